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
