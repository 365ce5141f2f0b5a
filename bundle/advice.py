"""Shape-policy advice: all-static, all-dynamic and bucketed policies measured on the same distribution.

Each policy is compiled from an empty cache and serves every shape of the distribution (its compile figures),
after the build warmed the compiler up (:func:`~inferensics.bundle.qualify.warm_up`): the as-built run, reused
here for the policy it is, would otherwise carry the compiler's one-time start in its compile seconds.
Then all of them, compiled again from their own caches and alive at once, are timed interleaved
(:mod:`inferensics.bundle.latency`): their steady latencies, each with the interval of its median, are
measured under the same load, with no compile in any timed call. Bucketed rounds every dimension up to the
next power of two (the proposed edges); its padding waste is the traffic-weighted share of padded elements.
The recommendation minimises the expected cost of a window of traffic: ``compile seconds + requests ×
traffic-weighted latency`` (``REQUESTS_PER_WINDOW`` requests), so a policy that compiles less wins unless its
latency costs more over the window than the compiles it saves; when the cheapest policy's cost interval
overlaps another's, the advice is "no clear winner".
"""

from __future__ import annotations

import functools
import math
import shutil
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

import torch

from inferensics.bundle import torch_adapter
from inferensics.bundle.latency import Call, LatencyEstimate, interleaved_latencies, synchronised
from inferensics.bundle.qualify import PolicyRun, ShapeRun, run_policy
from inferensics.bundle.shapes import ShapeDistribution

REQUESTS_PER_WINDOW: Final = 10_000
"""Requests the recommendation amortises compiles over."""
ADVICE_ROUNDS: Final = 15
"""Interleaved rounds per policy at least (15 gives the median a 96% interval between the 4th and 12th)."""
NO_CLEAR_WINNER: Final = "no clear winner"
"""The advice when the cheapest policy's cost interval overlaps another's."""


def next_pow2(n: int) -> int:
    """The smallest power of two ≥ ``n``."""
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def bucket_edges(dist: ShapeDistribution) -> list[list[int]]:
    """Proposed bucket edges per dimension: the powers of two that cover the distribution's values."""
    rank = max(len(s.shape) for s in dist.shapes)
    return [sorted({next_pow2(s.shape[d]) for s in dist.shapes if d < len(s.shape)}) for d in range(rank)]


