"""``inferensics requests``: the newest requests of a slice, or with ``--failing`` those that errored, produced
non-finite output or fell back to eager, from a store or through the service, narrowed like every named query (model,
pool, traffic class, host, bundle); ``--id ID`` shows one request: how it was served (compile, guards, fallback), its
graphs, the kernel-registry providers behind it and its newest replay verdicts.

It reads through named queries (``request_list`` and ``request_kinds`` of :mod:`inferensics.analytics.request_list`;
``request_detail``, ``request_graphs``, ``request_kernel_decisions`` and ``request_replays`` of
:mod:`inferensics.analytics.drilldown`),
so a token with only the ``read`` role reads them through ``--service``, where SQL needs ``admin``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer

from inferensics.cli.console import console
from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.options import DataDirOption, DsnOption, dsn_from
from inferensics.cli.query_runner import query_runner, undecodable
from inferensics.cli.service_commands import ServiceOption, TokenOption
from inferensics.collector.service_url import TOKEN_ENV

if TYPE_CHECKING:
    import polars as pl

    from inferensics.dashboard._internal.replay_command import UnpushedBundle

DEFAULT_SINCE: Final = timedelta(hours=24)
"""How far back the list reaches without ``--since``."""
_AGO = re.compile(r"(\d+)([mhd])")
_UNITS: Final = {"m": timedelta(minutes=1), "h": timedelta(hours=1), "d": timedelta(days=1)}
VERDICTS_SHOWN: Final = 3
"""Replay verdicts ``--id`` prints, newest first (the dashboard's request page shows the newest)."""
DETAIL_MIN: Final = 24
"""Columns the detail needs in the table; with fewer left the details follow the table, one line each."""
DETAIL_MAX: Final = 100
"""Characters of a detail shown in the table (an error's first line can be long)."""
REQUEST_PAGE: Final = "request?request_id="
"""The dashboard's request drill-down (``inferensics.dashboard._internal.links``' ``REQUEST_PATH`` and
``REQUEST_ID_PARAM``; a test keeps them equal)."""


def parse_moment(text: str, option: str, now: datetime) -> datetime:
    """``text`` as a UTC time: a time ago (``30m``, ``6h``, ``7d``) or an ISO 8601 date or time (UTC unless it
    names its zone); anything else exits 2 with one line naming ``option``."""
    given = text.strip()
    ago = _AGO.fullmatch(given)
    if ago:
        try:
            return now - int(ago.group(1)) * _UNITS[ago.group(2)]
        except OverflowError:  # it was a traceback
            fail(f"{option} {text!r} reaches back past year 1: give a time ago such as 7d or 30d")
    try:
        moment = datetime.fromisoformat(given)
    except ValueError:
        fail(f"{option} {text!r}: not a time; give a time ago (30m, 6h, 7d) or an ISO 8601 time in UTC "
             "(2026-03-03 or 2026-03-03T12:00)")  # fmt: skip
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def not_utf8(option: str, value: str) -> str | None:
    """What is wrong with ``value`` when it is not UTF-8 text (an argument's bytes that do not decode reach Python
    as lone surrogates, which no query can carry); ``None`` when it is text.

    >>> not_utf8("--host", "h1") is None
    True
    >>> print(not_utf8("--model", "m\\udcff")[:44])
    --model 'm\\xff': not UTF-8 text; the store's
    """
    shown = undecodable(value)
    if shown is None:
        return None
    return (f"{option} '{shown}': not UTF-8 text; the store's models, hosts, pools, classes and bundle ids are "
            "UTF-8: check the shell's quoting or the terminal's encoding")  # fmt: skip


def shown_detail(row: Mapping[str, Any]) -> str:
    """A listed request's detail with its replay verdict after it, unless the detail is the verdict (kind
    ``replayed fault``).

    >>> shown_detail({"kind": "error", "detail": "RuntimeError: boom", "verdict": "schedule"})
    'RuntimeError: boom · replay verdict schedule'
    >>> shown_detail({"kind": "replayed fault", "detail": "lowering · op aten.mm", "verdict": "lowering · op aten.mm"})
    'replay verdict lowering · op aten.mm'
    """
    from inferensics.analytics.request_list import KIND_REPLAYED_FAULT

    detail, verdict = " ".join(str(row.get("detail") or "").split()), str(row.get("verdict") or "")
    if not verdict:
        return detail
    if row["kind"] == KIND_REPLAYED_FAULT:
        return f"replay verdict {verdict}"
    return f"{detail} · replay verdict {verdict}" if detail else f"replay verdict {verdict}"


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
            "counts of the output fingerprint), fell back to eager (with the reason) or whose replay verdict "
            "(`inferensics replay`) named a fault (with the verdict).",
        ),
    ] = False,
    model: Annotated[str | None, typer.Option(help="Model [default: all].")] = None,
    hw_pool: Annotated[str | None, typer.Option(help="Hardware pool [default: all].")] = None,
    traffic_class: Annotated[str | None, typer.Option(help="Traffic class [default: all].")] = None,
    host: Annotated[str | None, typer.Option(help="Serving host [default: all].")] = None,
    bundle: Annotated[
        str | None,
        typer.Option(
            help="Bundle id, or a unique prefix of its hex digits (as `bundle promote` takes) [default: all].",
            show_default=False,
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option(help="Start: a time ago (30m, 6h, 7d) or an ISO 8601 time, UTC [default: 24h]."),
    ] = None,
    until: Annotated[
        str | None, typer.Option(help="End (excluded): a time ago or an ISO 8601 time, UTC [default: now].")
    ] = None,
    outcome: Annotated[
        list[str] | None,
        typer.Option(
            help="Only requests served this way: hit, compile, recompile, fallback, eager or error (how the compiled "
            "program served it); repeat for several [default: all].",
            show_default=False,
        ),
    ] = None,
    slower_than: Annotated[
        float | None,
        typer.Option(
            "--slower-than", help="Only requests that took at least this many ms [default: any].", show_default=False
        ),
    ] = None,
    limit: Annotated[int, typer.Option(help="Newest this many requests are listed (1 to 10000).")] = 50,
    request_id: Annotated[
        str | None,
        typer.Option(
            "--id",
            help="Show this one request instead of a list: outcome, compile, guards, fallback, its graphs, the "
            "kernel-registry providers behind it (eager and compiled, with why others were skipped or taken out) "
            "and its newest replay verdicts (`inferensics replay`).",
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
    errored, produced non-finite output, fell back to eager or whose replay verdict named a fault.

    One table (request id, time, model, pool, host, what failed, outcome, latency, detail and any replay verdict),
    then the count of each kind over the whole window (not only the listed ones) and how to open one: `inferensics
    requests --id ID` or the dashboard's request page, and `inferensics replay ID` for a failing one served from a
    bundle with its inputs captured. --model, --hw-pool, --traffic-class, --host, --bundle, --outcome (hit, compile,
    recompile, fallback, eager, error) and --slower-than narrow the list. With --id ID, one request instead: its
    output's NaN/inf counts, whether its inputs were captured, a graph break or fallback, its newest replay verdicts.
    Through --service a token with the read role is enough."""
    from inferensics.analytics.request_list import MAX_LIMIT
    from inferensics.schema.events import OUTCOMES

    dsn = dsn_from(ctx, dsn, data_dir)
    narrow = {"--model": model, "--hw-pool": hw_pool, "--traffic-class": traffic_class, "--host": host,
              "--bundle": bundle}  # fmt: skip
    for option, value in {**narrow, "--id": request_id}.items():
        if value is not None and (problem := not_utf8(option, value)) is not None:
            fail(problem)
    if request_id is not None:
        listing = {"--failing": failing, **narrow, "--outcome": outcome, "--slower-than": slower_than,
                   "--since": since, "--until": until}  # fmt: skip
        narrowing = [name for name, value in listing.items() if value is not None and value is not False]
        narrowing += ["--limit"] if limit != 50 else []
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
    for option, value in narrow.items():
        if value is not None and not value.strip():
            fail(f"{option}: empty; give a value, or leave {option} out for all")
    outcomes = tuple(dict.fromkeys(o.strip().lower() for o in outcome)) if outcome else None
    unknown = [o for o in outcomes or () if o not in OUTCOMES]
    if unknown:
        fail(f"--outcome {unknown[0]!r}: not an outcome; give one of {', '.join(OUTCOMES)} (repeat for several)")
    if slower_than is not None and not slower_than >= 0:
        fail(f"--slower-than {slower_than:g}: give a latency in ms, 0 or more")
    now = datetime.now(UTC)
    hi = parse_moment(until, "--until", now) if until is not None else now
    lo = parse_moment(since, "--since", now) if since is not None else hi - DEFAULT_SINCE
    if hi <= lo:
        fail(f"--since {lo:%Y-%m-%d %H:%M:%S} is not before --until {hi:%Y-%m-%d %H:%M:%S} (UTC): give a window "
             "whose end comes after its start")  # fmt: skip
    slice_ = {"model": model, "hw_pool": hw_pool, "traffic_class": traffic_class, "host": host, "bundle": bundle}
    given = {k: v for k, v in slice_.items() if v is not None}
    window = {"start": lo, "end": hi, **given, "failing": failing}
    if outcomes is not None:
        window["outcome"] = list(outcomes)
    if slower_than is not None:
        window["min_latency_ms"] = slower_than
    with query_runner(dsn, data_dir, service, token) as runner:
        listed = runner.query("request_list", **window, limit=limit)  # type: ignore[attr-defined]
        kinds = runner.query("request_kinds", **window)  # type: ignore[attr-defined]
        served_from_one = bool((listed.get_column("bundle_id") != "").any())  # else no replay command needs it
        release = bundle_pushes(runner) if served_from_one else None
    what = "failing requests" if failing else "requests"
    labels = {"model": "model", "hw_pool": "hardware pool", "traffic_class": "traffic class", "host": "host",
              "bundle": "bundle"}  # fmt: skip
    scope = "".join(f"{labels[k]} {v}, " for k, v in given.items())
    scope += f"outcome {' or '.join(outcomes)}, " if outcomes else ""
    scope += f"at least {slower_than:g} ms, " if slower_than is not None else ""
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
    for line in next_steps(listed, service, token, release):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


SERVICE_PLACEHOLDER: Final = "SERVICE_URL"
"""Stands for the service replay reads through in the replay hint of a list read from a store (``--dsn``)."""


def bundle_pushes(runner: object) -> pl.DataFrame | None:
    """Which bundles the service (or store) holds a push of (:data:`~inferensics.dashboard._internal.replay_command.
    RELEASE_QUERY`, read role enough): a replay command of a request whose bundle was never pushed needs ``--bundle
    DIR``. ``None`` when the query fails (an older service): the push state is then not known."""
    from inferensics.analytics.errors import AnalyticsError
    from inferensics.collector.client import ServiceError
    from inferensics.dashboard._internal.replay_command import RELEASE_QUERY, release_window

    try:
        return runner.query(RELEASE_QUERY, **release_window(datetime.now(UTC)))  # type: ignore[attr-defined,no-any-return]
    except (ServiceError, AnalyticsError):
        return None


def unpushed_of(release: pl.DataFrame | None, bundle_id: str) -> UnpushedBundle | None:
    """The bundle ``bundle_id`` when ``release`` (:func:`bundle_pushes`) holds no push of it, else ``None``."""
    from inferensics.dashboard._internal.replay_command import unpushed_bundle

    return unpushed_bundle(release.iter_rows(named=True) if release is not None else None, bundle_id)


def replay_hint(
    request_id: str, service: str | None, token: str | None, unpushed: UnpushedBundle | None = None
) -> list[str]:
    """The replay command of ``request_id`` as it runs (the request page's, :mod:`~inferensics.dashboard._internal.
    replay_command`): the service the list was read through, the trusted builders' keys from
    ``$INFERENSICS_BUNDLE_KEYRING``, each placeholder it cannot fill explained on a line of its own. A bare
    ``inferensics replay ID`` stopped at once (no keyring of trusted builders), and a list read from a store names no
    service to fetch the request's pack through. A request whose bundle the service holds no push of (``unpushed``)
    gets ``--bundle DIR``: replay stopped with "bundle ... is not available here (not pushed to the service)".

    >>> replay_hint("r-1", "http://127.0.0.1:4318", None)[0]
    'replay a failing one: inferensics replay r-1 --service http://127.0.0.1:4318 --keyring BUILDER.pub'
    """
    from inferensics.dashboard._internal.replay_command import (
        BUNDLE_PLACEHOLDER,
        KEYRING_ENV,
        KEYRING_PLACEHOLDER,
        bundle_folder_text,
        replay_command,
    )

    keyring = os.environ.get(KEYRING_ENV) or None
    typed_token = token is not None and not os.environ.get(TOKEN_ENV)  # replay reads $INFERENSICS_TOKEN itself
    shown = replay_command(request_id, service_url=service or SERVICE_PLACEHOLDER, keyring=keyring, token=typed_token,
                           unpushed=unpushed)  # fmt: skip
    lines = [f"replay a failing one: {shown.command}"]
    if not service:
        lines.append(f"  {SERVICE_PLACEHOLDER}: replay fetches the request through a collector service; while "
                     "none owns this store, start one on it (inferensics serve --dsn DSN: it holds the store until "
                     "stopped)")  # fmt: skip
    if not keyring:
        lines.append(f"  {KEYRING_PLACEHOLDER}: the trusted builders' public keys, a .pub file or a folder of them "
                     f"(the one inferensics bundle keygen wrote), or set ${KEYRING_ENV}")  # fmt: skip
    if typed_token:
        lines.append(f"  TOKEN: a token of the service with the admin role, or set ${TOKEN_ENV}")
    if unpushed is not None:
        lines.append(f"  {BUNDLE_PLACEHOLDER}: {bundle_folder_text(unpushed, service or SERVICE_PLACEHOLDER, code='')}")
    return lines


def next_steps(
    listed: pl.DataFrame, service: str | None, token: str | None = None, release: pl.DataFrame | None = None
) -> list[str]:
    """How to open a listed request: ``requests --id`` and the dashboard's page for the newest listed; and
    ``inferensics replay`` for the listed failing one most worth replaying that replay can take (served from a bundle,
    inputs captured; :func:`replay_hint`): a numeric fault of the compiled code before an error it raised, before an
    eager run, before a fault of the inputs (an error raised before any compiled graph ran, a verdict that blamed
    them), the newest of its rank (:func:`~inferensics.analytics.request_list.replay_worth`), with a line saying why
    when newer ones were passed over, or that every one failed on its inputs; else why none can be replayed when
    failing ones are listed. ``release`` (:func:`bundle_pushes`) tells whether the chosen one's bundle was pushed
    (``None``: not known, the command as before)."""
    import polars as pl

    from inferensics.analytics.request_list import INPUT_FAULT, INPUTS_CAPTURED, KIND_OK, replay_worth

    through = f" --service {service}" if service else ""
    first = str(listed.item(0, "request_id"))
    lines = [f"open one: inferensics requests --id {first}{through}, or the dashboard's request page "
             f"/{REQUEST_PAGE}{first}"]  # fmt: skip
    failed = listed.filter(pl.col("kind") != KIND_OK)
    replayable = failed.filter((pl.col("bundle_id") != "") & pl.col(INPUTS_CAPTURED)).to_dicts()
    if replayable:
        worth = [replay_worth(r) for r in replayable]  # newest first: min() keeps the newest of the best rank
        best = min(range(len(replayable)), key=lambda i: worth[i][0])
        chosen = str(replayable[best]["request_id"])
        hint = replay_hint(chosen, service, token, unpushed_of(release, str(replayable[best]["bundle_id"])))
        if best:  # why, beside the command it explains (the placeholders' lines follow)
            newest = str(replayable[0]["request_id"])
            newer = f"{best} newer replayable ones" if best > 1 else "a newer replayable one"
            hint.insert(1, f"  {chosen} chosen over {newer}: it {_cell(worth[best][1], 2 * DETAIL_MAX)}, while "
                           f"{newest} (the newest) {_cell(worth[0][1], 2 * DETAIL_MAX)}")  # fmt: skip
        elif worth[0][0] == INPUT_FAULT:
            hint.insert(1, f"  every replayable one listed failed on its inputs: the newest, {chosen}, "
                           f"{_cell(worth[0][1], 2 * DETAIL_MAX)}; replay shows which input, not a fault of the "
                           "compiled code")  # fmt: skip
        lines += hint
    elif failed.height:
        lines.append("none listed can be replayed: replay needs a request served from a bundle with its inputs "
                     "captured (serve from a bundle with SdkConfig(capture=CaptureRules(enabled=True)))")  # fmt: skip
    return lines


def _show_request(runner: object, request_id: str, occurrence: int | None) -> None:
    """One request's lines: which one, how it was served, what its bundle did (verified hit, miss and why, unqualified
    shape), its output's fingerprint and input capture, a graph break
    or fallback, its graphs, its kernel-registry decisions."""
    from inferensics.analytics.drilldown import bundle_lines, graph_break_text, shown_status

    which = {"request_id": request_id, **({"occurrence": occurrence} if occurrence is not None else {})}
    d = runner.query("request_detail", **which).row(0, named=True)  # type: ignore[attr-defined]
    graphs = runner.query("request_graphs", **which)  # type: ignore[attr-defined]
    decisions = runner.query("request_kernel_decisions", **which)  # type: ignore[attr-defined]
    replays = runner.query("request_replays", **which)  # type: ignore[attr-defined]
    n, k = int(d["occurrences"]), int(d["occurrence"])
    shared = f" (request {k} of {n} sharing the id; --occurrence N shows another)" if n > 1 else ""
    lines = [
        f"request {request_id}{shared}: {d['ts']:%Y-%m-%d %H:%M:%S} UTC · model {d['model']} · pool {d['hw_pool']} · "
        f"host {d['host']} · traffic {d['traffic_class'] or '-'} · bundle {d['bundle_id'] or 'none'}",
        f"outcome {d['outcome']} · status {shown_status(d)} · latency {float(d['latency_ms'] or 0):.1f} ms · compile "
        f"in request {float(d['compile_ms'] or 0):.1f} ms · guards {d['guard_outcome']} · graph cache "
        f"{d['cache_status']}",
        *(f"bundle: {text}" for _, text in bundle_lines(d)),
        output_line(d),
        capture_line(d),
    ]
    broke = graph_break_text(d)
    if broke is not None:
        lines.append(f"graph break: {broke}")
    elif d["fallback_reason"]:
        ran = "ran eagerly" if d["outcome"] == "fallback" else "did not run eagerly"
        lines.append(f"fallback reason: {d['fallback_reason']} ({ran})")
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
        fell_back = f" · {FALLBACK_WORDS}" if r["fallback"] else ""
        lines.append(f"kernel {where}: {r['op']}={r['provider']} at {r['signature']}{fell_back}{skipped}")
        lines += [f"  {e.partition(': ')[0]} raised and was taken out for that signature" for e in r["raised"]]
    lines += verdict_lines(replays)
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


FALLBACK_WORDS: Final = "fallback: no provider before it could serve this signature"
"""What ``--id`` says of a kernel decision that fell back (``kernel_decisions.fallback``: the reference served, or
Inductor's code traced in, because every provider ahead of it was skipped; the request page's ``fallback`` column)."""
FP_WORDS: Final = {
    "unsampled": "not fingerprinted (the sampling rule, fp_rate, skipped it)",
    "failed": "not fingerprinted (the SDK could not read it)",
    "none": "none given to set_output",
}
"""What ``--id`` says of an output whose ``fp_status`` holds no fingerprint."""


def output_line(d: Mapping[str, Any]) -> str:
    """The verdict of the request's output fingerprint, as the failing list and the dashboard give it: its NaN and inf
    counts when it counted any.

    >>> output_line({"fp_status": "ok", "fp_nan": 16384, "fp_inf": 0})
    'output: non-finite (NaN 16384, inf 0)'
    >>> output_line({"fp_status": "ok", "fp_nan": 0, "fp_inf": 0})
    'output: finite (fingerprinted: no NaN, no inf)'
    >>> output_line({"fp_status": "unsampled"})
    'output: not fingerprinted (the sampling rule, fp_rate, skipped it)'
    """
    nan, inf = int(d.get("fp_nan") or 0), int(d.get("fp_inf") or 0)
    if nan or inf:
        return f"output: non-finite (NaN {nan}, inf {inf})"
    status = str(d.get("fp_status") or "")
    return f"output: {FP_WORDS.get(status, 'finite (fingerprinted: no NaN, no inf)')}"


def capture_line(d: Mapping[str, Any]) -> str:
    """Whether the request's inputs were captured (what ``inferensics replay`` needs), with the blob's digest and
    size.

    >>> capture_line({"inputs_captured": True, "capture_blob": "ab" * 32, "capture_bytes": 2048})
    'inputs captured (blob abababababababababababababababababababababababababababababababab, 2,048 bytes stored)'
    >>> capture_line({"inputs_captured": False, "input_digest": ""})[:58]
    'inputs not captured (replay needs them): it passed no inpu'
    """
    from inferensics.analytics.drilldown import uncaptured_text

    if not d.get("inputs_captured"):
        return f"inputs not captured (replay needs them): {uncaptured_text(d)}"
    size = d.get("capture_bytes")
    stored = f"{int(size):,} bytes stored" if size is not None else "blob not found in the store"
    return f"inputs captured (blob {d['capture_blob']}, {stored})"


def verdict_lines(replays: pl.DataFrame) -> list[str]:
    """The newest :data:`VERDICTS_SHOWN` replay verdicts of a request (``request_replays``, newest first), one line
    each: attribution, op, node, source line, kernel, when and where it ran, the replay id; then how many older ones
    there are. None for a request never replayed."""
    from inferensics.analytics.drilldown import SAME_REQUEST

    lines: list[str] = []
    for r in replays.head(VERDICTS_SHOWN).iter_rows(named=True):
        fields = [f"{label} {r[key]}" for label, key in (("op", "op"), ("node", "fx_node")) if r[key]]
        if r["source_file"]:
            text = f" {r['source_text']}" if r["source_text"] else ""
            fields.append(f"{r['source_file']}:{r['source_line']}{text}")
        if r["kernel"]:
            fields.append(f"kernel {r['kernel']}")
        if r["detail"] and r["detail"] != r["attribution"]:
            fields.append(str(r["detail"]))
        device = f" on {r['device_name']}" if r["device_name"] else ""
        fields.append(f"{r['ts']:%Y-%m-%d %H:%M:%S} UTC{device} (replay {r['replay_id']})")
        untied = " (may be another request's: it names neither this request's inputs nor its start)"
        lines.append(f"replay verdict: {' · '.join([str(r['attribution']), *fields])}"
                     + (untied if SAME_REQUEST in r and r[SAME_REQUEST] is None else ""))  # fmt: skip
    if replays.height > VERDICTS_SHOWN:
        lines.append(f"  and {replays.height - VERDICTS_SHOWN:,} older replay verdict(s)")
    return lines


FOLLOWING: Final = ("model", "what failed", "outcome", "latency ms")
"""The columns that follow a narrow table (80 columns, a pipe) on each request's own line instead: in the table,
model and what failed folded into pieces (``tiny-`` / ``decod`` / ``er``) and outcome and latency left the detail no
room."""


def _print_table(listed: pl.DataFrame) -> None:
    """The list as a table as wide as the terminal: id, time and host whole (which request, when, which of a pool's
    hosts), how it was served (outcome, latency), the detail in what width is left, cut to one line; where less than
    :data:`DETAIL_MIN` is left (80 columns, a pipe), the table keeps id, time, pool and host and the rest
    (:data:`FOLLOWING`, then the detail) follows it, one line each, rather than a word or a piece a line."""
    from rich.cells import cell_len
    from rich.table import Table

    headers = ("request id", "time (UTC)", "model", "pool", "host", "what failed", "outcome", "latency ms")
    whole = (True, True, False, False, True, False, True, True)
    rows = [
        (str(r["request_id"]), f"{r['ts']:%Y-%m-%d %H:%M:%S}", str(r["model"]), str(r["hw_pool"]), str(r["host"]),
         str(r["kind"]), str(r["outcome"]), f"{float(r['latency_ms'] or 0):,.1f}")
        for r in listed.iter_rows(named=True)
    ]  # fmt: skip
    details = [shown_detail(r) for r in listed.iter_rows(named=True)]
    widths = [max(cell_len(h), *(cell_len(row[i]) for row in rows)) for i, h in enumerate(headers)]
    # A boxed table of n columns takes 3 n + 1 columns besides its cells (a rule and a space each side of each).
    left = console.width - sum(widths) - 3 * (len(headers) + 1) - 1
    inline = left >= DETAIL_MIN
    shown = [i for i, h in enumerate(headers) if inline or h not in FOLLOWING]
    table = Table(pad_edge=inline)  # narrow, the two edge spaces go to the cells
    for i in shown:
        table.add_column(headers[i], no_wrap=whole[i], min_width=widths[i] if whole[i] else None, overflow="fold")
    if inline:
        table.add_column("detail", no_wrap=True, overflow="ellipsis")
    for row, detail in zip(rows, details, strict=True):
        cells = [row[i] for i in shown]
        table.add_row(*cells, *([_cell(detail, min(max(left, 1), DETAIL_MAX))] if inline else []))
    console.print(table)
    if not inline:
        for (request_id, _, model, _, _, kind, outcome, latency), detail in zip(rows, details, strict=True):
            served = f"{kind} · model {model} · outcome {outcome} · {latency} ms"
            console.print(f"{request_id}: {served}" + (f" · {_cell(detail, DETAIL_MAX * 3)}" if detail else ""),
                          markup=False, highlight=False, soft_wrap=True)  # fmt: skip
