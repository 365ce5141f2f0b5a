"""Qualification: measure every provider per shape bucket, gate it on accuracy, promote only on evidence.

For each op and shape: every provider the arguments allow is checked against the reference on several
seeded inputs (the op's tolerance rule for the provider's accuracy mode; batch-invariant providers also
give a row the same bits alone as in the batch). Provider and reference each run on their own copy of the
arguments, and a provider that writes into its inputs is refused, naming them (the ops' schemas declare no
input mutable). A provider that fails, or raises, is refused for the bucket, whatever its speed. Providers
that pass are timed: warm-ups, then ``trials`` rounds, each round running every provider once in a freshly
shuffled order (``iters`` calls timed together), so drift in clocks or load falls on all of them alike. Each
provider's median gets a bootstrap 95 % confidence interval. The bucket's priority changes only when a
challenger's interval lies wholly below the incumbent's, by the margin:
``ci_high(challenger) < ci_low(incumbent) * (1 - margin)``.

Several shapes of one bucket are decided together, after all of them are measured (so the order they are listed
in changes nothing): a provider refused at any of them is refused for the bucket, and a challenger is promoted
only if it clears the margin over the provider serving each shape at every shape where it runs; where it clears
it at some and not others, its records say so (``shapes disagree``) and the bucket keeps its order.

What a sample measures (each record's ``timing``): on CUDA (``timing="auto"``), each provider's ``iters``
calls are captured once into a CUDA graph (after the warm-ups, on a side stream) and a sample is one replay
timed by CUDA events, divided by ``iters``: device time, as compiled and CUDA-graph serving sees it, without
the host's dispatch and launch overhead (``cuda_graph``). Eager calls timed back to back would measure that
host overhead whenever the GPU waits on the host, as it does at decode sizes. When any provider of a shape
cannot be captured (it synchronizes, compiles or otherwise breaks capture), every provider of that shape is
timed by CUDA events around ``iters`` back-to-back eager calls instead (``events``), so a shape's providers
are always compared by one method; ``timing="events"`` asks for that everywhere. On the CPU a sample is the
wall time of ``iters`` back-to-back calls (``wall``).
"""

from __future__ import annotations

import functools
import random
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any, Final

import torch

from inferensics.kernels.op import REFERENCE, SemanticOp
from inferensics.kernels.registry import INTERPRETED_CPU, Registry, canonical_digest, environment, state_problem
from inferensics.kernels.requirements import CallContext, interpreter_enabled
from inferensics.kernels.samples import (
    bytes_moved,
    default_shapes,
    make_args,
    no_samples,
    shape_fields,
    shape_label,
    shape_problem,
)
from inferensics.kernels.tolerance import compare
from inferensics.schema.events import KernelQualificationEvent
from inferensics.schema.vocabularies import QUALIFICATION_DECISIONS, QUALIFICATION_STATUSES, QUALIFICATION_TIMINGS

# The words of the records' closed columns, defined once in the schema (the collector refuses any other); unpacked in
# full, so a word added there or taken away fails this import instead of falling out of every count.
_UNMEASURED, MEASURED, UNSUPPORTED, REFUSED, ERROR = QUALIFICATION_STATUSES
_UNDECIDED, INCUMBENT, PROMOTED, DEMOTED, KEPT, DECISION_REFUSED = QUALIFICATION_DECISIONS
_UNTIMED, CUDA_GRAPH, EVENTS, WALL = QUALIFICATION_TIMINGS

EVIDENCE_KIND = "inferensics.kernels.qualification"
"""``kind`` of an evidence file (:meth:`QualifyResult.to_json`), which ``inferensics kernels list --evidence`` reads."""
EVIDENCE_BODY: Final = ("kind", "ts", "environment", "options", "records", "changes")
"""The keys of an evidence file its ``digest`` covers."""

BATCH_INVARIANT_OPS = frozenset({"rms_norm", "fused_add_rms_norm"})
"""Ops whose rows are independent, so a batch-invariant provider must give row 0 the same bits alone."""
TIMING_OPTIONS: Final = ("auto", EVENTS)
"""What :attr:`QualifyOptions.timing` takes."""
TIMING_METHODS: Final = {
    CUDA_GRAPH: "CUDA-graph replay (device time)",
    EVENTS: "CUDA events around back-to-back eager calls (host overhead included)",
    WALL: "wall time of back-to-back eager calls",
}
"""How a record's median was measured (:attr:`Evidence.timing`), each described."""
OPTIONAL_RECORD_FIELDS: Final = frozenset({"timing"})
"""Evidence record fields added after evidence files were first written: a record may lack them (an older
file), and reads as their default."""


