"""``import-trace`` dates records as their log does, stores a compile once whatever its log's file is called,
and says what it did not do.

A walk through the product found: a log older than a table's retention stored at the import time (an old
recompile storm in this week's report); glog stamps (local time, no year) read as UTC in a year guessed from
the file's mtime, though the log's epoch times say both; a copy of a log under another name stored its
compiles again; a directory's skipped files listed without why; one stray line on top refusing a whole log;
labels given to a re-import dropped without a word; and ``1 compiles``.

Real parts: the shared corpus of real TORCH_TRACE logs (copies of it moved in time, cut or renamed here), the
CLI through typer's runner, an embedded chDB store.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.collector.trace import read_trace_file
from inferensics.collector.trace.importer import StoreTarget, import_trace
from inferensics.collector.trace.log_clock import LogClock
from inferensics.schema import CacheEvent, CompileEvent
from inferensics.schema import columns as col
from inferensics.schema.arrow import events_by_model
from inferensics.schema.processes import PROCESS_ATTR
from inferensics.schema.store import Store
from inferensics.schema.table import Event
from tests.collector.trace.log_counts import HEADER, count_log
from tests.collector.trace.test_import_corpus import CORPUS

LOG = CORPUS / "cache_hit_miss.log"
"""Six compiles, written on 2024-12-06 by a machine on UTC-8 (its chromium events' ``ts`` say so)."""
LOG_YEAR = 2024
STAMP = re.compile(r"^([VIWEC])(\d{4} \d{2}:\d{2}:\d{2}\.\d{6})( .*)$")
EPOCH_FIELDS = re.compile(r'"(start_time|start_time_us|end_time_us)": ([\d.]+)')
CHROMIUM_TS = re.compile(r'^"ts": ([\d.]+)')
ENV = {"COLUMNS": "500"}


def _dsn(store: Store) -> str:
    return f"chdb://{store.dsn.path}?database={store.database}"


def _cli(*args: str) -> str:
    res = CliRunner().invoke(app, ["import-trace", *args], env=ENV)
    assert res.exit_code == 0, res.output
    return res.output


def _ts(event: Event) -> datetime:
    ts = getattr(event, col.TS)
    assert isinstance(ts, datetime)
    return ts


def _first_chromium_utc(path: Path) -> datetime:
    """The ``ts`` of the log's first chromium event, read off the text: an epoch time in microseconds."""
    ts = re.search(r'^\t"ts": ([\d.]+)', path.read_text(encoding="utf-8"), re.MULTILINE)
    assert ts is not None
    return datetime.fromtimestamp(float(ts[1]) / 1e6, UTC)


def _rewrite(
    log: Path,
    out: Path,
    *,
    shift: timedelta = timedelta(0),
    stamps_only: timedelta = timedelta(0),
    keep: Callable[[str], bool] = lambda header: True,
) -> Path:
    """``log`` moved ``shift`` in time (glog stamps, chromium ``ts``, compilation metrics' epoch times), its
    glog stamps moved ``stamps_only`` more (a machine on another UTC offset), records whose header ``keep``
    refuses dropped; payload digests made to match."""
    us = round(shift.total_seconds() * 1e6)
    out_lines: list[str] = []
    lines = log.read_text(encoding="utf-8").split("\n")
    i = 0
    while i < len(lines):
        line, i = lines[i], i + 1
        payload: list[str] = []
        while i < len(lines) and lines[i].startswith("\t"):
            payload.append(lines[i][1:])
            i += 1
        m = STAMP.match(line)
        if m is None:
            out_lines += [line, *("\t" + p for p in payload)]
            continue
        if not keep(m.group(3)):
            continue
        when = datetime.strptime(f"{LOG_YEAR}{m.group(2)}", "%Y%m%d %H:%M:%S.%f") + shift + stamps_only
        rest = EPOCH_FIELDS.sub(
            lambda f: (
                f'"{f[1]}": {float(f[2]) + us / 1e6!r}' if f[1] == "start_time" else f'"{f[1]}": {int(f[2]) + us}'
            ),
            m.group(3),
        )
        payload = [CHROMIUM_TS.sub(lambda t: f'"ts": {float(t[1]) + us!r}', p) for p in payload]
        if payload and '"has_payload": "' in rest:
            digest = hashlib.md5("\n".join(payload).encode(), usedforsecurity=False).hexdigest()
            rest = re.sub(r'"has_payload": "[0-9a-f]+"', f'"has_payload": "{digest}"', rest)
        out_lines += [f"{m.group(1)}{when:%m%d %H:%M:%S.%f}{rest}", *("\t" + p for p in payload)]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(out_lines), encoding="utf-8")
    return out


