"""A semantic op: its reference implementation fixes the signature and the semantics; providers compete.

Dispatch (vLLM IR's model, with FlashInfer-style requirement checks): take the priority list of the call's
shape bucket, skip providers whose requirements the call does not meet and providers quarantined for this
signature, run the first that remains. The reference is always last and supports every call, so a call
never goes unserved; when it lands there because nothing else could serve it, the decision says so
(``fallback``) and why each other provider was skipped. A provider that raises is quarantined for that
signature, counted, and the call moves on down the list: the serving call never sees the exception.

Every op is a ``torch.library`` operator (``torch.ops.inferensics.<name>``) whose implementation is the
dispatcher itself, registered as ``CompositeImplicitAutograd``: in eager it runs on real tensors; under
``torch.compile`` Dynamo records the op and AOTAutograd traces through the dispatcher with fake tensors,
so the chosen provider's code (the reference's aten ops, which Inductor then fuses, or a ``triton_op``
kernel) is what lands in the graph. Fake tensors cannot show that a kernel fails for real, and a compiled
graph's calls never come back here to fall back: so before a compile commits to a provider (other than the
reference and Inductor) for a signature it has not yet served in this process, the provider runs once on real
tensors made like the traced ones (:mod:`inferensics.kernels.probe`); if that raises, it is quarantined and
counted as in eager, and the graph gets the next provider. Eager and compiled calls take the same decision
for the same arguments; compiled decisions are also written into the compile's structured trace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from inferensics.kernels import _torch_adapter, cache_salt, compile_records, probe
from inferensics.kernels.decisions import MAX_SIGNATURES, Decision, DecisionLog
from inferensics.kernels.provider import Provider, plain_eager_entry
from inferensics.kernels.requirements import CallContext, interpreter_enabled
from inferensics.kernels.signatures import signature
from inferensics.kernels.tolerance import ToleranceSpec

REFERENCE = "reference"
"""Name of every op's reference provider."""
NAMESPACE = "inferensics"
"""``torch.library`` namespace of the semantic ops."""

_TRUSTED = ("reference", "inductor")
"""Provider kinds a compile takes without a probe: what they put into the graph is the reference's own code."""

_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # type: ignore[no-untyped-call]
_MISS: Any = object()
"""What the eager hot path returns when it did not serve the call."""
BucketFn = Callable[[Sequence[Any]], str]