@dataclass(frozen=True, slots=True)
class QualifyOptions:
    """What to qualify and how hard to measure.

    Attributes:
        ops: Op names (all when ``None``).
        shapes: ``{op: [shape, ...]}`` (the defaults for the device when ``None`` or missing an op).
        dtype: Dtype of the floating arguments.
        device: Device to run on (CUDA when available, else CPU).
        warmup: Untimed calls per provider before timing.
        trials: Timed rounds (each a fresh random order of the providers).
        iters: Calls per provider per round, timed together.
        accuracy_seeds: Seeded inputs each provider is checked on.
        margin: Fraction by which a challenger's interval must clear the incumbent's to be promoted.
        seed: Seed of the shuffles and the bootstrap.
        apply: Change the registry's priorities (otherwise only report what would change).
        timing: ``auto``: on CUDA, time replays of a CUDA graph holding ``iters`` calls (device time), or CUDA
            events around eager calls for every provider of a shape when one of them cannot be captured;
            ``events``: CUDA events around eager calls everywhere. On the CPU either is wall time.
    """

    ops: tuple[str, ...] | None = None
    shapes: dict[str, list[dict[str, int]]] | None = None
    dtype: torch.dtype = torch.bfloat16
    device: str | None = None
    warmup: int = 3
    trials: int = 15
    iters: int = 10
    accuracy_seeds: int = 3
    margin: float = 0.05
    seed: int = 0
    apply: bool = True
    timing: str = "auto"


@dataclass(frozen=True, slots=True)
class Evidence:
    """One provider at one shape: support, accuracy and timing (µs per call)."""

    op: str
    provider: str
    bucket: str
    shape: str
    dtype: str
    status: str
    """``measured``, ``unsupported`` (reason in ``detail``), ``refused`` (accuracy gate) or ``error``."""
    accuracy_passed: bool = False
    rule: str = ""
    max_abs_err: float = 0.0
    detail: str = ""
    median_us: float = 0.0
    ci_low_us: float = 0.0
    ci_high_us: float = 0.0
    trials: int = 0
    bytes: int = 0
    tb_s: float = 0.0
    decision: str = ""
    """``incumbent`` (served the bucket and still does), ``promoted`` (serves the bucket now and did not before:
    its interval cleared the incumbent's by the margin, or the provider before it was refused), ``demoted``
    (served the bucket and no longer does), ``kept`` (neither before nor after), ``refused`` (accuracy gate, or it
    raised: status ``error``) or empty (not measured)."""
    timing: str = ""
    """How the median was measured: ``cuda_graph`` (replays of a captured CUDA graph, device time), ``events``
    (CUDA events around back-to-back eager calls), ``wall`` (CPU wall time) or empty (not measured; or an
    evidence file written before records carried it)."""


@dataclass(frozen=True, slots=True)
class PriorityChange:
    """A bucket's priority list before and after qualification, and why."""

    op: str
    bucket: str
    before: list[str]
    after: list[str]
    reason: str