def _aged(tmp_path: Path, days: int, now: datetime) -> tuple[Path, timedelta]:
    """The log moved to have been written ``days`` and an hour before ``now`` (the hour: whole days still, when the
    test runs on); returns it and how far it moved."""
    began = now - timedelta(days=days, hours=1)
    shift = timedelta(seconds=round((began - _first_chromium_utc(LOG)).total_seconds()))
    return _rewrite(LOG, tmp_path / f"aged{days}" / LOG.name, shift=shift), shift


# --- 1. retention ----------------------------------------------------------------------------------------


def test_a_log_older_than_retention_is_left_out_and_said(store: Store, tmp_path: Path) -> None:
    """A 200-day-old log was stored at the import time (its time in attrs) and showed as this week's compiles.
    Now its records are left out, the import says how many, how old, the retention and the flag; the file is not
    marked imported, so --redate then stores them at the import time, its own time kept."""
    now = datetime.now(UTC)
    log, _ = _aged(tmp_path, 200, now)
    out = _cli(str(log), "--dsn", _dsn(store))
    assert store.row_counts().get("compiles", 0) == 0
    assert store.row_counts().get("cache_events", 0) == 0
    assert store.row_counts().get("kernels", 0) == 0  # the compiles' kernels, kept for ever, stay out with them
    logged = (now - timedelta(days=200, hours=1)).date()
    assert (
        "  12 records older than their table's retention were not stored: cache_events 6 (180 days), compiles 6 "
        f"(180 days), with the 2 kernels of those compiles; logged {logged:%Y-%m-%d}, 200 days ago; the file is "
        "not marked imported: import it again with --redate to store them at the import time, their own time kept "
        "in attrs log_ts (they then count in the current week's reports)"
    ) in out.splitlines()

    before = datetime.now(UTC)
    out = _cli(str(log), "--dsn", _dsn(store), "--redate")
    assert (
        "  12 records older than their table's retention were stored at the import time, their own time kept in "
        "attrs log_ts (--redate): cache_events 6, compiles 6"
    ) in out.splitlines()
    compiles = store.select_events(CompileEvent)
    assert len(compiles) == count_log(LOG).counts["compiles"] == 6
    assert all(before <= c.ts <= datetime.now(UTC) for c in compiles)
    logged_at = sorted(datetime.fromisoformat(c.attrs["log_ts"]) for c in compiles)
    assert logged_at[0].date() == logged
    assert "already imported" in _cli(str(log), "--dsn", _dsn(store), "--redate")


def test_a_log_within_retention_keeps_its_own_time(store: Store, tmp_path: Path) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    log, shift = _aged(tmp_path, 100, now)
    import_trace(log, StoreTarget(store), host="h", now=now)
    stored = sorted(c.ts for c in store.select_events(CompileEvent))
    assert len(stored) == 6
    assert abs(stored[0] - (now - timedelta(days=100, hours=1))) < timedelta(seconds=1)  # it began as the log did
    _, original = read_trace_file(LOG, host="h")
    assert stored == sorted(e.ts + shift for e in original if isinstance(e, CompileEvent))
    assert not any("log_ts" in c.attrs for c in store.select_events(CompileEvent))


def test_redate_in_the_python_api_stamps_the_import_time(store: Store) -> None:
    now = datetime.now(UTC).replace(microsecond=0)
    (report,) = import_trace(LOG, StoreTarget(store), host="h", redate=True, now=now)
    assert report.redated == {"compiles": 6, "cache_events": 6}
    assert not report.expired
    assert {c.ts for c in store.select_events(CompileEvent)} == {now}
    assert {e.ts for e in store.select_events(CacheEvent)} == {now}
    first = min(store.select_events(CompileEvent), key=lambda c: c.attrs["log_ts"])
    assert first.attrs["log_ts"] == "2024-12-06T23:24:45.405000+00:00"


# --- 2. the log's own clock ------------------------------------------------------------------------------


