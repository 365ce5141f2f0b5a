"""``import-trace`` stores a compile once, whichever road brought it first.

A serving process instrumented by the host SDK, run with ``TORCH_TRACE`` on, records its compiles live; its
log holds the same compiles again. Importing that log used to store every compile, recompile and cache
lookup twice. Now the tracker writes its process key into the log and the import skips what that process
has stored, keeping what the SDK never saw (compiles after it stopped). A log that grew since it was
imported adds only its new compiles, compile ids reused after ``torch._dynamo.reset()`` included.

Real parts: the SDK in a fresh process under ``TORCH_TRACE``, exporting into an embedded chDB store; Inductor
on CPU with graphs of matrix products only (extern kernels, no C++ build).
"""

from __future__ import annotations

import os
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.collector.trace import read_trace_file, trace_files
from inferensics.schema import CacheEvent, CompileEvent, RecompileEvent
from inferensics.schema.processes import COMPILE_SEQ_ATTR, PROCESS_ATTR
from inferensics.schema.store import Store
from tests.collector.trace.log_counts import count_log
from tests.collector.trace.test_import_corpus import CORPUS
from tests.collector.trace.traced_run import run_traced

SERVER = """\
import sys

import torch

from inferensics.collector.host import SdkConfig, instrument
from inferensics.schema.store import Store


def f(x):
    return torch.mm(x, x)


def g(x):
    return torch.mm(x, x.t())


config = SdkConfig(batch_rows=100)
if sys.argv[1].startswith("http"):  # through a collector service, as a serving host does
    store = None
    tracker = instrument(service_url=sys.argv[1], token=sys.argv[2], host="srv", model="m", config=config)
else:
    store = Store.open(sys.argv[1])
    store.migrate()
    tracker = instrument(store=store, host="srv", model="m", config=config)
served = tracker.compile(f, dynamic=False)
for i, n in enumerate((4, 5, 4)):  # a compile, a recompile (new size), a hit
    with tracker.request(f"r{i}") as req:
        req.set_output(served(torch.ones(n, n)))
tracker.shutdown()
torch.compile(g)(torch.ones(3, 3))  # after the SDK stopped: only the log has it
if store is not None:
    store.close()
"""


@pytest.mark.slow
def test_an_instrumented_process_log_adds_only_what_the_sdk_did_not_record(tmp_path: Path) -> None:
    dsn = f"chdb://{tmp_path / 'store'}?database=inferensics"
    trace = run_traced(tmp_path, SERVER, dsn)
    (log,) = trace_files(trace)
    in_log = count_log(log).counts
    assert (in_log["compiles"], in_log["recompiles"]) == (3, 1)  # f, f again (new size), g

    with Store.open(dsn) as store:
        live = store.select_events(CompileEvent)
        live_cache = Counter((e.compile_id, e.cache, e.result) for e in store.select_events(CacheEvent))
    assert sorted(c.compile_id for c in live) == ["0/0", "0/1"]  # g came after the SDK stopped
    assert len({c.attrs[PROCESS_ATTR] for c in live}) == 1

    args = ["import-trace", str(trace), "--dsn", dsn, "--host", "srv"]
    res = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "2 of the compiles were already stored (recorded live by the host SDK): not stored again" in res.output

    with Store.open(dsn) as store:
        compiles = store.select_events(CompileEvent)
        assert sorted(c.compile_id for c in compiles) == ["0/0", "0/1", "1/0"]
        assert len(store.select_events(RecompileEvent)) == in_log["recompiles"]
        cache = Counter((e.compile_id, e.cache, e.result) for e in store.select_events(CacheEvent))
        assert {k: v for k, v in cache.items() if k[0] != "1/0"} == live_cache  # nothing of f's twice
        assert any(k[0] == "1/0" for k in cache)  # g's lookups came from the log
        imported = next(c for c in compiles if c.compile_id == "1/0")
        assert imported.trigger == "import"
        assert imported.attrs[PROCESS_ATTR] == live[0].attrs[PROCESS_ATTR]  # the log named its process


def _cut_before_last_start(log: Path, out: Path) -> None:
    """``log`` up to its last compile's first record: the same log, read before that compile happened."""
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    last = max(i for i, line in enumerate(lines) if '{"dynamo_start"' in line)
    out.write_text("".join(lines[:last]), encoding="utf-8")


GROWING = """\
import torch
import torch._dynamo


def h(x):
    return torch.mm(x, x)


torch.compile(h, dynamic=False)(torch.ones(3, 3))
torch.compile(h, dynamic=False)(torch.ones(4, 4))
torch._dynamo.reset()  # compile ids start again at 0/0
torch.compile(h, dynamic=False)(torch.ones(5, 5))
"""


