"""``inferensics report weekly`` and ``inferensics canary compare``: reports from a store or a service.

Both commands build their output from named queries through a runner: a local store (``--dsn``) or a
running collector service (``--service``, required while the service owns an embedded store).
"""

from __future__ import annotations

import enum
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.help_format import command_app
from inferensics.cli.options import DataDirOption, DsnOption, MinCompileSecondsOption, MinRecompilesOption, dsn_from
from inferensics.cli.query_runner import query_runner, store_text
from inferensics.cli.service_commands import ServiceOption, TokenOption
from inferensics.schema.dsn import default_report_dir

if TYPE_CHECKING:
    import polars as pl

    from inferensics.dashboard._internal.replay_command import UnpushedBundle

report_app = command_app("Weekly recompilation and cache reports.")
canary_app = command_app("Canary comparisons of two bundles or two windows.")

EXIT_FAIL, EXIT_INCONCLUSIVE = 1, 3


class ReportFormat(enum.StrEnum):
    """What ``report weekly`` writes."""

    MARKDOWN = "markdown"
    JSON = "json"


def _check_out(out: Path) -> Path:
    """``out`` checked before any work (without creating it: a failed connection leaves nothing behind), or a
    usage error that names it."""
    if out.exists() and not out.is_dir():
        fail(f"--out {out}: that is a file, not a directory; pass a directory")
    existing = next(p for p in (out, *out.absolute().parents) if p.exists())
    if not existing.is_dir():
        fail(f"--out {out}: cannot make that directory ({existing} is a file); pass a writable directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        fail(f"--out {out}: {existing} is not writable; pass a writable directory")
    return out


def _make_out(out: Path) -> Path:
    """``out`` created once there is something to write into it."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        fail(f"--out {out}: cannot make that directory ({exc.strerror or exc}); pass a writable directory")
    return out


@report_app.command("weekly")
@needs_extra("dashboard", "report weekly")
def weekly(  # noqa: PLR0917 (typer options)
    ctx: typer.Context,
    week: Annotated[str | None, typer.Option(help="ISO week YYYY-Www [default: the current week, up to now].")] = None,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="Directory to write the Markdown and HTML into [default: the store's own folder, store-<hash>, in "
            "$INFERENSICS_REPORT_DIR, else in ~/.local/share/inferensics/reports: the folder the dashboard's "
            "Weekly report page lists for that store].",
        ),
    ] = None,
    dsn: DsnOption = None,
    data_dir: DataDirOption = None,
    service: ServiceOption = None,
    token: TokenOption = None,
    min_recompiles: MinRecompilesOption = None,
    min_compile_seconds: MinCompileSecondsOption = None,
    output_format: Annotated[
        ReportFormat,
        typer.Option(
            "--format",
            help="markdown: weekly-<week>.md and a self-contained weekly-<week>.html; json: weekly-<week>.json, "
            "the same figures as data (ratios as fractions, times in ISO 8601 UTC, the end excluded).",
        ),
    ] = ReportFormat.MARKDOWN,
) -> None:
    """Write the weekly recompilation/cache report: weekly-<week>.md and a self-contained weekly-<week>.html, or
    weekly-<week>.json with --format json.

    A small fleet (or a short demo) lowers the storm rule's floors with --min-recompiles and
    --min-compile-seconds; the report states the rule it applied."""
    from inferensics.analytics.errors import AnalyticsError
    from inferensics.analytics.report.folders import name_store, store_folder
    from inferensics.analytics.report.weekly import summary_lines, write_weekly_json, write_weekly_report
    from inferensics.analytics.storms import StormRule
    from inferensics.analytics.weekly import build_weekly_report, current_week, parse_week

    dsn = dsn_from(ctx, dsn, data_dir)
    now = datetime.now(UTC)
    if week is not None and not week.strip():
        # What an unset `--week ${VAR}` becomes: the current week would be reported in its place.
        fail("--week: empty; give an ISO week as YYYY-Www (e.g. 2026-W10), or leave --week out for the current week")
    try:
        chosen = current_week(now) if week is None else week
        parse_week(chosen, now=now)  # a week that has not started would be a report of zeros
    except AnalyticsError as exc:
        fail(str(exc))
    store_named = None  # without --out: the store's own folder in the report folder, as the dashboard's page
    if out is None:
        _check_out(default_report_dir())
    else:
        _check_out(out)
    with query_runner(dsn, data_dir, service, token) as runner:
        floors = {"min_recompiles": min_recompiles, "min_compile_seconds": min_compile_seconds}
        rule = StormRule(**{k: v for k, v in floors.items() if v is not None})
        report = build_weekly_report(runner, chosen, now, rule)  # type: ignore[arg-type]
        if out is None:
            store_named = store_text(runner)
            out = store_folder(default_report_dir(), store_named)
    _make_out(out)
    if store_named is not None:
        name_store(out, store_named)
    if output_format is ReportFormat.JSON:
        written = f"wrote {write_weekly_json(report, out)}"
    else:
        md, page = write_weekly_report(report, out)
        written = f"wrote {md} and {page}"
    for line in summary_lines(report):
        typer.echo(line)
    typer.echo(written)


def _full_id(given: str | None, known: list[str], option: str) -> str | None:
    """``given`` as a full bundle id: itself when known or not a prefix of any, else the one known id it
    begins (ids are shown shortened, as a 12- or 16-digit prefix); a prefix of several is a usage error."""
    if given is None or given in known:
        return given
    matches = sorted({k for k in known if k.startswith(given.lower())})
    if len(matches) > 1:
        fail(
            f"{option} {given}: the start of {len(matches)} bundle ids "
            f"({', '.join(m[:16] for m in matches)}); give more digits"
        )
    return matches[0] if matches else given


def _utc(moment: datetime | None) -> datetime | None:
    """A datetime option as UTC (a naive one is read as UTC)."""
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def _check_window(lo: datetime | None, hi: datetime | None, first: str, last: str) -> None:
    """Refuse a window that holds no time: it would compare no requests and record an inconclusive verdict."""
    if lo is not None and hi is not None and hi <= lo:
        fail(f"{first} {lo:%Y-%m-%d %H:%M:%S} is not before {last} {hi:%Y-%m-%d %H:%M:%S} (UTC): give a window "
             "whose end comes after its start")  # fmt: skip


@canary_app.command("compare")
@needs_extra("dashboard", "canary compare")
def compare(  # noqa: PLR0917 (typer options)
    ctx: typer.Context,
    baseline: Annotated[str, typer.Option(help="Baseline bundle id ('any' for all bundles, with --baseline-start).")],
    candidate: Annotated[str, typer.Option(help="Candidate bundle id ('any' for all bundles).")],
    model: Annotated[str | None, typer.Option(help="Model [default: the candidate bundle's model].")] = None,
    traffic_class: Annotated[str | None, typer.Option(help="Traffic class [default: all].")] = None,
    hw_pool: Annotated[
        str | None,
        typer.Option(
            help="Hardware pool to compare, or 'all' for every pool at once [default: each pool both bundles "
            "served, judged alone (the worst pool's verdict decides), as the dashboard's canary page does; refused "
            "when they served none in common].",
        ),
    ] = None,
    start: Annotated[datetime | None, typer.Option(help="Window start, UTC [default: end - 24 h].")] = None,
    end: Annotated[datetime | None, typer.Option(help="Window end, UTC [default: now].")] = None,
    baseline_start: Annotated[datetime | None, typer.Option(help="Baseline window start (two-window mode).")] = None,
    baseline_end: Annotated[datetime | None, typer.Option(help="Baseline window end (two-window mode).")] = None,
    min_requests: Annotated[
        int | None,
        typer.Option(min=1, help="Requests each side needs for a verdict [default: the analytics default, 100]."),
    ] = None,
    min_pairs: Annotated[
        int | None,
        typer.Option(min=1, help="Input-matched pairs argmax agreement needs [default: the analytics default, 30]."),
    ] = None,
    out: Annotated[Path | None, typer.Option("--out", help="Also write canary-*.md/.html here.")] = None,
    dsn: DsnOption = None,
    data_dir: DataDirOption = None,
    service: ServiceOption = None,
    token: TokenOption = None,
) -> None:
    """Compare a candidate with a baseline and print the verdict table.

    Exit status: 0 pass, 1 fail, 3 inconclusive, 2 usage or connection error. The rule is printed with
    the verdict (see `inferensics.analytics.canary`). Where the bundles served several pools in common, each is
    judged alone and the worst verdict (fail, then inconclusive) decides, naming its pool.
    """
    from inferensics.analytics.canary import CanaryParams, verdict_event
    from inferensics.analytics.canary_pools import (
        QUERY_NAME,
        PoolVerdict,
        correct_for_pools,
        pool_frames,
        worst_verdict,
    )
    from inferensics.analytics.local_runner import LocalRunner
    from inferensics.analytics.report.canary import render_canary_text, verdict_of, write_canary_report
    from inferensics.schema.store import Store

    dsn = dsn_from(ctx, dsn, data_dir)
    for option, given_id in (("--baseline", baseline), ("--candidate", candidate)):
        if not given_id.strip():
            fail(f"{option}: empty; give a bundle id (its first 12 digits do), or 'any' for every bundle")
    if model is None and baseline == candidate == "any":
        fail("--baseline any --candidate any: no bundle to take the model from; pass --model, and give the baseline "
             "its own window with --baseline-start and --baseline-end")  # fmt: skip
    if out is not None:
        _check_out(out)
    hi = _utc(end) or datetime.now(UTC)
    lo = _utc(start) or hi - timedelta(hours=24)
    _check_window(lo, hi, "--start", "--end" if end else "--end (default: now)")
    if (baseline_start is None) != (baseline_end is None):
        fail("give both --baseline-start and --baseline-end (the baseline's own window), or neither")
    if baseline_start is not None and baseline_end is not None:
        _check_window(_utc(baseline_start), _utc(baseline_end), "--baseline-start", "--baseline-end")
    base = None if baseline == "any" else baseline
    cand = None if candidate == "any" else candidate
    with query_runner(dsn, data_dir, service, token) as runner:
        known = runner.query("bundles")  # type: ignore[attr-defined]
        ids = [str(i) for i in known["bundle_id"].to_list()] if "bundle_id" in known.columns else []
        base, cand = _full_id(base, ids, "--baseline"), _full_id(cand, ids, "--candidate")
        if model is None:
            match = known.filter(known["bundle_id"] == (cand or base or "")) if ids else known
            if match.is_empty():
                fail(
                    f"cannot tell the model: bundle {cand or base} is not in the store's bundles table (a host "
                    "that loaded it registers it): pass --model"
                )
            model = str(match.item(0, "model"))
        pools, pool_note = _choose_pools(runner, hw_pool, model, traffic_class, (base, cand), (lo, hi),
                                         (_utc(baseline_start), _utc(baseline_end)))  # fmt: skip
        params = {
            "model": model,
            "baseline": base,
            "candidate": cand,
            "start": lo,
            "end": hi,
            "traffic_class": traffic_class,
            "baseline_start": baseline_start,
            "baseline_end": baseline_end,
            "min_requests": min_requests,
            "min_pairs": min_pairs,
        }
        given = {k: v for k, v in params.items() if v is not None}
        asked = [given | ({"hw_pool": pool} if pool is not None else {}) for pool in pools]
        judged: list[tuple[str | None, pl.DataFrame]]
        if len(pools) > 1:  # several pools, each alone, from the queries of one comparison
            frames = pool_frames(runner.query(QUERY_NAME, **given, hw_pools=pools))  # type: ignore[attr-defined]
            judged = [(pool, frames[str(pool)]) for pool in pools]
        else:
            judged = [(pools[0], runner.query("canary_compare", **asked[0]))]  # type: ignore[attr-defined]
        if len(judged) > 1:  # one test per pool and metric: the p-value checks corrected for the pools
            corrected = correct_for_pools({str(p): f for p, f in judged})
            judged = [(p, corrected[str(p)]) for p, _ in judged]
        # One row per pool judged, its pool in attrs: a row without one reads as every pool at once.
        rows = [
            verdict_event(f, CanaryParams(**given), now=datetime.now(UTC), pools_judged=len(judged))
            for (_, f), given in zip(judged, asked, strict=True)
        ]
        from inferensics.cli.requests_commands import bundle_pushes, unpushed_of

        unpushed = unpushed_of(bundle_pushes(runner), cand) if cand else None  # replay's --bundle DIR, if needed
        store = runner.client if isinstance(runner, LocalRunner) else None
        verdicts = "verdict" if len(rows) == 1 else f"{len(rows)} verdicts (one per hardware pool)"
        if isinstance(store, Store):
            store.insert_events(rows)
            recorded = f"{verdicts} recorded in {store.database}.canary_verdicts"
        else:
            from inferensics.cli.service_records import record_through_service

            recorded = f"{verdicts} " + record_through_service(str(service), token, rows, "canary_verdicts")[1]
    several = len(judged) > 1

    def label(where: str) -> str:
        window = f"{lo:%Y-%m-%d %H:%M} to {hi:%Y-%m-%d %H:%M} UTC"
        if baseline_start is not None and baseline_end is not None:  # two windows: both named, or it reads as one
            b_lo, b_hi = _utc(baseline_start), _utc(baseline_end)
            window = f"baseline {b_lo:%Y-%m-%d %H:%M} to {b_hi:%Y-%m-%d %H:%M}, candidate {window}"
        return f"{model}: {base or 'any'} → {cand or 'any'}, {where} ({window})"

    pools_judged = ", ".join(str(p) for p, _ in judged)
    typer.echo("canary " + label(f"hardware pools {pools_judged}, each judged alone" if several else _where(pools[0])))
    if pool_note:
        typer.echo(pool_note)
    for pool, frame in judged:
        if several:
            typer.echo(f"\nhardware pool {pool}:")
        typer.echo(render_canary_text(frame), nl=False)
        for line in _disagreeing(frame, service, token, unpushed):
            typer.echo(line)
        if out is not None:
            stem = f"canary-{model}{f'-{pool}' if several else ''}-{lo:%Y%m%dT%H%M}"
            md, page = write_canary_report(frame, label(_where(pool)), _make_out(out), stem)
            typer.echo(f"wrote {md} and {page}")
    verdict, _ = verdict_of(judged[0][1])
    if several:
        per_pool = [PoolVerdict(str(p), *verdict_of(f)) for p, f in judged]
        typer.echo("\nverdict per hardware pool:")
        for v in per_pool:
            typer.echo(f"  {v.pool}: {v.verdict.upper()} ({v.rule})")
        verdict, rule = worst_verdict(per_pool)
        typer.echo(f"verdict: {verdict.upper()} {rule}")
    typer.echo(recorded)
    if verdict != "pass":
        raise typer.Exit(EXIT_FAIL if verdict == "fail" else EXIT_INCONCLUSIVE)


def _disagreeing(
    frame: pl.DataFrame, service: str | None, token: str | None, unpushed: UnpushedBundle | None = None
) -> list[str]:
    """Under an argmax-agreement check that did not pass: the worst disagreeing pairs, how to open the worst candidate
    request, and how to replay the worst that replay can take (served from a bundle, inputs captured), saying why when
    it is not the worst, or why none can be replayed (a FAIL on agreement named no request, and ``requests --failing``
    cannot list a finite output); ``[]`` when the check passed or names no pair. ``unpushed``: the candidate bundle
    when the service holds no push of it (the command then takes ``--bundle DIR``)."""
    from inferensics.analytics.canary import CANDIDATE_REPLAYABLE, CANDIDATE_REQUEST, disagreements_of
    from inferensics.analytics.report.canary import disagreement_lines
    from inferensics.cli.requests_commands import REQUEST_PAGE, replay_hint

    lines = disagreement_lines(frame)
    if not lines:
        return []
    pairs = disagreements_of(frame)
    worst = str(pairs.item(0, CANDIDATE_REQUEST))
    through = f" --service {service}" if service else ""
    lines += [f"open the worst: inferensics requests --id {worst}{through}, or the dashboard's request page "
              f"/{REQUEST_PAGE}{worst}"]  # fmt: skip
    replayable = pairs.get_column(CANDIDATE_REPLAYABLE).to_list()
    at = next((i for i, ok in enumerate(replayable) if ok is not False), None)  # null: an older service, not known
    if at is None:
        return [*lines, f"none of the {pairs.height:,} worst candidate requests can be replayed: replay needs a "
                        "request served from a bundle with its inputs captured (serve the candidate with "
                        "SdkConfig(capture=CaptureRules(enabled=True)), or capture a sample of its "
                        "requests)"]  # fmt: skip
    chosen = str(pairs.item(at, CANDIDATE_REQUEST))
    lines += replay_hint(chosen, service, token, unpushed)
    if at:
        worse = "the worse one was" if at == 1 else f"the {at:,} worse ones were"
        lines.append(f"  {chosen} is the worst disagreeing candidate request replay can take (served from a bundle, "
                     f"its inputs captured); {worse} not")  # fmt: skip
    return lines


def _where(pool: str | None) -> str:
    """The pool a comparison judged, in words."""
    return f"hardware pool {pool}" if pool else "every hardware pool"


ALL_POOLS = "all"
"""``--hw-pool all``: compare every pool at once (the dashboard's *All*)."""


def _choose_pools(  # noqa: PLR0917 (the comparison's parts)
    runner: object,
    given: str | None,
    model: str,
    traffic_class: str | None,
    bundles: tuple[str | None, str | None],
    window: tuple[datetime, datetime],
    baseline_window: tuple[datetime | None, datetime | None],
) -> tuple[list[str | None], str]:
    """The pools to judge, each alone (``None``: every pool at once), and a line saying which and why.

    Without ``--hw-pool`` they are the pools both bundles served (the candidate's busiest first), as the
    dashboard's canary page judges them, and the line names the pools left out: over every pool a baseline that
    also served elsewhere is measured partly on other hardware than the candidate. Where they served no pool
    in common it refuses, naming each side's pools. ``--hw-pool all`` compares every pool at once.
    """
    from inferensics.analytics.canary_pools import PoolSplit

    if given is not None and given != ALL_POOLS:
        return [given], ""
    windows = {"baseline": baseline_window if baseline_window[0] is not None else window, "candidate": window}
    counts: dict[str, dict[str, int]] = {}
    for side, bundle in zip(("baseline", "candidate"), bundles, strict=True):
        lo, hi = windows[side]
        slice_ = {"model": model, "start": lo, "end": hi, "traffic_class": traffic_class, "bundle": bundle}
        frame = runner.query("fleet_overview", **{k: v for k, v in slice_.items() if v is not None})  # type: ignore[attr-defined]
        counts[side] = {}
        for pool, n in frame.select("hw_pool", "requests").iter_rows():
            counts[side][str(pool)] = counts[side].get(str(pool), 0) + int(n)
    split = PoolSplit(counts["baseline"], counts["candidate"])
    if given == ALL_POOLS:
        one_sided = [split.describe(p) for p in split.pools() if p not in split.shared()]
        mixed = f": mixed, {'; '.join(one_sided)}" if one_sided else ""
        return [None], f"hardware pools: every pool at once (--hw-pool all){mixed}"
    if not any(split.baseline.values()) or not any(split.candidate.values()):
        return [None], ""  # a side without requests: the verdict says so
    shared = split.shared()
    if not shared:
        fail(
            f"the bundles served no hardware pool in common ({split.sides()} requests): pass --hw-pool POOL to "
            "compare one, or --hw-pool all to compare across pools (the hardware's difference then counts)"
        )
    left = [split.describe(p) for p in split.pools() if p not in shared]
    if len(shared) == 1:
        (pool,) = shared
        note = (
            f"hardware pool {pool}: where both bundles served (baseline {split.baseline[pool]:,}, candidate "
            f"{split.candidate[pool]:,} requests)"
        )
    else:
        per_pool = "; ".join(
            f"{p}: baseline {split.baseline[p]:,}, candidate {split.candidate[p]:,} requests" for p in shared
        )
        note = (
            f"hardware pools {', '.join(shared)}: where both bundles served, each judged alone and the worst "
            f"verdict decides ({per_pool})"
        )
    if left:
        note += f"; left out: {'; '.join(left)}; --hw-pool chooses another, --hw-pool all compares every pool"
    elif len(shared) > 1:
        note += "; --hw-pool POOL judges one pool, --hw-pool all compares every pool at once"
    judged: list[str | None] = [*shared]
    return judged, note


def register(app: typer.Typer) -> None:
    """Add ``report`` and ``canary`` to the app."""
    app.add_typer(report_app, name="report")
    app.add_typer(canary_app, name="canary")
