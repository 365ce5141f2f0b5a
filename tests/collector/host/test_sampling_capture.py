"""Sampled kernel timings tied to artifacts, input capture (rules, redaction, size cap), eager requests,
the capability table and the pinned public API."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load

from inferensics.collector import host
from inferensics.collector.host import CaptureRules, SdkConfig, instrument
from inferensics.collector.host import torch_adapter as adapter
from inferensics.schema import CompileEvent, KernelInventoryEvent, KernelTimingEvent, RequestEvent
from inferensics.schema.store import Store


def test_public_api_is_pinned() -> None:
    assert sorted(host.__all__) == sorted(
        [
            "Capability",
            "CaptureRules",
            "ConfigError",
            "Exporter",
            "InductorBackend",
            "NullExporter",
            "RequestScope",
            "SdkConfig",
            "ShapePolicy",
            "Tracker",
            "active_tracker",
            "instrument",
            "probe_capabilities",
        ]
    )


def test_sampled_request_gets_kernel_timings_tied_to_artifacts(store: Store) -> None:
    tracker = instrument(store=store, host="h", model="m", config=SdkConfig(sample_rate=1.0))
    compiled = tracker.compile(lambda x: torch.relu(x) * 2 + 1, options={"cpp.enable_kernel_profile": True})
    for i in range(2):
        with tracker.request(f"s-{i}") as req:
            req.set_output(compiled(torch.randn(32)))
    tracker.shutdown()

    reqs = {r.request_id: r for r in store.select_events(RequestEvent)}
    assert reqs["s-0"].sampled
    assert reqs["s-1"].sampled
    timings = store.select_events(KernelTimingEvent)
    (artifact,) = {c.artifact_id for c in store.select_events(CompileEvent)}
    inventory = {k.kernel_name for k in store.select_events(KernelInventoryEvent) if k.artifact_id == artifact}
    assert inventory
    tied = [t for t in timings if t.request_id == "s-1" and t.artifact_id == artifact]
    assert tied, [t.kernel_name for t in timings]
    assert any(t.kernel_name.startswith("## Call CompiledFxGraph") for t in tied)
    assert all(t.calls >= 1 for t in tied)


def test_nonfinite_and_error_requests_capture_redacted_inputs(store: Store) -> None:
    def redact(inputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        return {k: v for k, v in inputs.items() if k != "secret"}

    rules = CaptureRules(enabled=True, redact=redact, max_bytes=4096)
    tracker = instrument(store=store, host="h", model="m", config=SdkConfig(capture=rules, fingerprint_rate=1.0))
    x = torch.tensor([1.0, -1.0, 4.0])
    secret = torch.arange(3)
    with tracker.request("cap-nan", inputs={"x": x, "secret": secret}) as req:
        req.set_output(torch.sqrt(x))  # eager: NaN for -1
    with tracker.request("cap-ok", inputs={"x": x.abs()}) as req:
        req.set_output(torch.sqrt(x.abs()))
    with pytest.raises(ValueError, match="boom"), tracker.request("cap-err", inputs={"x": x}):
        raise ValueError("boom")
    with tracker.request("cap-same", inputs={"x": x.clone()}):
        pass
    with tracker.request("cap-big", inputs={"x": torch.zeros(4096)}) as req:
        req.set_output(torch.full((2,), float("inf")))
    tracker.shutdown()

    reqs = {r.request_id: r for r in store.select_events(RequestEvent)}
    assert reqs["cap-nan"].fp_nan == 1
    assert reqs["cap-nan"].outcome == "eager"
    assert reqs["cap-ok"].capture_blob == ""
    assert reqs["cap-err"].status == "error"
    assert reqs["cap-err"].capture_blob
    assert reqs["cap-big"].fp_inf == 2
    assert reqs["cap-big"].capture_blob == ""
    blob = store.get_blob(reqs["cap-nan"].capture_blob)
    assert blob is not None
    tensors = load(blob)
    assert set(tensors) == {"x"}
    torch.testing.assert_close(tensors["x"], x)
    assert tracker.stats()["capture_over_cap"] == 1
    assert reqs["cap-same"].input_digest == reqs["cap-err"].input_digest != ""
    assert reqs["cap-nan"].input_digest not in ("", reqs["cap-err"].input_digest)


def test_missing_hook_degrades_with_reason(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    real = adapter.probe_capabilities

    def without_guard_hook() -> dict[str, adapter.Capability]:
        table = real()
        table["guard_complete_hook"] = adapter.Capability("guard_complete_hook", False, "absent in this build")
        return table

    monkeypatch.setattr(adapter, "probe_capabilities", without_guard_hook)
    tracker = instrument(store=store, host="h", model="m", config=SdkConfig(fingerprint_rate=1.0))
    assert tracker.capability_report()["guard_complete_hook"] == "absent in this build"
    with tracker.request("deg-0") as req:
        req.set_output(torch.ones(2, 3))
    tracker.shutdown()
    (r,) = store.select_events(RequestEvent)
    assert r.guard_outcome == "none"
    assert r.outcome == "eager"
    assert r.fp_argmax_head == (0, 0)