@pytest.mark.slow
def test_a_log_that_grew_adds_only_its_new_compiles(tmp_path: Path) -> None:
    """Imported while its process ran, then again: the second import stores the one compile the first
    could not see, though its id (``0/0``, after a reset) is one the first import stored."""
    (log,) = trace_files(run_traced(tmp_path, GROWING))
    earlier = tmp_path / "earlier" / log.name
    earlier.parent.mkdir()
    _cut_before_last_start(log, earlier)
    assert (count_log(earlier).counts["compiles"], count_log(log).counts["compiles"]) == (2, 3)

    dsn = f"chdb://{tmp_path / 'store'}?database=inferensics"
    first = CliRunner().invoke(app, ["import-trace", str(earlier), "--dsn", dsn], env={"COLUMNS": "300"})
    assert first.exit_code == 0, first.output
    second = CliRunner().invoke(app, ["import-trace", str(log), "--dsn", dsn], env={"COLUMNS": "300"})
    assert second.exit_code == 0, second.output
    assert "2 of the compiles were already stored (imported before, from this process's log)" in second.output
    with Store.open(dsn) as store:
        assert sorted(c.compile_id for c in store.select_events(CompileEvent)) == ["0/0", "0/0", "0/1"]


def _compiles(events: list[Any]) -> Counter[tuple[str, str, str, str, str]]:
    return Counter(
        (e.compile_id, e.attrs.get(COMPILE_SEQ_ATTR, ""), e.outcome, e.graph_key, e.cache_status)
        for e in events
        if isinstance(e, CompileEvent)
    )


def _lookups(events: list[Any]) -> Counter[tuple[str, str, str, str]]:
    return Counter(
        (e.compile_id, e.attrs.get(COMPILE_SEQ_ATTR, ""), e.cache, e.result)
        for e in events
        if isinstance(e, CacheEvent)
    )


