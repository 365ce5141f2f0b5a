"""A semantic op: its reference implementation fixes the signature and the semantics; providers compete.

Dispatch (vLLM IR's model, with FlashInfer-style requirement checks): take the priority list of the call's
shape bucket, skip providers whose requirements the call does not meet and providers quarantined for this
signature, run the first that remains. The reference is always last and supports every call, so a call
never goes unserved; when it lands there because nothing else could serve it, the decision says so
(``fallback``) and why each other provider was skipped. A provider that raises is quarantined for that
signature, counted, and the call moves on down the list: the serving call never sees the exception; so is one
whose requirement check raises. An op whose ``bucket`` function raises for a call has no priority list for it: the
reference serves it, and the raise is counted (:data:`UNBUCKETED`).

A decision is held per argument signature, the non-tensor arguments' values and each tensor's data-pointer
alignment (:data:`ALIGNMENT`), so a requirement check may read any of those (an ``eps`` or ``scale`` a kernel was
built for, a 16-byte aligned pointer) and still runs again for a call where one differs. An op whose providers'
checks all read only the signature (``Requirements.signature_checks``, as ours do) holds its eager decisions per
signature alone: its hot path reads no pointer and no other argument.

A shape bucket with a symbolic size (``float32/n64/t*``: a graph compiled with dynamic shapes, one trace for every
row count) covers every concrete bucket that matches it (``t*`` matches ``t4``, ``t8`` ...), and the graph will
serve sizes of all of them. So it follows its own priority list if one was set for it, else the default list, and
skips every provider that a covered bucket's evidence refused or left out of that bucket's list: a provider is
traced in only where no evidence for any size it will serve speaks against it (the decision names the bucket).

Every op is a ``torch.library`` operator (``torch.ops.inferensics.<name>``) whose implementation is the
dispatcher itself, registered as ``CompositeImplicitAutograd``: in eager it runs on real tensors; under
``torch.compile`` Dynamo records the op and AOTAutograd traces through the dispatcher with fake tensors,
so the chosen provider's code (the reference's aten ops, which Inductor then fuses, or a ``triton_op``
kernel) is what lands in the graph. Fake tensors cannot show that a kernel fails for real, and a compiled
graph's calls never come back here to fall back: so before a compile commits to a provider (other than the
reference and Inductor) for a signature it has not yet served in this process, the provider runs once on real
tensors made like the traced ones (:mod:`inferensics.kernels.probe`); if that raises, it is quarantined and
counted as in eager, and the graph gets the next provider. A provider that works on real tensors but raises
while traced (it reads data, calls NumPy) is *not traceable*: it is taken out of compiled decisions for that
signature only (eager calls keep it), counted apart (``untraceable``), and the reason says how to fix it.
Eager and compiled calls take the same decision for the same arguments; compiled decisions are also written
into the compile's structured trace.
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
from inferensics.kernels.samples import Samples
from inferensics.kernels.signatures import signature
from inferensics.kernels.tolerance import ToleranceSpec

REFERENCE = "reference"
"""Name of every op's reference provider."""
UNBUCKETED = "<bucket>"
"""The bucket of a decision whose op's ``bucket`` function raised, and the provider its failure is counted under
(``DecisionLog.failures``): such a call is served by the reference (see :meth:`SemanticOp.select`)."""
NAMESPACE = "inferensics"
"""``torch.library`` namespace of the semantic ops."""

ALIGNMENT = 16
"""Bytes of data-pointer alignment a held decision depends on (a 16-byte vector load needs it): each tensor's
pointer modulo this is part of a call's decision key, so a check that reads it runs again for a misaligned view."""

_TRUSTED = ("reference", "inductor")
"""Provider kinds a compile takes without a probe: what they put into the graph is the reference's own code."""

_LIBRARY = torch.library.Library(NAMESPACE, "FRAGMENT")  # type: ignore[no-untyped-call]
_MISS: Any = object()
"""What the eager hot path returns when it did not serve the call."""
BucketFn = Callable[[Sequence[Any]], str]


def eager_key(args: Sequence[Any], by_value: bool = True) -> tuple[Any, ...] | None:
    """What an eager call's decision depends on, cheaply: each tensor's dtype, sizes, strides and device, the
    interpreter switches when a tensor is on the CPU (its platform) and, ``by_value``, each tensor's pointer alignment
    (:data:`ALIGNMENT`) and the other arguments' values. ``None`` when a compiler is tracing, or any tensor is a
    subclass (fake, functional): such a call takes the full path."""
    if _torch_adapter.current_trace() is not None:
        return None
    return _argument_key(args) if by_value else _tensor_key(args)


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


