"""Shape-policy advice: all-static, all-dynamic and bucketed policies measured on the same distribution.

Each policy is compiled from an empty cache and serves every shape of the distribution. Bucketed rounds
every dimension up to the next power of two (the proposed edges); its padding waste is the traffic-weighted
share of padded elements. The recommendation minimises the expected cost of a window of traffic:
``compile seconds + requests × traffic-weighted latency`` (``REQUESTS_PER_WINDOW`` requests), so a policy
that compiles less wins unless its latency costs more over the window than the compiles it saves.
"""

from __future__ import annotations

import math
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from inferensics.bundle.qualify import PolicyRun, run_policy
from inferensics.bundle.shapes import ShapeDistribution

REQUESTS_PER_WINDOW: Final = 10_000
"""Requests the recommendation amortises compiles over."""


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
    """Traffic-weighted steady latency."""
    padding_waste: float
    """Traffic-weighted share of padded elements."""
    cost_s: float
    """``compile_s + REQUESTS_PER_WINDOW × latency``."""


def summarise(run: PolicyRun, dist: ShapeDistribution) -> PolicySummary:
    """Figures of one policy run over the distribution's weights."""
    shares = dist.shares
    latency = sum(shares[r.shape] * r.latency_s for r in run.shapes)
    waste = sum(shares[r.shape] * (1 - math.prod(r.shape) / math.prod(r.served_as)) for r in run.shapes)
    return PolicySummary(
        name=run.name,
        specializations=len(run.graphs),
        compile_s=run.compile_s,
        cache_bytes=len(run.blob),
        latency_ms=latency * 1e3,
        padding_waste=waste,
        cost_s=run.compile_s + REQUESTS_PER_WINDOW * latency,
    )


def recommend(summaries: list[PolicySummary]) -> PolicySummary:
    """The policy with the lowest window cost."""
    return min(summaries, key=lambda s: s.cost_s)


def compare_policies(  # noqa: PLR0917 - one call site, in build
    model: Any,
    make_inputs: Callable[[tuple[int, ...]], tuple[Any, ...]],
    dist: ShapeDistribution,
    compile_args: Mapping[str, Any],
    patches: Mapping[str, Any],
    main: PolicyRun,
    repeats: int,
) -> list[PolicyRun]:
    """Run static, dynamic and bucketed policies (reusing ``main`` for the one it already is)."""
    exact = [(s.shape, s.shape) for s in dist.shapes]
    padded = [(s.shape, bucketed(s.shape)) for s in dist.shapes]
    out: list[PolicyRun] = []
    for name, shapes, dynamic in (("static", exact, False), ("dynamic", exact, True), ("bucketed", padded, False)):
        if shapes == exact and dynamic == compile_args.get("dynamic"):
            out.append(PolicyRun(name, main.shapes, main.graphs, main.blob, main.graph_breaks, main.guard_failures, ""))
            continue
        if name == "bucketed" and shapes == exact:  # every shape already sits on an edge: same as static
            s = out[0]
            out.append(PolicyRun(name, s.shapes, s.graphs, s.blob, s.graph_breaks, s.guard_failures, ""))
            continue
        args = {**compile_args, "dynamic": dynamic}
        try:
            run = run_policy(
                name, model, make_inputs, shapes, compile_args=args, config_patches=patches, repeats=repeats
            )
        except BaseException:  # the runs made so far are not returned: remove their compile caches here
            for made in out:
                if made.cache_dir:
                    shutil.rmtree(made.cache_dir, ignore_errors=True)
            raise
        out.append(run)
    return out
