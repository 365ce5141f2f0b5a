"""Qualification's gate and decisions: a provider that writes into its inputs or raises is refused with the reason;
several shapes of one bucket are decided together, whatever order they are listed in; an op of your own is qualified
through its :class:`~inferensics.kernels.Samples`, and one without them is refused in one line."""

from __future__ import annotations

import functools
import importlib
import itertools
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from inferensics import kernels
from inferensics.kernels import DecisionLog, Provider, QualifyOptions, Registry, Requirements, SemanticOp
from inferensics.kernels.ops.common import rows_bucket
from inferensics.kernels.ops.norm import rms_norm_reference
from inferensics.kernels.requirements import Platform
from inferensics.kernels.tolerance import ToleranceSpec

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

# On the CPU whatever the host has: the planted providers run only there (a GPU host measured on CUDA and found
# every planted provider unsupported).
QUICK: dict[str, Any] = {
    "warmup": 1, "trials": 3, "iters": 1, "accuracy_seeds": 2, "dtype": torch.float32, "device": "cpu"
}  # fmt: skip
CPU: frozenset[Platform] = frozenset({"cpu"})
_names = (f"test_gate_op_{i}" for i in itertools.count())
qualify_module = importlib.import_module("inferensics.kernels.qualify")  # `kernels.qualify` is the function


@pytest.fixture
def rms_norm() -> Iterator[kernels.SemanticOp]:
    reg = kernels.registry()
    op = reg.op("rms_norm")
    saved, evidence = reg.policy(), list(reg.evidence)
    yield op
    for name in [n for n in op.providers if n.startswith("planted")]:
        op.unregister(name)
    op.refused.clear()
    op.bucket_priority.clear()
    reg.apply_policy(saved)
    reg.evidence[:] = evidence