def _argument_key(args: Sequence[Any]) -> tuple[Any, ...] | None:
    """:func:`_tensor_key` with each tensor's pointer alignment and the other arguments' values: an op whose
    providers' checks may read them (``Requirements.signature_checks`` false)."""
    key: list[Any] = []
    cpu = False
    for a in args:
        if isinstance(a, torch.Tensor):
            if type(a) is not torch.Tensor:
                return None
            cpu = cpu or a.is_cpu
            key.append((a.dtype, a.shape, a.stride(), a.device, a.data_ptr() % ALIGNMENT))
        else:  # a scalar a check may read (eps, scale); a list (``int[]``) as a tuple, to be hashed
            key.append(tuple(a) if type(a) is list else a)
    if cpu:  # the switches decide only a CPU tensor's platform (reading them costs more than the rest of the key)
        key.append(interpreter_enabled())
    return tuple(key)


def _value_key(a: Any) -> Any:
    """A non-tensor argument as the full path's decision key holds it: its value; a symbolic one (traced) as ``sym``,
    never compared (that would add a guard)."""
    if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return "sym"
    if isinstance(a, (list, tuple)):
        return tuple(_value_key(v) for v in a)
    return a


def _call_key(args: Sequence[Any], compiling: bool) -> tuple[Any, ...]:
    """What a decision depends on besides the signature: the non-tensor arguments and, on real tensors, each one's
    pointer alignment (a traced tensor has no data; a compiled graph's checks see the traced ones)."""
    key: list[Any] = []
    for a in args:
        if not isinstance(a, torch.Tensor):
            key.append(_value_key(a))
        elif not compiling:
            try:
                key.append(a.data_ptr() % ALIGNMENT)
            except Exception:  # a subclass without storage: nothing a check could read either
                key.append(None)
    return tuple(key)


def _define(name: str, schema: str) -> None:
    """Define ``torch.ops.inferensics.<name>``; ``ValueError`` in one line when the name is taken (by another op in
    this process) or ``schema`` is not a ``torch.library`` schema (torch says either in several lines)."""
    try:
        _LIBRARY.define(f"{name}{schema}")  # type: ignore[no-untyped-call]
    except RuntimeError as exc:
        if "multiple times" in str(exc):
            raise ValueError(
                f"kernel op {name!r} is already defined in this process ({NAMESPACE}::{name}): give yours another "
                f"name, or add providers to the one there (kernels.registry().op({name!r}).register(...))"
            ) from None
        first = (str(exc).strip().splitlines() or [""])[0]
        raise ValueError(
            f"kernel op {name!r}: schema {schema!r} is not a torch.library schema ({first}); write it as "
            "'(Tensor x, float eps) -> Tensor'"
        ) from None