@dataclass
class QualifyResult:
    """Everything one qualification run found, with its environment and the registry state after it."""

    ts: datetime
    records: list[Evidence] = field(default_factory=list)
    changes: list[PriorityChange] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)
    options: dict[str, Any] = field(default_factory=dict)
    state: dict[str, Any] = field(default_factory=dict)

    def digest(self) -> str:
        """Digest of the evidence (what ``to_json()['digest']`` holds)."""
        return str(self.to_json()["digest"])

    def events(self, host: str) -> list[KernelQualificationEvent]:
        """One store record per provider and shape, stamped with the environment and the evidence digest."""
        digest = self.digest()
        env = self.environment
        return [
            KernelQualificationEvent(
                ts=self.ts,
                host=host,
                device_name=env.get("device", ""),
                op=r.op,
                provider=r.provider,
                bucket=r.bucket,
                shape=r.shape,
                dtype=r.dtype,
                status=r.status,
                accuracy_passed=r.accuracy_passed,
                rule=r.rule,
                max_abs_err=r.max_abs_err if r.max_abs_err == r.max_abs_err and r.max_abs_err != float("inf") else -1.0,
                detail=r.detail,
                median_us=r.median_us,
                ci_low_us=r.ci_low_us,
                ci_high_us=r.ci_high_us,
                trials=r.trials,
                tb_s=r.tb_s,
                decision=r.decision,
                timing=r.timing,
                evidence_digest=digest,
                torch_version=env.get("torch", ""),
                triton_version=env.get("triton", ""),
                cuda_version=env.get("cuda", ""),
            )
            for r in self.records
        ]

    def to_json(self) -> dict[str, Any]:
        """JSON-ready evidence (``digest`` covers records, changes, environment and options)."""
        values = (EVIDENCE_KIND, self.ts.isoformat(), self.environment, self.options,
                  [asdict(r) for r in self.records], [asdict(c) for c in self.changes])  # fmt: skip
        body = dict(zip(EVIDENCE_BODY, values, strict=True))
        return {**body, "digest": canonical_digest(body), "registry": self.state}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> QualifyResult:
        """The result an evidence file holds (``doc`` checked by :func:`evidence_problem`, as
        :func:`~inferensics.kernels.evidence.read_evidence` returns it), so its records can be stored later.

        Raises:
            ValueError: a file written before its records carried every field (rebuilt, they would carry another
                digest than the file's, so they could not be stored under it), or a malformed time or change; one
                line.
        """
        try:
            result = cls(
                ts=datetime.fromisoformat(doc["ts"]),
                records=[Evidence(**r) for r in doc["records"]],
                changes=[PriorityChange(**c) for c in doc["changes"]],
                environment=dict(doc["environment"]),
                options=dict(doc["options"]),
                state=dict(doc["registry"]),
            )
        except (TypeError, ValueError) as exc:  # a ts or a change evidence_problem does not check
            raise ValueError(f"evidence {doc['digest']}: not a qualification result ({exc})") from None
        if result.digest() != doc["digest"]:
            raise ValueError(
                f"evidence {doc['digest']} was written before its records carried "
                f"{', '.join(sorted(OPTIONAL_RECORD_FIELDS))}: its records cannot be stored under its digest; "
                "run `inferensics kernels qualify --store` to measure again"
            )
        return result


_TYPES: dict[str, tuple[type, ...]] = {"str": (str,), "bool": (bool,), "int": (int,), "float": (int, float)}


def evidence_problem(doc: Any) -> str | None:
    """Why ``doc`` (a parsed evidence file) is not one :meth:`QualifyResult.to_json` wrote, or ``None``: another
    kind of file, contents that no longer match the digest (damaged or edited), or a malformed record or
    registry state (each named)."""
    if not isinstance(doc, dict) or doc.get("kind") != EVIDENCE_KIND:
        return "not a qualification evidence file"
    if canonical_digest({k: doc.get(k) for k in EVIDENCE_BODY}) != doc.get("digest"):
        return "its contents do not match its digest: damaged or edited since qualify wrote it"
    for key, kind in (("environment", dict), ("options", dict), ("records", list), ("changes", list)):
        if not isinstance(doc.get(key), kind):
            return f"{key} is not a JSON {'object' if kind is dict else 'array'}"
    types = {f.name: _TYPES.get(str(f.type), (object,)) for f in fields(Evidence)}
    required = set(types) - OPTIONAL_RECORD_FIELDS
    for i, r in enumerate(doc["records"]):
        if not isinstance(r, dict) or not required <= set(r) <= set(types):
            return f"record {i} is not an evidence record (fields {', '.join(types)})"
        if wrong := [k for k, v in r.items() if _wrong_type(v, types[k])]:
            return f"record {i}: {', '.join(wrong)} of the wrong type"
    problem = state_problem(doc.get("registry"))
    return None if problem is None else f"registry: {problem}"


def _wrong_type(value: Any, allowed: tuple[type, ...]) -> bool:
    # A bool is an int to isinstance: only a bool field takes one, and a bool field takes nothing else.
    return isinstance(value, bool) != (allowed == (bool,)) or not isinstance(value, allowed)


def _bootstrap_ci(values: Sequence[float], rng: random.Random, rounds: int = 1000) -> tuple[float, float]:
    if len(values) < 2:
        v = values[0] if values else 0.0
        return v, v
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(rounds))
    return meds[int(0.025 * rounds)], meds[int(0.975 * rounds) - 1]


