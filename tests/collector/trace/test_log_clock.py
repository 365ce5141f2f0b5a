"""A log's clock is read in the one pass that decodes the log, and follows a daylight-saving change.

The importer read each log two or three times (once for the clock, once to assemble it), and gave a whole log one
UTC offset: records after a daylight-saving change were an hour off. Real parts: the shared corpus of real
TORCH_TRACE logs, and copies of one moved onto the nights US clocks changed in 2024.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import IO, Any

import pytest

from inferensics.collector.trace import read_trace_file
from inferensics.collector.trace.log_clock import LogClock
from inferensics.schema import CacheEvent
from inferensics.schema import columns as col
from inferensics.schema.processes import COMPILE_SEQ_ATTR
from inferensics.schema.table import Event
from tests.collector.trace.test_import_corpus import FILES
from tests.collector.trace.test_import_time_and_copies import LOG, LOG_YEAR, STAMP, _rewrite

PST, PDT = timedelta(hours=-8), timedelta(hours=-7)


class _CountingFile:
    """A file whose lines are counted as they are read."""

    def __init__(self, fh: IO[Any], lines: list[int]) -> None:
        self._fh, self._lines = fh, lines

    def __enter__(self) -> _CountingFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self._fh.close()

    def __iter__(self) -> Iterator[Any]:
        for line in self._fh:
            self._lines[-1] += 1
            yield line


@pytest.mark.parametrize("path", FILES, ids=[p.name for p in FILES])
def test_a_log_is_read_once(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every corpus log, whether its clock is known after eight records or only at its end, is opened once and
    its lines read once."""
    opened = Path.open
    lines: list[int] = []

    def counting_open(self: Path, *args: Any, **kwargs: Any) -> Any:
        fh = opened(self, *args, **kwargs)
        if self != path:
            return fh
        lines.append(0)
        return _CountingFile(fh, lines)

    monkeypatch.setattr(Path, "open", counting_open)
    report, _ = read_trace_file(path, host="h")
    monkeypatch.undo()
    assert report.envelopes > 0
    text = path.read_bytes()
    assert lines == [text.count(b"\n") + (not text.endswith(b"\n"))]  # one open, every line read once


def _ts(event: Event) -> datetime:
    ts = getattr(event, col.TS)
    assert isinstance(ts, datetime)
    return ts


def _compile(event: Event) -> str:
    """The compile a row belongs to: its id, and ``#n`` after the n-th reuse of that id (a Dynamo reset)."""
    seq = getattr(event, col.ATTRS, {}).get(COMPILE_SEQ_ATTR)
    return str(getattr(event, col.COMPILE_ID, "")) + (f"#{seq}" if seq else "")


def _times(events: list[Event], shift: timedelta = timedelta(0)) -> list[tuple[str, str, datetime]]:
    return sorted((type(e).__name__, _compile(e), _ts(e) - shift) for e in events)


def _wall(header: str, year: int) -> datetime:
    """The local time a record header's glog stamp names in ``year``."""
    m = STAMP.match(header)
    assert m is not None
    return datetime.strptime(f"{year}{m.group(2)}", "%Y%m%d %H:%M:%S.%f")


def _headers(path: Path) -> list[int]:
    """Indexes of the log's record headers among its lines."""
    return [i for i, line in enumerate(path.read_text(encoding="utf-8").split("\n")) if STAMP.match(line)]


def _across_a_change(tmp_path: Path, *, split: int, change: datetime, forward: bool) -> tuple[Path, timedelta]:
    """``LOG`` moved so that its record header number ``split`` is logged at ``change`` (UTC), on a machine in
    California: its clock goes forward (PST to PDT) or back (PDT to PST) at that instant. Returns the log and how
    far it moved."""
    lines = LOG.read_text(encoding="utf-8").split("\n")
    at = _headers(LOG)[split]
    shift = (change + PST).replace(tzinfo=None) - _wall(lines[at], LOG_YEAR)  # still on PST, epoch times moved along
    moved = _rewrite(LOG, tmp_path / "moved.log", shift=shift)
    lines = moved.read_text(encoding="utf-8").split("\n")
    for i in _headers(moved):
        if (i >= at) == forward:  # on PDT: an hour later on the wall
            m = STAMP.match(lines[i])
            assert m is not None
            when = _wall(lines[i], change.year) + timedelta(hours=1)
            lines[i] = f"{m.group(1)}{when:%m%d %H:%M:%S.%f}{m.group(3)}"
    out = tmp_path / LOG.name
    out.write_text("\n".join(lines), encoding="utf-8")
    return out, shift


@pytest.mark.parametrize(
    ("change", "forward", "before", "after"),
    [
        (datetime(2024, 3, 10, 10, tzinfo=UTC), True, PST, PDT),  # 02:00 PST is 03:00 PDT
        (datetime(2024, 11, 3, 9, tzinfo=UTC), False, PDT, PST),  # 02:00 PDT is 01:00 PST
    ],
    ids=["spring-forward", "fall-back"],
)
def test_a_log_across_a_daylight_saving_change_is_dated_on_both_sides(
    tmp_path: Path, change: datetime, forward: bool, before: timedelta, after: timedelta
) -> None:
    """The clock changes as the fourth of six compiles (the second ``1/0``, after a Dynamo reset) begins, at a record
    with an epoch time (a chromium event): every record on both sides is dated as the original log's, moved; the
    clock says where the offset changed."""
    log, shift = _across_a_change(tmp_path, split=185, change=change, forward=forward)
    walls = [_wall(line, 2024) for line in log.read_text(encoding="utf-8").split("\n") if STAMP.match(line)]
    assert walls[185] == (change + after).replace(tzinfo=None)  # the wall clock the change set
    assert abs(walls[185] - walls[184] - (after - before)) < timedelta(seconds=1)  # it jumped an hour
    _, original = read_trace_file(LOG, host="h")
    report, events = read_trace_file(log, host="h")
    first_half = [e for e in events if _ts(e) < change]
    second_half = [e for e in events if _ts(e) >= change]
    assert {_compile(e) for e in first_half if isinstance(e, CacheEvent)} == {"1/0"}
    assert {_compile(e) for e in second_half if isinstance(e, CacheEvent)} == {"1/0#1", "1/0#2"}
    assert _times(events, shift) == _times(original)
    assert report.clock == LogClock(2024, before, 8, ((change, after),))


def test_records_before_the_next_epoch_time_keep_the_offset_before_the_change(tmp_path: Path) -> None:
    """The clock goes forward just after a chromium event; the dynamo_start that follows has nothing to say so, and
    the compile row and cache lookups it dates are an hour late. The next epoch time puts the rest right."""
    change = datetime(2024, 3, 10, 10, tzinfo=UTC)
    log, shift = _across_a_change(tmp_path, split=186, change=change, forward=True)
    _, original = read_trace_file(LOG, host="h")
    report, events = read_trace_file(log, host="h")
    assert report.clock is not None
    assert [offset for _, offset in report.clock.shifts] == [PDT]
    late = {(n, c) for n, c, t in _times(events, shift) if t not in {t for _, _, t in _times(original)}}
    assert late == {("CacheEvent", "1/0#1"), ("CompileEvent", "1/0#1")}
    hour = timedelta(hours=1)
    moved = [(n, c, t - hour if (n, c) in late else t) for n, c, t in _times(events, shift)]
    assert sorted(moved) == _times(original)