def bucketed(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The bucket a shape is padded to."""
    return tuple(next_pow2(d) for d in shape)


@dataclass(frozen=True)
class PolicySummary:
    """One policy's figures."""

    name: str
    specializations: int
    compile_s: float
    cache_bytes: int
    latency_ms: float
    """Traffic-weighted steady latency (the median of the interleaved rounds, when compared)."""
    padding_waste: float
    """Traffic-weighted share of padded elements."""
    cost_s: float
    """``compile_s + REQUESTS_PER_WINDOW × latency``."""
    latency_low_ms: float = 0.0
    """Lower end of the latency median's interval (equal to ``latency_ms`` when not compared)."""
    latency_high_ms: float = 0.0
    """Upper end of it."""
    cost_low_s: float = 0.0
    """``cost_s`` at the interval's lower end."""
    cost_high_s: float = 0.0
    """``cost_s`` at its upper end."""
    latency_samples: int = 0
    """Interleaved rounds measured (0: not compared)."""
    same_as: str = ""
    """The policy this one is identical to (not a separate choice)."""


def summarise(run: PolicyRun, dist: ShapeDistribution) -> PolicySummary:
    """Figures of one policy run over the distribution's weights (its interleaved latency when it has one)."""
    shares = dist.shares
    waste = sum(shares[r.shape] * (1 - math.prod(r.shape) / math.prod(r.served_as)) for r in run.shapes)
    m = run.latency
    if m is None:
        latency = sum(shares[r.shape] * r.latency_s for r in run.shapes)
        m = LatencyEstimate(latency, latency, latency, 0, 0)
    return PolicySummary(
        name=run.name,
        specializations=len(run.graphs),
        compile_s=run.compile_s,
        cache_bytes=len(run.blob),
        latency_ms=m.median_s * 1e3,
        padding_waste=waste,
        cost_s=run.compile_s + REQUESTS_PER_WINDOW * m.median_s,
        latency_low_ms=m.low_s * 1e3,
        latency_high_ms=m.high_s * 1e3,
        cost_low_s=run.compile_s + REQUESTS_PER_WINDOW * m.low_s,
        cost_high_s=run.compile_s + REQUESTS_PER_WINDOW * m.high_s,
        latency_samples=m.samples,
        same_as=run.same_as,
    )


def recommend(summaries: list[PolicySummary]) -> tuple[PolicySummary | None, str]:
    """The policy with the lowest window cost and why, or ``None`` and why not: the cheapest policy's cost
    interval overlaps another policy's (their difference is within the measurement's spread)."""
    choices = [s for s in summaries if not s.same_as]
    if not choices:
        return None, ""
    best = min(choices, key=lambda s: s.cost_s)
    close = [s for s in choices if s is not best and s.cost_low_s <= best.cost_high_s]
    if close:
        return None, (
            f"{NO_CLEAR_WINNER}: {best.name}'s window cost {_interval(best)} overlaps "
            + ", ".join(f"{s.name}'s {_interval(s)}" for s in close)
        )
    others = ", ".join(f"{s.name} {_interval(s)}" for s in choices if s is not best)
    return best, f"lowest window cost, {_interval(best)}" + (f", below every other's ({others})" if others else "")


def _interval(s: PolicySummary) -> str:
    return f"{s.cost_s:.4g} s [{s.cost_low_s:.4g}, {s.cost_high_s:.4g}]"


def compare_policies(  # noqa: PLR0917 - one call site, in build
    model: Any,
    make_inputs: Callable[[tuple[int, ...]], tuple[Any, ...]],
    dist: ShapeDistribution,
    compile_args: Mapping[str, Any],
    patches: Mapping[str, Any],
    main: PolicyRun,
    repeats: int,
    on_shape: Callable[[str, ShapeRun], None] | None = None,
) -> list[PolicyRun]:
    """Run static, dynamic and bucketed policies (reusing ``main`` for the one it already is), then time them
    interleaved (at least :data:`ADVICE_ROUNDS` rounds) into each run's ``latency``; ``on_shape`` is told of each
    shape a policy run serves."""
    exact = [(s.shape, s.shape) for s in dist.shapes]
    padded = [(s.shape, bucketed(s.shape)) for s in dist.shapes]
    out: list[PolicyRun] = []
    timed: list[tuple[PolicyRun, Sequence[tuple[tuple[int, ...], tuple[int, ...]]], bool, str]] = []
    try:
        for name, shapes, dynamic in (("static", exact, False), ("dynamic", exact, True), ("bucketed", padded, False)):
            if shapes == exact and dynamic == compile_args.get("dynamic"):
                run = PolicyRun(name, main.shapes, main.graphs, main.blob, main.graph_breaks, main.guard_failures, "")
                out.append(run)
                timed.append((run, shapes, dynamic, main.cache_dir))
                continue
            if name == "bucketed" and shapes == exact:  # every shape already sits on an edge: same as static
                s = out[0]
                out.append(PolicyRun(name, s.shapes, s.graphs, s.blob, s.graph_breaks, s.guard_failures, "",
                                     same_as=s.name))  # fmt: skip
                continue
            args = {**compile_args, "dynamic": dynamic}
            run = run_policy(
                name, model, make_inputs, shapes, compile_args=args, config_patches=patches, repeats=repeats,
                on_shape=functools.partial(on_shape, name) if on_shape is not None else None,
            )  # fmt: skip
            out.append(run)
            timed.append((run, shapes, dynamic, run.cache_dir))
        measured = _interleaved(model, make_inputs, dist, patches, timed, max(repeats, ADVICE_ROUNDS))
    except BaseException:  # the runs made so far are not returned: remove their compile caches here
        for made in out:
            if made.cache_dir:
                shutil.rmtree(made.cache_dir, ignore_errors=True)
        raise
    return [replace(r, latency=measured.get(r.same_as or r.name)) for r in out]


def _interleaved(  # noqa: PLR0917 - one call site, above
    model: Any,
    make_inputs: Callable[[tuple[int, ...]], tuple[Any, ...]],
    dist: ShapeDistribution,
    patches: Mapping[str, Any],
    timed: Sequence[tuple[PolicyRun, Sequence[tuple[tuple[int, ...], tuple[int, ...]]], bool, str]],
    rounds: int,
) -> dict[str, LatencyEstimate]:
    """Each policy compiled again from its own cache folder (Dynamo starts afresh: the runs reset it), all alive
    at once, then timed interleaved; a compile inside the timed rounds goes to a scratch cache, not the user's."""
    shares = dist.shares
    policies: dict[str, list[Call]] = {}
    scratch = tempfile.mkdtemp(prefix="inferensics-bundle-timing-")
    torch_adapter.reset_compiler()
    try:
        with torch_adapter.recompile_limit_raised(8 * len(timed) * max(1, len(dist.shapes))), torch.inference_mode():
            for run, shapes, dynamic, cache_dir in timed:
                compiled = torch.compile(model, backend=functools.partial(torch_adapter.compile_fx,
                                         config_patches=patches), dynamic=dynamic)  # fmt: skip
                calls: list[Call] = []
                with torch_adapter.temporary_cache_dir(cache_dir or scratch):
                    for shape, served in shapes:
                        args = make_inputs(served)
                        call = synchronised(functools.partial(compiled, *args), args)
                        call()  # compiled here (a cache hit of the run's), never in a timed call
                        calls.append((call, shares[shape]))
                policies[run.name] = calls
            with torch_adapter.temporary_cache_dir(scratch):
                return interleaved_latencies(policies, rounds, compiles=torch_adapter.frames_compiled)
    finally:
        torch_adapter.reset_compiler()
        shutil.rmtree(scratch, ignore_errors=True)
