"""Dispatch: priority order, requirement checks, recorded decisions, fallback, quarantine, policy as data."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
import torch

from inferensics import kernels
from inferensics.kernels import DecisionLog, Provider, Requirements, SemanticOp, ToleranceSpec
from inferensics.kernels.ops.common import rows_bucket

_names = (f"test_reg_op_{i}" for i in itertools.count())


def _op(log: DecisionLog | None = None) -> SemanticOp:
    # torch.library operators cannot be removed: every test defines its own op under a fresh name.
    return SemanticOp(
        next(_names),
        "(Tensor x) -> Tensor",
        lambda x: x * 2,
        tolerance=ToleranceSpec(),
        bucket=rows_bucket,
        doc="doubles x",
        log=log or DecisionLog(),
    )


def test_first_supported_provider_in_priority_order_serves_and_the_decision_says_why() -> None:
    op = _op()
    only_f64 = Requirements(dtypes=frozenset({torch.float64}), accuracy="exact")
    op.register(Provider("f64", "vendor", lambda x: x + x, only_f64))
    op.register(Provider("any", "triton", lambda x: x * 2.0, Requirements(accuracy="exact")))
    assert op.priority == ["f64", "any", "reference"]
    x = torch.ones(3, 4)
    assert torch.equal(op(x), x * 2)
    (d,) = op.log.snapshot()
    assert (d.provider, d.skipped, d.fallback, d.compiled) == (
        "any",
        (("f64", "dtype float32 not supported"),),
        False,
        False,
    )
    assert d.signature == "float32[3,4]@cpu"
    assert op.log.stats()["calls"] == {f"{op.name}/any": 1}


def test_no_provider_for_the_arguments_falls_back_to_the_reference_with_the_reason() -> None:
    op = _op()
    op.register(Provider("cuda_only", "triton", lambda x: x * 3, Requirements(platforms=frozenset({"cuda"}))))
    out = op(torch.ones(2))
    assert torch.equal(out, torch.full((2,), 2.0))  # the reference's answer, not the provider's
    (d,) = op.log.snapshot()
    assert d.provider == "reference"
    assert d.fallback
    assert d.skipped[0][0] == "cuda_only"
    assert d.skipped[0][1].endswith("not in ['cuda']")
    assert op.log.stats()["fallbacks"] == {op.name: 1}


def test_registered_op_strided_input_falls_back_with_the_layout_reason() -> None:
    x = torch.randn(8, 8)[:, ::2]  # last dimension strided: our kernel's requirement says no
    before = kernels.registry().log.stats()["fallbacks"].get("silu_mul", 0)
    out = kernels.silu_mul(x)
    torch.testing.assert_close(out, torch.nn.functional.silu(x[:, :2]) * x[:, 2:], rtol=0, atol=0)
    d = next(d for d in kernels.registry().decisions() if d.op == "silu_mul" and d.signature.startswith("float32[8,4]"))
    reasons = dict(d.skipped)
    assert d.provider == "reference"
    assert d.fallback
    # Whichever platform rejects it first, the reason is recorded (on CPU without the interpreter, the platform).
    assert reasons.get("triton")
    assert kernels.registry().log.stats()["fallbacks"]["silu_mul"] >= before


def test_a_provider_that_raises_is_quarantined_for_that_signature_counted_and_the_call_served() -> None:
    op = _op()
    calls: list[tuple[int, ...]] = []

    def broken(x: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(x.shape))
        if x.shape[0] == 3:
            raise RuntimeError("illegal memory access (planted)")
        return x * 2

    op.register(Provider("broken", "triton", broken, Requirements()))
    assert torch.equal(op(torch.ones(3)), torch.full((3,), 2.0))  # served by the reference
    assert torch.equal(op(torch.ones(3)), torch.full((3,), 2.0))
    assert calls == [(3,)]  # taken out after the first failure: not tried again for this signature
    assert op.log.stats()["failures"] == {f"{op.name}/broken": 1}
    assert op.quarantined == {("float32[3]@cpu", "broken"): "raised RuntimeError: illegal memory access (planted)"}
    assert op.status("broken") == "quarantined"
    op(torch.ones(4))  # another signature still gets the provider
    assert calls == [(3,), (4,)]
    assert op.log.snapshot()[-1].provider == "broken"


# Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_calls_count_eager_calls_not_the_passes_of_a_compile() -> None:
    op = _op()

    def f(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = op(x) + 1
        return out

    compiled = torch.compile(f, backend="inductor", dynamic=False)
    for _ in range(4):
        torch.testing.assert_close(compiled(torch.ones(2, 4)), torch.full((2, 4), 3.0))
    # Tracing passed through the dispatcher (a compiled decision is recorded); the four calls ran the graph.
    assert [d.compiled for d in op.log.snapshot()] == [True]
    assert op.log.stats()["calls"] == {}
    op(torch.ones(2, 4))
    op(torch.ones(2, 4))
    assert op.log.stats()["calls"] == {f"{op.name}/reference": 2}


def test_the_reference_raising_is_the_callers_error() -> None:
    with pytest.raises(ValueError, match="even last dimension"):
        kernels.silu_mul(torch.ones(2, 3))


def test_priority_lists_per_bucket_and_the_reference_always_last() -> None:
    op = _op()
    op.register(Provider("a", "triton", lambda x: x * 2, Requirements()))
    op.register(Provider("b", "vendor", lambda x: x + x, Requirements()))
    op.set_priority(["b", "reference", "a"])
    assert op.priority == ["b", "a", "reference"]
    x = torch.ones(2, 4)
    bucket = op.bucket((x,))
    op.set_priority(["a"], bucket=bucket)
    op(x)
    op(torch.ones(300, 4))  # another bucket: the default list
    providers = [d.provider for d in op.log.snapshot()]
    assert sorted(providers) == ["a", "b"]
    with pytest.raises(ValueError, match="unknown providers"):
        op.set_priority(["nope"])


def test_registry_state_is_json_data_with_a_digest_that_follows_the_policy() -> None:
    import json

    reg = kernels.registry()
    state = kernels.registry_state()
    json.dumps(state)  # JSON-ready
    assert set(state) == {"version", "ops", "policy", "evidence", "environment", "digest"}
    assert set(state["ops"]) == {
        "rms_norm",
        "fused_add_rms_norm",
        "silu_mul",
        "rotary_embedding",
        "paged_decode_attention",
    }
    assert state["policy"]["paged_decode_attention"]["priority"][-1] == "reference"
    assert kernels.registry_state()["digest"] == state["digest"]  # stable
    op = reg.op("rms_norm")
    saved = reg.policy()
    try:
        assert reg.apply_policy({"rms_norm": {"priority": ["inductor"]}, "nope": {}}) == ["unknown op 'nope'"]
        assert op.priority == ["inductor", "reference"]
        assert kernels.registry_state()["digest"] != state["digest"]
    finally:
        reg.apply_policy(saved)
    assert kernels.registry_state()["digest"] == state["digest"]


def test_compiled_decisions_name_inductor_for_the_reference_left_to_the_compiler() -> None:
    from torch._subclasses.fake_tensor import FakeTensorMode

    op = kernels.registry().op("rms_norm")
    with FakeTensorMode() as mode:
        x = mode.from_tensor(torch.ones(2, 8))
        w = mode.from_tensor(torch.ones(8))
        d = op.select((x, w, 1e-6))
    assert d.compiled
    assert d.provider in ("inductor", "triton")
    if d.provider == "inductor":
        assert d.fallback
        assert dict(d.skipped)["triton"]


def _describe(op: SemanticOp) -> dict[str, Any]:
    return op.describe()


def test_kernels_list_data_names_requirements_and_status() -> None:
    desc = _describe(kernels.registry().op("silu_mul"))
    by_name = {p["name"]: p for p in desc["providers"]}
    assert by_name["reference"]["status"] == "default"
    assert by_name["inductor"]["status"] in ("available", "promoted")
    assert by_name["triton"]["requirements"]["accuracy"] == "exact"
    assert desc["tolerance"]["exact_when_exact"] is True
