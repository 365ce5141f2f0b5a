"""``inferensics import-trace``: TORCH_TRACE logs into the store."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from inferensics.cli.console import console
from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.options import DataDirOption, DsnOption, dsn_from
from inferensics.cli.service_commands import ServiceOption, TokenOption
from inferensics.cli.store_paths import writable_store

if TYPE_CHECKING:
    from inferensics.collector.trace.importer import FileReport, ImportTarget, Recorded
    from inferensics.schema.table import Event

ROLES_HINT = "import-trace through the service needs a token with the ingest and read roles (admin has both)"
EXPORT_WAIT_S = 120.0
"""How long each chunk of imported rows may take to be acknowledged by the service."""


class ImportRefusedError(Exception):
    """The service did not take an import's rows; the message says why and what to do."""


class ServiceTarget:
    """A collector service as the target of an import, for a store it owns (chDB lets one process open it):
    rows through its OTLP endpoint, answered once durable in its spool; blobs through its blob API (their
    kind kept; the host and attributes a store would index them with are not sent)."""

    def __init__(self, url: str, token: str | None) -> None:
        from inferensics.collector.client import ServiceClient

        self.url, self.token = url, token
        self.client = ServiceClient(url, token=token, timeout=300)

    def has_blob(self, sha256: str) -> bool:
        """Whether the service holds the blob (a read of it)."""
        from inferensics.collector.client import ServiceError

        try:
            self.client.get_blob(sha256)
        except ServiceError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def put_blob(self, data: bytes, kind: str, *, host: str = "", attrs: Mapping[str, str] | None = None) -> str:
        """Upload the blob."""
        del host, attrs  # not part of the blob API
        return self.client.put_blob(data, kind)

    def insert_events(self, events: list[Event]) -> object:
        """Export the rows and wait until the service holds them.

        Raises:
            ImportRefusedError: the service refused them or did not answer.
        """
        from inferensics.cli.service_records import record_through_service

        table = type(events[0]).TABLE.name if events else ""
        ok, line = record_through_service(self.url, self.token, events, table, timeout_s=EXPORT_WAIT_S)
        if not ok:
            raise ImportRefusedError(line)
        return len(events)

    def recorded_compiles(self, processes: Sequence[str]) -> set[Recorded]:
        """What the service's store holds for these processes (named query ``recorded_compiles``).

        Raises:
            CannotCheckError: the service has no such query (started otherwise than by ``inferensics serve``,
                or older than this command).
        """
        from inferensics.collector.client import ServiceError
        from inferensics.collector.trace.importer import CannotCheckError

        try:
            frame = self.client.query("recorded_compiles", processes=list(processes))
        except ServiceError as exc:
            if exc.status in (400, 404):
                raise CannotCheckError(
                    f"the service at {self.url} cannot say which compiles it holds (no query recorded_compiles: "
                    "a service older than this command, or one not started by `inferensics serve`); run this "
                    "version's `inferensics serve`"
                ) from exc
            raise
        return {(str(k), str(c), str(q)) for k, c, q in frame.select("kind", "compile_id", "seq").iter_rows()}


@contextmanager
def _target(dsn: str | None, service: str | None, token: str | None) -> Iterator[ImportTarget]:
    """The store (``--dsn``) or the service that owns it (``--service``); their errors become one line."""
    from inferensics.collector.client import ServiceError
    from inferensics.schema.store import Store, StoreError

    try:
        if service:
            target = ServiceTarget(service, token)
            try:
                yield target
            finally:
                target.client.close()
        else:
            from inferensics.collector.trace.importer import StoreTarget

            with Store.open(dsn) as store:
                store.create_if_empty()
                yield StoreTarget(store)
    except StoreError as exc:
        fail(str(exc))
    except ImportRefusedError as exc:
        fail(f"{exc} (nothing of the file is marked imported: run the command again)")
    except ServiceError as exc:
        fail(f"{exc.message}: {ROLES_HINT}" if exc.status in (401, 403) else exc.message)