def test_epoch_times_give_the_year_and_the_utc_offset(tmp_path: Path) -> None:
    """The glog stamps read ``1206 15:24:45``: local time on UTC-8, as the chromium events' epoch times show.
    They were read as UTC, in the year the file's mtime gave."""
    report, events = read_trace_file(LOG, host="h")
    assert report.clock == LogClock(LOG_YEAR, timedelta(hours=-8), 8)
    first = min(_ts(e) for e in events if isinstance(e, CompileEvent | CacheEvent))
    assert abs(first - _first_chromium_utc(LOG)) < timedelta(milliseconds=5)

    # The mtime says nothing once the log has epoch times.
    late = tmp_path / "late" / LOG.name
    late.parent.mkdir()
    shutil.copy(LOG, late)
    os.utime(late, (datetime(2031, 1, 1, tzinfo=UTC).timestamp(),) * 2)
    assert sorted(map(_ts, read_trace_file(late, host="h")[1])) == sorted(map(_ts, events))

    # Written at UTC+5:30: the same instants, other stamps.
    india = _rewrite(LOG, tmp_path / "india" / LOG.name, stamps_only=timedelta(hours=13, minutes=30))
    report, moved = read_trace_file(india, host="h")
    assert report.clock == LogClock(LOG_YEAR, timedelta(hours=5, minutes=30), 8)
    assert sorted(map(_ts, moved)) == sorted(map(_ts, events))


def test_a_log_across_new_year_runs_on_into_the_next_year(tmp_path: Path) -> None:
    """Stamped ``1231 23:59:55`` to ``0101 00:00:0x`` on UTC-8: one year for every record put the January ones a
    year before the December ones."""
    first_local = datetime.strptime(f"{LOG_YEAR}{LOG.read_text()[1:21]}", "%Y%m%d %H:%M:%S.%f")
    shift = datetime(2025, 12, 31, 23, 59, 55) - first_local
    log = _rewrite(LOG, tmp_path / LOG.name, shift=shift)
    stamps = [ln[1:5] for ln in log.read_text().splitlines() if STAMP.match(ln)]
    assert (stamps[0], stamps[-1]) == ("1231", "0101")
    report, events = read_trace_file(log, host="h")
    assert report.clock == LogClock(2025, timedelta(hours=-8), 8)
    times = sorted(map(_ts, events))
    assert times[0] >= datetime(2026, 1, 1, 7, 59, 55, tzinfo=UTC)  # 23:59:55 on UTC-8
    assert times[-1] - times[0] < timedelta(seconds=15)  # the log's ten seconds, not a year


def test_compilation_metrics_date_a_log_without_chromium_events() -> None:
    """``comp_metrics.log`` (2024-04-03, UTC-7) has no chromium events; its compilation metrics' ``start_time``
    plus the frame's compile time is when each was logged."""
    report, events = read_trace_file(CORPUS / "comp_metrics.log", host="h")
    assert report.clock == LogClock(LOG_YEAR, timedelta(hours=-7), 3)
    began = min(_ts(e) for e in events if isinstance(e, CompileEvent))
    assert began == datetime(2024, 4, 3, 14, 28, 48, 52368, tzinfo=UTC)  # its start_time, 1712154528.0523684
    assert all(abs(_ts(e) - began) < timedelta(seconds=1) for e in events)  # and the rows its stamps date agree


def test_a_log_without_epoch_times_says_its_times_were_inferred(store: Store, tmp_path: Path) -> None:
    bare = _rewrite(CORPUS / "simple.log", tmp_path / "bare.log", keep=lambda header: '"chromium_event"' not in header)
    os.utime(bare, (datetime(2026, 12, 7, tzinfo=UTC).timestamp(),) * 2)
    report, events = read_trace_file(bare, host="h")
    assert report.clock == LogClock(2026, timedelta(0), 0)
    # its dynamo_start's stamp, V1206 15:18:20.254000, read as UTC
    assert min(map(_ts, events)) == datetime(2026, 12, 6, 15, 18, 20, 254000, tzinfo=UTC)
    out = _cli(str(bare), "--dsn", _dsn(store))
    assert (
        "  times inferred: no record holds an epoch time, so the glog stamps (the writing machine's local time, "
        "without a year) were read as UTC in 2026, the latest year that puts the first record no later than the "
        "file's modification time"
    ) in out.splitlines()


# --- 3. one process, whatever its log is called ----------------------------------------------------------


