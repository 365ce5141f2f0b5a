"""Steady latency of several compiled policies, measured interleaved, with the spread of each.

A policy measured after another on a shared box meets other load than the one before it: timing every policy
in turn, call by call (the order rotating each round), gives each the same conditions. Each round yields one
traffic-weighted sample per policy; a sample whose calls compiled anything (Dynamo compiled a frame) is left
out and the round repeated, so compile time never enters a per-call figure. The spread is a distribution-free
interval of the median (order statistics of the binomial), so two policies whose intervals overlap are not told
apart.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import torch

CONFIDENCE: Final = 0.95
"""Coverage of the median's interval."""
WARMUP_ROUNDS: Final = 2
"""Untimed rounds before the timed ones (lazy initialisation, CUDA-graph recording, caches)."""

Call = tuple[Callable[[], Any], float]
"""One shape's call and its traffic weight."""


@dataclass(frozen=True)
class LatencyEstimate:
    """One policy's traffic-weighted steady latency."""

    median_s: float
    """Median over the rounds."""
    low_s: float
    """Lower end of the median's interval (:data:`CONFIDENCE`)."""
    high_s: float
    """Upper end of it."""
    samples: int
    """Rounds measured."""
    discarded: int
    """Rounds left out because a call compiled."""


def synchronised(fn: Callable[[], Any], inputs: Sequence[Any]) -> Callable[[], Any]:
    """``fn``, returning only once the GPU work it queued is done when ``inputs`` are on a CUDA device (a kernel
    launch returns before the kernel ran: timing it alone measures the launch)."""
    if not any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs):
        return fn

    def call() -> Any:
        out = fn()
        torch.cuda.synchronize()
        return out

    return call


def median_interval(samples: Sequence[float], confidence: float = CONFIDENCE) -> tuple[float, float, float]:
    """``(median, low, high)``: the sample median and the order statistics that cover the true median with at
    least ``confidence`` (the whole range when there are too few samples for it)."""
    xs = sorted(samples)
    n = len(xs)
    if not n:
        return 0.0, 0.0, 0.0
    tail = (1 - confidence) / 2
    cdf, j = 0.0, 1
    for m in range(n):  # the largest m with P(Binomial(n, 1/2) <= m) <= tail gives ranks m+1 and n-m
        cdf += math.comb(n, m) / 2**n
        if cdf > tail:
            break
        j = m + 1
    j = min(j, (n + 1) // 2)
    return statistics.median(xs), xs[j - 1], xs[n - j]


def interleaved_latencies(
    policies: Mapping[str, Sequence[Call]],
    rounds: int,
    *,
    compiles: Callable[[], int],
    clock: Callable[[], float] = time.perf_counter,
) -> dict[str, LatencyEstimate]:
    """Time every policy's calls interleaved: in each round, shape by shape, one call of each policy (their order
    rotating with the round), after :data:`WARMUP_ROUNDS` untimed rounds.

    Args:
        policies: Policy name → its calls, one per shape, each with the shape's traffic weight.
        rounds: Samples wanted per policy.
        compiles: A counter that moves when anything compiles (a sample taken while it moved is left out).
        clock: Seconds.
    """
    names = list(policies)
    samples: dict[str, list[float]] = {n: [] for n in names}
    discarded = dict.fromkeys(names, 0)
    shapes = max((len(c) for c in policies.values()), default=0)
    for r in range(WARMUP_ROUNDS + 2 * rounds):  # rounds with a compile are repeated, up to as many again
        if r >= WARMUP_ROUNDS and all(len(s) >= rounds for s in samples.values()):
            break
        order = names[r % len(names) :] + names[: r % len(names)] if names else []
        total = dict.fromkeys(names, 0.0)
        compiled = dict.fromkeys(names, False)
        for i in range(shapes):
            for n in order:
                calls = policies[n]
                if i >= len(calls):
                    continue
                fn, weight = calls[i]
                before = compiles()
                t0 = clock()
                fn()
                total[n] += weight * (clock() - t0)
                compiled[n] = compiled[n] or compiles() != before
        if r < WARMUP_ROUNDS:
            continue
        for n in names:
            if compiled[n]:
                discarded[n] += 1
            elif len(samples[n]) < rounds:
                samples[n].append(total[n])
    out = {}
    for n in names:
        median, low, high = median_interval(samples[n])
        out[n] = LatencyEstimate(median, low, high, len(samples[n]), discarded[n])
    return out
