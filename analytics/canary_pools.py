"""Which hardware pools a canary comparison compares: those where both bundles served, each alone.

A canary usually serves in one pool while its baseline serves in several; over every pool the baseline's
requests come partly from other hardware than the candidate's, and a latency or rate difference may then be
the hardware's, not the bundle's. The dashboard's canary page and ``inferensics canary compare`` both judge
each pool both bundles served on its own unless told otherwise, name what they left out, and give the worst
of the pools' verdicts (:func:`worst_verdict`). Judging only the candidate's busiest shared pool hid a
regression of one pool (walk 42: INCONCLUSIVE on h100-a while h200-b failed), and which pool was busiest
turned on a couple of requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

VERDICT_RANK: Final = {"fail": 0, "inconclusive": 1, "pass": 2}
"""The verdicts from worst to best: the worst pool's verdict is the comparison's."""


@dataclass(frozen=True)
class PoolSplit:
    """Requests per hardware pool on each side of a comparison (its model, traffic class and window)."""

    baseline: dict[str, int]
    candidate: dict[str, int]

    def shared(self) -> list[str]:
        """The pools both bundles served, the candidate's busiest first."""
        both = [p for p, n in self.candidate.items() if n > 0 and self.baseline.get(p, 0) > 0]
        return sorted(both, key=lambda p: (-self.candidate[p], -self.baseline[p], p))

    def pools(self) -> list[str]:
        """Every pool either bundle served, busiest first."""
        total = {p: self.baseline.get(p, 0) + self.candidate.get(p, 0) for p in {*self.baseline, *self.candidate}}
        return sorted((p for p, n in total.items() if n > 0), key=lambda p: (-total[p], p))

    def describe(self, pool: str) -> str:
        """``pool`` and who served there, in words."""
        b, c = self.baseline.get(pool, 0), self.candidate.get(pool, 0)
        if not c:
            return f"{pool} (only the baseline served there: {b:,} requests)"
        if not b:
            return f"{pool} (only the candidate served there: {c:,} requests)"
        return f"{pool} (both served there, baseline {b:,} and candidate {c:,} requests: pick it to compare it)"

    def sides(self) -> str:
        """Each side's pools and requests, in words (``baseline: cpu-a (120), cpu-b (80); candidate: ...``)."""
        return "; ".join(
            f"{name}: " + (", ".join(f"{p} ({n:,})" for p, n in counts.items() if n) or "no requests")
            for name, counts in (("baseline", self.baseline), ("candidate", self.candidate))
        )


@dataclass(frozen=True)
class PoolVerdict:
    """One pool's verdict in a comparison of several pools."""

    pool: str
    verdict: str
    """``pass``, ``fail`` or ``inconclusive``."""
    rule: str
    """What decided it (the verdict row's rule)."""


def worst_verdict(verdicts: Sequence[PoolVerdict]) -> tuple[str, str]:
    """The comparison's verdict over ``verdicts`` (fail before inconclusive before pass) and its rule, naming the
    pool or pools that decided it (``on hardware pool h200-b (failed: p50_ms)``).

    >>> undecided, failed = PoolVerdict("a", "inconclusive", "undecided: p99_ms"), PoolVerdict("b", "fail", "failed: x")
    >>> worst_verdict([undecided, failed])
    ('fail', 'on hardware pool b (failed: x)')
    """
    if not verdicts:
        raise ValueError("no pool was judged")
    worst = min(verdicts, key=lambda v: VERDICT_RANK.get(v.verdict, len(VERDICT_RANK))).verdict
    deciding = [v for v in verdicts if v.verdict == worst]
    pools = "hardware pool" if len(deciding) == 1 else "hardware pools"
    return worst, f"on {pools} " + "; ".join(f"{v.pool} ({v.rule})" for v in deciding)