@pytest.mark.parametrize(
    ("first", "copy", "what"),
    [
        (CORPUS / "comp_failure.log", CORPUS / "multi_rank/dedicated_log_torch_trace_rank_0.log", "a newline more"),
        (CORPUS / "simple.log", CORPUS / "simple_corrupted_json.log", "one payload damaged"),
    ],
    ids=["renamed-copy", "damaged-copy"],
)  # fmt: skip
def test_a_copy_under_another_name_stores_nothing_again(store: Store, first: Path, copy: Path, what: str) -> None:
    # the same process: the same pid and first record
    assert first.read_text().splitlines()[0] == copy.read_text().splitlines()[0], what
    assert first.read_bytes() != copy.read_bytes()
    _cli(str(first), "--dsn", _dsn(store), "--redate")
    n = count_log(first).counts["compiles"]
    assert len(store.select_events(CompileEvent)) == n == 1
    out = _cli(str(copy), "--dsn", _dsn(store), "--redate")
    assert "  1 of the compiles was already stored (imported before, from this process's log): not stored again" in out
    assert len(store.select_events(CompileEvent)) == n


@pytest.mark.parametrize(
    "legacy",
    [
        "cache_hit_miss.log pid 1667746 at 1206 15:24:45.403000",
        "cache_hit_miss.log pid 1667746 at 2026-12-06T15:24:45.403000+00:00",
    ],
    ids=["name-and-stamp", "name-and-inferred-time"],
)  # fmt: skip
def test_rows_an_earlier_version_stored_are_still_found(store: Store, tmp_path: Path, legacy: str) -> None:
    """Earlier versions keyed an uninstrumented process by its log's name, pid and first record's time (the
    stamp, and before that the stamp read as UTC in the year the mtime gave: 2026 for this mtime)."""
    log = tmp_path / LOG.name
    shutil.copy(LOG, log)
    os.utime(log, (datetime(2026, 12, 6, 15, 30, tzinfo=UTC).timestamp(),) * 2)
    now = datetime.now(UTC)
    _, events = read_trace_file(log, host="h")
    old = [
        e.model_copy(update={col.TS: now, col.ATTRS: {**getattr(e, col.ATTRS), PROCESS_ATTR: legacy}}) for e in events
    ]
    for group in events_by_model(old).values():
        store.insert_events(group)
    out = _cli(str(log), "--dsn", _dsn(store), "--redate")
    assert "  6 of the compiles were already stored (imported before, from this process's log): not stored again" in out
    assert len(store.select_events(CompileEvent)) == 6


# --- 4, 5. what is a log -------------------------------------------------------------------------------