RedateOption = Annotated[
    bool,
    typer.Option(
        "--redate",
        help="Store records older than their table's retention at the import time, their own time kept in "
        "attrs log_ts; they then count in the current week's reports (without it they are left out, counted).",
    ),
]


@needs_extra("service", "import-trace")
def import_trace_command(  # noqa: PLR0917 - typer maps each parameter to an option
    ctx: typer.Context,
    path: Annotated[
        list[Path],
        typer.Argument(
            metavar="PATH...", help="TORCH_TRACE log files or directories of them (several: a shell glob works)."
        ),
    ],
    dsn: DsnOption = None,
    data_dir: DataDirOption = None,
    service: ServiceOption = None,
    token: TokenOption = None,
    host: Annotated[str, typer.Option(help="Host label for the imported records (default: this host).")] = "",
    model: Annotated[str, typer.Option(help="Model label for the imported records.")] = "",
    hw_pool: Annotated[str, typer.Option(help="Hardware pool label for the imported records.")] = "",
    redate: RedateOption = False,
) -> None:
    """Import TORCH_TRACE logs: one compile record per compile, with cache events, graph breaks and blobs.

    Records keep the time they were logged (the log's epoch times date its local-time glog stamps; without any,
    the file's mtime gives the year and the stamps are read as UTC, as the output says). Records older than
    their table's retention are left out and counted, unless --redate. Importing a file again adds nothing
    (each file content is imported once per store), and a compile is stored once: the log of a process the
    host SDK instrumented adds only what the SDK did not record, a copy of a log under another name adds
    nothing, and a log that grew since its import adds only its new compiles. Files that are not
    TORCH_TRACE logs are refused: exit 2 when PATH itself is one (the other paths given are imported first),
    skipped and listed with the reason inside a directory. While `inferensics serve` owns the store, pass
    --service: the records go through it (a token with the ingest and read roles).
    """
    from inferensics.collector.trace.importer import import_trace, not_trace_reason

    dsn = dsn_from(ctx, dsn, data_dir)
    if not service:
        writable_store(dsn, "`inferensics import-trace` imports into a store, or makes one")
    refused, given = [], []
    for p in path:
        if not p.exists():
            refused.append(f"{p} does not exist")
        elif p.is_file() and (reason := not_trace_reason(p)):
            refused.append(f"{p} is not a TORCH_TRACE log ({reason})")
        else:
            given.append(p)
    what_to_pass = "pass TORCH_TRACE log files (written under TORCH_TRACE=<dir>) or directories of them"
    if not given:
        fail("; ".join(refused) + f": {what_to_pass}")
    reports: list[FileReport] = []
    now = datetime.now(UTC)
    with _target(dsn, service, token) as target:
        for p in given:
            reports += import_trace(p, target, host=host, model=model, hw_pool=hw_pool, redate=redate, now=now)
    labels = {"model": model, "hw_pool": hw_pool, "host": host}
    skipped = [r for r in reports if r.not_trace]
    imported = [r for r in reports if not r.not_trace]
    for r in imported:
        for line in _file_lines(r, {k: v for k, v in labels.items() if v}, now):
            console.print(line)
    if skipped:
        console.print(f"skipped {_count(len(skipped), 'file')} that {_are(len(skipped))} not TORCH_TRACE logs:")
        for r in skipped[:SKIPPED_LISTED]:
            console.print(f"  {r.path}: {r.not_trace}")
        if len(skipped) > SKIPPED_LISTED:
            console.print(f"  and {len(skipped) - SKIPPED_LISTED} more")
    if len(reports) + len(refused) > 1:
        console.print(_total_line(reports, len(refused)))
    if refused:
        done = f" ({_count(len(imported), 'log')} imported)" if imported else ""
        fail("; ".join(refused) + f": {what_to_pass}{done}")
    if any(r.refused for r in imported):
        fail("; ".join(f"{r.path}: {r.refused}" for r in imported if r.refused))
    if not imported:
        where = ", ".join(str(p) for p in given)
        fail(f"no TORCH_TRACE logs under {where}" + (f" ({len(skipped)} other files skipped)" if skipped else ""))


