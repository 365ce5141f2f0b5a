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


def _kept(name: str) -> Iterator[kernels.SemanticOp]:
    """The registry's op ``name``; its policy, evidence and refusals put back and planted providers removed after."""
    reg = kernels.registry()
    op = reg.op(name)
    saved = reg.policy()
    evidence = list(reg.evidence)
    yield op
    for planted in [n for n in op.providers if n.startswith("planted")]:
        op.unregister(planted)
    op.refused.clear()
    op.bucket_priority.clear()
    reg.apply_policy(saved)
    reg.evidence[:] = evidence


@pytest.fixture
def silu_mul() -> Iterator[kernels.SemanticOp]:
    yield from _kept("silu_mul")


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


def test_the_reference_winning_takes_every_provider_it_clearly_beats_out(silu_mul: kernels.SemanticOp) -> None:
    # Planted names: the fixture takes them off silu_mul after (left there, they were in every later test's state).
    # Before: only the incumbent left, so `slow`, which the reference beats as clearly, came to serve the bucket.
    silu_mul.register(Provider("planted_slow", "vendor", F.silu, Requirements()), enabled=False)
    silu_mul.register(Provider("planted_close", "vendor", F.silu, Requirements()), enabled=False)
    silu_mul.set_priority(["triton", "planted_slow", "planted_close", "reference"], "b6")
    records = {
        "triton": _ev("triton", 50.0, 48.0, 52.0),
        "planted_slow": _ev("planted_slow", 40.0, 38.0, 42.0),
        "planted_close": _ev("planted_close", 20.5, 19.5, 21.5),  # overlaps the reference: no evidence against it
        "reference": _ev("reference", 20.0, 19.0, 21.0),
    }
    change = _decide(silu_mul, "b6", records, QualifyOptions())
    assert change is not None
    assert change.after == ["planted_close", "reference"]
    assert change.reason.endswith("by > 5%, and planted_slow as clearly (out of the bucket's list)")
    assert silu_mul.priority_for("b6") == ["planted_close", "reference"]
    assert records["planted_close"].decision == "promoted"
    assert records["triton"].decision == "demoted"
    assert records["planted_slow"].decision == "kept"


def test_a_bucket_whose_first_provider_changes_labels_the_new_one_promoted(silu_mul: kernels.SemanticOp) -> None:
    # Before: triton refused by the accuracy gate left the reference labelled `incumbent`, while the reference
    # taking the same bucket from triton on time was `promoted`: one outcome (triton > reference -> reference),
    # two labels.
    refused = replace(_ev("triton", 0.0, 0.0, 0.0), status="refused", trials=0, detail="seed 0: 40 elements differ")
    records = {"triton": refused, "reference": _ev("reference", 20.0, 19.0, 21.0)}
    change = _decide(silu_mul, "b4", records, QualifyOptions(apply=False))
    assert change is not None
    assert (change.before, change.after) == (["triton", "reference"], ["reference"])
    assert records["reference"].decision == "promoted"
    # A first provider that cannot run here never served the bucket: the reference served it and still does.
    unsupported = replace(refused, status="unsupported", detail="platform cpu not in ['cuda', 'interpreter']")
    records = {"triton": unsupported, "reference": _ev("reference", 20.0, 19.0, 21.0)}
    assert _decide(silu_mul, "b5", records, QualifyOptions(apply=False)) is None
    assert records["reference"].decision == "incumbent"


@pytest.mark.parametrize("shape", [{"tokens": 4, "hidden": 0}, {"tokens": 0, "hidden": 64}])
def test_a_zero_size_is_refused_before_anything_is_measured(
    silu_mul: kernels.SemanticOp, shape: dict[str, int]
) -> None:
    field = next(f"{k}=0" for k, v in shape.items() if v == 0)
    label = ",".join(f"{k}={v}" for k, v in shape.items())
    why = rf"^1 of 1 shapes rejected, nothing measured: silu_mul\[0\] {label}: {field} is not a positive integer "
    with pytest.raises(ValueError, match=why + r"\(silu_mul takes tokens, hidden\)$"):
        kernels.qualify(kernels.registry(), QualifyOptions(ops=("silu_mul",), shapes={"silu_mul": [shape]}, **QUICK))


def test_an_empty_last_dimension_keeps_the_rows_in_the_bucket(silu_mul: kernels.SemanticOp) -> None:
    assert silu_mul.bucket((torch.empty(4, 0),)) == "float32/n0/t4"  # before: t0
    assert silu_mul.bucket((torch.empty(4, 6, 8),)) == "float32/n8/t32"


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


