"""What a compile record stores of the kernel registry's decisions when one op is traced at two shapes: a
real ``torch.compile`` run writes its TORCH_TRACE log and the assembler (the one the live trace sink feeds)
reads it.

The record keeps one ``op=provider`` per op signature, one-to-one with the ``kernel_decisions`` rows, which
hold each signature and why the other providers were skipped. The request page reads the repeats as one
decision chosen for N signatures (``rms_norm=inductor ×2``); the stored rows stay whole.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inferensics.collector.trace.assembler import AssemblyContext, CompileAssembler
from inferensics.collector.trace.envelope import Envelope, decode_record
from inferensics.collector.trace.importer import read_trace_file, trace_files
from inferensics.schema.events import KERNEL_DECISIONS_ARTIFACT, CompileEvent, KernelDecisionEvent
from inferensics.schema.table import Event
from tests.traced_program import run_traced

PROGRAM = """
import torch
from inferensics import kernels

def block(x, y, w):
    return kernels.rms_norm(x, w, 1e-6).sum() + kernels.rms_norm(y, w, 1e-6).sum()

compiled = torch.compile(block, dynamic=False)
x, y, w = torch.randn(4, 16), torch.randn(2, 16), torch.ones(16)
torch.testing.assert_close(compiled(x, y, w), block(x, y, w))
"""


@pytest.mark.slow
def test_one_op_at_two_shapes_is_two_decisions_of_one_provider(tmp_path: Path) -> None:
    trace = run_traced(PROGRAM, tmp_path)
    events = [e for f in trace_files(trace) for e in read_trace_file(f, host="h", model="m")[1]]
    (compile_event,) = [e for e in events if isinstance(e, CompileEvent) and e.outcome == "ok"]
    decisions = sorted((e for e in events if isinstance(e, KernelDecisionEvent)), key=lambda e: e.signature)
    assert [d.signature for d in decisions] == [
        "float32[2,16]@cpu float32[16]@cpu",
        "float32[4,16]@cpu float32[16]@cpu",
    ]
    assert all(d.graph_key == compile_event.graph_key for d in decisions)
    assert compile_event.kernel_providers == tuple(f"{d.op}={d.provider}" for d in decisions)
    assert compile_event.kernel_providers == ("rms_norm=inductor", "rms_norm=inductor")


def _record(kind: str, body: object, frame: int, payload: str | None = None) -> Envelope:
    metadata = {kind: body, "frame_id": frame, "frame_compile_id": 0, "attempt": 0}
    return decode_record(metadata, payload, ts=datetime(2026, 12, 6, tzinfo=UTC))


def test_decisions_written_after_their_compile_ended_are_rows_of_that_compile() -> None:
    """The kernel registry writes a compile's decisions when the outermost compile ends; a compile run inside
    another (a backend compiling a helper) has logged its own end by then where torch logs it. Its decisions
    must become rows of that compile, not open a second record of it that never ends (an ``incomplete``
    compile at the end of an import, or for ever in a live process)."""
    events: list[Event] = []
    assembler = CompileAssembler(AssemblyContext(host="h", model="m", source="trace"), events.append)
    decisions = [{"op": "rms_norm", "provider": "triton", "signature": "float32[4,16]@cpu", "skipped": []}]
    for env in (
        _record("dynamo_start", {"stack": []}, 0),
        _record("dynamo_start", {"stack": []}, 1),  # the nested compile
        _record("compilation_metrics", {"co_name": "helper", "co_filename": "m.py", "co_firstlineno": 3}, 1),
        _record("artifact", {"name": KERNEL_DECISIONS_ARTIFACT, "encoding": "json"}, 1, json.dumps(decisions)),
        _record("compilation_metrics", {"co_name": "outer", "co_filename": "m.py", "co_firstlineno": 9}, 0),
    ):
        assembler.feed(env)
    assembler.finish()
    compiles = [e for e in events if isinstance(e, CompileEvent)]
    assert sorted(c.compile_id for c in compiles) == ["0/0", "1/0"]  # no third, incomplete record of 1/0
    assert all(c.outcome != "incomplete" for c in compiles)
    (row,) = [e for e in events if isinstance(e, KernelDecisionEvent)]
    assert (row.compile_id, row.op, row.provider, row.model) == ("1/0", "rms_norm", "triton", "m")