def _time_calls(fn: Callable[[], Any], iters: int, device: torch.device) -> float:
    """Microseconds per call of ``iters`` back-to-back calls: CUDA events around them on CUDA, else wall time."""
    if device.type == "cuda":
        start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return float(start.elapsed_time(end)) * 1000.0 / iters
    t0 = time.perf_counter()
    for _ in range(iters):
        fn()
    return (time.perf_counter() - t0) * 1e6 / iters


def _capture(fn: Callable[[], Any], iters: int, warmup: int, device: torch.device) -> torch.cuda.CUDAGraph:
    """``iters`` calls of ``fn`` captured into one fresh CUDA graph on a fresh side stream (warmed up on that
    stream first, as capture requires), replayed once so the first timed replay does not pay its upload.

    Raises what capture raised (a provider that synchronizes or compiles while captured). Either way the
    caller's stream is current again and the device idle: a failed capture leaves nothing half-done.
    """
    prior = torch.cuda.current_stream(device)
    stream = torch.cuda.Stream(device)  # type: ignore[no-untyped-call]
    graph = torch.cuda.CUDAGraph()
    try:
        stream.wait_stream(prior)
        with torch.cuda.stream(stream):
            for _ in range(max(1, warmup)):
                fn()
        stream.synchronize()
        with torch.cuda.graph(graph, stream=stream):
            for _ in range(iters):
                fn()
    finally:
        # torch.cuda.graph leaves the side stream current when ending the capture raises.
        torch.cuda.set_stream(prior)
        torch.cuda.synchronize(device)
    graph.replay()
    torch.cuda.synchronize(device)
    return graph


def _time_replay(graph: torch.cuda.CUDAGraph, iters: int, device: torch.device) -> float:
    """Microseconds per call of one replay of ``graph`` (holding ``iters`` calls), by CUDA events: device time."""
    stream = torch.cuda.current_stream(device)
    start = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    end = torch.cuda.Event(enable_timing=True)  # type: ignore[no-untyped-call]
    start.record(stream)
    graph.replay()
    end.record(stream)
    end.synchronize()
    return float(start.elapsed_time(end)) * 1000.0 / iters


def _timers(
    calls: dict[str, Callable[[], Any]], opts: QualifyOptions, device: torch.device
) -> tuple[str, dict[str, Callable[[], float]], dict[str, str]]:
    """How one shape's providers are timed: the method (``cuda_graph``, ``events`` or ``wall``), a timer per
    provider (one sample, µs per call), and per provider why it could not be captured (then the whole shape
    falls back to ``events``, so its providers are compared by one method)."""
    loop: dict[str, Callable[[], float]] = {
        n: functools.partial(_time_calls, c, opts.iters, device) for n, c in calls.items()
    }
    if device.type != "cuda":
        return WALL, loop, {}
    if opts.timing == EVENTS:
        return EVENTS, loop, {}
    graphs: dict[str, torch.cuda.CUDAGraph] = {}
    failed: dict[str, str] = {}
    for n, c in calls.items():
        try:
            graphs[n] = _capture(c, opts.iters, opts.warmup, device)
        except Exception as exc:  # whatever breaks capture sends the shape to the event loop
            failed[n] = f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0]}"
    if failed:
        graphs.clear()
        return EVENTS, loop, failed
    return CUDA_GRAPH, {n: functools.partial(_time_replay, g, opts.iters, device) for n, g in graphs.items()}, {}


def _to64(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)


def _first_row(args: tuple[Any, ...]) -> tuple[Any, ...]:
    rows = args[0].shape[0]
    return tuple(a[:1] if isinstance(a, torch.Tensor) and a.dim() > 1 and a.shape[0] == rows else a for a in args)