def test_a_directory_names_why_each_file_was_skipped(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "mixed"
    folder.mkdir()
    shutil.copy(CORPUS / "comp_failure.log", folder / "comp_failure.log")
    (folder / "empty.log").write_bytes(b"")
    (folder / "notrace.json").write_text('{"a": 1}\n')
    (folder / "simple.log.gz").write_bytes(gzip.compress((CORPUS / "simple.log").read_bytes(), mtime=0))
    (folder / "utf16.log").write_bytes((CORPUS / "simple.log").read_text().encode("utf-16"))
    out = _cli(str(folder), "--dsn", _dsn(store), "--redate").splitlines()
    at = out.index("skipped 4 files that are not TORCH_TRACE logs:")
    assert out[at + 1 : at + 5] == [
        f"  {folder / 'empty.log'}: it holds no records",
        f"  {folder / 'notrace.json'}: its line is not a glog-prefixed JSON record: " + repr('{"a": 1}'),
        f"  {folder / 'simple.log.gz'}: it is gzip-compressed: gunzip it, then import the log",
        f"  {folder / 'utf16.log'}: it is UTF-16 text; a TORCH_TRACE log is UTF-8: convert it, e.g. with iconv -f "
        "UTF-16 -t UTF-8",
    ]
    # the same words as the refusal of the file given alone
    alone = CliRunner().invoke(app, ["import-trace", str(folder / "simple.log.gz"), "--dsn", _dsn(store)], env=ENV)
    assert "(it is gzip-compressed: gunzip it, then import the log)" in alone.output


@pytest.mark.parametrize("junk", ["cut", "mid-character", "stray", "49 lines"])
def test_junk_before_the_first_record_is_damage_not_a_refusal(store: Store, tmp_path: Path, junk: str) -> None:
    damaged = {"cut": 1, "mid-character": 1, "stray": 1, "49 lines": 49}[junk]  # a cut record: its payload too
    content = {
        "cut": LOG.read_bytes()[99:],  # tail -c +100: cut inside the first record's header
        "mid-character": "\u2603 snowman\n".encode()[1:] + LOG.read_bytes(),  # cut inside a character
        "stray": b"starting server...\n" + LOG.read_bytes(),
        "49 lines": b"".join(b"junk %d\n" % i for i in range(49)) + LOG.read_bytes(),
    }[junk]
    log = tmp_path / "head.log"
    log.write_bytes(content)
    out = _cli(str(log), "--dsn", _dsn(store), "--redate")
    assert f"{log}: 6 compiles, 0 failed, " in out
    assert (f", {damaged} damaged records skipped, " if damaged > 1 else ", 1 damaged record skipped, ") in out
    assert "  first damaged record: line 1: " in out
    assert len(store.select_events(CompileEvent)) == 6


def test_fifty_lines_without_a_record_are_refused(store: Store, tmp_path: Path) -> None:
    log = tmp_path / "chatter.log"
    log.write_bytes(b"".join(b"junk %d\n" % i for i in range(50)) + LOG.read_bytes())
    res = CliRunner().invoke(app, ["import-trace", str(log), "--dsn", _dsn(store)], env=ENV)
    assert res.exit_code == 2, res.output
    assert (
        f"{log} is not a TORCH_TRACE log (none of its first 50 lines is a glog-prefixed JSON record (the first: "
        "'junk 0'))"
    ) in res.output


# --- 6, 7. what the import says ------------------------------------------------------------------------


def test_labels_given_to_a_reimport_are_said_not_applied(store: Store) -> None:
    log = CORPUS / "simple.log"
    _cli(str(log), "--dsn", _dsn(store), "--redate", "--model", "a", "--host", "h1")
    out = _cli(str(log), "--dsn", _dsn(store), "--redate", "--model", "b", "--hw-pool", "p", "--host", "h1")
    assert out.splitlines()[1:] == [
        "  the labels given (--model b, --hw-pool p) were not applied: its rows keep the first import's "
        "(model a, no hw-pool)"
    ]
    assert {(c.model, c.hw_pool) for c in store.select_events(CompileEvent)} == {("a", "")}
    assert len(_cli(str(log), "--dsn", _dsn(store), "--model", "a").splitlines()) == 1  # the same labels: no note


def test_the_summary_counts_in_words_and_ends_with_a_total(store: Store, tmp_path: Path) -> None:
    simple = CORPUS / "simple.log"
    headers = [json.loads(m[1]) for m in map(HEADER.match, simple.read_text().splitlines()) if m]
    kinds = [h.get("artifact", {}).get("name", "") for h in headers]
    assert kinds.count("aot_forward_graph_fw_metadata") == kinds.count("aotautograd_cache_hash") == 1
    out = _cli(str(simple), "--dsn", _dsn(store), "--redate").splitlines()
    assert out[0] == (
        f"{simple}: 1 compile, 0 failed, 0 graph breaks, cache fx_graph_miss=1, 2 kernels, 0 shape guards, 3 blobs, "
        "0 damaged records skipped, 5 records of kinds no compile record uses (aot_forward_graph_fw_metadata 1, "
        "aot_inference_graph 1, aotautograd_cache_hash 1, 2 other kinds 2)"
    )
    assert len(out) == 2  # and the line of the records re-dated; no total for one file

    folder = tmp_path / "more"
    folder.mkdir()
    shutil.copy(simple, folder / "copy.log")
    shutil.copy(CORPUS / "comp_failure.log", folder / "comp_failure.log")
    shutil.copy(CORPUS / "README.md", folder / "README.md")
    out = _cli(str(folder), "--dsn", _dsn(store), "--redate").splitlines()
    digest = hashlib.sha256(simple.read_bytes()).hexdigest()[:12]
    assert out[0] == f"{folder / 'comp_failure.log'}: " + (
        "1 compile, 1 failed, 0 graph breaks, cache none, 0 kernels, 0 shape guards, 1 blob, 0 damaged records "
        "skipped, 0 records of kinds no compile record uses"
    )
    assert (
        f"{folder / 'copy.log'}: already imported as simple.log (same content, sha256 {digest}); nothing added" in out
    )
    assert out[-1] == (
        "total over 3 files: 1 log imported (1 compile stored, 1 record re-dated), 1 already imported, 1 skipped as "
        "not TORCH_TRACE logs"
    )
