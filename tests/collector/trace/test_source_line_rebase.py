"""Kernel source lines are re-read from the graph the process compiled when the backend recorded it (the
provenance Inductor replays on an FX-graph-cache hit names the first compiler's files)."""

from __future__ import annotations

import json

from inferensics.collector.trace.artifacts import NODE_TRACES_ARTIFACT
from inferensics.collector.trace.assembler import AssemblyContext, CompileAssembler
from inferensics.collector.trace.envelope import decode_record
from inferensics.schema import KernelInventoryEvent
from inferensics.schema.table import Event

OLD, NEW = "/old/checkout/model.py", "/new/checkout/model.py"
CODE = "cpp_fused_a_0 = async_compile.cpp_pybinding(['float*'], '''\n'''\ncpp_fused_b_1 = async_compile.cpp(''')\n"


def _artifact(name: str) -> dict[str, object]:
    return {"artifact": {"name": name, "encoding": "json"}, "frame_id": 0, "frame_compile_id": 0, "attempt": 0}


def _lines(node_traces: dict[str, str] | None) -> tuple[dict[str, tuple[str, ...]], int]:
    out: list[Event] = []
    asm = CompileAssembler(AssemblyContext(host="h", source="trace"), out.append)
    records: list[tuple[dict[str, object], str | None]] = []
    if node_traces is not None:
        records.append((_artifact(NODE_TRACES_ARTIFACT), json.dumps(node_traces)))
    mappings = {"cppCodeToPost": {"cpp_fused_a_0:1": ["mul"]}, "postToPre": {"mul": ["y"]}}
    cached = {
        "cpp_fused_a_0:1": [f'  File "{OLD}", line 6, in forward\n'],
        "cpp_fused_b_1:2": [f'  File "{OLD}", line 9, in forward\n'],  # no mapping names its nodes
    }
    records += [
        (_artifact("inductor_provenance_tracking_node_mappings"), json.dumps(mappings)),
        (_artifact("inductor_provenance_tracking_kernel_stack_traces"), json.dumps(cached)),
        ({"inductor_output_code": {}, "frame_id": 0, "frame_compile_id": 0}, CODE),
        ({"compilation_metrics": {"co_filename": NEW, "co_firstlineno": 4, "co_name": "forward"},
          "frame_id": 0, "frame_compile_id": 0}, None),
    ]  # fmt: skip
    for metadata, payload in records:
        asm.feed(decode_record(metadata, payload))
    asm.finish()
    kernels = {e.kernel_name: e.source_lines for e in out if isinstance(e, KernelInventoryEvent)}
    return kernels, asm.stats.stale_source_lines


def test_lines_come_from_the_compiled_graph() -> None:
    traces = {"y": f'  File "{NEW}", line 7, in forward\n    y = x * 2\n', "x": ""}
    kernels, stale = _lines(traces)
    assert kernels["cpp_fused_a_0"] == (f"{NEW}:7",)
    # Unmapped and naming a file the compiled graph does not come from: dropped and counted, never stored.
    assert kernels["cpp_fused_b_1"] == ()
    assert stale == 1


def test_without_the_graph_the_logged_lines_stay() -> None:
    kernels, stale = _lines(None)
    assert kernels == {"cpp_fused_a_0": (f"{OLD}:6",), "cpp_fused_b_1": (f"{OLD}:9",)}
    assert stale == 0