@pytest.mark.parametrize("cuts", [(2000, 2372), (2372,)])
def test_a_compile_cut_off_by_an_earlier_import_is_completed_by_the_longer_log(
    store: Store, tmp_path: Path, cuts: tuple[int, ...]
) -> None:
    """A log imported mid-compile stores that compile ``incomplete`` (graph key and cache status as far as the log
    got); the full log, imported later, used to skip it as already stored, so the broken row stayed for ever. Now
    it is replaced: the store ends as if the full log alone had been imported, the rollup of cache lookups
    included (line 2000 cuts compile 1/0 before its cache lookups, line 2372 after the first of them; the two cuts
    in a row are a log read twice while that compile ran)."""
    log = CORPUS / "cache_hit_miss.log"
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    lines = log.read_text(encoding="utf-8").splitlines(keepends=True)
    for n in cuts:
        earlier = tmp_path / str(n) / log.name  # the same process's log, read earlier
        earlier.parent.mkdir()
        earlier.write_text("".join(lines[:n]), encoding="utf-8")
        # --redate: the corpus log is older than the tables' retention
        res = CliRunner().invoke(app, ["import-trace", str(earlier), "--dsn", dsn, "--redate"], env={"COLUMNS": "300"})
        assert res.exit_code == 0, res.output
    stored = {(e.compile_id, e.outcome) for e in store.select_events(CompileEvent)}
    assert stored == {("0/0", "ok"), ("1/0", "incomplete")}

    res = CliRunner().invoke(app, ["import-trace", str(log), "--dsn", dsn, "--redate"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "1 of the compiles was already stored (imported before, from this process's log)" in res.output
    _, whole = read_trace_file(log, host="h")
    assert _compiles(store.select_events(CompileEvent)) == _compiles(whole)
    assert _lookups(store.select_events(CacheEvent)) == _lookups(whole)
    rollup = store.query_rows(f"SELECT sum(requests) FROM {store.database}.cache_events_1h")[0][0]
    assert rollup == len(store.select_events(CacheEvent)) == 6


def test_copies_of_one_log_that_infer_different_years_are_one_process(store: Store, tmp_path: Path) -> None:
    """glog stamps carry no year; a log without epoch times has it inferred from the file's mtime. A log read while
    it was written and a copy of it whose mtime fell a minute before its first record (a clock behind, a copy
    keeping an older stamp) were dated a year apart, so the process key (log name, pid, first record's time)
    differed and the longer copy stored every compile again beside the incomplete one. The key now carries the
    time as glog stamps it."""
    log = CORPUS / "cache_hit_miss.log"  # its first record: V1206 15:24:45.403
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    # Without its chromium events (timing records) the log holds no epoch time: the mtime gives its year.
    lines: list[str] = []
    cut, timing = 0, False
    for n, line in enumerate(log.read_text(encoding="utf-8").splitlines(keepends=True)):
        timing = timing if line.startswith("\t") else '"chromium_event"' in line
        if not timing:
            lines.append(line)
            cut += n < 2000  # the original's line 2000: inside compile 1/0
    earlier = tmp_path / "early" / log.name
    later = tmp_path / "late" / log.name
    for path, text, stamp in (
        (earlier, "".join(lines[:cut]), datetime(2026, 12, 6, 15, 30, tzinfo=UTC)),  # year 2026
        (later, "".join(lines), datetime(2026, 12, 6, 15, 23, tzinfo=UTC)),  # before its first record: 2025
    ):
        path.parent.mkdir()
        path.write_text(text, encoding="utf-8")
        os.utime(path, (stamp.timestamp(), stamp.timestamp()))
    # --redate: a year-old copy is older than the tables' retention
    res = CliRunner().invoke(app, ["import-trace", str(earlier), "--dsn", dsn, "--redate"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "were read as UTC in 2026, the latest year that puts the first record no later than" in res.output
    res = CliRunner().invoke(app, ["import-trace", str(later), "--dsn", dsn, "--redate"], env={"COLUMNS": "300"})
    assert res.exit_code == 0, res.output
    assert "were read as UTC in 2025, the latest year that puts the first record no later than" in res.output
    assert "1 compile an earlier import of this log stored incomplete was completed: 1/0" in res.output
    _, whole = read_trace_file(log, host="h")
    assert _compiles(store.select_events(CompileEvent)) == _compiles(whole)


@pytest.mark.slow
def test_through_the_service_a_compile_left_incomplete_is_named(tmp_path: Path) -> None:
    """Through a service, rows are only added (OTLP), so the compile an earlier import stored ``incomplete`` cannot
    be replaced by the longer log's: the import used to count it among "already stored" and say no more. It now
    names the compiles that stay incomplete and how to complete them."""
    from tests.collector.service.harness import ADMIN, new_service
    from tests.polling import poll

    log = CORPUS / "cache_hit_miss.log"
    earlier = tmp_path / "early" / log.name
    earlier.parent.mkdir()
    earlier.write_text("".join(log.read_text(encoding="utf-8").splitlines(keepends=True)[:2000]), encoding="utf-8")
    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service") as service:
        client = service.client()
        args = ["--service", service.url, "--token", ADMIN, "--host", "h", "--redate"]  # an old log: --redate
        res = CliRunner().invoke(app, ["import-trace", str(earlier), *args], env={"COLUMNS": "300"})
        assert res.exit_code == 0, res.output

        def stored() -> list[tuple[str, str]]:
            frame = client.sql("SELECT compile_id, outcome FROM compiles ORDER BY compile_id")
            return list(zip(frame["compile_id"].to_list(), frame["outcome"].to_list(), strict=True))

        assert poll(stored, lambda r: len(r) >= 2, timeout=60, interval=0.2) == [("0/0", "ok"), ("1/0", "incomplete")]
        res = CliRunner().invoke(app, ["import-trace", str(log), *args], env={"COLUMNS": "300"})
        assert res.exit_code == 0, res.output
        assert (
            "  1 compile an earlier import of this log stored incomplete is complete in it but stays incomplete: 1/0 "
            "(the service only adds rows; to replace them, stop the service and import this log with --dsn naming "
            "its store)"
        ) in res.output
        assert stored() == [("0/0", "ok"), ("1/0", "incomplete")]


@pytest.mark.slow
def test_through_the_service_the_live_spans_and_the_log_make_one_record(tmp_path: Path) -> None:
    """The production road: the SDK exports OTLP spans to ``inferensics serve``, then ``import-trace
    --service`` asks that service what the process has stored (named query ``recorded_compiles``)."""
    from tests.collector.service.harness import ADMIN, INGEST, new_service
    from tests.polling import poll

    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service") as service:
        trace = run_traced(tmp_path, SERVER, service.url, INGEST)
        client = service.client()

        def stored() -> list[str]:
            return list(client.sql("SELECT compile_id FROM compiles ORDER BY compile_id")["compile_id"].to_list())

        live = poll(stored, lambda r: len(r) >= 2, timeout=60, interval=0.2)
        assert live == ["0/0", "0/1"]

        args = ["import-trace", str(trace), "--service", service.url, "--token", ADMIN, "--host", "srv"]
        res = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
        assert res.exit_code == 0, res.output
        assert "2 of the compiles were already stored (recorded live by the host SDK): not stored again" in res.output
        # g's rows travel in the import's one batch of compiles: once 1/0 is stored, all of that batch is.
        got = poll(stored, lambda r: "1/0" in r, timeout=60, interval=0.2)
        assert got == ["0/0", "0/1", "1/0"]
        assert client.sql("SELECT count() FROM recompiles").item() == 1


@pytest.mark.slow
def test_a_service_that_cannot_say_what_it_holds(tmp_path: Path) -> None:
    """A service without the query (here one started without `inferensics serve`'s named queries): the log of
    an instrumented process is refused, as storing it unchecked would count its compiles twice; another log is
    imported whole, with a note."""
    from tests.collector.service.harness import ADMIN, INGEST, new_service

    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service", via_cli=False) as service:
        trace = run_traced(tmp_path, SERVER, service.url, INGEST)
        other = CORPUS / "simple.log"
        args = ["import-trace", str(trace), str(other), "--service", service.url, "--token", ADMIN, "--redate"]
        res = CliRunner().invoke(app, args, env={"COLUMNS": "300"})
        assert res.exit_code == 2, res.output
        assert f"{other}: 1 compile, " in res.output
        assert "every compile was stored, whether or not it was stored before" in res.output
        assert "cannot say which compiles it holds (no query recorded_compiles" in res.output
        assert "nothing of this log was stored, as the host SDK recorded its process live" in res.output
