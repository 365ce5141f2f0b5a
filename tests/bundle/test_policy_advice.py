"""The shape-policy advice is decided on interleaved timings with their spread, never on a compile, and abstains
when the policies cannot be told apart.

It used to take the median of 3 calls per policy, each policy timed in turn on a loaded box, and always named
the cheapest: 1.23 ms against 11.27 ms decided "dynamic" on noise. A fake clock makes these cases exact.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from inferensics import bundle as b
from inferensics.bundle import advice, capture, torch_adapter
from inferensics.bundle.latency import WARMUP_ROUNDS, LatencyEstimate, interleaved_latencies, median_interval
from inferensics.bundle.qualify import PolicyRun, ShapeRun
from inferensics.bundle.shapes import ShapeDistribution
from tests.bundle.conftest import Keys, spec

DIST = ShapeDistribution.of([(2, 8), (3, 8)], [3, 1])
JITTER = (0.0, 0.3, -0.2, 0.1, -0.3, 0.2, -0.1)
"""Deterministic noise (ms) of successive calls."""


class FakeBox:
    """A clock that calls advance, and a compile counter."""

    def __init__(self) -> None:
        self.now = 0.0
        self.compiles = 0
        self.calls = 0

    def clock(self) -> float:
        return self.now

    def call(self, ms: float, *, compile_on: int = -1) -> Callable[[], None]:
        """A call that takes ``ms`` (plus jitter); its ``compile_on``-th call compiles for 30 s."""
        made = [0]

        def run() -> None:
            made[0] += 1
            self.now += (ms + JITTER[self.calls % len(JITTER)]) / 1e3
            self.calls += 1
            if made[0] == compile_on:
                self.compiles += 1
                self.now += 30.0

        return run


def _measure(box: FakeBox, static_ms: float, dynamic_ms: float, compile_on: int = -1) -> dict[str, LatencyEstimate]:
    shares = DIST.shares
    policies = {
        "static": [(box.call(static_ms), shares[(2, 8)]), (box.call(static_ms), shares[(3, 8)])],
        "dynamic": [(box.call(dynamic_ms, compile_on=compile_on), shares[(2, 8)]),
                    (box.call(dynamic_ms), shares[(3, 8)])],
    }  # fmt: skip
    return interleaved_latencies(policies, advice.ADVICE_ROUNDS, compiles=lambda: box.compiles, clock=box.clock)


def _summaries(measured: dict[str, LatencyEstimate]) -> list[advice.PolicySummary]:
    shapes = [ShapeRun(shape=s.shape, served_as=s.shape) for s in DIST.shapes]
    return [advice.summarise(PolicyRun(n, shapes, [], b"", [], [], "", latency=m), DIST) for n, m in measured.items()]


def test_a_clearly_faster_policy_is_recommended_with_its_spread() -> None:
    measured = _measure(FakeBox(), static_ms=1.0, dynamic_ms=5.0)
    assert {m.samples for m in measured.values()} == {advice.ADVICE_ROUNDS}
    static, dynamic = measured["static"], measured["dynamic"]
    assert static.median_s == pytest.approx(1.0e-3, abs=0.31e-3)
    assert static.low_s <= static.median_s <= static.high_s < dynamic.low_s
    best, why = advice.recommend(_summaries(measured))
    assert best is not None
    assert best.name == "static"
    assert best.latency_low_ms <= best.latency_ms <= best.latency_high_ms
    assert why.startswith("lowest window cost, ")
    assert "below every other's (dynamic " in why


def test_policies_within_each_others_spread_get_no_clear_winner() -> None:
    measured = _measure(FakeBox(), static_ms=2.0, dynamic_ms=2.05)
    best, why = advice.recommend(_summaries(measured))
    assert best is None
    assert why.startswith(f"{advice.NO_CLEAR_WINNER}: static's window cost ")
    assert "overlaps dynamic's" in why


def test_a_call_that_compiles_is_never_timed() -> None:
    box = FakeBox()
    measured = _measure(box, static_ms=1.0, dynamic_ms=5.0, compile_on=WARMUP_ROUNDS + 4)  # in a timed round
    assert box.compiles == 1
    dynamic = measured["dynamic"]
    assert dynamic.discarded == 1
    assert dynamic.samples == advice.ADVICE_ROUNDS  # the round was made up
    assert dynamic.high_s < 6e-3  # no 30 s compile in any sample


def test_the_median_interval_is_the_binomial_order_statistics() -> None:
    samples = [float(i) for i in range(1, 16)]  # n = 15: the 4th and the 12th cover the median with 96.5%
    assert median_interval(samples) == (8.0, 4.0, 12.0)
    assert median_interval([3.0, 1.0, 2.0]) == (2.0, 1.0, 3.0)  # too few for 95%: the whole range


WARM_UP_S = 30.0
"""The compiler's one-time start, on the fake clock: paid by the first compile in a process."""
COMPILE_S = 1.0
"""Each graph's compile, on the fake clock."""


@pytest.mark.slow
def test_the_first_policy_measured_is_not_charged_the_compilers_warm_up(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The as-built run compiles first and the advice reuses it for the policy it is (static here): its compile
    seconds used to carry the compiler's one-time start, so static looked 30 s dearer than it is. Real compiles;
    the compile clock is fake (every compile takes 1 s on it, the first in the process 30 s more)."""
    clock = SimpleNamespace(now=0.0)
    monkeypatch.setattr(capture, "time", SimpleNamespace(perf_counter=lambda: clock.now))
    real = torch_adapter.compile_fx
    compiles: list[int] = []

    def compile_fx(gm: Any, example_inputs: list[Any], config_patches: Any) -> Any:
        if not compiles:
            clock.now += WARM_UP_S
        compiles.append(1)
        clock.now += COMPILE_S
        return real(gm, example_inputs, config_patches)

    monkeypatch.setattr(torch_adapter, "compile_fx", compile_fx)
    result = b.build(spec(advise=True), keys.key, tmp_path / "out")
    assert compiles
    figures = {p.name: (p.compile_s, len(p.graphs)) for p in [result.main, *result.policies]}
    assert set(figures) == {"as built", "static", "dynamic", "bucketed"}
    assert all(n > 0 for _, n in figures.values()), figures
    assert all(seconds == pytest.approx(COMPILE_S * n) for seconds, n in figures.values()), figures