def _copy(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


def arg_names(schema: str) -> list[str]:
    """The argument names of a ``torch.library`` schema after the op's name: ``(Tensor x, float eps) -> Tensor`` gives
    ``["x", "eps"]``."""
    inside = schema[schema.index("(") + 1 : schema.index(")")] if "(" in schema and ")" in schema else ""
    return [part.split("=")[0].split()[-1] for part in inside.split(",") if part.strip() and part.strip() != "*"]


def _mutated(op: SemanticOp, before: tuple[Any, ...], after: tuple[Any, ...]) -> list[str]:
    """The names of the tensor arguments a provider changed (``after`` its call) from their copy ``before``."""
    names = arg_names(op.schema)
    return [
        names[i] if i < len(names) else f"argument {i}"
        for i, (b, a) in enumerate(zip(before, after, strict=True))
        if isinstance(a, torch.Tensor) and not _same(a, b)
    ]


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if torch.equal(a, b):
        return True
    return a.is_floating_point() and bool(torch.isclose(a, b, rtol=0.0, atol=0.0, equal_nan=True).all())  # NaNs


def _check_accuracy(
    op: SemanticOp, provider: str, shape: dict[str, int], opts: QualifyOptions, device: torch.device
) -> tuple[bool, str, float, str]:
    p = op.providers[provider]
    rule = op.tolerance.rule(opts.dtype, p.requirements.accuracy)
    worst = 0.0
    for seed in range(opts.accuracy_seeds):
        args = _make_args(op, shape, opts.dtype, device, seed=1000 + seed)
        # The provider on a copy: one that writes into its inputs must not hand the reference other inputs (the
        # reference, the op's definition, writes into none: it takes the originals, and no second copy is made).
        theirs = _copy(args)
        outs = p.fn(*theirs)
        if p.kind != "reference" and (changed := _mutated(op, args, theirs)):
            what = f"input{'s' if len(changed) > 1 else ''} {', '.join(changed)}"
            return False, rule.describe(), worst, f"seed {seed}: writes into its {what} (no input of the op is mutable)"
        del theirs
        refs = op.reference(*args)
        ref64s = op.reference(*_to64(args)) if rule.kind == "rmse" else None
        outs_t = outs if isinstance(outs, tuple) else (outs,)
        refs_t = refs if isinstance(refs, tuple) else (refs,)
        r64_t = ref64s if isinstance(ref64s, tuple) else (ref64s,) * len(refs_t)
        for o, r, r64 in zip(outs_t, refs_t, r64_t, strict=True):
            verdict = compare(o, r, rule, r64)
            worst = max(worst, verdict.max_abs_err)
            if not verdict.passed:
                return False, rule.describe(), worst, f"seed {seed}: {verdict.detail}"
        if p.requirements.accuracy == "batch_invariant" and op.name in BATCH_INVARIANT_OPS:
            alone = p.fn(*_copy(_first_row(args)))
            alone_t = alone if isinstance(alone, tuple) else (alone,)
            for a, o in zip(alone_t, outs_t, strict=True):
                if not torch.equal(a, o[:1]):
                    return (
                        False,
                        rule.describe(),
                        worst,
                        f"seed {seed}: row 0 differs computed alone (not batch-invariant)",
                    )
    return True, rule.describe(), worst, ""


def _make_args(op: SemanticOp, shape: dict[str, int], dtype: torch.dtype, device: torch.device, seed: int) -> Any:
    return make_args(op.name, shape, dtype, device, seed=seed, samples=op.samples)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {(str(exc).strip().splitlines() or [''])[0][:300]}"


def _qualify_shape(
    op: SemanticOp, shape: dict[str, int], opts: QualifyOptions, device: torch.device, rng: random.Random
) -> dict[str, Evidence]:
    """Every provider's record at ``shape`` (undecided: :func:`_decide_bucket` labels them with their bucket's)."""
    label, dt = shape_label(shape), str(opts.dtype).removeprefix("torch.")
    try:
        args = _make_args(op, shape, opts.dtype, device, seed=opts.seed)
        bucket = op.bucket(args)
    except Exception as exc:  # counted as the shape's, nobody refused
        if isinstance(exc, (torch.OutOfMemoryError, MemoryError)) or (
            isinstance(exc, RuntimeError) and op.samples is None
        ):  # too large for this device
            what = f"cannot allocate the arguments here ({_why(exc)})"
        else:  # an op of your own: its Samples.make or its bucket function raised
            what = f"the op's own code raised making its arguments or naming their bucket ({_why(exc)})"
        detail = f"{what}: nothing measured at this shape"
        blank = Evidence(op=op.name, provider="", bucket="", shape=label, dtype=dt, status=ERROR, detail=detail)
        return {name: replace(blank, provider=name) for name in op.providers}
    ctx = CallContext.of(args)
    base = Evidence(op=op.name, provider="", bucket=bucket, shape=label, dtype=dt, status="")
    records: dict[str, Evidence] = {}
    runnable: list[str] = []
    for name, p in op.providers.items():
        try:
            ok, why = p.supports(args, ctx)
        except Exception as exc:  # the provider's own check: it raised, as its function might
            records[name] = replace(base, provider=name, status=ERROR, detail=f"requirement check raised {_why(exc)}")
            continue
        if not ok:
            records[name] = replace(base, provider=name, status=UNSUPPORTED, detail=why)
            continue
        try:
            passed, rule, err, detail = _check_accuracy(op, name, shape, opts, device)
        except Exception as exc:
            records[name] = replace(base, provider=name, status=ERROR, detail=f"{type(exc).__name__}: {exc}")
            continue
        if not passed:
            records[name] = replace(
                base,
                provider=name,
                status=REFUSED,
                rule=rule,
                max_abs_err=err,
                detail=detail,
                decision=DECISION_REFUSED,
            )
            continue
        records[name] = replace(base, provider=name, status=MEASURED, accuracy_passed=True, rule=rule, max_abs_err=err)
        runnable.append(name)
    calls: dict[str, Callable[[], Any]] = {n: functools.partial(op.providers[n].fn, *args) for n in runnable}

    def failed(n: str, exc: Exception, when: str) -> None:  # raised while timed: out of the timing, refused
        records[n] = replace(records[n], status=ERROR, accuracy_passed=False, detail=f"{when}: {_why(exc)}")
        runnable.remove(n)

    for n in list(runnable):
        try:
            for _ in range(opts.warmup):
                calls[n]()
        except Exception as exc:
            failed(n, exc, "raised while warming up")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    method, timers, uncaptured = _timers({n: calls[n] for n in runnable}, opts, device)
    samples: dict[str, list[float]] = {n: [] for n in runnable}
    for _ in range(opts.trials):
        order = list(runnable)
        rng.shuffle(order)
        for n in order:
            try:
                samples[n].append(timers[n]())
            except Exception as exc:
                failed(n, exc, "raised while timed")
    del timers  # the shape's graphs go with their timers
    moved = bytes_moved(op.name, args, op.reference(*args)) if runnable else 0
    for n in runnable:
        med = statistics.median(samples[n])
        lo, hi = _bootstrap_ci(samples[n], rng)
        r = records[n]
        records[n] = replace(
            r, median_us=med, ci_low_us=lo, ci_high_us=hi, trials=len(samples[n]), bytes=moved,
            tb_s=moved / med / 1e6 if med > 0 else 0.0, timing=method,
        )  # fmt: skip
        if n in uncaptured:
            records[n] = replace(
                records[n],
                detail=f"not capturable in a CUDA graph ({uncaptured[n]}): this shape was timed with events",
            )
    return records


def _decide(op: SemanticOp, bucket: str, records: dict[str, Evidence], opts: QualifyOptions) -> PriorityChange | None:
    """:func:`_decide_bucket` for a bucket measured at one shape."""
    return _decide_bucket(op, bucket, [records], opts)


def _decide_bucket(
    op: SemanticOp, bucket: str, shapes: list[dict[str, Evidence]], opts: QualifyOptions
) -> PriorityChange | None:
    """Decide ``bucket`` on the records of all its shapes (each ``{provider: record}``, labelled in place): a provider
    refused, or raising, at any shape is refused; a challenger is promoted only if it clears the margin over the
    provider serving each shape at every shape where it runs (whatever order the shapes were listed in)."""
    before = op.priority_for(bucket)
    # A shape whose arguments the reference rejects (or that could not be made) tells nothing about the providers.
    usable = sorted(
        (recs for recs in shapes if recs[REFERENCE].status != ERROR), key=lambda recs: recs[REFERENCE].shape
    )
    many = len(usable) > 1
    refusals: dict[str, str] = {}
    raised: set[str] = set()  # refused for raising, not by the accuracy gate
    for recs in usable:
        for n, r in recs.items():
            if n == REFERENCE or n in refusals or r.status not in {REFUSED, ERROR}:
                continue
            detail = r.detail
            if r.status == ERROR:
                raised.add(n)
                detail = detail if detail.startswith(("raised", "requirement check raised")) else f"raised {detail}"
            refusals[n] = f"at {r.shape}: {detail}" if many else detail
    refused = [n for n in op.providers if n in refusals]
    measured = [{n: r for n, r in recs.items() if r.status == MEASURED and n not in refusals} for recs in usable]
    current = [n for n in before if n not in refused]
    if current[-1:] != [REFERENCE]:
        current.append(REFERENCE)
    serving = [next((n for n in current if n in m), None) for m in measured]
    reason = ""
    after = list(current)
    if any(serving):
        names = dict.fromkeys(n for m in measured for n in m)
        verdicts = {n: _verdict(n, measured, serving, opts.margin) for n in names}
        winners = {n: v[0] for n, v in verdicts.items() if v is not None and v[0] is not None}
        if winners:
            best = min(winners, key=lambda n: (winners[n], n))
            # The reference stays last: when it is the clear winner, every provider it beats as clearly leaves the
            # bucket's list (the incumbent first among them), so none slower than it is left to serve ahead of it.
            if best == REFERENCE:
                after = [n for n in current if not _outrun(REFERENCE, n, measured, opts.margin)]
            else:
                after = [best, *[n for n in current if n != best]]
            reason = "; ".join(
                f"{'at ' + m[best].shape + ': ' if many else ''}{best} {_us(m[best])} beats {s} {_us(m[s])} by > "
                f"{opts.margin:.0%}"
                for m, s in zip(measured, serving, strict=True)
                if s is not None and best in m and s != best
            )
            if also := [n for n in current if n not in after and not any(n == s for s in serving)]:
                reason += f", and {', '.join(also)} as clearly (out of the bucket's list)"
        for n, v in verdicts.items():  # cleared the margin at some shapes, not all: said, not promoted
            if v is not None and v[0] is None and v[1]:
                note = (
                    f"shapes disagree: clears the margin at {', '.join(v[1])} but not at {', '.join(v[2])}; not "
                    "promoted (a provider must clear it at every shape of its bucket)"
                )
                for recs in usable:
                    if n in recs and recs[n].status == MEASURED:
                        recs[n] = replace(recs[n], detail="; ".join(filter(None, (recs[n].detail, note))))
        after = [n for n in after if n != REFERENCE] + [REFERENCE]
        # Labelled by who serves each shape before and after: the first provider that could run there. A refused first
        # provider hands the bucket to the next, a promotion though nothing was timed against it.
        for recs, m in zip(usable, measured, strict=True):
            ran = {n for n, r in recs.items() if r.status in {MEASURED, REFUSED, ERROR}}
            served_before = next((n for n in [*before, REFERENCE] if n in ran), None)
            served_after = next((n for n in after if n in m), None)
            for n in m:
                if n == served_after:
                    decision = INCUMBENT if n == served_before else PROMOTED
                else:
                    decision = DEMOTED if n == served_before else KEPT
                recs[n] = replace(recs[n], decision=decision)
    for recs in usable:
        for n in refused:
            if n in recs and recs[n].status in {REFUSED, ERROR}:
                recs[n] = replace(recs[n], decision=DECISION_REFUSED)
    if refused:
        why = [f"{n} refused{'' if n in raised else ' by the accuracy gate'}: {refusals[n]}" for n in refused]
        reason = "; ".join([*why, *([reason] if reason else [])])
    if opts.apply:
        for n in refused:  # refused providers stay listed, so each decision says why they were skipped
            op.refuse(bucket, n, refusals[n])
        if after != current:
            op.set_priority([*after[:-1], *refused], bucket)
    if after == before and not refused:
        return None
    return PriorityChange(op.name, bucket, list(before), after, reason)


def _us(r: Evidence) -> str:
    return f"{r.median_us:.2f} us [{r.ci_low_us:.2f}, {r.ci_high_us:.2f}]"


def _verdict(
    n: str, measured: list[dict[str, Evidence]], serving: list[str | None], margin: float
) -> tuple[float | None, list[str], list[str]] | None:
    """How ``n`` fares against the provider serving each shape where it runs and another serves: ``None`` when there is
    none; else its worst ratio to that provider's median if it clears the margin at all of them (``None`` if not),
    the shapes where it does and those where it does not."""
    contested = [(m[n], m[s]) for m, s in zip(measured, serving, strict=True) if n in m and s is not None and s != n]
    if not contested:
        return None
    wins = [c.shape for c, o in contested if _beats(c, o, margin)]
    losses = [c.shape for c, o in contested if not _beats(c, o, margin)]
    worst = max(c.median_us / o.median_us if o.median_us > 0 else float("inf") for c, o in contested)
    return (None if losses else worst), wins, losses


def _outrun(winner: str, n: str, measured: list[dict[str, Evidence]], margin: float) -> bool:
    """Whether ``winner`` clears the margin over ``n`` at every shape where both were measured (one at least)."""
    where = [m for m in measured if n in m and winner in m]
    return bool(where) and n != winner and all(_beats(m[winner], m[n], margin) for m in where)


def _beats(challenger: Evidence, other: Evidence, margin: float) -> bool:
    """Whether ``challenger``'s interval clears ``other``'s by more than ``margin`` (its upper bound under the other's
    lower bound less the margin): the evidence a priority change needs."""
    return challenger.ci_high_us < other.ci_low_us * (1 - margin)


def distinct_shapes(shapes: list[dict[str, int]]) -> list[dict[str, int]]:
    """``shapes`` without repeats (the same fields and values, in any order), first occurrences in order."""
    seen: dict[tuple[tuple[str, int], ...], dict[str, int]] = {}
    for shape in shapes:
        seen.setdefault(tuple(sorted(shape.items())), shape)
    return list(seen.values())


def qualify(registry: Registry, opts: QualifyOptions | None = None) -> QualifyResult:
    """Qualify the registry's providers on this machine; apply the changes the evidence supports.

    An op or shape given twice is qualified once; an op given an empty list of shapes is refused
    (``ValueError``), as is a shape that is not one of its op's, and an op with no shapes to measure (no sample
    arguments, or none by default) (each named, before anything is measured).
    """
    opts = opts or QualifyOptions()
    if opts.timing not in TIMING_OPTIONS:
        raise ValueError(f"timing {opts.timing!r}: expected one of {', '.join(TIMING_OPTIONS)}")
    device = torch.device(opts.device or ("cuda" if torch.cuda.is_available() else "cpu"))
    rng = random.Random(opts.seed)
    if empty := sorted(name for name, shapes in (opts.shapes or {}).items() if isinstance(shapes, list) and not shapes):
        raise ValueError(
            f"no shapes listed for {', '.join(empty)}: list at least one, or leave the op out for its default shapes"
        )
    names = list(dict.fromkeys(opts.ops)) if opts.ops else sorted(registry.ops)
    ops = [registry.op(name) for name in names]
    plan = [(op, (opts.shapes or {}).get(op.name) or default_shapes(op.name, device, op.samples)) for op in ops]
    if nothing := [op.name for op, shapes in plan if not shapes]:  # before: measured nothing, and said nothing
        raise ValueError(
            "; ".join(
                no_samples(name)
                if shape_fields(name, registry.op(name).samples) is None
                else f"op {name!r} has no default shapes: list its shapes"
                for name in nothing
            )
        )
    # Every shape is checked before any is measured: a typo in the last one must not cost the run before it.
    rejects = [
        f"{op.name}[{i}] {shape_label(shape) if isinstance(shape, dict) else repr(shape)}: {why}"
        for op, shapes in plan
        for i, shape in enumerate(shapes)
        if (why := shape_problem(op.name, shape, op.samples)) is not None
    ]
    if rejects:
        total = sum(len(shapes) for _, shapes in plan)
        raise ValueError(f"{len(rejects)} of {total} shapes rejected, nothing measured: {'; '.join(rejects)}")
    # An op or a shape named twice is measured once: twice would write its records twice and decide its bucket
    # twice on the same evidence.
    plan = [(op, distinct_shapes(shapes)) for op, shapes in plan]
    if opts.shapes is not None:
        opts = replace(opts, shapes={n: distinct_shapes(v) if n in names else v for n, v in opts.shapes.items()})
    opts = replace(opts, ops=tuple(names) if opts.ops else opts.ops)
    env = environment()
    if device.type == "cpu" and interpreter_enabled():  # a GPU host measuring CPU tensors in the interpreter
        env["device"] = INTERPRETED_CPU
    result = QualifyResult(ts=datetime.now(UTC), environment=env)
    result.options = {
        k: (str(v).removeprefix("torch.") if isinstance(v, torch.dtype) else v) for k, v in asdict(opts).items()
    }
    result.options["device"] = str(device)
    for op, shapes in plan:
        # Every shape of the op is measured before any bucket is decided, so each is measured under the same policy
        # and a bucket's shapes are decided together.
        measured = [_qualify_shape(op, shape, opts, device, rng) for shape in shapes]
        buckets: dict[str, list[dict[str, Evidence]]] = {}
        for records in measured:
            if bucket := records[REFERENCE].bucket:
                buckets.setdefault(bucket, []).append(records)
        for bucket, group in buckets.items():
            if (change := _decide_bucket(op, bucket, group, opts)) is not None:
                result.changes.append(change)
        for records in measured:
            result.records.extend(records.values())
    if opts.apply and result.changes:
        registry.evidence.append(result.digest())  # the digest the evidence file and the stored records carry
    result.state = registry.state()
    return result
