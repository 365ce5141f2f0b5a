"""What the assembler makes of records the corpus and torch 2.13 write that it used to drop or misread: compile
times under their microsecond names, the time an FX-graph-cache hit saved, a strict ``torch.export``, a log cut
off inside a record, and an artifact's kernels when a cache hit serves it again.

Expected values are read off the logs' text by ``log_counts`` (regular expressions and ``json``), not by the
decoder under test. The torch 2.13 logs are written here and now by ``traced_run`` (matrix products only:
Inductor calls an extern kernel, no C++ build).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.collector.trace.assembler import AssemblyContext, CompileAssembler
from inferensics.collector.trace.assembly_stats import damage_note
from inferensics.collector.trace.envelope import Damaged, iter_file_envelopes
from inferensics.schema import CacheEvent, CompileEvent, KernelInventoryEvent
from inferensics.schema.store import Store
from inferensics.schema.table import Event
from tests.collector.trace.log_counts import (
    logged_compilation_metrics,
    logged_kernels,
    logged_records,
)
from tests.collector.trace.traced_run import run_traced

CORPUS = Path("/work/shared/corpus/torch-trace")
LOGS = Path(__file__).parent / "logs"

STRICT_EXPORT = """\
import torch


class M(torch.nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            return torch.mm(x, x.t()) * 2
        return x.cos()


b = torch.export.Dim("b", min=3, max=64)
torch.export.export(M(), (torch.randn(4, 8),), dynamic_shapes={"x": {0: b}}, strict=True)
"""
"""One module, exported strictly: Dynamo traces its frame without starting a compile."""

CACHE_HIT = """\
import torch
import torch._dynamo


def f(x):
    return torch.mm(x, x)


for _ in range(2):
    torch.compile(f)(torch.ones(4, 4))
    torch._dynamo.reset()
"""
"""The same graph compiled twice in one process: an FX-graph-cache miss, then a hit serving the same code."""


def _assemble(lines: Iterable[str]) -> tuple[CompileAssembler, list[Event]]:
    out: list[Event] = []
    asm = CompileAssembler(AssemblyContext(host="h", source="trace"), out.append)
    for item in iter_file_envelopes(lines, year=2026):
        if not isinstance(item, Damaged):
            asm.feed(item)
    asm.finish()
    return asm, out


def _assemble_file(path: Path) -> tuple[CompileAssembler, list[Event]]:
    with path.open(encoding="utf-8", newline="\n") as fh:
        return _assemble(fh)


def _compiles(events: list[Event]) -> list[CompileEvent]:
    return [e for e in events if isinstance(e, CompileEvent)]


def _one_log(folder: Path) -> Path:
    (log,) = folder.iterdir()
    return log


@pytest.fixture(scope="module")
def strict_export_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _one_log(run_traced(tmp_path_factory.mktemp("strict"), STRICT_EXPORT))


@pytest.fixture(scope="module")
def cache_hit_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _one_log(run_traced(tmp_path_factory.mktemp("hit"), CACHE_HIT))


# --- 1. compile times ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["simple.log", "cache_hit_miss.log"])
def test_microsecond_times_fill_the_time_columns(name: str) -> None:
    """These logs name a compile's times only ``*_cumulative_compile_time_us`` (the seconds fields are absent)."""
    log = CORPUS / name
    logged = logged_compilation_metrics(log)
    assert logged
    assert all("entire_frame_compile_time_s" not in m for _, m in logged)
    _, events = _assemble_file(log)
    compiles = _compiles(events)
    assert [c.compile_id for c in compiles] == [cid for cid, _ in logged]
    for c, (_, m) in zip(compiles, logged, strict=True):
        micros = {
            "entire_frame_s": m.get("dynamo_cumulative_compile_time_us"),
            "backend_s": m.get("aot_autograd_cumulative_compile_time_us"),
            "inductor_s": m.get("inductor_cumulative_compile_time_us"),
            "codegen_s": m.get("inductor_code_gen_cumulative_compile_time_us"),
        }
        for column, us in micros.items():
            want = us / 1e6 if isinstance(us, int) else 0.0
            assert getattr(c, column) == pytest.approx(want, rel=1e-6), (c.compile_id, column)
        assert c.entire_frame_s > 0
        for phase in ("pre_grad_pass_time_us", "joint_graph_pass_time_us", "post_grad_pass_time_us"):
            if m.get(phase):
                assert c.attrs[phase] == str(m[phase])  # times without a column are kept, in microseconds


def test_seconds_fields_and_the_old_start_time() -> None:
    """torch 2.3 wrote seconds fields and ``start_time`` (epoch seconds): the row starts then, not at the glog
    stamp (the writing machine's local time), and the time before a restart is kept in microseconds."""
    log = CORPUS / "comp_metrics.log"
    logged = logged_compilation_metrics(log)
    _, events = _assemble_file(log)
    compiles = _compiles(events)
    assert len(compiles) == len(logged) == 3
    for c, (_, m) in zip(compiles, logged, strict=True):
        assert c.entire_frame_s == pytest.approx(m["entire_frame_compile_time_s"], rel=1e-6)
        assert c.backend_s == pytest.approx(m["backend_compile_time_s"], rel=1e-6)
        assert c.ts == datetime.fromtimestamp(float(str(m["start_time"])), UTC)  # glog stamps are local time
        before_restart = float(str(m["dynamo_time_before_restart_s"]))
        if before_restart:
            assert c.attrs["dynamo_compile_time_before_restart_us"] == str(round(before_restart * 1e6))
        else:
            assert "dynamo_compile_time_before_restart_us" not in c.attrs


def test_a_compile_dynamo_did_not_time_takes_its_span() -> None:
    """AOTInductor's metrics name no phase time: the compile lasted from ``start_time_us`` to ``end_time_us``."""
    log = LOGS / "aoti_compile.log"
    ((cid, m),) = logged_compilation_metrics(log)
    assert cid == ""
    assert m["entire_frame_compile_time_s"] is None
    assert m["dynamo_cumulative_compile_time_us"] is None
    _, events = _assemble_file(log)
    (c,) = _compiles(events)
    span = (int(str(m["end_time_us"])) - int(str(m["start_time_us"]))) / 1e6
    assert span > 1
    assert c.entire_frame_s == pytest.approx(span, rel=1e-6)


def test_an_fx_graph_hit_stores_the_time_it_saved() -> None:
    """The FX-graph cache writes ``time_saved_ns``; a hit stored as saving nothing priced cold misses at 0 s."""
    log = CORPUS / "cache_hit_miss.log"
    records = logged_records(log.read_text(encoding="utf-8"))
    hit_artifact = {"name": "fx_graph_cache_hit", "encoding": "json"}
    logged = [r.payload for r in records if r.envelope.get("artifact") == hit_artifact]
    assert len(logged) == 1
    assert '"time_saved_ns": ' in logged[0]
    saved_ns = int(logged[0].split('"time_saved_ns": ', 1)[1].split(",", 1)[0].strip("} "))
    _, events = _assemble_file(log)
    (hit,) = [e for e in events if isinstance(e, CacheEvent) and (e.cache, e.result) == ("fx_graph", "hit")]
    assert saved_ns > 0
    assert hit.time_saved_ms == pytest.approx(saved_ns / 1e6, rel=1e-6)


# --- 2. torch.export --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_strict_export_is_one_compile(strict_export_log: Path) -> None:
    records = logged_records(strict_export_log.read_text(encoding="utf-8"))
    assert not any("dynamo_start" in r.envelope for r in records)  # Dynamo traced the frame, started no compile
    traced = {(r.envelope["frame_id"], r.envelope["frame_compile_id"]) for r in records if "frame_id" in r.envelope}
    assert traced == {(0, 0)}
    (guards,) = [r.payload for r in records if "dynamo_cpp_guards_str" in r.envelope]
    ((cid, m),) = logged_compilation_metrics(strict_export_log)
    assert cid == ""
    asm, events = _assemble_file(strict_export_log)
    (c,) = _compiles(events)
    assert (c.compile_id, c.outcome) == ("0/0", "ok")
    assert c.guard_tree_digest == hashlib.sha256(guards.encode("utf-8")).hexdigest()
    assert c.backend_s == pytest.approx(int(str(m["aot_autograd_cumulative_compile_time_us"])) / 1e6, rel=1e-6)
    span = (int(str(m["end_time_us"])) - int(str(m["start_time_us"]))) / 1e6
    assert c.entire_frame_s == pytest.approx(span, rel=1e-6)
    assert asm.stats.compiles == 1
    assert "dynamo_cpp_guards_str" not in asm.stats.unused


# --- 3. a log cut off inside a record ---------------------------------------------------------------------------


def _cut(text: str, at: int) -> list[str]:
    return text[:at].splitlines(keepends=True)


def test_a_log_cut_inside_its_last_record_says_so() -> None:
    """``head -c 5000 comp_metrics.log`` ends inside a ``dynamo_guards`` payload."""
    text = (CORPUS / "comp_metrics.log").read_text(encoding="utf-8")
    whole = logged_records(text)
    for at in (5000, text.index("\n\t", 5000) + 1):  # inside a payload line, and right after one
        cut = logged_records(text[:at])
        last = cut[-1]
        assert last.lineno == whole[len(cut) - 1].lineno
        assert last.payload != whole[len(cut) - 1].payload
        asm, events = _assemble(_cut(text, at))
        assert asm.stats.cut_off_at == last.lineno
        assert damage_note(asm.stats) == (
            f"the file ends inside a record at line {last.lineno}: cut off, or still being written"
        )
        (c,) = _compiles(events)
        assert c.outcome == "incomplete"  # the compile whose end the cut left out


def test_import_trace_says_a_cut_log_is_cut(tmp_path: Path) -> None:
    """The import said "first damaged record: line 25: payload does not match its record (skipped; the rest of the
    file was imported)" of a log that ends inside that record."""
    text = (CORPUS / "comp_metrics.log").read_text(encoding="utf-8")
    cut = tmp_path / "comp_metrics.log"
    cut.write_text(text[:5000], encoding="utf-8")
    last = logged_records(text[:5000])[-1]
    args = ["import-trace", str(cut), "--dsn", f"chdb://{tmp_path / 'store'}", "--redate"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    assert (
        f"  damaged: the file ends inside a record at line {last.lineno}: cut off, or still being written "
        "(the records before it were imported)"
    ) in res.output
    assert "payload does not match its record" not in res.output


def test_damage_before_the_end_is_not_a_cut() -> None:
    text = (CORPUS / "simple_corrupted_json.log").read_text(encoding="utf-8")
    asm, _ = _assemble(text.splitlines(keepends=True))
    assert asm.stats.cut_off_at == 0
    assert damage_note(asm.stats) == f"line {asm.stats.first_damaged_payload}: payload does not match its record"
    # Cut it inside the payload of its last record that has one: both are named.
    last = next(r for r in reversed(logged_records(text)) if len(r.payload) > 20)
    first_line = "\n\t" + last.payload.split("\n", 1)[0]
    asm, _ = _assemble(_cut(text, text.rindex(first_line) + len(first_line) // 2))
    assert asm.stats.cut_off_at == last.lineno > asm.stats.first_damaged_payload > 0
    assert damage_note(asm.stats) == (
        f"line {asm.stats.first_damaged_payload}: payload does not match its record; "
        f"the file ends inside a record at line {last.lineno}: cut off, or still being written"
    )


# --- 4. kernels of an artifact served again ---------------------------------------------------------------------


def test_a_cache_hit_adds_no_kernel_rows() -> None:
    log = CORPUS / "cache_hit_miss.log"
    asm, events = _assemble_file(log)
    kernels = [(e.artifact_id, e.kernel_name) for e in events if isinstance(e, KernelInventoryEvent)]
    assert len(kernels) == len(set(kernels)) == asm.stats.kernels
    assert set(kernels) == logged_kernels(log)


@pytest.mark.slow
def test_the_summary_counts_the_kernel_rows_stored(cache_hit_log: Path, store: Store) -> None:
    artifacts = [r.envelope.get("artifact") for r in logged_records(cache_hit_log.read_text(encoding="utf-8"))]
    names = [str(a.get("name")) for a in artifacts if isinstance(a, dict)]
    assert [n for n in names if n.startswith("fx_graph_cache_")] == ["fx_graph_cache_miss", "fx_graph_cache_hit"]
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = CliRunner().invoke(app, ["import-trace", str(cache_hit_log), "--dsn", dsn], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    (summary,) = re.findall(r", (\d+) kernels?, ", res.output)
    kernels = store.query_rows(f"SELECT artifact_id, kernel_name FROM {store.database}.kernels FINAL")
    stored = store.query_rows(f"SELECT count() FROM {store.database}.kernels")[0][0]
    assert {(str(a), str(k)) for a, k in kernels} == logged_kernels(cache_hit_log)
    assert int(summary) == stored == len(kernels) >= 1
    hit = store.query_rows(
        f"SELECT time_saved_ms FROM {store.database}.cache_events WHERE cache = 'fx_graph' AND result = 'hit'"
    )
    assert len(hit) == 1
    assert hit[0][0] > 0
