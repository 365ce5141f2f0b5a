"""Options shared by subcommands, declared once."""

from __future__ import annotations

from typing import Annotated

import typer

from inferensics.schema.dsn import DSN_ENV

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