def eager_key(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """What an eager call's decision depends on, cheaply: each tensor's dtype, sizes, strides and device, and the
    interpreter switches when a tensor is on the CPU (its platform). ``None`` when a compiler is tracing, or any
    tensor is a subclass (fake, functional): such a call takes the full path."""
    if _torch_adapter.current_trace() is not None:
        return None
    return _tensor_key(args)


def _tensor_key(args: Sequence[Any]) -> tuple[Any, ...] | None:
    key: list[Any] = []
    cpu = False
    for a in args:
        if isinstance(a, torch.Tensor):
            if type(a) is not torch.Tensor:
                return None
            cpu = cpu or a.is_cpu
            key.append((a.dtype, a.shape, a.stride(), a.device))
    if cpu:  # the switches decide only a CPU tensor's platform (reading them costs more than the rest of the key)
        key.append(interpreter_enabled())
    return tuple(key)


class SemanticOp:
    """One operation, defined by its reference, served by the best provider the call allows.

    Args:
        name: Op name; the operator is ``torch.ops.inferensics.<name>``.
        schema: Its ``torch.library`` schema after the name, e.g. ``(Tensor x, Tensor w, float eps) -> Tensor``.
        reference: The portable reference implementation (plain torch ops).
        tolerance: Accuracy rules against the reference.
        bucket: Maps call arguments to a shape bucket (priority lists and evidence are per bucket).
        doc: One line on what the op computes.
        log: Where decisions, calls and failures are recorded.
        contents: Fills the arguments of a probe whose values providers rely on with valid ones (see
            :mod:`inferensics.kernels.probe`); by default floats are normal and integers zero.
    """

    def __init__(
        self,
        name: str,
        schema: str,
        reference: Callable[..., Any],
        *,
        tolerance: ToleranceSpec,
        bucket: BucketFn,
        doc: str,
        log: DecisionLog,
        contents: probe.ContentsFn | None = None,
    ) -> None:
        from inferensics.kernels.requirements import Requirements

        self.name = name
        self.schema = schema
        self.reference = reference
        self.tolerance = tolerance
        self.bucket = bucket
        self.doc = doc
        self.log = log
        self.contents = contents
        self.providers: dict[str, Provider] = {
            REFERENCE: Provider(
                REFERENCE, "reference", reference, Requirements(accuracy="exact"), "the op's definition"
            )
        }
        self.priority: list[str] = [REFERENCE]
        self.bucket_priority: dict[str, list[str]] = {}
        """Priority lists set on evidence for particular shape buckets (the default list elsewhere)."""
        self.quarantined: dict[tuple[str, str], str] = {}
        """``(signature, provider) -> reason`` for providers taken out after raising."""
        self.refused: dict[tuple[str, str], str] = {}
        """``(bucket, provider) -> reason`` for providers the accuracy gate refused during qualification."""
        self.proven: set[tuple[str, str]] = set()
        """``(signature, provider)`` pairs that ran on real tensors in this process (eager, or a compile's probe)."""
        self._cache: dict[tuple[str, bool, str], Decision] = {}
        """Decisions by ``(signature, compiling, platform)``."""
        self._eager: dict[tuple[Any, ...], tuple[Decision, Callable[..., Any], Callable[..., Any]]] = {}
        """Eager calls' decisions, the function that serves them, and its entry for a call already found plain eager
        (:func:`~inferensics.kernels.provider.plain_eager_entry`), by :func:`eager_key` (the hot path)."""
        self._generation = 0
        """Counts policy changes and quarantines: a decision made before one is not kept after it."""
        self._lock = threading.Lock()
        _LIBRARY.define(f"{name}{schema}")  # type: ignore[no-untyped-call]
        _LIBRARY.impl(name, self._dispatch, "CompositeImplicitAutograd")  # type: ignore[no-untyped-call]
        self.overload: Any = getattr(getattr(torch.ops, NAMESPACE), name).default

    # --- registration and policy ---------------------------------------------------------------------------

    def register(self, provider: Provider, *, before: str = REFERENCE, enabled: bool = True) -> None:
        """Add ``provider``; when ``enabled`` it enters the default priority list just before ``before``."""
        if provider.name in self.providers:
            raise ValueError(f"{self.name}: provider {provider.name!r} is already registered")
        self.providers[provider.name] = provider
        if enabled:
            self.priority.insert(self.priority.index(before), provider.name)
        self._invalidate()

    def unregister(self, name: str) -> None:
        """Remove a provider (not the reference) from the op, its priority lists, refusals and quarantines."""
        if name == REFERENCE or name not in self.providers:
            raise ValueError(f"{self.name}: cannot unregister {name!r}")
        del self.providers[name]
        self.priority = [p for p in self.priority if p != name]
        self.bucket_priority = {b: [p for p in v if p != name] for b, v in self.bucket_priority.items()}
        self.refused = {k: v for k, v in self.refused.items() if k[1] != name}
        self.quarantined = {k: v for k, v in self.quarantined.items() if k[1] != name}
        self.proven = {k for k in self.proven if k[1] != name}
        self._invalidate()

    def set_priority(self, order: Sequence[str], bucket: str | None = None) -> None:
        """Set the priority list (of one shape ``bucket``, or the default); the reference is appended last."""
        unknown = [p for p in order if p not in self.providers]
        if unknown:
            raise ValueError(f"{self.name}: unknown providers {unknown}; registered: {sorted(self.providers)}")
        names = [p for p in dict.fromkeys(order) if p != REFERENCE] + [REFERENCE]
        if bucket is None:
            self.priority = names
        else:
            self.bucket_priority[bucket] = names
        self._invalidate()

    def priority_for(self, bucket: str) -> list[str]:
        """The priority list calls in ``bucket`` follow."""
        return self.bucket_priority.get(bucket, self.priority)

    def refuse(self, bucket: str, provider: str, reason: str) -> None:
        """Take ``provider`` out of ``bucket`` (the accuracy gate's verdict)."""
        self.refused[(bucket, provider)] = reason
        self._invalidate()

    def _invalidate(self) -> None:
        with self._lock:
            self._generation += 1
            self._cache.clear()
            self._eager.clear()

    # --- dispatch ------------------------------------------------------------------------------------------

    def __call__(self, *args: Any) -> Any:
        """Run the op through ``torch.ops.inferensics.<name>`` (the same path eager and compiled).

        In plain eager (no compiler tracing; no torch-function mode, dispatch mode or profiler, which would see
        the operator) a signature served before goes straight to its provider: the dispatcher's own hop into
        the Python implementation costs more than the provider's decision lookup.
        """
        if not torch.compiler.is_compiling() and _torch_adapter.plain_eager():
            key = _tensor_key(args)  # no mode is active, so no compiler is tracing (its tensors are fake)
            if key is not None:
                out = self._serve_held(key, args, plain_eager=True)
                if out is not _MISS:
                    return out
        return self.overload(*args)

    def select(self, args: Sequence[Any], ctx: CallContext | None = None) -> Decision:
        """The provider a call with ``args`` would get, with the reasons the others were skipped (no side effect
        besides caching)."""
        ctx = ctx or CallContext.of(args)
        sig = signature(args)
        key = (sig, ctx.compiling, ctx.platform)
        hit = self._cache.get(key)
        if hit is not None:
            if ctx.compiling and hit.compile_id != (cid := _torch_adapter.compile_id()):
                # Another compile took this decision before: it is this compile's decision too (its record and its
                # trace artifact name this compile, not the earlier one).
                hit = replace(hit, compile_id=cid)
                with self._lock:
                    self._cache[key] = hit
            return hit
        bucket = self.bucket(args)
        skipped: list[tuple[str, str]] = []
        chosen = REFERENCE
        for name in self.priority_for(bucket):
            if name == REFERENCE:
                break
            if ctx.compiling and self.providers[name].kind == "inductor":
                chosen = name  # while compiling, leaving the op to the compiler is always possible
                break
            reason = self.quarantined.get((sig, name)) or self.refused.get((bucket, name))
            if reason is None:
                ok, why = self.providers[name].supports(args, ctx)
                reason = None if ok else why
            if reason is None:
                chosen = name
                break
            skipped.append((name, reason))
        fallback = chosen in (REFERENCE, "inductor") and bool(skipped)
        if chosen == REFERENCE and ctx.compiling and "inductor" in self.providers:
            chosen = "inductor"  # traced in, the reference is what Inductor compiles: name it for what runs
        decision = Decision(
            op=self.name,
            provider=chosen,
            signature=sig,
            bucket=bucket,
            skipped=tuple(skipped),
            compiled=ctx.compiling,
            fallback=fallback,
            compile_id=_torch_adapter.compile_id() if ctx.compiling else "",
        )
        with self._lock:
            if len(self._cache) >= MAX_SIGNATURES:
                self._cache.clear()
            self._cache[key] = decision
        return decision

    def _serve_held(self, key: tuple[Any, ...], args: Sequence[Any], *, plain_eager: bool = False) -> Any:
        """The eager hot path: serve a signature that ran before with its held decision (it holds until the policy
        changes); :data:`_MISS` when none is held or its provider raised (then quarantined: the full path serves
        the call). ``plain_eager``: the caller has just found the call plain eager and not compiling, so the
        provider's entry that does not ask again serves it."""
        served = self._eager.get(key)
        if served is None:
            return _MISS
        decision, fn, entry = served
        try:
            out = (entry if plain_eager else fn)(*args)
        except Exception as exc:
            if fn is self.reference:
                raise  # the definition rejects the arguments: the caller's error (as on the full path)
            self._quarantine(decision, exc)
            return _MISS
        self.log.count_call(self.name, decision.provider)
        return out

    def _dispatch(self, *args: Any) -> Any:
        key = eager_key(args)
        if key is not None:
            out = self._serve_held(key, args)
            if out is not _MISS:
                return out
        ctx = CallContext.of(args)
        generation = self._generation
        while True:
            decision = self.select(args, ctx)
            provider = self.providers[decision.provider]
            fn = self.reference if provider.kind == "inductor" and ctx.compiling else provider.fn
            if ctx.compiling and provider.kind not in _TRUSTED:
                failure = self._prove(provider, decision.signature, args)
                if failure is not None:
                    self._quarantine(decision, failure)
                    continue
            try:
                out = fn(*args)
            except Exception as exc:
                if fn is self.reference:
                    # The definition itself rejects the arguments (in eager, or traced in for Inductor while
                    # compiling): that is the caller's error, and no provider further down could serve them.
                    raise
                self._quarantine(decision, exc)
                continue
            if ctx.compiling:
                # A trace, not a call: the graph runs the provider's code without passing through here again.
                cache_salt.note(decision)  # the compile caches key this graph on the providers it holds
                # Logged and written into the compile's trace when the compile ends, signed under the sizes it
                # settled on (a provider's guards specialise symbols as it traces).
                compile_records.hold(decision, args, self.log)
            else:
                self.log.record(decision)
                self.log.count_call(self.name, decision.provider)
                if provider.kind not in _TRUSTED:
                    self._proved(decision.signature, provider.name)
                if key is not None:
                    with self._lock:
                        if len(self._eager) >= MAX_SIGNATURES:
                            self._eager.clear()
                        if generation == self._generation:  # no policy change or quarantine since it decided
                            self._eager[key] = (decision, fn, plain_eager_entry(fn))
            return out

    def _prove(self, provider: Provider, sig: str, args: Sequence[Any]) -> Exception | None:
        """What ``provider`` raised on real tensors made like the traced ``args``, or ``None`` (it ran, it ran
        before for ``sig``, or no probe could be made: then it is kept, neither proven nor blamed)."""
        if (sig, provider.name) in self.proven:
            return None
        try:
            failure = probe.run(provider.fn, args, self.contents)
        except probe.ProbeError:
            self.log.count_unproven(self.name, provider.name)  # kept, untested: counted, not silent
            return None
        if failure is None:
            self._proved(sig, provider.name)
        return failure

    def _proved(self, sig: str, provider: str) -> None:
        if (sig, provider) in self.proven:
            return
        with self._lock:
            if len(self.proven) >= MAX_SIGNATURES:
                self.proven.clear()  # proving again costs one run per signature, never a wrong answer
            self.proven.add((sig, provider))

    def _quarantine(self, decision: Decision, exc: Exception) -> None:
        reason = f"raised {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}"
        self.log.count_failure(self.name, decision.provider)
        with self._lock:
            self.quarantined[(decision.signature, decision.provider)] = reason
            for key in [k for k in self._cache if k[0] == decision.signature]:  # eager calls and compiles alike
                del self._cache[key]
            self._generation += 1
            self._eager.clear()  # rare: every eager signature decides again

    # --- description ---------------------------------------------------------------------------------------

    def status(self, provider: str) -> str:
        """``default`` (in the default list), ``promoted`` (in a bucket list only), ``available``,
        ``refused`` (by the accuracy gate in some bucket) or ``quarantined`` (raised for some signature)."""
        if any(p == provider for _, p in self.quarantined):
            return "quarantined"
        if any(p == provider for _, p in self.refused):
            return "refused"
        if provider in self.priority:
            return "default"
        if any(provider in order for order in self.bucket_priority.values()):
            return "promoted"
        return "available"

    def describe(self) -> dict[str, Any]:
        """JSON-ready state of this op (providers, priorities, quarantines, refusals)."""
        return {
            "name": self.name,
            "doc": self.doc,
            "schema": f"{NAMESPACE}::{self.name}{self.schema}",
            "tolerance": self.tolerance.describe(),
            "providers": [{**p.describe(), "status": self.status(p.name)} for p in self.providers.values()],
            "priority": list(self.priority),
            "bucket_priority": {b: list(v) for b, v in sorted(self.bucket_priority.items())},
            "refused": [{"bucket": b, "provider": p, "reason": r} for (b, p), r in sorted(self.refused.items())],
            "quarantined": [
                {"signature": s, "provider": p, "reason": r} for (s, p), r in sorted(self.quarantined.items())
            ],
        }
