"""``inferensics import-trace``: TORCH_TRACE logs into the store."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from inferensics.cli.console import console
from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.options import DataDirOption, DsnOption, dsn_from
from inferensics.cli.service_commands import ServiceOption, TokenOption
from inferensics.cli.store_commands import writable_store

if TYPE_CHECKING:
    from inferensics.collector.trace.importer import ImportTarget, Recorded
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
) -> None:
    """Import TORCH_TRACE logs: one compile record per compile, with cache events, graph breaks and blobs.

    Importing a file again adds nothing (each file content is imported once per store), and a compile is
    stored once: the log of a process the host SDK instrumented adds only what the SDK did not record, and a
    log that grew since its import adds only its new compiles. Files that are not
    TORCH_TRACE logs are refused: exit 2 when PATH itself is one (the other paths given are imported first),
    skipped and listed inside a directory. While `inferensics serve` owns the store, pass --service: the
    records go through it (a token with the ingest and read roles).
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
    reports = []
    with _target(dsn, service, token) as target:
        for p in given:
            reports += import_trace(p, target, host=host, model=model, hw_pool=hw_pool)
    skipped = [r for r in reports if r.not_trace]
    imported = [r for r in reports if not r.not_trace]
    for r in imported:
        if r.already_imported:
            console.print(f"{r.path}: already imported (same content, sha256 {r.sha256[:12]}); nothing added")
            continue
        if r.refused:
            continue
        s = r.stats
        cache = ", ".join(f"{k}={v}" for k, v in sorted(s.cache.items())) or "none"
        console.print(
            f"{r.path}: {s.compiles} compiles, {s.failures} failed, {s.graph_breaks} graph breaks, "
            f"cache {cache}, {s.kernels} kernels, {s.shape_guards} shape guards, {s.blobs} blobs, "
            f"{r.damaged_lines + s.damaged_payloads} damaged records skipped, "
            f"{sum(s.unused.values())} records of kinds no compile record uses"
        )
        if r.first_damage:
            console.print(f"  first damaged record: {r.first_damage} (skipped; the rest of the file was imported)")
        if r.already_recorded:
            how = "recorded live by the host SDK" if r.instrumented else "imported before, from this process's log"
            console.print(f"  {r.already_recorded} of the compiles were already stored ({how}): not stored again")
        if r.completed:
            ids = ", ".join(str(c) for c, _ in r.completed[:5]) + (" ..." if len(r.completed) > 5 else "")
            console.print(
                f"  {len(r.completed)} compiles an earlier import of this log stored incomplete were completed: {ids}"
            )
        if r.left_incomplete:
            ids = ", ".join(str(c) for c, _ in r.left_incomplete[:5]) + (" ..." if len(r.left_incomplete) > 5 else "")
            console.print(
                f"  {len(r.left_incomplete)} compiles an earlier import of this log stored incomplete are complete "
                f"in it but stay incomplete: {ids} (the service only adds rows; to replace them, stop the service "
                "and import this log with --dsn naming its store)"
            )
        if r.unchecked:
            console.print(f"  {r.unchecked}: every compile was stored, whether or not it was stored before")
    if skipped:
        names = ", ".join(Path(r.path).name for r in skipped)
        console.print(f"skipped {len(skipped)} files that are not TORCH_TRACE logs: {names}")
    if refused:
        done = f" ({len(imported)} logs imported)" if imported else ""
        fail("; ".join(refused) + f": {what_to_pass}{done}")
    if any(r.refused for r in imported):
        fail("; ".join(f"{r.path}: {r.refused}" for r in imported if r.refused))
    if not imported:
        where = ", ".join(str(p) for p in given)
        fail(f"no TORCH_TRACE logs under {where}" + (f" ({len(skipped)} other files skipped)" if skipped else ""))


def register(app: typer.Typer) -> None:
    """Add ``import-trace`` to the app."""
    app.command("import-trace")(import_trace_command)