def bucket_covers(bucket: str, concrete: str) -> bool:
    """Whether ``bucket`` (with a symbolic size written ``*``, as ``float32/n64/t*``) covers ``concrete`` (``t*``
    matches ``t4``; every other part must be equal)."""
    parts, others = bucket.split("/"), concrete.split("/")
    if len(parts) != len(others):
        return False
    pairs = zip(parts, others, strict=True)
    return all(p == o or (p.endswith("*") and o.startswith(p[:-1]) and "*" not in o) for p, o in pairs)


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
        samples: How qualification makes the op's arguments at a named shape (the built-in ops have theirs in
            :mod:`inferensics.kernels.samples`); an op without them cannot be qualified.
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
        samples: Samples | None = None,
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
        self.samples = samples
        self.providers: dict[str, Provider] = {
            REFERENCE: Provider(
                REFERENCE, "reference", reference, Requirements(accuracy="exact"), "the op's definition"
            )
        }
        self.priority: list[str] = [REFERENCE]
        self.bucket_priority: dict[str, list[str]] = {}
        """Priority lists set on evidence for particular shape buckets (the default list elsewhere)."""
        self.quarantined: dict[tuple[str, str], str] = {}
        """``(signature, provider) -> reason`` for providers taken out after raising (or their check raising)."""
        self.untraceable: dict[tuple[str, str], str] = {}
        """``(signature, provider) -> reason`` for providers that raised while a compiler traced them: taken out of
        compiled decisions for that signature only."""
        self.refused: dict[tuple[str, str], str] = {}
        """``(bucket, provider) -> reason`` for providers the accuracy gate refused during qualification."""
        self.proven: set[tuple[str, str]] = set()
        """``(signature, provider)`` pairs that ran on real tensors in this process (eager, or a compile's probe)."""
        self._cache: dict[tuple[str, bool, str, tuple[Any, ...]], Decision] = {}
        """Decisions by ``(signature, compiling, platform, the other arguments and alignments)``."""
        self._eager: dict[tuple[Any, ...], tuple[Decision, Callable[..., Any], Callable[..., Any]]] = {}
        """Eager calls' decisions, the function that serves them, and its entry for a call already found plain eager
        (:func:`~inferensics.kernels.provider.plain_eager_entry`), by :func:`eager_key` (the hot path)."""
        self._by_value = False
        """Whether the hot path's key holds pointer alignments and the other arguments (:func:`_argument_key`): once a
        provider's checks may read more than the signature."""
        self._generation = 0
        """Counts policy changes and quarantines: a decision made before one is not kept after it."""
        self._lock = threading.Lock()
        _define(name, schema)
        _LIBRARY.impl(name, self._dispatch, "CompositeImplicitAutograd")  # type: ignore[no-untyped-call]
        self.overload: Any = getattr(getattr(torch.ops, NAMESPACE), name).default

    # --- registration and policy ---------------------------------------------------------------------------

    def register(self, provider: Provider, *, before: str = REFERENCE, enabled: bool = True) -> None:
        """Add ``provider``; when ``enabled`` it enters the default priority list just before ``before``.

        Raises:
            ValueError: a provider of that name is registered already, or ``before`` is not in the default priority
                list (a provider not registered on this host, such as ``triton`` where Triton does not import); the
                op is left as it was.
        """
        if provider.name in self.providers:
            raise ValueError(f"{self.name}: provider {provider.name!r} is already registered")
        if enabled and before not in self.priority:
            raise ValueError(
                f"{self.name}: cannot register {provider.name!r} before {before!r}, which is not in the default "
                f"priority list ({' > '.join(self.priority)}): name one of those"
            )
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
        self.untraceable = {k: v for k, v in self.untraceable.items() if k[1] != name}
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
        """The priority list calls in ``bucket`` follow (a symbolic bucket's: see :meth:`covered_refusal`)."""
        return self.bucket_priority.get(bucket, self.priority)

    def covered_refusal(self, bucket: str, provider: str) -> str | None:
        """For a bucket with a symbolic size, why a concrete bucket it covers speaks against ``provider``: refused
        there, or left out of its priority list; ``None`` when none does (or ``bucket`` is concrete)."""
        if "*" not in bucket:
            return None
        for (b, p), reason in sorted(self.refused.items()):
            if p == provider and bucket_covers(bucket, b):
                return f"refused in {b}, a bucket this dynamic-shape call covers: {reason}"
        for b, order in sorted(self.bucket_priority.items()):
            if provider not in order and bucket_covers(bucket, b):
                return f"left out of bucket {b}'s priority list, a bucket this dynamic-shape call covers"
        return None

    def refuse(self, bucket: str, provider: str, reason: str) -> None:
        """Take ``provider`` out of ``bucket`` (the accuracy gate's verdict)."""
        self.refused[(bucket, provider)] = reason
        self._invalidate()

    def _invalidate(self) -> None:
        by_value = any(p.requirements.checks and not p.requirements.signature_checks for p in self.providers.values())
        with self._lock:
            self._by_value = by_value
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
            # No mode is active, so no compiler is tracing (its tensors are fake).
            key = _argument_key(args) if self._by_value else _tensor_key(args)
            if key is not None:
                out = self._serve_held(key, args, plain_eager=True)
                if out is not _MISS:
                    return out
        return self.overload(*args)

    def select(self, args: Sequence[Any], ctx: CallContext | None = None) -> Decision:
        """The provider a call with ``args`` would get, with the reasons the others were skipped (no side effect
        besides caching, and taking out a provider whose requirement check raised)."""
        ctx = ctx or CallContext.of(args)
        sig = signature(args)
        key = (sig, ctx.compiling, ctx.platform, _call_key(args, ctx.compiling))
        hit = self._cache.get(key)
        if hit is not None:
            if ctx.compiling and hit.compile_id != (cid := _torch_adapter.compile_id()):
                # Another compile took this decision before: it is this compile's decision too (its record and its
                # trace artifact name this compile, not the earlier one).
                hit = replace(hit, compile_id=cid)
                with self._lock:
                    self._cache[key] = hit
            return hit
        try:
            bucket = self.bucket(args)
        except Exception as exc:  # the op's own code, as a provider's is: it must not fail the call
            return self._keep(key, self._unbucketed(sig, ctx, exc))
        skipped: list[tuple[str, str]] = []
        chosen = REFERENCE
        for name in self.priority_for(bucket):
            if name == REFERENCE:
                break
            if ctx.compiling and self.providers[name].kind == "inductor":
                chosen = name  # while compiling, leaving the op to the compiler is always possible
                break
            reason = (
                self.quarantined.get((sig, name))
                or (self.untraceable.get((sig, name)) if ctx.compiling else None)
                or self.refused.get((bucket, name))
                or self.covered_refusal(bucket, name)
            )
            if reason is None:
                try:
                    ok, why = self.providers[name].supports(args, ctx)
                except Exception as exc:  # the provider's own code, as its fn is: it must not fail the call
                    reason = self._take_out(sig, name, "requirement check raised", exc, compiling=ctx.compiling)
                else:
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
        return self._keep(key, decision)

    def _keep(self, key: tuple[Any, ...], decision: Decision) -> Decision:
        with self._lock:
            if len(self._cache) >= MAX_SIGNATURES:
                self._cache.clear()
            self._cache[key] = decision
        return decision

    def _unbucketed(self, sig: str, ctx: CallContext, exc: Exception) -> Decision:
        """The decision for a call whose shape bucket the op's ``bucket`` function could not name (it raised): the
        reference (or Inductor, traced in), since every priority list and refusal is per bucket; each provider
        listed before it is skipped with why, and the raise is counted (:data:`UNBUCKETED`)."""
        message = str(exc).splitlines()[0][:200] if str(exc).strip() else ""
        reason = (
            f"the op's bucket function raised {type(exc).__name__}: {message}; priorities and evidence are per "
            "bucket, so the reference serves: make the bucket function name a bucket for these arguments"
        )
        self.log.count_failure(self.name, UNBUCKETED)
        skipped = tuple((p, reason) for p in self.priority if p != REFERENCE)
        chosen = "inductor" if ctx.compiling and "inductor" in self.providers else REFERENCE
        return Decision(
            op=self.name,
            provider=chosen,
            signature=sig,
            bucket=UNBUCKETED,
            skipped=skipped,
            compiled=ctx.compiling,
            fallback=bool(skipped),
            compile_id=_torch_adapter.compile_id() if ctx.compiling else "",
        )

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
        key = eager_key(args, self._by_value)
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
                if ctx.compiling:
                    # It ran on real tensors (the probe above, or an eager call), or could not be probed: what failed
                    # is tracing it, so it leaves compiled graphs only.
                    self._take_out(decision.signature, decision.provider, "raised", exc, compiling=True)
                else:
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
        self._take_out(decision.signature, decision.provider, "raised", exc, compiling=False)

    def _take_out(self, sig: str, provider: str, what: str, exc: Exception, *, compiling: bool) -> str:
        """Take ``provider`` out for ``sig`` after ``exc``; the reason, which decisions name. In eager (a real
        failure) for every call of the signature, counted as a failure; while compiling (the provider, or its check,
        cannot be traced: it may work on real tensors) for compiled decisions only, counted as untraceable."""
        message = str(exc).splitlines()[0][:200] if str(exc).strip() else ""
        if compiling:
            reason = (
                f"not traceable by torch.compile ({what} {type(exc).__name__}: {message}); left out of compiled "
                "graphs for this signature, eager calls keep it: declare Requirements(compiled='eager'), or wrap the "
                "kernel as a torch.library custom op with a fake implementation"
            )
            self.log.count_untraceable(self.name, provider)
            with self._lock:
                self.untraceable[(sig, provider)] = reason
                for key in [k for k in self._cache if k[0] == sig and k[1]]:
                    del self._cache[key]
            return reason
        reason = f"{what} {type(exc).__name__}: {message}"
        self.log.count_failure(self.name, provider)
        with self._lock:
            self.quarantined[(sig, provider)] = reason
            for key in [k for k in self._cache if k[0] == sig]:  # eager calls and compiles alike
                del self._cache[key]
            self._generation += 1
            self._eager.clear()  # rare: every eager signature decides again
        return reason

    # --- description ---------------------------------------------------------------------------------------

    def status(self, provider: str) -> str:
        """``default`` (in the default list), ``promoted`` (in a bucket list only), ``available``,
        ``refused`` (by the accuracy gate in some bucket) or ``quarantined`` (raised for some signature; one that
        only could not be traced keeps its status, see :attr:`untraceable`)."""
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
            "untraceable": [
                {"signature": s, "provider": p, "reason": r} for (s, p), r in sorted(self.untraceable.items())
            ],
        }
