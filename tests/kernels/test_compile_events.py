"""A compiled graph's provider decisions reach its compile record: a real ``torch.compile`` run writes its
TORCH_TRACE log, and the collector's assembler (the one the live trace sink feeds) reads the registry's
artifact into ``CompileEvent.kernel_providers`` and ``KernelDecisionEvent`` rows."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferensics.collector.host.trace_sink import KEPT_ARTIFACTS
from inferensics.collector.trace.importer import read_trace_file, trace_files
from inferensics.schema.events import KERNEL_DECISIONS_ARTIFACT, CompileEvent, KernelDecisionEvent
from tests.traced_program import run_traced

PROGRAM = """
import torch
from inferensics import kernels

def block(x, w):
    h = kernels.rms_norm(x, w, 1e-6)
    return kernels.silu_mul(torch.cat((h, h * 2), dim=-1)).sum(-1)

compiled = torch.compile(block, dynamic=False)
x, w = torch.randn(4, 16), torch.ones(16)
torch.testing.assert_close(compiled(x, w), block(x, w))

def head(x, w):  # a second graph taking the same rms_norm decision
    return kernels.rms_norm(x, w, 1e-6) * 3

torch.testing.assert_close(torch.compile(head, dynamic=False)(x, w), head(x, w))
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_traced(PROGRAM, tmp_path_factory.mktemp("kernel_trace"))


@pytest.mark.slow
def test_compile_events_name_each_ops_provider_and_why_the_others_were_skipped(trace: Path) -> None:
    events = [e for f in trace_files(trace) for e in read_trace_file(f, host="h", model="m")[1]]
    compile_event, head_event = sorted(
        (e for e in events if isinstance(e, CompileEvent) and e.outcome == "ok"), key=lambda e: e.compile_id
    )
    assert compile_event.kernel_providers == ("rms_norm=inductor", "silu_mul=inductor")
    decisions = {e.op: e for e in events if isinstance(e, KernelDecisionEvent) and e.compile_id == "0/0"}
    assert set(decisions) == {"rms_norm", "silu_mul"}
    # The second graph's rms_norm decision was decided before (same signature): it is still this graph's record.
    assert head_event.kernel_providers == ("rms_norm=inductor",)
    (head_decision,) = [e for e in events if isinstance(e, KernelDecisionEvent) and e.compile_id == "1/0"]
    assert (head_decision.op, head_decision.graph_key) == ("rms_norm", head_event.graph_key)
    for d in decisions.values():
        assert d.compiled
        assert d.fallback
        assert d.graph_key == compile_event.graph_key
        assert d.compile_id == compile_event.compile_id
        # On this CPU the Triton provider declines (no GPU, no interpreter opt-in) and says so.
        assert d.skipped == ("triton: platform cpu not in ['cuda', 'interpreter']",)
    assert decisions["rms_norm"].signature == "float32[4,16]@cpu float32[16]@cpu"


def test_the_live_sink_keeps_the_registry_artifact() -> None:
    assert KERNEL_DECISIONS_ARTIFACT in KEPT_ARTIFACTS