SKIPPED_LISTED = 20
"""Files of a directory skipped as not TORCH_TRACE logs that are named, each with its reason; the rest counted."""
UNUSED_KINDS_NAMED = 3
"""Kinds of records no compile record uses named in a file's line, with their counts; the rest counted."""


def _count(n: int, noun: str, plural: str = "") -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _are(n: int) -> str:
    return "is" if n == 1 else "are"


def _ids(keys: Sequence[tuple[str, str]]) -> str:
    return ", ".join(str(c) for c, _ in keys[:5]) + (" ..." if len(keys) > 5 else "")


def _unused(unused: Mapping[str, int]) -> str:
    total = sum(unused.values())
    if not total:
        return "0 records of kinds no compile record uses"
    top = sorted(unused.items(), key=lambda kv: (-kv[1], kv[0]))
    named = [f"{kind} {n}" for kind, n in top[:UNUSED_KINDS_NAMED]]
    if len(top) > UNUSED_KINDS_NAMED:
        rest = top[UNUSED_KINDS_NAMED:]
        named.append(f"{_count(len(rest), 'other kind')} {sum(n for _, n in rest)}")
    kinds = "a kind" if len(top) == 1 else "kinds"
    return f"{_count(total, 'record')} of {kinds} no compile record uses ({', '.join(named)})"


def _labels(labels: Mapping[str, str], *, flags: bool = True) -> str:
    names = {k: ("--" if flags else "") + k.replace("_", "-") for k in labels}
    return ", ".join(f"{names[k]} {v}" if v else f"no {names[k]}" for k, v in labels.items())


def _file_lines(r: FileReport, given: Mapping[str, str], now: datetime) -> list[str]:
    """What the import of one file prints: its summary line, then a line for each thing to know."""
    from inferensics.collector.trace.retention import LOG_TS_ATTR

    if r.already_imported:
        earlier = f" as {r.earlier['file']}" if r.earlier.get("file") else ""
        lines = [f"{r.path}: already imported{earlier} (same content, sha256 {r.sha256[:12]}); nothing added"]
        if all(k in r.earlier for k in given):  # the marker names the first import's labels
            given = {k: v for k, v in given.items() if r.earlier[k] != v}
            first = f"the first import's ({_labels({k: r.earlier[k] for k in given}, flags=False)})"
        else:
            first = "the labels of its first import"
        if given:
            lines.append(f"  the labels given ({_labels(given)}) were not applied: its rows keep {first}")
        return lines
    if r.refused:
        return []
    s = r.stats
    cache = ", ".join(f"{k}={v}" for k, v in sorted(s.cache.items())) or "none"
    lines = [
        f"{r.path}: {_count(s.compiles, 'compile')}, {s.failures} failed, {_count(s.graph_breaks, 'graph break')}, "
        f"cache {cache}, {_count(s.kernels, 'kernel')}, {_count(s.shape_guards, 'shape guard')}, "
        f"{_count(s.blobs, 'blob')}, {_count(r.damaged_lines + s.damaged_payloads, 'damaged record')} skipped, "
        f"{_unused(s.unused)}"
    ]
    if r.first_damage:
        if "the file ends inside a record" in r.first_damage:
            lines.append(f"  damaged: {r.first_damage} (the records before it were imported)")
        else:
            lines.append(f"  first damaged record: {r.first_damage} (skipped; the rest of the file was imported)")
    if r.clock is not None and r.clock.inferred:
        lines.append(
            f"  times inferred: no record holds an epoch time, so the glog stamps (the writing machine's local time, "
            f"without a year) were read as UTC in {r.clock.year}, the latest year that puts the first record no "
            "later than the file's modification time"
        )
    if r.already_recorded:
        how = "recorded live by the host SDK" if r.instrumented else "imported before, from this process's log"
        lines.append(
            f"  {r.already_recorded} of the compiles {'was' if r.already_recorded == 1 else 'were'} already stored "
            f"({how}): not stored again"
        )
    if r.completed:
        lines.append(
            f"  {_count(len(r.completed), 'compile')} an earlier import of this log stored incomplete "
            f"{'was' if len(r.completed) == 1 else 'were'} completed: {_ids(r.completed)}"
        )
    if r.left_incomplete:
        one = len(r.left_incomplete) == 1
        lines.append(
            f"  {_count(len(r.left_incomplete), 'compile')} an earlier import of this log stored incomplete "
            f"{'is' if one else 'are'} complete in it but stay{'s' if one else ''} incomplete: "
            f"{_ids(r.left_incomplete)} (the service only adds rows; to replace them, stop the service and import "
            "this log with --dsn naming its store)"
        )
    if r.unchecked:
        lines.append(f"  {r.unchecked}: every compile was stored, whether or not it was stored before")
    if r.expired:
        lines.append(_expired_line(r, now))
    if r.redated:
        n = sum(r.redated.values())
        lines.append(
            f"  {_count(n, 'record')} older than {'its' if n == 1 else 'their'} table's retention "
            f"{'was' if n == 1 else 'were'} stored at the import time, {'its' if n == 1 else 'their'} own time "
            f"kept in attrs {LOG_TS_ATTR} (--redate): {_tables(r.redated)}"
        )
    return lines