def test_a_provider_that_writes_into_its_inputs_is_refused_naming_them(rms_norm: kernels.SemanticOp) -> None:
    def zeroes(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        x.zero_()  # RMSNorm of zeros is zeros: the reference run on the same tensors agreed
        return torch.zeros_like(x)

    def right_then_zeroes(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        out = rms_norm_reference(x, weight, eps)
        x.zero_()
        return out

    for name, fn in (("planted_zeroes", zeroes), ("planted_right", right_then_zeroes)):
        rms_norm.register(Provider(name, "vendor", fn, Requirements(platforms=CPU)))
    shapes = {"rms_norm": [{"tokens": 4, "hidden": 64}]}
    result = kernels.qualify(kernels.registry(), QualifyOptions(ops=("rms_norm",), shapes=shapes, **QUICK))
    by = {r.provider: r for r in result.records}
    for name in ("planted_zeroes", "planted_right"):
        assert by[name].status == "refused", by[name]
        assert by[name].detail == "seed 0: writes into its input x (no input of the op is mutable)"
        assert ("float32/n64/t4", name) in rms_norm.refused


def test_a_provider_that_raises_at_a_shape_is_refused_for_its_bucket(rms_norm: kernels.SemanticOp) -> None:
    def raises(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        raise RuntimeError("illegal memory access (planted)")

    rms_norm.register(Provider("planted_raiser", "vendor", raises, Requirements(platforms=CPU)))
    rms_norm.set_priority(["planted_raiser"])
    shapes = {"rms_norm": [{"tokens": 4, "hidden": 64}]}
    result = kernels.qualify(kernels.registry(), QualifyOptions(ops=("rms_norm",), shapes=shapes, **QUICK))
    record = next(r for r in result.records if r.provider == "planted_raiser")
    assert (record.status, record.decision) == ("error", "refused")
    assert (
        rms_norm.refused[("float32/n64/t4", "planted_raiser")] == "raised RuntimeError: illegal memory access (planted)"
    )
    change = next(c for c in result.changes if c.op == "rms_norm")
    assert change.after[0] != "planted_raiser"
    assert "planted_raiser refused: raised RuntimeError" in change.reason
    assert rms_norm.select((torch.randn(4, 64), torch.ones(64), 1e-6)).provider != "planted_raiser"


# Microseconds each provider's calls take, per row count: a is fast at 3 rows, b at 4 (both in bucket t4).
TIMES = {"planted_a": {3: 10.0, 4: 1000.0}, "planted_b": {3: 1000.0, 4: 10.0}, "reference": {3: 100.0, 4: 100.0}}


def _fixed_timers(
    calls: dict[str, Callable[[], Any]], opts: QualifyOptions, device: torch.device
) -> tuple[str, dict[str, Callable[[], float]], dict[str, str]]:
    """Timers that give each provider its :data:`TIMES` at the call's row count (500 us for any other)."""
    timers: dict[str, Callable[[], float]] = {}
    for n, call in calls.items():
        rows = call.args[0].shape[0]  # type: ignore[attr-defined]  # functools.partial of the provider
        timers[n] = functools.partial(float, TIMES.get(n, {}).get(rows, 500.0))
    return "wall", timers, {}


@pytest.mark.parametrize("order", [[3, 4], [4, 3]])
def test_the_shapes_of_one_bucket_are_decided_together_whatever_their_order(
    rms_norm: kernels.SemanticOp, monkeypatch: pytest.MonkeyPatch, order: list[int]
) -> None:
    # Before: each shape was decided alone against the list the shape before it wrote: [3, 4] promoted b (1000 us at
    # 3 rows), [4, 3] then put a back first; the file's order set the bucket's provider.
    monkeypatch.setattr(qualify_module, "_timers", _fixed_timers)  # timings made exact: only the decision is tested
    for name in TIMES:
        if name != "reference":
            rms_norm.register(
                Provider(name, "vendor", rms_norm_reference, Requirements(platforms=CPU, accuracy="exact"))
            )
    rms_norm.set_priority(["planted_a", "planted_b"])
    shapes = {"rms_norm": [{"tokens": t, "hidden": 64} for t in order]}
    result = kernels.qualify(kernels.registry(), QualifyOptions(ops=("rms_norm",), shapes=shapes, **QUICK))
    assert rms_norm.priority_for("float32/n64/t4") == ["planted_a", "planted_b", "reference"]
    b = [r for r in result.records if r.provider == "planted_b"]
    assert {r.decision for r in b} == {"kept"}
    assert all("shapes disagree: clears the margin at tokens=4,hidden=64 but not at tokens=3,hidden=64" in r.detail
               for r in b)  # fmt: skip
    assert [r.shape for r in result.records if r.provider == "reference"] == [f"tokens={t},hidden=64" for t in order]


def _scaled_op(samples: Any) -> SemanticOp:
    op = SemanticOp(
        next(_names),
        "(Tensor x) -> Tensor",
        lambda x: x * 2,
        tolerance=ToleranceSpec(exact_when_exact=True),
        bucket=rows_bucket,
        doc="x times two (a test's op)",
        log=DecisionLog(),
        samples=samples,
    )

    def slow(x: torch.Tensor) -> torch.Tensor:
        time.sleep(0.0001)
        return x * 2

    op.register(Provider("slow", "vendor", slow, Requirements(accuracy="exact")))
    return op


def test_an_op_of_your_own_is_qualified_through_its_samples() -> None:
    from inferensics.kernels import Samples

    samples = Samples(
        fields=("rows", "width"),
        make=lambda shape, dtype, device, seed: (
            torch.randn(shape["rows"], shape["width"], generator=torch.Generator().manual_seed(seed)).to(device, dtype),
        ),
        shapes=({"rows": 4, "width": 8},),
    )
    op = _scaled_op(samples)
    reg = Registry([], op.log)
    reg.add(op)
    with pytest.raises(ValueError, match="already in the registry"):
        reg.add(op)
    result = kernels.qualify(reg, QualifyOptions(**QUICK))
    assert {(r.provider, r.status, r.shape) for r in result.records} == {
        ("reference", "measured", "rows=4,width=8"),
        ("slow", "measured", "rows=4,width=8"),
    }
    with pytest.raises(ValueError, match=r"lacks width \(test_gate_op_\d+ takes rows, width\)"):
        kernels.qualify(reg, QualifyOptions(shapes={op.name: [{"rows": 4}]}, **QUICK))


def test_an_op_without_sample_arguments_is_refused_in_one_line_not_skipped() -> None:
    op = _scaled_op(None)
    reg = Registry([op], op.log)
    # Before: with no shapes given it measured nothing and said nothing.
    with pytest.raises(ValueError, match=rf"^no sample arguments for op '{op.name}': .*samples=kernels.Samples"):
        kernels.qualify(reg, QualifyOptions(**QUICK))