def test_cpu_records_say_they_were_timed_as_wall_time_and_the_options_carry_the_method(
    silu_mul: kernels.SemanticOp,
) -> None:
    for timing in ("auto", "events"):  # on the CPU either is wall time
        opts = QualifyOptions(ops=("silu_mul",), shapes=SHAPES, device="cpu", timing=timing, apply=False, **QUICK)
        result = kernels.qualify(kernels.registry(), opts)
        measured = [r for r in result.records if r.trials]
        assert measured
        assert {r.timing for r in measured} == {"wall"}
        assert {r.timing for r in result.records if not r.trials} <= {""}
        assert result.to_json()["options"]["timing"] == timing
        assert {e.timing for e in result.events("h") if e.trials} == {"wall"}
    with pytest.raises(ValueError, match="timing 'graph': expected one of auto, events"):
        kernels.qualify(kernels.registry(), QualifyOptions(ops=("silu_mul",), shapes=SHAPES, timing="graph"))


def _redigest(doc: dict[str, Any]) -> dict[str, Any]:
    from inferensics.kernels.qualify import EVIDENCE_BODY
    from inferensics.kernels.registry import canonical_digest

    doc["digest"] = canonical_digest({k: doc.get(k) for k in EVIDENCE_BODY})
    return doc


def test_evidence_written_before_records_carried_their_timing_still_loads(silu_mul: kernels.SemanticOp) -> None:
    from inferensics.kernels.evidence import EvidenceError, parse_evidence
    from inferensics.kernels.qualify import evidence_problem

    opts = QualifyOptions(ops=("silu_mul",), shapes=SHAPES, apply=False, **QUICK)
    doc = kernels.qualify(kernels.registry(), opts).to_json()
    assert evidence_problem(doc) is None
    old = json.loads(json.dumps(doc))
    for r in old["records"]:
        del r["timing"]
    del old["options"]["timing"]
    old = _redigest(old)
    assert evidence_problem(old) is None  # as the file an older qualify wrote: no timing anywhere
    assert parse_evidence(json.dumps(old), "old.json")["digest"] == old["digest"]
    # Only timing may be missing; any other field missing, an unknown one, or a timing of another type is refused.
    for edit in ("missing", "extra", "typed"):
        bad = json.loads(json.dumps(doc))
        if edit == "missing":
            del bad["records"][0]["decision"]
        elif edit == "extra":
            bad["records"][0]["timed_by"] = "events"
        else:
            bad["records"][0]["timing"] = 1
        problem = evidence_problem(_redigest(bad))
        assert problem is not None, edit
        assert problem.startswith("record 0"), problem
        with pytest.raises(EvidenceError, match="record 0"):
            parse_evidence(json.dumps(bad), "bad.json")


@pytest.fixture
def rms_norm() -> Iterator[kernels.SemanticOp]:
    yield from _kept("rms_norm")


DECODE = {"rms_norm": [{"tokens": 8, "hidden": 1024}]}
"""A decode-sized shape, where eager calls timed back to back measure the host, not the GPU."""


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: CUDA-graph timing captures on CUDA")
def test_on_cuda_qualification_times_replays_of_a_captured_graph(rms_norm: kernels.SemanticOp) -> None:
    opts = QualifyOptions(ops=("rms_norm",), shapes=DECODE, dtype=torch.bfloat16, device="cuda", apply=False, **QUICK)
    result = kernels.qualify(kernels.registry(), opts)
    measured = [r for r in result.records if r.status == "measured"]
    assert {r.provider for r in measured} >= {"reference", "triton"}
    assert {r.timing for r in measured} == {"cuda_graph"}, [(r.provider, r.detail) for r in measured]
    assert all(r.median_us > 0 for r in measured)
    assert result.to_json()["options"]["timing"] == "auto"
    forced = kernels.qualify(kernels.registry(), replace(opts, timing="events"))
    assert {r.timing for r in forced.records if r.status == "measured"} == {"events"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU: CUDA-graph timing captures on CUDA")
def test_a_provider_that_cannot_be_captured_sends_its_whole_shape_to_the_event_loop(
    rms_norm: kernels.SemanticOp,
) -> None:
    def syncing(*args: Any) -> Any:
        out = rms_norm.reference(*args)
        torch.cuda.synchronize()  # not allowed while a stream is captured
        return out

    rms_norm.register(Provider("planted_sync", "vendor", syncing, Requirements(accuracy="exact")), before="triton")
    opts = QualifyOptions(ops=("rms_norm",), shapes=DECODE, dtype=torch.bfloat16, device="cuda", apply=False, **QUICK)
    result = kernels.qualify(kernels.registry(), opts)
    measured = {r.provider: r for r in result.records if r.status == "measured"}
    assert {"planted_sync", "reference", "triton"} <= set(measured)
    assert {r.timing for r in measured.values()} == {"events"}  # one method for the whole shape
    assert "not capturable in a CUDA graph" in measured["planted_sync"].detail
    # Nothing was left broken: the default stream is current, and the next qualification captures again.
    assert torch.cuda.current_stream() == torch.cuda.default_stream()
    rms_norm.unregister("planted_sync")
    again = kernels.qualify(kernels.registry(), opts)
    assert {r.timing for r in again.records if r.status == "measured"} == {"cuda_graph"}
