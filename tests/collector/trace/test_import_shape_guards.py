"""``import-trace`` keeps the symbolic-shape guards of an export log: expression, symbol sources and the
user line that added each, counted in the summary; damaged lines beside them are named once and counted."""

from __future__ import annotations

import json
import re
from pathlib import Path

from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.collector.trace import read_trace_file
from inferensics.schema import ShapeGuardEvent
from inferensics.schema.store import Store
from tests.collector.trace.log_counts import HEADER

LOG = Path(__file__).parent / "logs" / "export_guards.log"
GEN = "gen_export_guards.py"


def _logged_guards(path: Path) -> list[dict[str, object]]:
    """The ``guard_added`` bodies, read straight off the text without the decoder under test."""
    out = []
    for line in path.read_text(encoding="utf-8").splitlines():
        m = HEADER.match(line)
        if m and m.group(1).startswith('{"guard_added": '):
            out.append(json.loads(m.group(1))["guard_added"])
    return out


def _guards(path: Path) -> dict[str, ShapeGuardEvent]:
    report, events = read_trace_file(path, host="h")
    assert report.damaged_lines + report.stats.damaged_payloads == 0
    guards = [e for e in events if isinstance(e, ShapeGuardEvent)]
    assert report.stats.shape_guards == len(guards)
    assert "guard_added" not in report.stats.unused
    return {g.expr: g for g in guards}


def test_export_guards_are_stored_with_their_line() -> None:
    logged = _logged_guards(LOG)
    guards = _guards(LOG)
    assert sorted(guards) == sorted(str(g["expr"]) for g in logged) == ["Eq(s17, s77)", "s17 <= s77"]
    slice_guard, solved = guards["s17 <= s77"], guards["Eq(s17, s77)"]
    # The slice in forward() added the first; solving the dynamic-shape constraints, called from the
    # script's export(...) line, added the second.
    assert slice_guard.user_frame.endswith(f"{GEN}:8 in forward")
    assert slice_guard.attrs["code"] == "return x[: y.shape[0]] * 2 + y"
    assert solved.user_frame.endswith(f"{GEN}:13 in <module>")
    assert solved.attrs["code"].startswith("ep = export(M()")
    for g in guards.values():
        assert g.compile_id == "export/0"
        assert g.symbol_sources == ("s17=L['y'].size()[0]", "s77=L['x'].size()[0]")
        assert (g.source, g.attrs["record"], g.attrs["file"]) == ("trace", "guard_added", LOG.name)


def test_trace_only_log_finds_the_same_guards(tmp_path: Path) -> None:
    """Under TORCH_TRACE alone PyTorch writes only ``guard_added_fast`` (no sources, no user stack outside
    Dynamo): the symbols come from ``create_symbol`` and the line from the full stack."""
    lines = LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    fast_only = tmp_path / "export_trace_only.log"
    fast_only.write_text("".join(ln for ln in lines if '] {"guard_added": ' not in ln), encoding="utf-8")
    want = _guards(LOG)
    got = _guards(fast_only)
    assert sorted(got) == sorted(want)
    for expr, g in got.items():
        assert (g.user_frame, g.symbol_sources, g.attrs["code"]) == (
            want[expr].user_frame,
            want[expr].symbol_sources,
            want[expr].attrs["code"],
        )
        assert g.attrs["record"] == "guard_added_fast"


def test_cli_stores_guards_and_names_a_damaged_line(store: Store, tmp_path: Path) -> None:
    lines = LOG.read_text(encoding="utf-8").splitlines(keepends=True)
    at = next(i for i, ln in enumerate(lines) if ln.startswith("V") and '"expression_created"' in ln)
    lines[at] = lines[at].replace('{"expression_created"', '{expression_created"', 1)
    damaged = tmp_path / "export_damaged.log"
    damaged.write_text("".join(lines), encoding="utf-8")
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    # --redate: the log (written 2026-12-02) is to outlive the tables' retention; its rows are to be stored still
    args = ["import-trace", str(damaged), "--dsn", dsn, "--host", "imp", "--redate"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    assert ": 0 compiles, 0 failed, 0 graph breaks, cache none, 0 kernels, 2 shape guards, " in res.output
    assert ", 1 damaged record skipped, " in res.output
    (note,) = re.findall(r"first damaged record: line (\d+): envelope is not JSON", res.output)
    assert int(note) == at + 1
    stored = store.select_events(ShapeGuardEvent)
    assert sorted(g.expr for g in stored) == ["Eq(s17, s77)", "s17 <= s77"]
    assert all(g.host == "imp" and g.user_frame for g in stored)
