"""``inferensics requests``: the newest requests of a slice, or with ``--failing`` those that errored, produced
non-finite output or fell back to eager, from a store or through the service.

It reads through the named queries ``request_list`` and ``request_kinds`` (:mod:`inferensics.analytics.request_list`),
so a token with only the ``read`` role lists them through ``--service``, where SQL needs ``admin``.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Final

import typer

from inferensics.cli.console import console
from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.options import DataDirOption, DsnOption, dsn_from
from inferensics.cli.query_runner import query_runner
from inferensics.cli.service_commands import ServiceOption, TokenOption

if TYPE_CHECKING:
    import polars as pl

DEFAULT_SINCE: Final = timedelta(hours=24)
"""How far back the list reaches without ``--since``."""
_AGO = re.compile(r"(\d+)([mhd])")
_UNITS: Final = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}
REQUEST_PAGE: Final = "request?request_id="
"""The dashboard's request drill-down (``inferensics.dashboard._internal.links``' ``REQUEST_PATH`` and
``REQUEST_ID_PARAM``; a test keeps them equal)."""


def parse_moment(text: str, option: str, now: datetime) -> datetime:
    """``text`` as a UTC time: a time ago (``30m``, ``6h``, ``7d``) or an ISO 8601 date or time (UTC unless it
    names its zone); anything else exits 2 with one line naming ``option``."""
    given = text.strip()
    ago = _AGO.fullmatch(given)
    if ago:
        return now - int(ago.group(1)) * _UNITS[ago.group(2)]
    try:
        moment = datetime.fromisoformat(given)
    except ValueError:
        fail(f"{option} {text!r}: not a time; give a time ago (30m, 6h, 7d) or an ISO 8601 time in UTC "
             "(2026-03-03 or 2026-03-03T12:00)")  # fmt: skip
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def _cell(value: object, width: int) -> str:
    text = " ".join(str(value).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def register(app: typer.Typer) -> None:
    """Add ``requests`` to the app."""
    app.command("requests")(requests)


@needs_extra("service", "requests")
def requests(  # noqa: PLR0917 (typer options)
    ctx: typer.Context,
    failing: Annotated[
        bool,
        typer.Option(
            "--failing",
            help="Only requests that errored (with the error's first line), produced non-finite output (NaN/inf "
            "counts of the output fingerprint) or fell back to eager (with the reason).",
        ),
    ] = False,
    model: Annotated[str | None, typer.Option(help="Model [default: all].")] = None,
    hw_pool: Annotated[str | None, typer.Option(help="Hardware pool [default: all].")] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Start: a time ago (30m, 6h, 7d) or an ISO 8601 time, UTC [default: 24h]."),
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="End (excluded): a time ago or an ISO 8601 time, UTC [default: now].")
    ] = None,
    limit: Annotated[int, typer.Option(help="Newest this many requests are listed (1 to 10000).")] = 50,
    dsn: DsnOption = None,
    data_dir: DataDirOption = None,
    service: ServiceOption = None,
    token: TokenOption = None,
) -> None:
    """List the newest requests, newest first, with what failed and its detail: with --failing only those that
    errored, produced non-finite output or fell back to eager.

    One table (request id, time, model, pool, host, what failed, detail), then the count of each kind over the
    whole window (not only the listed ones) and how to open one: `inferensics replay ID` or the dashboard's
    request page. Through --service a token with the read role is enough."""
    from inferensics.analytics.request_list import MAX_LIMIT

    dsn = dsn_from(ctx, dsn, data_dir)
    if not 1 <= limit <= MAX_LIMIT:
        fail(f"--limit {limit}: list at least 1 and at most {MAX_LIMIT:,} requests")
    for option, value in (("--model", model), ("--hw-pool", hw_pool)):
        if value is not None and not value.strip():
            fail(f"{option}: empty; give a value, or leave {option} out for all")
    now = datetime.now(UTC)
    hi = parse_moment(until, "--until", now) if until is not None else now
    lo = parse_moment(since, "--since", now) if since is not None else hi - DEFAULT_SINCE
    if hi <= lo:
        fail(f"--since {lo:%Y-%m-%d %H:%M:%S} is not before --until {hi:%Y-%m-%d %H:%M:%S} (UTC): give a window "
             "whose end comes after its start")  # fmt: skip
    given = {k: v for k, v in {"model": model, "hw_pool": hw_pool}.items() if v is not None}
    window = {"start": lo, "end": hi, **given, "failing": failing}
    with query_runner(dsn, data_dir, service, token) as runner:
        listed = runner.query("request_list", **window, limit=limit)  # type: ignore[attr-defined]
        kinds = runner.query("request_kinds", **window)  # type: ignore[attr-defined]
    what = "failing requests" if failing else "requests"
    scope = "".join(f"{label} {v}, " for label, v in (("model", model), ("hardware pool", hw_pool)) if v is not None)
    span = f"{scope}{lo:%Y-%m-%d %H:%M:%S} to {hi:%Y-%m-%d %H:%M:%S} UTC"
    if listed.is_empty():
        console.print(f"no {what} matched ({span})")
        return
    heading = f"{what} ({span})"
    _print_table(listed)
    total = int(kinds.get_column("requests").sum())
    counts = ", ".join(f"{kind} {int(n):,}" for kind, n in kinds.iter_rows())
    shown = f"newest {listed.height:,} of {total:,}" if total > listed.height else f"all {total:,}"
    console.print(f"{heading}: {shown} ({counts})")
    first = str(listed.item(0, "request_id"))
    replay = f"inferensics replay {first}" + (f" --service {service}" if service else "")
    console.print(f"open one: {replay}, or the dashboard's request page /{REQUEST_PAGE}{first}")


def _print_table(listed: pl.DataFrame) -> None:
    from rich.table import Table

    table = Table("request id", "time (UTC)", "model", "pool", "host", "what failed", "detail")
    for row in listed.iter_rows(named=True):
        table.add_row(
            str(row["request_id"]),
            f"{row['ts']:%Y-%m-%d %H:%M:%S}",
            str(row["model"]),
            str(row["hw_pool"]),
            str(row["host"]),
            str(row["kind"]),
            _cell(row["detail"], 100),
        )
    console.print(table)