def _tables(counts: Mapping[str, int]) -> str:
    return ", ".join(f"{table} {n}" for table, n in sorted(counts.items()))


def _expired_line(r: FileReport, now: datetime) -> str:
    from inferensics.collector.trace.retention import LOG_TS_ATTR

    old = {t: n for t, n in r.expired.items() if r.retention.get(t)}
    n = sum(old.values())
    tables = ", ".join(f"{t} {k} ({r.retention[t]} days)" for t, k in sorted(old.items()))
    along = sum(r.expired.values()) - n
    kernels = f", with the {_count(along, 'kernel')} of those compiles" if along else ""
    when = ""
    if r.expired_span is not None:
        oldest, newest = r.expired_span
        if oldest.date() == newest.date():
            when = f"; logged {oldest:%Y-%m-%d}, {_count((now - oldest).days, 'day')} ago"
        else:
            when = f"; logged {oldest:%Y-%m-%d} to {newest:%Y-%m-%d}, {(now - oldest).days} to "
            when += f"{_count((now - newest).days, 'day')} ago"
    return (
        f"  {_count(n, 'record')} older than {'its' if n == 1 else 'their'} table's retention "
        f"{'was' if n == 1 else 'were'} not stored: {tables}{kernels}{when}; the file is not marked imported: "
        "import it again with --redate to store them at the import time, their own time kept in attrs "
        f"{LOG_TS_ATTR} (they then count in the current week's reports)"
    )


def _total_line(reports: Sequence[FileReport], refused_paths: int) -> str:
    """One line over every file of a multi-file import."""
    read = [r for r in reports if not r.not_trace and not r.already_imported and not r.refused]
    parts = [f"{_count(len(read), 'log')} imported"]
    stored = sum(r.rows.get("compiles", 0) for r in read)
    inner = [f"{_count(stored, 'compile')} stored"]
    if again := sum(r.already_recorded for r in read):
        inner.append(f"{again} already stored")
    if damaged := sum(r.damaged_lines + r.stats.damaged_payloads for r in read):
        inner.append(f"{_count(damaged, 'damaged record')} skipped")
    if expired := sum(sum(r.expired.values()) for r in read):
        inner.append(f"{_count(expired, 'record')} older than retention not stored")
    if redated := sum(sum(r.redated.values()) for r in read):
        inner.append(f"{_count(redated, 'record')} re-dated")
    parts[0] += f" ({', '.join(inner)})"
    if already := sum(r.already_imported for r in reports):
        parts.append(f"{already} already imported")
    if refused := sum(bool(r.refused) for r in reports):
        parts.append(f"{refused} refused")
    if skipped := sum(bool(r.not_trace) for r in reports):
        parts.append(f"{skipped} skipped as not TORCH_TRACE logs")
    if refused_paths:
        parts.append(f"{_count(refused_paths, 'path')} given refused")
    return f"total over {_count(len(reports), 'file')}: {', '.join(parts)}"


def register(app: typer.Typer) -> None:
    """Add ``import-trace`` to the app."""
    app.command("import-trace")(import_trace_command)
