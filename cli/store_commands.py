"""``inferensics init`` and ``inferensics status``: create or migrate the store, and report on it."""

from __future__ import annotations

import typer
from rich.table import Table

from inferensics.cli.console import console
from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.options import DataDirOption, DsnOption, dsn_from
from inferensics.cli.service_commands import ServiceOption, TokenOption, print_service_status
from inferensics.cli.store_paths import existing_store, writable_store
from inferensics.schema.migrations import LATEST_VERSION, newer_store_text


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


@needs_extra("service", "init")
def init(ctx: typer.Context, dsn: DsnOption = None, data_dir: DataDirOption = None) -> None:
    """Create the store, or migrate it to the latest schema, and print the schema version.

    A store a later release migrated is refused (exit 1): this release must not write to it."""
    from inferensics.schema.store import Store, StoreError, StoreNewerError, error_line

    dsn = dsn_from(ctx, dsn, data_dir)
    writable_store(dsn, "`inferensics init` makes a store")
    try:
        with Store.open(dsn) as store:
            before = store.schema_version()
            version = store.migrate()
    except StoreNewerError as exc:
        fail(str(exc), code=1)  # the store's state, as `status` says it: not a usage error
    except StoreError as exc:
        fail(str(exc))
    except Exception as exc:  # the driver's own, reading the version before migrating
        fail(f"cannot read store {dsn or 'the default store'}: {error_line(exc)}")
    action = "created" if before == 0 else ("migrated" if version != before else "up to date")
    console.print(f"store {store.dsn}: {action}, schema version {version}")


@needs_extra("service", "status")
def status(
    ctx: typer.Context,
    dsn: DsnOption = None,
    data_dir: DataDirOption = None,
    service: ServiceOption = None,
    token: TokenOption = None,
) -> None:
    """Show the store, its schema version, rows and bytes on disk per table, and the store folder's size.

    With --service URL (or $INFERENSICS_SERVICE_URL) it asks that running service, which also reports
    its spool; a store held by a running service is reached through it.
    """
    from inferensics.schema.store import Store, StoreError

    dsn = dsn_from(ctx, dsn, data_dir)
    if service:
        print_service_status(service, token)
        return
    parsed = existing_store(dsn, data_dir, code=1)
    try:
        with Store.open(parsed) as store:
            version = store.schema_version()
            counts = store.row_counts() if version else {}
            disk = store.disk_bytes() if version else {}
            size = store.data_dir_bytes()
    except StoreError as exc:
        fail(str(exc), code=1)  # unavailable (refused, held by a service, ...): a monitoring check's 1, not usage
    console.print(f"store        {store.dsn}")
    if version == 0:
        state = "not initialised: run `inferensics init`"
    elif version > LATEST_VERSION:
        state = f"latest {LATEST_VERSION}: newer than this release, which must not write to it"
    elif version == LATEST_VERSION:
        state = f"latest {LATEST_VERSION}: current"
    else:
        state = f"latest {LATEST_VERSION}: behind, run `inferensics init`"
    console.print(f"schema       version {version} ({state})")
    if size is not None:
        console.print(f"folder       {store.dsn.path}: {folder_size_text(size, sum(disk.values()))}")
    if counts:
        table = Table("table", "rows", "on disk", title="rows per table")
        for name, n in counts.items():
            table.add_row(name, f"{n:,}", _human(disk.get(name, 0)))
        console.print(table)
    if version > LATEST_VERSION:  # the rollback case: `init` refuses it too, in the same words
        fail(newer_store_text(store.dsn, version), code=1)
    if version != LATEST_VERSION:
        # A monitoring script reads the exit code: a store the service cannot write to is not fine.
        fail(f"the store's schema is version {version}, this inferensics needs {LATEST_VERSION}: run "
             "`inferensics init` with the same --dsn (the migrating user's, on a server)", code=1)  # fmt: skip


def folder_size_text(files: int, parts: int) -> str:
    """What ``status`` says of an embedded store's folder: the bytes of its files now (``du -sb`` adds each
    directory's own 4 KiB) and, among them, this database's tables' active parts. The rest is the engine's own:
    its metadata, other databases, and the parts a merge replaced, which it deletes minutes later, so the folder
    shrinks with no write (right after a run it can be several times the parts)."""
    rest = max(files - parts, 0)
    return (
        f"{_human(files)} in files now, of which the tables' active parts {_human(parts)} (the rows per table "
        f"below); the other {_human(rest)} is the engine's own (metadata, other databases, parts a merge replaced "
        "and deletes minutes later)"
    )


def register(app: typer.Typer) -> None:
    """Add the store commands to the app."""
    app.command("init")(init)
    app.command("status")(status)
