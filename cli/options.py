"""Options shared by subcommands, declared once."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferensics.cli.errors import fail
from inferensics.schema.dsn import DATA_DIR_ENV, DSN_ENV, DsnError, check_data_dir

DsnOption = Annotated[
    str | None,
    typer.Option(
        "--dsn",
        envvar=DSN_ENV,
        help="Store DSN: chdb:///<data dir> (embedded) or http(s)://user:password@host:port/database. "
        f"Falls back to ${DSN_ENV}, then the embedded default directory.",
        show_default=False,
    ),
]

DataDirOption = Annotated[
    Path | None,
    typer.Option(
        "--data-dir",
        help="The embedded store in DIR (DIR/store, where `inferensics demo --data-dir DIR` keeps it): "
        f"--dsn chdb://DIR/store; ${DATA_DIR_ENV} names DIR the same way. Not together with --dsn; a store's "
        "own folder is refused (pass it as --dsn chdb://STORE).",
        show_default=False,
    ),
]


def typed(ctx: typer.Context, name: str) -> bool:
    """Whether parameter ``name`` was given on the command line (not by its environment variable or default)."""
    source = ctx.get_parameter_source(name)
    return source is not None and source.name == "COMMANDLINE"


def dsn_from(ctx: typer.Context, dsn: str | None, data_dir: Path | None) -> str | None:
    """The store a command opens: ``--dsn`` (or ``$INFERENSICS_DSN``), or the embedded store ``--data-dir`` names.

    ``--data-dir`` means what ``inferensics demo --data-dir`` means (one definition:
    ``inferensics.demo.processes.store_dsn``), so the store a demo left is reached with the same flag. It beats
    ``$INFERENSICS_DSN`` (an argument beats an environment variable); beside ``--dsn`` it is refused in one line,
    and so is a store's own folder (:func:`~inferensics.schema.dsn.check_data_dir`: its ``store/`` is the engine's,
    and ``$INFERENSICS_DATA_DIR`` names a data directory the same way).
    A command that also takes ``--service`` refuses it typed beside ``--dsn`` or ``--data-dir``: the service
    would be used and the store named left unread, without a word.
    """
    if typed(ctx, "service") and ctx.params.get("service"):
        for name, flag in (("dsn", "--dsn"), ("data_dir", "--data-dir")):
            if typed(ctx, name):
                fail(f"--service and {flag} both name where the records are: pass one of them (--service while "
                     f"`inferensics serve` owns the store, else {flag})")  # fmt: skip
    if data_dir is None:
        return dsn
    given = ctx.get_parameter_source("dsn")
    if dsn is not None and (given is None or given.name != "ENVIRONMENT"):
        fail("--dsn and --data-dir both name the store: give one (--data-dir DIR is --dsn chdb://DIR/store)")
    try:
        check_data_dir(data_dir, named_by="--data-dir")
    except DsnError as exc:
        fail(str(exc))
    from inferensics.demo.processes import store_dsn

    return store_dsn(data_dir)


MinRecompilesOption = Annotated[
    int | None,
    typer.Option(min=1, help="Storm rule: recompiles an hour needs at least [default: 10].", show_default=False),
]
MinCompileSecondsOption = Annotated[
    float | None,
    typer.Option(
        min=0.001, help="Storm rule: compile seconds an hour needs at least [default: 60].", show_default=False
    ),
]
