"""``inferensics init`` and ``inferensics status``: create or migrate the store, and report on it."""

from __future__ import annotations

import os
from pathlib import Path

import typer
from rich.table import Table

from inferensics.cli.console import console
from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.options import DataDirOption, DsnOption, dsn_from
from inferensics.cli.service_commands import ServiceOption, TokenOption, print_service_status
from inferensics.schema.dsn import DSN_ENV, STORE_FOLDER, Dsn, DsnError, is_store_folder, resolve_dsn
from inferensics.schema.migrations import LATEST_VERSION


def _human(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _refuse_empty(dsn: str | None) -> None:
    """An empty ``--dsn`` (what an unset ``--dsn ${VAR}`` in a unit becomes) would mean the embedded default
    directory: `init` would create a stray store there and report success while the real one stays behind."""
    if dsn is not None and not dsn.strip():
        fail("--dsn: empty; give the store's DSN (chdb:///<data dir> or http(s)://user:password@host:port/database), "
             "or leave --dsn out for $INFERENSICS_DSN, then the embedded default directory")  # fmt: skip


def existing_store(dsn: str | None, data_dir: Path | None, *, code: int = 2) -> Dsn:
    """The store a read-only command opens, refused in one line when it is an embedded one whose folder does not
    exist or is not a store (chDB's ``metadata/`` is not in it): opening it would write an engine's files there
    (``metadata/``, ``tmp/``), and a mistyped path, or a folder of the user's, must not become a store.

    ``code`` is the exit status of the refusal (``status`` exits 1: a monitoring check's "not fine").
    """
    _refuse_empty(dsn)
    try:
        parsed = resolve_dsn(dsn)
    except DsnError as exc:
        fail(str(exc))
    if parsed.kind != "chdb" or parsed.path is None:
        return parsed
    flag = "--data-dir" if data_dir else "--dsn"
    kind = folder_kind(parsed.path)
    if kind == "data dir":
        fail(data_dir_refusal(parsed.path), code=code)
    if kind == "missing":
        default = dsn is None and data_dir is None and not os.environ.get(DSN_ENV)
        if default:  # nothing named a store: the likelier mistake is a store another command reaches
            fail(f"no store at {parsed.path} (the default place: no --dsn, --data-dir or ${DSN_ENV} given): "
                 "while `inferensics serve` holds your store, pass --service URL (and a token); else pass its "
                 "--dsn or --data-dir, or create one here with `inferensics init`", code=code)  # fmt: skip
        fail(f"no store at {parsed.path}: the directory does not exist; create it with `inferensics init` "
             f"(same {flag}), or pass the --dsn of an existing store", code=code)  # fmt: skip
    if kind != "store":
        looks = "a store's folder holds the engine's metadata/ and store/, which `inferensics init` makes"
        if kind == "empty":
            fail(f"no store at {parsed.path}: the folder is empty ({looks}); create it with `inferensics init` "
                 f"(same {flag}), or pass the --dsn of an existing store", code=code)  # fmt: skip
        fail(f"no store at {parsed.path}: it is {FOLDER_KINDS[kind]}, not a store ({looks} in a new or empty "
             "folder); pass the --dsn of an existing store", code=code)  # fmt: skip
    return parsed


FOLDER_KINDS = {"file": "a file", "other files": "a folder of other files", "data dir": "a data directory"}
"""How a refusal names what an embedded store's path holds when it is neither a store nor new or empty."""


def folder_kind(path: Path) -> str:
    """What an embedded store's path holds: ``missing``, ``store`` (chDB's ``metadata/`` is there), ``empty``,
    ``file``, ``data dir`` (a folder whose ``store/`` is a store: ``--data-dir``'s kind of folder) or ``other
    files``: the read commands, ``init``, ``import-trace``, ``serve`` and the bundle state commands refuse by it."""
    if not path.exists():
        return "missing"
    if is_store_folder(path):
        return "store"
    if not path.is_dir():
        return "file"
    if is_store_folder(path / STORE_FOLDER):
        return "data dir"
    try:
        return "empty" if next(path.iterdir(), None) is None else "other files"
    except OSError:  # unreadable: not known to be empty, and no store this process could open either
        return "other files"


def writable_store(dsn: str | None, what: str) -> Dsn:
    """The store a command that may create one writes to, refused in one line when it is an embedded one whose
    path is a file or a folder of other files: chDB would write its ``metadata/``, ``store/`` and ``tmp/``
    among them. ``what`` says what the command makes there (``"`inferensics init` makes a store"``)."""
    _refuse_empty(dsn)
    try:
        parsed = resolve_dsn(dsn)
    except DsnError as exc:
        fail(str(exc))
    path = parsed.path if parsed.kind == "chdb" else None
    kind = folder_kind(path) if path is not None else "store"
    if path is not None and kind == "data dir":
        fail(data_dir_refusal(path))
    if path is not None and kind in FOLDER_KINDS:
        fail(f"{path} is {FOLDER_KINDS[kind]}, not a store: {what} in a new or empty folder (the engine writes "
             "its metadata/, store/ and tmp/ there); name one with --dsn or --data-dir")  # fmt: skip
    return parsed


def data_dir_refusal(path: Path) -> str:
    """The refusal of a data directory named where a store's own folder belongs (``--dsn chdb://DIR``): opening it
    would make a second, empty store beside ``DIR/store``."""
    return (
        f"{path} is a data directory, not a store: its store is {path / STORE_FOLDER}; pass --data-dir {path} "
        f"(or --dsn chdb://{path / STORE_FOLDER})"
    )


@needs_extra("service", "init")
def init(ctx: typer.Context, dsn: DsnOption = None, data_dir: DataDirOption = None) -> None:
    """Create the store, or migrate it to the latest schema, and print the schema version."""
    from inferensics.schema.store import Store, StoreError

    dsn = dsn_from(ctx, dsn, data_dir)
    writable_store(dsn, "`inferensics init` makes a store")
    try:
        with Store.open(dsn) as store:
            before = store.schema_version()
            version = store.migrate()
    except StoreError as exc:
        fail(str(exc))
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
    state = (
        "not initialised: run `inferensics init`"
        if version == 0
        else (
            f"latest {LATEST_VERSION}: current"
            if version == LATEST_VERSION
            else f"latest {LATEST_VERSION}: behind, run `inferensics init`"
        )
    )
    console.print(f"schema       version {version} ({state})")
    if size is not None:
        console.print(f"folder       {store.dsn.path}: {folder_size_text(size, sum(disk.values()))}")
    if counts:
        table = Table("table", "rows", "on disk", title="rows per table")
        for name, n in counts.items():
            table.add_row(name, f"{n:,}", _human(disk.get(name, 0)))
        console.print(table)
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
