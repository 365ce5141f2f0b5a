"""A compile's provider decisions wait for Dynamo's end of compile only where that end will come."""

from __future__ import annotations

import pytest
import torch

from inferensics.kernels import DecisionLog, _torch_adapter, compile_records
from inferensics.kernels.decisions import Decision
from inferensics.kernels.signatures import signature


def test_a_decision_traced_outside_a_dynamo_compile_is_written_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # A trace with a compile id but no end-of-compile callback to come (export's full-graph capture sets a compile
    # context without them): held, it would wait for the next compile, or for ever.
    emitted: list[str] = []
    monkeypatch.setattr(
        _torch_adapter, "emit_decisions", lambda payload, *_: emitted.extend(d["op"] for d in payload())
    )
    log = DecisionLog()
    x = torch.ones(2, 3)
    decision = Decision("rms_norm", "triton", signature([x]), "b", compiled=True, compile_id="7/0")
    assert not _torch_adapter.compile_end_pending()
    compile_records.hold(decision, [x], log)
    assert emitted == ["rms_norm"]
    assert log.snapshot() == [decision]


def test_inside_a_compile_the_decisions_wait_for_its_end(monkeypatch: pytest.MonkeyPatch) -> None:
    emitted: list[str] = []
    monkeypatch.setattr(
        _torch_adapter, "emit_decisions", lambda payload, *_: emitted.extend(d["op"] for d in payload())
    )
    log = DecisionLog()
    during: list[tuple[bool, list[str]]] = []

    def backend(gm: torch.fx.GraphModule, example: list[torch.Tensor]) -> torch.fx.GraphModule:
        x = torch.ones(2, 3)
        for op in ("silu_mul", "silu_mul", "rms_norm"):  # the first two one (op, signature): written once
            decision = Decision(op, "triton", signature([x]), "b", compiled=True, compile_id="0/0")
            compile_records.hold(decision, [x], log)
        during.append((_torch_adapter.compile_end_pending(), list(emitted)))
        return gm

    torch.compile(lambda t: t + 1, backend=backend)(torch.ones(4))
    assert during == [(True, [])]  # held while the compile ran
    assert sorted(emitted) == ["rms_norm", "silu_mul"]  # one artifact at its end, each (op, signature) once
    assert [d.op for d in log.snapshot()] == ["rms_norm", "silu_mul"]
