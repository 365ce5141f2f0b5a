"""Qualification: evidence records, the accuracy gate refusing a planted wrong provider, promotion only
when a challenger's confidence interval clears the incumbent's by the margin."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import torch
from torch.nn import functional as F  # noqa: N812

from inferensics import kernels
from inferensics.kernels import Provider, QualifyOptions, Requirements
from inferensics.kernels.qualify import Evidence, _decide
from inferensics.schema.events import KernelQualificationEvent

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

QUICK: dict[str, Any] = {"warmup": 1, "trials": 3, "iters": 1, "accuracy_seeds": 2}
SHAPES = {"silu_mul": [{"tokens": 3, "hidden": 64}]}


@pytest.fixture
def silu_mul() -> Iterator[kernels.SemanticOp]:
    reg = kernels.registry()
    op = reg.op("silu_mul")
    saved = reg.policy()
    evidence = list(reg.evidence)
    yield op
    for name in [n for n in op.providers if n.startswith("planted")]:
        op.unregister(name)
    op.refused.clear()
    op.bucket_priority.clear()
    reg.apply_policy(saved)
    reg.evidence[:] = evidence


def test_qualify_records_evidence_with_the_environment_and_a_digest(silu_mul: kernels.SemanticOp) -> None:
    result = kernels.qualify(kernels.registry(), QualifyOptions(ops=("silu_mul",), shapes=SHAPES, **QUICK))
    by = {r.provider: r for r in result.records}
    assert by["triton"].status == "measured"
    assert by["triton"].accuracy_passed
    assert by["triton"].trials == 3
    assert by["triton"].ci_low_us <= by["triton"].median_us <= by["triton"].ci_high_us
    assert by["reference"].rule == "exact"
    assert by["inductor"].status == "unsupported" or by["inductor"].accuracy_passed
    doc = result.to_json()
    json.dumps(doc)
    assert doc["environment"]["torch"] == torch.__version__
    assert doc["options"]["trials"] == 3
    assert doc["options"]["dtype"] == "bfloat16"
    assert len(doc["digest"]) == 64
    assert doc["registry"]["digest"] == kernels.registry_state()["digest"]
    events = result.events("host-a")
    assert all(isinstance(e, KernelQualificationEvent) for e in events)
    assert {e.evidence_digest for e in events} == {doc["digest"]}


def test_the_accuracy_gate_refuses_a_planted_wrong_provider(silu_mul: kernels.SemanticOp) -> None:
    # Planted: a fast "SiLU·mul" with the sigmoid approximated -- close, but not the bit-exact op it claims.
    def wrong(x: torch.Tensor) -> torch.Tensor:
        d = x.shape[-1] // 2
        gate = x[..., :d].float()
        approx = gate * (0.5 + 0.25 * gate.clamp(-2, 2))  # hard-sigmoid
        return (approx * x[..., d:].float()).to(x.dtype)

    silu_mul.register(Provider("planted_wrong", "triton", wrong, Requirements(accuracy="exact")), before="triton")
    args = (torch.randn(3, 128, dtype=torch.bfloat16),)
    bucket = silu_mul.bucket(args)
    assert silu_mul.select(args).provider == "planted_wrong"  # first in the list and supported: it would serve
    result = kernels.qualify(kernels.registry(), QualifyOptions(ops=("silu_mul",), shapes=SHAPES, **QUICK))
    planted = next(r for r in result.records if r.provider == "planted_wrong")
    assert planted.status == "refused"
    assert planted.decision == "refused"
    assert not planted.accuracy_passed
    assert "elements differ" in planted.detail
    assert (bucket, "planted_wrong") in silu_mul.refused
    decision = silu_mul.select(args)
    assert decision.provider != "planted_wrong"
    assert dict(decision.skipped)["planted_wrong"] == silu_mul.refused[(bucket, "planted_wrong")]
    assert any("refused by the accuracy gate" in c.reason for c in result.changes)
    state = kernels.registry_state()
    assert {"bucket": bucket, "provider": "planted_wrong"}.items() <= state["policy"]["silu_mul"]["refused"][0].items()


def test_dry_run_changes_nothing(silu_mul: kernels.SemanticOp) -> None:
    silu_mul.register(Provider("planted_wrong", "vendor", lambda x: x[..., : x.shape[-1] // 2] * 0, Requirements()))
    before = kernels.registry_state()["digest"]
    result = kernels.qualify(kernels.registry(), QualifyOptions(ops=("silu_mul",), shapes=SHAPES, apply=False, **QUICK))
    assert any(r.status == "refused" for r in result.records)
    assert kernels.registry_state()["digest"] == before


def _ev(provider: str, med: float, lo: float, hi: float) -> Evidence:
    return Evidence(
        op="silu_mul", provider=provider, bucket="b", shape="s", dtype="bfloat16", status="measured",
        accuracy_passed=True, median_us=med, ci_low_us=lo, ci_high_us=hi, trials=15,
    )  # fmt: skip


def test_promotion_needs_the_interval_to_clear_the_margin(silu_mul: kernels.SemanticOp) -> None:
    silu_mul.register(Provider("planted_fast", "vendor", lambda x: F.silu(x[..., :1]), Requirements()), enabled=False)
    opts = QualifyOptions(margin=0.05)
    base = {"triton": _ev("triton", 10.0, 9.8, 10.2), "reference": _ev("reference", 40.0, 39.0, 41.0)}
    # Overlapping intervals (9.6-9.9 against 9.8-10.2): no change.
    records = {**base, "planted_fast": _ev("planted_fast", 9.7, 9.6, 9.9)}
    assert _decide(silu_mul, "b", records, opts) is None
    assert records["planted_fast"].decision == "kept"
    assert records["triton"].decision == "incumbent"
    # Clear of the incumbent's lower bound by less than the margin (9.3 > 9.8 * 0.95 = 9.31): no change.
    records = {**base, "planted_fast": _ev("planted_fast", 9.2, 9.1, 9.32)}
    assert _decide(silu_mul, "b", records, opts) is None
    # Clear by more than the margin: promoted for this bucket only, the default list untouched.
    records = {**base, "planted_fast": _ev("planted_fast", 8.0, 7.9, 8.1)}
    change = _decide(silu_mul, "b", records, opts)
    assert change is not None
    assert change.after == ["planted_fast", "triton", "reference"]
    assert records["planted_fast"].decision == "promoted"
    assert records["triton"].decision == "demoted"
    assert silu_mul.priority_for("b") == ["planted_fast", "triton", "reference"]
    assert silu_mul.priority == ["triton", "reference"]
    assert silu_mul.status("planted_fast") == "promoted"


def test_the_reference_winning_demotes_the_incumbent_and_stays_last(silu_mul: kernels.SemanticOp) -> None:
    records = {"triton": _ev("triton", 50.0, 48.0, 52.0), "reference": _ev("reference", 20.0, 19.0, 21.0)}
    change = _decide(silu_mul, "b2", records, QualifyOptions())
    assert change is not None
    assert change.after == ["reference"]
    assert replace(records["reference"]).decision == "promoted"


def test_the_registry_names_its_evidence_by_the_digest_the_file_and_the_records_carry(
    silu_mul: kernels.SemanticOp,
) -> None:
    silu_mul.register(Provider("planted_wrong", "vendor", lambda x: x[..., : x.shape[-1] // 2] * 0, Requirements()))
    result = kernels.qualify(kernels.registry(), QualifyOptions(ops=("silu_mul",), shapes=SHAPES, **QUICK))
    assert result.changes  # the refusal changed the policy: the registry records the evidence behind it
    assert kernels.registry().evidence[-1] == result.digest() == result.to_json()["digest"]
    assert {e.evidence_digest for e in result.events("h")} == {kernels.registry_state()["evidence"][-1]}


def test_every_shape_is_checked_before_any_is_measured(silu_mul: kernels.SemanticOp) -> None:
    served: list[int] = []

    def counting(x: torch.Tensor) -> torch.Tensor:
        served.append(x.shape[0])
        return F.silu(x[..., : x.shape[-1] // 2]) * x[..., x.shape[-1] // 2 :]

    silu_mul.register(Provider("planted_counting", "vendor", counting, Requirements(accuracy="exact")))
    shapes = {"silu_mul": [{"tokens": 3, "hidden": 64}, {"tokens": 3, "intermediate": 64}]}
    with pytest.raises(ValueError, match=r"^1 of 2 shapes rejected, nothing measured: silu_mul\[1\] .*lacks hidden"):
        kernels.qualify(kernels.registry(), QualifyOptions(ops=("silu_mul",), shapes=shapes, **QUICK))
    assert served == []
