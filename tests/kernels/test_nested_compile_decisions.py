"""A compile that runs inside another (a backend that compiles a helper) keeps its own provider decisions.

Dynamo runs its start and end callbacks for the outermost compile only, so the registry wrote what the inner
compile decided when the outer one ended, in the outer compile's trace: the inner graph's ``rms_norm`` read as
the outer graph's. Each compile's decisions are written under that compile's id. A real nested
``torch.compile`` on the CPU under ``TORCH_TRACE``, read back by the collector's importer."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from inferensics.collector.trace.importer import read_trace_file, trace_files
from inferensics.schema.events import KERNEL_DECISIONS_ARTIFACT, KernelDecisionEvent
from tests.traced_program import run_traced

PROGRAM = """
import torch
from inferensics import kernels

x, w = torch.randn(4, 16), torch.ones(16)

def inner(x, w):
    return kernels.rms_norm(x, w, 1e-6) * 3

inner_compiled = torch.compile(inner, backend="aot_eager", dynamic=False)

def compiling_backend(gm, example_inputs):
    inner_compiled(x, w)  # compile 1/0, inside compile 0/0
    return gm

def outer(a):
    return kernels.silu_mul(torch.cat((a, a * 2), dim=-1)).sum(-1)

torch.testing.assert_close(torch.compile(outer, backend=compiling_backend, dynamic=False)(x), outer(x))
"""


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_traced(PROGRAM, tmp_path_factory.mktemp("nested_trace"))


def _artifacts(trace: Path) -> dict[str, list[str]]:
    """Compile id → the ops of each decisions artifact written under it (as the trace's records say)."""
    out: dict[str, list[str]] = {}
    lines = [line for f in trace_files(trace) for line in f.read_text().splitlines()]
    for i, line in enumerate(lines):
        head = json.loads(line[line.index("{") :]) if "{" in line and not line.startswith("\t") else {}
        if head.get("artifact", {}).get("name") == KERNEL_DECISIONS_ARTIFACT:
            payload = json.loads(lines[i + 1].removeprefix("\t"))
            key = f"{head.get('frame_id')}/{head.get('frame_compile_id')}"
            out.setdefault(key, []).extend(sorted(d["op"] for d in payload))
    return out


@pytest.mark.slow
def test_a_nested_compiles_decisions_are_written_under_its_own_compile(trace: Path) -> None:
    assert _artifacts(trace) == {"0/0": ["silu_mul"], "1/0": ["rms_norm"]}
    events = [e for f in trace_files(trace) for e in read_trace_file(f, host="h", model="m")[1]]
    decided = sorted((e.compile_id, e.op) for e in events if isinstance(e, KernelDecisionEvent))
    assert decided == [("0/0", "silu_mul"), ("1/0", "rms_norm")]
