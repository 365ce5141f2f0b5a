"""What a compile record stores of the kernel registry's decisions when one op is traced at two shapes: a
real ``torch.compile`` run writes its TORCH_TRACE log and the assembler (the one the live trace sink feeds)
reads it.

The record keeps one ``op=provider`` per op signature, one-to-one with the ``kernel_decisions`` rows, which
hold each signature and why the other providers were skipped. The request page reads the repeats as one
decision chosen for N signatures (``rms_norm=inductor ×2``); the stored rows stay whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from inferensics.collector.trace.importer import read_trace_file, trace_files
from inferensics.schema.events import CompileEvent, KernelDecisionEvent
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
