"""``inferensics import-trace`` over a TORCH_TRACE log written here and now by this machine's torch: graph
breaks, recompiles, the recompile limit, compile failures and all three cache results, which the shared
corpus never shows. The imported records equal what the log states, counted independently off its text.

The program compiles with Inductor on CPU; its graphs hold only matrix products (Inductor calls extern
kernels for them, no C++ build), so the whole run takes seconds. The one C++ kernel, in ``failing``, is
never built: its compiler does not exist.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.collector.trace import read_trace_file, trace_files
from inferensics.schema import CacheEvent, CompileEvent, GraphBreakEvent, RecompileEvent
from inferensics.schema.store import Store
from tests.collector.trace.log_counts import LogCounts, count_log
from tests.collector.trace.traced_run import run_traced

PROGRAM = """\
import torch
import torch._dynamo


def breaks(x, flag):
    y = torch.mm(x, x)
    torch._dynamo.graph_break()  # GB0025
    print("side effect")  # GB0059
    z = torch.mm(y, x)
    if flag:  # GB0170, data-dependent branching
        return torch.mm(z, y)
    return z


def scaled(x, k):
    return torch.addmm(x, x, x, alpha=k)


def limited(x):
    return torch.mm(x, x.t())


def failing(x):
    return torch.cos(x) + 2


def refused(x):
    return torch.mm(x, x)


def bypassed(x):
    return torch.mm(x, x)


def raising_backend(gm, inputs):
    raise RuntimeError("backend refuses this graph")


torch.compile(breaks)(torch.ones(4, 4), torch.tensor(True))

s = torch.compile(scaled)  # a new size, then a new Python constant: two recompiles
for n, k in [(4, 2), (4, 2), (7, 2), (9, 2), (4, 3)]:
    s(torch.ones(n, n), k)

lim = torch.compile(limited, dynamic=False)
with torch._dynamo.config.patch(recompile_limit=2):
    for n in (3, 5, 6, 7, 3):
        lim(torch.ones(n, 2))

with torch._dynamo.config.patch(suppress_errors=True):
    torch.compile(failing, options={"cpp.cxx": ("/nonexistent/c++",)})(torch.ones(6))
    torch.compile(refused, backend=raising_backend)(torch.ones(3, 3))
# an uncacheable custom pass: the FX graph and AOTAutograd caches are bypassed
torch.compile(bypassed, options={"post_grad_custom_post_pass": lambda g: None})(torch.ones(2, 2))

torch._dynamo.reset()  # compile ids start again at 0/0; the FX graph cache now hits
torch.compile(limited, dynamic=False)(torch.ones(3, 2))
"""


@pytest.fixture(scope="module")
def live_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The TORCH_TRACE folder a run of :data:`PROGRAM` wrote (its own, empty Inductor cache)."""
    return run_traced(tmp_path_factory.mktemp("live_trace"), PROGRAM)


def _logged(trace: Path) -> LogCounts:
    logged = LogCounts()
    for f in trace_files(trace):
        logged.update(count_log(f))
    return logged


@pytest.mark.slow
def test_the_run_shows_every_case(live_trace: Path) -> None:
    """The log holds what the program set out to produce, so the comparisons below are not 0 with 0."""
    logged = _logged(live_trace)
    c = logged.counts
    assert (c["graph_breaks"], c["recompiles"], c["recompile_limit"], c["failures"]) == (3, 4, 1, 3)
    assert min(c["fx_graph_hit"], c["fx_graph_miss"], c["fx_graph_bypass"], c["aot_autograd_bypass"]) >= 1
    assert sorted(b.registry_id for b in logged.breaks) == ["GB0025", "GB0059", "GB0170"]
    assert {b.break_type for b in logged.breaks} >= {"Data-dependent branching", "Failed to trace builtin operator"}
    assert all(b.user_frame.startswith(str(live_trace.parent / "program.py:")) for b in logged.breaks)
    assert all(b.user_frame.endswith(" in breaks") for b in logged.breaks)
    assert sorted(t for _, t in logged.fail_types) == ["BackendCompilerFailed", "InductorError", "Unsupported"]
    assert c["damaged"] == 0


@pytest.mark.slow
def test_decoded_counts_equal_the_log(live_trace: Path) -> None:
    for f in trace_files(live_trace):
        want = count_log(f).counts
        report, _ = read_trace_file(f, host="h")
        s = report.stats
        got = (s.compiles, s.failures, s.recompile_limit, s.recompiles, s.graph_breaks)
        assert got == tuple(want[k] for k in ("compiles", "failures", "recompile_limit", "recompiles", "graph_breaks"))
        assert s.cache == Counter({k: v for k, v in want.items() if k.startswith(("fx_graph_", "aot_autograd_"))})
        assert report.damaged_lines + s.damaged_payloads == want["damaged"]


@pytest.mark.slow
def test_cli_import_equals_the_log(live_trace: Path, store: Store) -> None:
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = CliRunner().invoke(app, ["import-trace", str(live_trace), "--dsn", dsn, "--host", "live"])
    assert res.exit_code == 0, res.output
    assert "0 damaged records skipped" in res.output
    logged = _logged(live_trace)
    want = logged.counts

    compiles = store.select_events(CompileEvent)
    assert len(compiles) == want["compiles"]
    assert sum(c.outcome in ("failed", "recompile_limit") for c in compiles) == want["failures"]
    assert sum(c.outcome == "recompile_limit" for c in compiles) == want["recompile_limit"]
    assert sorted((c.compile_id, c.fail_type) for c in compiles if c.fail_type) == sorted(logged.fail_types)

    recompiles = store.select_events(RecompileEvent)
    assert sorted((r.compile_id, r.reasons) for r in recompiles) == sorted(logged.recompile_reasons)

    breaks = store.select_events(GraphBreakEvent)
    got = sorted((b.compile_id, b.registry_id, b.break_type, b.user_frame) for b in breaks)
    assert got == sorted((b.compile_id, b.registry_id, b.break_type, b.user_frame) for b in logged.breaks)
    by_compile = Counter(b.compile_id for b in breaks)
    assert {c.compile_id: c.graph_break_count for c in compiles if c.graph_break_count} == dict(by_compile)
    # A break names the frame its compile compiled (known only from the compile's metrics, which come later;
    # compile ids repeat after the program's torch._dynamo.reset(), so pairs are compared).
    compiled = {(c.compile_id, c.code_location) for c in compiles}
    assert all(b.code_location and (b.compile_id, b.code_location) in compiled for b in breaks), breaks
    assert {b.code_location.split(":")[-1].startswith(("breaks", "torch_dynamo_resume_in_breaks")) for b in breaks} == {
        True
    }

    cache = Counter(f"{e.cache}_{e.result}" for e in store.select_events(CacheEvent))
    assert cache == Counter({k: v for k, v in want.items() if k.startswith(("fx_graph_", "aot_autograd_"))})
