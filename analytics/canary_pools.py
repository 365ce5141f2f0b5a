"""Which hardware pool a canary comparison compares: where both bundles served.

A canary usually serves in one pool while its baseline serves in several; over every pool the baseline's
requests come partly from other hardware than the candidate's, and a latency or rate difference may then be
the hardware's, not the bundle's. The dashboard's canary page and ``inferensics canary compare`` both compare
the pool both bundles served (the candidate's busiest such pool) unless told otherwise, and name what they
left out.
"""

from __future__ import annotations

from dataclasses import dataclass


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
