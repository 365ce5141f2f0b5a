"""``inferensics requests``: the newest requests of a slice, or with ``--failing`` those that errored, produced
non-finite output or fell back to eager, from a store or through the service; ``--id ID`` shows one request: how it
was served (compile, guards, fallback), its graphs and the kernel-registry providers behind it.

It reads through named queries (``request_list`` and ``request_kinds`` of :mod:`inferensics.analytics.request_list`;
``request_detail``, ``request_graphs`` and ``request_kernel_decisions`` of :mod:`inferensics.analytics.drilldown`),
so a token with only the ``read`` role reads them through ``--service``, where SQL needs ``admin``.
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
    request_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            help="Show this one request instead of a list: outcome, compile, guards, fallback, its graphs and the "
            "kernel-registry providers behind it (eager and compiled, with why others were skipped or taken out).",
        ),
    ] = None,
    occurrence: Annotated[
        int | None,
        typer.Option(help="With --id: which of the requests sharing the id (1 for the earliest) [default: 1]."),
    ] = None,
    dsn: DsnOption = None,
    data_dir: DataDirOption = None,
    service: ServiceOption = None,
    token: TokenOption = None,
) -> None:
    """List the newest requests, newest first, with what failed and its detail: with --failing only those that
    errored, produced non-finite output or fell back to eager.

    One table (request id, time, model, pool, host, what failed, detail), then the count of each kind over the
    whole window (not only the listed ones) and how to open one: `inferensics replay ID` or the dashboard's
    request page. With --id ID, one request instead. Through --service a token with the read role is enough."""
    from inferensics.analytics.request_list import MAX_LIMIT

    dsn = dsn_from(ctx, dsn, data_dir)
    if request_id is not None:
        listing = {"--failing": failing, "--model": model, "--hw-pool": hw_pool, "--since": since, "--until": until}
        narrowing = [name for name, value in listing.items() if value] + (["--limit"] if limit != 50 else [])
        if narrowing:
            one = len(narrowing) == 1
            fail(f"--id shows one request: {', '.join(narrowing)} narrow{'s' if one else ''} a list; leave "
                 f"{'it' if one else 'them'} out")  # fmt: skip
        if occurrence is not None and occurrence < 1:
            fail(f"--occurrence {occurrence}: requests that share an id are numbered from 1 (the earliest)")
        with query_runner(dsn, data_dir, service, token) as runner:
            _show_request(runner, request_id.strip(), occurrence)
        return
    if occurrence is not None:
        fail("--occurrence picks one of the requests that share an --id: give --id ID with it")
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


def _show_request(runner: object, request_id: str, occurrence: int | None) -> None:
    """One request's lines: which one, how it was served, its graphs, its kernel-registry decisions."""
    which = {"request_id": request_id, **({"occurrence": occurrence} if occurrence is not None else {})}
    d = runner.query("request_detail", **which).row(0, named=True)  # type: ignore[attr-defined]
    graphs = runner.query("request_graphs", **which)  # type: ignore[attr-defined]
    decisions = runner.query("request_kernel_decisions", **which)  # type: ignore[attr-defined]
    n, k = int(d["occurrences"]), int(d["occurrence"])
    shared = f" (request {k} of {n} sharing the id; --occurrence N shows another)" if n > 1 else ""
    lines = [
        f"request {request_id}{shared}: {d['ts']:%Y-%m-%d %H:%M:%S} UTC · model {d['model']} · pool {d['hw_pool']} · "
        f"host {d['host']} · traffic {d['traffic_class'] or '-'} · bundle {d['bundle_id'] or 'none'}",
        f"outcome {d['outcome']} · status {d['status']} · latency {float(d['latency_ms'] or 0):.1f} ms · compile in "
        f"request {float(d['compile_ms'] or 0):.1f} ms · guards {d['guard_outcome']} · graph cache {d['cache_status']}",
    ]
    if d["fallback_reason"]:
        lines.append(f"fallback: {d['fallback_reason']}")
    if d["error"]:
        lines.append(f"error: {str(d['error']).strip().splitlines()[0]}")
    lines += [f"guard failure: {r}" for r in d.get("guard_failure_reasons") or []]
    lines += [f"recompile: {r}" for r in d.get("recompile_reasons") or []]
    for g in graphs.iter_rows(named=True):
        providers = ", ".join(dict.fromkeys(g.get("kernel_providers") or [])) or "none recorded"
        lines.append(f"graph {g['position']}: {g['graph_key'][:16]} · {g['calls']} calls · providers: {providers}")
    if decisions.is_empty():
        lines.append("kernel providers: no kernel-registry decision recorded for this request")
    for r in decisions.iter_rows(named=True):
        where = "eager" if not r["compiled"] else f"graph {r['position']}"
        if r["compiled"] and not r["this_request"]:
            where += " (traced in an earlier request's compile)"
        skipped = f" · skipped {'; '.join(r['skipped'])}" if r["skipped"] else ""
        lines.append(f"kernel {where}: {r['op']}={r['provider']} at {r['signature']}{skipped}")
        lines += [f"  {e.partition(': ')[0]} raised and was taken out for that signature" for e in r["raised"]]
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


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
