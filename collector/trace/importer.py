"""``import-trace``: TORCH_TRACE log files → compile, cache, graph-break, recompile and kernel records.

The importer reads each file with the shared envelope decoder, assembles records with the shared
:class:`~inferensics.collector.trace.assembler.CompileAssembler` and writes them to a store in batches.
Damaged lines and payloads are counted and skipped, never fatal.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from inferensics.collector.trace.assembler import AssemblyContext, AssemblyStats, CompileAssembler
from inferensics.collector.trace.envelope import Damaged, iter_file_envelopes
from inferensics.schema import columns as col
from inferensics.schema.table import Event

if TYPE_CHECKING:
    from inferensics.schema.store import Store


@dataclass
class FileReport:
    """What one file held."""

    path: str
    envelopes: int = 0
    damaged_lines: int = 0
    stats: AssemblyStats = field(default_factory=AssemblyStats)
    rows: Counter[str] = field(default_factory=Counter)


def trace_files(path: Path) -> list[Path]:
    """The trace files under ``path`` (itself when a file), sorted; hidden files are skipped."""
    if path.is_file():
        return [path]
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".") and _looks_like_trace(p))


def _looks_like_trace(p: Path) -> bool:
    if p.suffix in (".log", ".txt", ".trace"):
        return True
    try:
        with p.open("rb") as fh:
            head = fh.read(64)
    except OSError:
        return False
    return head[:1] in (b"V", b"I", b"W", b"E") and head[1:5].isdigit()


def _lines(path: Path) -> Iterator[str]:
    # newline="\n": lines end at "\n" only and keep any "\r" (universal newlines would split a payload
    # line at a "\r" inside it and report a sound record as damaged).
    with path.open("r", encoding="utf-8", errors="replace", newline="\n") as fh:
        yield from fh


def read_trace_file(
    path: Path,
    *,
    host: str = "",
    model: str = "",
    hw_pool: str = "",
    store: Store | None = None,
) -> tuple[FileReport, list[Event]]:
    """Decode and assemble one file; blobs go to ``store`` when given. Returns the report and the records."""
    events: list[Event] = []
    report = FileReport(str(path))
    put_blob = None
    if store is not None:
        target = store

        def put_blob(data: bytes, kind: str, attrs: Mapping[str, str]) -> str:
            return target.put_blob(data, kind, host=host, attrs=attrs)

    ctx = AssemblyContext(
        host=host or socket.gethostname(), model=model, hw_pool=hw_pool, source="trace", attrs={"file": path.name}
    )
    assembler = CompileAssembler(ctx, events.append, put_blob)
    mtime = datetime.fromtimestamp(path.stat().st_mtime, UTC)
    for item in iter_file_envelopes(_lines(path), year=_log_year(path, mtime)):
        if isinstance(item, Damaged):
            report.damaged_lines += 1
            continue
        report.envelopes += 1
        assembler.feed(item)
    assembler.finish()
    report.stats = assembler.stats
    events = [_within_ttl(e) for e in events]
    for e in events:
        report.rows[type(e).TABLE.name] += 1
    return report, events


def _log_year(path: Path, mtime: datetime) -> int:
    """glog stamps carry no year: take the latest year that puts the first record no later than the file's mtime."""
    for item in iter_file_envelopes(_lines(path), year=mtime.year):
        if not isinstance(item, Damaged) and item.ts is not None:
            return mtime.year - 1 if item.ts > mtime else mtime.year
    return mtime.year


def _within_ttl(event: Event) -> Event:
    """Records older than their table's TTL would vanish on insert: stamp them now, keep the log time in attrs."""
    ttl = type(event).TABLE.ttl_days
    ts = getattr(event, col.TS, None)
    if not ttl or not isinstance(ts, datetime) or ts > datetime.now(UTC) - timedelta(days=ttl - 1):
        return event
    update: dict[str, object] = {col.TS: datetime.now(UTC)}
    if col.ATTRS in type(event).model_fields:
        update[col.ATTRS] = {**dict(getattr(event, col.ATTRS, {})), "log_ts": ts.isoformat()}
    return event.model_copy(update=update)


def import_trace(path: Path, store: Store, *, host: str = "", model: str = "", hw_pool: str = "") -> list[FileReport]:
    """Import every trace file under ``path`` into ``store``; one report per file.

    Raises:
        FileNotFoundError: ``path`` does not exist.
    """
    # Arrow comes with the store (the service extra); the host SDK's trace sink imports this package too.
    from inferensics.schema.arrow import events_by_model

    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    reports: list[FileReport] = []
    for file in trace_files(path):
        report, events = read_trace_file(file, host=host, model=model, hw_pool=hw_pool, store=store)
        for group in events_by_model(events).values():
            store.insert_events(group)
        reports.append(report)
    return reports
