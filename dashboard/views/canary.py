"""Canary comparison: pick a model, a baseline and a candidate bundle; see the verdict, evidence, charts.

The comparison is like for like by default: on each hardware pool where both bundles served (Hardware pool
*Where both served*), each judged alone, the worst pool's verdict the headline (a table gives every pool's),
naming the pools it leaves out and why. Over every pool, the baseline's requests from a pool the canary never ran
on made a latency check "fail" on hardware, not on the bundle; and judging only the candidate's busiest shared
pool hid a failure on another (walk 42).

A link can fill the form in (``/canary?model=...&candidate=...&baseline=...&min_pairs=12``, built by
:func:`inferensics.dashboard._internal.links.canary_link`): the page then opens on that comparison's verdict. A
parameter it cannot use gets one warning naming it and what is expected; its field keeps the default.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Literal

import polars as pl
import streamlit as st

from inferensics.analytics import canary as canary_rules
from inferensics.analytics.canary_pools import QUERY_NAME as POOLS_QUERY
from inferensics.analytics.canary_pools import PoolSplit, PoolVerdict, correct_for_pools, pool_frames, worst_verdict
from inferensics.analytics.report import charts as report_charts
from inferensics.analytics.report.canary import (
    DISAGREEING,
    NOT_REPLAYABLE,
    disagreement_summary,
    render_canary_markdown,
    verdict_of,
)
from inferensics.analytics.report.evidence import evidence_table
from inferensics.collector.client import ServiceError
from inferensics.dashboard._internal import charts, queries
from inferensics.dashboard._internal.filters import ALL, TIME_RANGES, now
from inferensics.dashboard._internal.links import CANARY_PARAMS, END_PARAM, duration_text, parse_duration, request_link
from inferensics.dashboard._internal.options import filter_options
from inferensics.dashboard._internal.service import fetch_queries, run_query, said, section_query, service_errors
from inferensics.dashboard._internal.tables import show_table
from inferensics.schema import columns as col

DEFAULT_WINDOW = "Last 6 hours"
SHARED = "Where both served"
"""The Hardware pool choice that compares like for like, the default: the pool where both bundles served
(:func:`like_for_like`)."""
RECORDED_SHOWN = 20
VERDICT_STYLE = {
    "pass": (st.success, ":material/check_circle:"),
    "fail": (st.error, ":material/cancel:"),
    "inconclusive": (st.warning, ":material/help:"),
}


class LinkedForm:
    """The form values the page's link asks for (its query parameters, :data:`links.CANARY_PARAMS`).

    Each method returns the default of one field: the link's value when it is usable there, else the page's own
    default, after one warning (through ``warn``) that names the parameter and what it expects.
    """

    def __init__(self, params: Mapping[str, str], warn: Callable[[str], object]) -> None:
        self.params = {k: v.strip() for k, v in params.items() if k in CANARY_PARAMS and v.strip()}
        self.warn = warn
        for name in params:
            if name not in CANARY_PARAMS and name != END_PARAM:
                warn(
                    f"The link's parameter `{name}` is not one this page reads (it reads "
                    f"{', '.join(CANARY_PARAMS)} and {END_PARAM}); it is ignored."
                )

    def _unusable(self, name: str, expected: str) -> None:
        shown = self.params[name][:80].replace("`", "'")
        self.warn(f"The link's `{name}={shown}` is not usable: expected {expected}. That field keeps its default.")

    def choice(self, name: str, options: list[str], default: int, expected: str) -> int:
        """The position of the link's ``name`` among ``options`` (``All`` in any case for :data:`ALL`)."""
        if name not in self.params:
            return default
        raw = self.params[name]
        wanted = ALL if raw.lower() == ALL.lower() else raw
        if wanted in options:
            return options.index(wanted)
        self._unusable(name, expected)
        return default

    def bundle(self, name: str, labels: dict[str, str], default: int, model: str) -> int:
        """The position of the bundle the link's ``name`` gives by id or id prefix among ``labels``' ids."""
        if name not in self.params:
            return default
        ids = list(labels)
        prefix = self.params[name].lower()
        found = [i for i, b in enumerate(ids) if b.lower() == prefix] or [
            i for i, b in enumerate(ids) if b.lower().startswith(prefix)
        ]
        if len(found) == 1:
            return found[0]
        what = "matches none" if not found else f"matches {len(found)}"
        offered = ", ".join(labels[b] for b in ids[:8]) + (", ..." if len(ids) > 8 else "")
        self._unusable(name, f"the id, or a prefix of one id, of a bundle of {model} (it {what} of: {offered})")
        return default

    def window(self, windows: list[str], default: int) -> int:
        """The position of the shortest of ``windows`` (labels of :data:`TIME_RANGES`) that holds the link's
        ``window`` duration."""
        if "window" not in self.params:
            return default
        span = parse_duration(self.params["window"])
        spans = [TIME_RANGES[w] for w in windows]
        if span is not None and span <= max(spans):
            return spans.index(min(s for s in spans if s >= span))
        self._unusable("window", f"a duration such as 15m, 6h or 7d, at most {duration_text(max(spans))}")
        return default

    def number(self, name: str, default: float, low: float, high: float | None) -> float:
        """The link's ``name`` as a number within ``[low, high]`` (whole when ``default`` is an int)."""
        if name not in self.params:
            return default
        whole = isinstance(default, int)
        try:
            value: float = int(self.params[name]) if whole else float(self.params[name])
        except ValueError:
            value = float("nan")
        if low <= value and (high is None or value <= high):
            return value
        kind = "a whole number" if whole else "a number"
        self._unusable(name, f"{kind} {f'from {low:g} to {high:g}' if high is not None else f'of at least {low:g}'}")
        return default


DIGEST_PATTERN = r"^[0-9a-fA-F]{13,}$"
"""A bundle id that is a hex digest (the schema's sha256 of the manifest): shown as its first 12 digits."""
DIGEST_SHOWN = 12


def shown_id(bundle_id: str) -> str:
    """``bundle_id`` as the page shows it: a hex digest's first 12 digits, any other id whole (named ids such as
    ``bnd-llama-70b-canary`` and ``bnd-llama-70b-prod`` share their first 12 characters)."""
    return bundle_id[:DIGEST_SHOWN] if re.match(DIGEST_PATTERN, bundle_id) else bundle_id


def bundle_label(bundles: pl.DataFrame) -> dict[str, str]:
    """Bundle id → ``name (id as shown)`` for the pickers (:func:`shown_id`)."""
    return {
        str(r[col.BUNDLE_ID]): f"{r[col.BUNDLE_NAME] or 'unnamed'} ({shown_id(str(r[col.BUNDLE_ID]))})"
        for r in bundles.iter_rows(named=True)
    }


def bundle_choices(model: str, bundles: pl.DataFrame, served: list[str]) -> tuple[dict[str, str], int, int]:
    """The bundles to offer for ``model``: its registered ones, newest registration first, then the bundle
    ids requests were served with that no registration names (``served``, busiest first), each labelled
    ``unregistered``. Returns the labels and the default candidate and baseline positions: the newest
    registration against the next bundle offered; among unregistered bundles only, the least busy (a
    canary serves a share of the traffic) against the busiest."""
    own = bundles.filter(pl.col(col.MODEL) == model) if bundles.height else bundles
    labels = bundle_label(own)
    known = set(bundles.get_column(col.BUNDLE_ID).to_list()) if bundles.height else set()
    extra = [b for b in served if b and b not in known]
    labels.update({b: f"unregistered ({b[:24]})" for b in extra})
    if own.height or len(labels) < 2:
        return labels, 0, 1
    return labels, len(labels) - 1, 0


def pickers(
    models: list[str],
    traffic: list[str],
    bundles: pl.DataFrame,
    served: list[str],
    pools: list[str],
    *,
    link: LinkedForm,
) -> tuple[dict[str, Any], str] | None:
    """The model picker and the comparison form; the parameters to compare (the form's defaults, the link's
    values where it gives usable ones, until it is submitted) and the hardware pool picked: a pool, :data:`ALL`
    or :data:`SHARED` (the default), which :func:`like_for_like` resolves once the sides are known."""
    if not models:
        st.info("No model has served requests yet, so there is nothing to compare.")
        return None
    model_at = link.choice("model", models, 0, f"a model that served requests: {', '.join(models)}")
    model = st.selectbox("Model", models, index=model_at, key="canary.model")
    labels, cand_at, base_at = bundle_choices(model, bundles, served)
    ids = list(labels)
    if len(ids) < 2:
        st.info(f"{model} has {len(ids)} bundle(s), registered or seen in requests; a comparison needs two.")
        return None
    if link.params.get("model", model) == model:  # the link's bundles are its model's, not one picked since
        cand_at = link.bundle("candidate", labels, cand_at, model)
        base_at = link.bundle("baseline", labels, base_at, model)
    traffic_options, pool_options, windows = [ALL, *traffic], [SHARED, ALL, *pools], list(TIME_RANGES)
    # The analytics defaults (CanaryParams); a short run (the demo's) serves fewer, and its summary names what it
    # used (and links here with them). Read before the form, so that a link's warnings show above it.
    default = canary_rules.CanaryParams.model_fields
    traffic_at = link.choice("traffic_class", traffic_options, 0, f"one of {', '.join(traffic_options)}")
    window_at = link.window(windows, windows.index(DEFAULT_WINDOW))
    tolerance_at = float(link.number("latency_tolerance", default["latency_tolerance"].default, 0.0, 2.0))
    min_requests_at = int(link.number("min_requests", default["min_requests"].default, 1, None))
    min_pairs_at = int(link.number("min_pairs", default["min_pairs"].default, 1, None))
    pool_at = link.choice("hw_pool", pool_options, 0, f"a pool that served requests: {', '.join([ALL, *pools])}")
    with st.form("canary.form"):
        one, two = st.columns(2)
        candidate = one.selectbox(
            "Candidate", ids, index=cand_at, format_func=labels.__getitem__, key="canary.candidate"
        )
        baseline = two.selectbox("Baseline", ids, index=base_at, format_func=labels.__getitem__, key="canary.baseline")
        three, four, five = st.columns(3)
        traffic_class = three.selectbox("Traffic class", traffic_options, index=traffic_at, key="canary.traffic_class")
        window = four.selectbox("Window", windows, index=window_at, key="canary.window")
        tolerance = five.number_input(
            "Latency tolerance", 0.0, 2.0, tolerance_at, 0.05, format="%.2f", key="canary.tolerance"
        )
        six, seven, eight = st.columns(3)
        min_requests = six.number_input("Min requests per side", 1, None, min_requests_at, key="canary.min_requests")
        min_pairs = seven.number_input("Min input-matched pairs", 1, None, min_pairs_at, key="canary.min_pairs")
        hw_pool = eight.selectbox("Hardware pool", pool_options, index=pool_at, key="canary.hw_pool")
        st.form_submit_button("Compare", type="primary")
    end = now()
    return {
        "model": model, "baseline": baseline, "candidate": candidate,
        "traffic_class": None if traffic_class == ALL else traffic_class,
        "hw_pool": None if hw_pool in (ALL, SHARED) else hw_pool,
        "start": end - TIME_RANGES[window], "end": end, "latency_tolerance": tolerance,
        "min_requests": int(min_requests), "min_pairs": int(min_pairs),
    }, str(hw_pool)  # fmt: skip


Note = tuple[Literal["info", "warning"], str]
"""How the page says which pools it compares: an info or a warning, in Markdown."""
MIXED_POOLS = "a latency or rate difference may then be the hardware's, not the bundle's"


def like_for_like(choice: str, split: PoolSplit) -> tuple[list[str | None], Note | None]:
    """The pools to judge, each alone, for the Hardware pool ``choice`` (:data:`SHARED` or :data:`ALL`; ``None``:
    every pool at once) and what the page says about them.

    :data:`SHARED` judges each pool where both bundles served (the candidate's busiest first; the worst verdict
    is the comparison's), and names the pools it leaves out and why: a canary usually serves in one pool while
    its baseline serves in several, and over all of them the baseline's requests came from other hardware than
    the candidate's (on the demo's run a p50 "failed" only so). Where the bundles share no pool it compares them
    all, and warns. :data:`ALL` compares every pool at once, with a warning when a pool served only one side.
    """
    shared, pools = split.shared(), split.pools()
    one_sided = [p for p in pools if p not in shared]
    if not any(split.baseline.values()) or not any(split.candidate.values()):
        return [None], None  # a side without requests: the verdict says so
    if not shared:
        apart = f"({split.sides()} requests): the comparison is across pools, and {MIXED_POOLS}."
        return [None], ("warning", f"**The bundles served no hardware pool in common** in this window {apart}")
    if choice == SHARED:
        if len(shared) == 1:
            (pool,) = shared
            text = (
                f"**Hardware pool {pool}**, where both bundles served in this window (baseline "
                f"{split.baseline[pool]:,}, candidate {split.candidate[pool]:,} requests): both sides ran on the "
                "same hardware."
            )
        else:
            counts = "; ".join(
                f"{p}: baseline {split.baseline[p]:,}, candidate {split.candidate[p]:,} requests" for p in shared
            )
            text = (
                f"**Hardware pools {', '.join(shared)}**, where both bundles served in this window, each judged "
                f"alone ({counts}): in each both sides ran on the same hardware, and the worst pool's verdict is "
                "the comparison's."
            )
        left = [split.describe(p) for p in one_sided]
        if left:
            text += f" Left out: {'; '.join(left)}."
        text += " *All* under Hardware pool compares every pool at once." if left or len(shared) > 1 else ""
        judged: list[str | None] = [*shared]
        return judged, ("info", text)
    if one_sided:
        alone = f"judges {', '.join(shared)} each alone" if len(shared) > 1 else f"compares {shared[0]} alone"
        return [None], ("warning", f"**All pools, mixed:** {'; '.join(split.describe(p) for p in one_sided)}; "
                                   f"{MIXED_POOLS}. *{SHARED}* {alone}.")  # fmt: skip
    return [None], None


def pool_split(params: Mapping[str, Any]) -> PoolSplit:
    """Requests per pool of each side in the comparison's model, traffic class and window (``fleet_overview``
    narrowed to each bundle)."""
    keys = ("model", "traffic_class", "start", "end")
    calls = {
        side: (queries.FLEET, {**{k: params[k] for k in keys}, "bundle": params[side]})
        for side in ("baseline", "candidate")
    }
    counts: dict[str, dict[str, int]] = {}
    for side, frame in fetch_queries("the bundles' hardware pools", calls).items():
        if frame.is_empty():
            counts[side] = {}
            continue
        per_pool = frame.group_by(col.HW_POOL).agg(pl.col(col.REQUESTS).sum())
        counts[side] = {str(p): int(n) for p, n in per_pool.select(col.HW_POOL, col.REQUESTS).iter_rows()}
    return PoolSplit(counts["baseline"], counts["candidate"])


def verdict_banner(frame: pl.DataFrame) -> None:
    """The verdict, the rule that decided it, and the two sides' sizes."""
    verdict, rule = verdict_of(frame)
    show, icon = VERDICT_STYLE.get(verdict, (st.info, ":material/info:"))
    show(f"**Verdict: {verdict.upper()}** — {rule}", icon=icon)
    row = frame.filter(pl.col("check") == "verdict").row(0, named=True)
    evidence = frame.filter(pl.col("check") != "verdict")
    outcomes = evidence.get_column("outcome").to_list()
    cells = st.columns(4)
    cells[0].metric("Baseline requests", f"{int(row['baseline'] or 0):,}")
    cells[1].metric("Candidate requests", f"{int(row['candidate'] or 0):,}")
    cells[2].metric("Checks failed", str(outcomes.count("fail")))
    cells[3].metric("Checks passed", str(outcomes.count("pass")))


def too_few_hint(frame: pl.DataFrame, min_requests: int) -> None:
    """Under an inconclusive verdict for want of requests: how a short run gets one (walk 39 met INCONCLUSIVE here
    beside the demo's printed FAIL, which its lowered thresholds gave)."""
    row = frame.filter(pl.col("check") == "verdict").row(0, named=True)
    fewest = int(min(row["baseline"] or 0, row["candidate"] or 0))
    if row["outcome"] != "inconclusive" or not 0 < fewest < min_requests:
        return
    st.caption(
        f"A side served {fewest:,} requests here, fewer than the {min_requests:,} *Min requests per side* asks. A "
        "short run (the demo's) lowers it to what was served, as `inferensics canary compare --min-requests` and "
        "the demo's printed link to this page do; fewer requests give wider intervals."
    )


def render() -> None:
    """Draw the page."""
    st.title("Canary comparison")
    with service_errors():
        options = filter_options()
        bundles = run_query(queries.BUNDLES, "bundles")
        link = LinkedForm({name: st.query_params.get(name, "") for name in st.query_params}, st.warning)
        picked = pickers(options.models, options.traffic_classes, bundles, options.bundles, options.pools, link=link)
        if picked is None:
            return
        params, pool_choice = picked
        pools = compared_pools(pool_choice, params) if pool_choice in (SHARED, ALL) else [params["hw_pool"]]
        frames = compared_frames(pools, params)
        if frames is None:
            return
        if len(frames) > 1:
            frames = pool_verdicts(frames)
        for pool, frame in frames.items():
            if len(frames) > 1:
                st.header(f"Hardware pool {pool}: {verdict_of(frame)[0].upper()}")
            comparison({**params, "hw_pool": pool}, frame, several=len(frames) > 1)
        with st.expander("How the verdict is decided"):
            st.markdown("\n\n".join((canary_rules.__doc__ or "").split("\n\n")[1:4]))
        recorded_verdicts(params["model"])


def compared_frames(pools: list[str | None], params: Mapping[str, Any]) -> dict[str | None, pl.DataFrame] | None:
    """Each of ``pools``' ``canary_compare`` frame (``None``: every pool at once), by pool in their order: several
    pools from one ``canary_compare_pools`` query, whose pools share the comparison's scans (as ``inferensics
    canary compare`` asks for them); ``None`` when the service rejected the comparison (its section says why)."""
    if len(pools) == 1:
        frame = section_query(queries.CANARY, "canary comparison", **{**params, "hw_pool": pools[0]})
        return None if frame is None else {pools[0]: frame}
    asked = {k: v for k, v in params.items() if k != "hw_pool"}
    frame = section_query(POOLS_QUERY, "canary comparison of each hardware pool", **asked, hw_pools=pools)
    if frame is None:
        return None
    split = pool_frames(frame)
    return {pool: split[str(pool)] for pool in pools}


PAIR_LINKS_NOTE = (
    "The argmax-agreement check's disagreeing input-matched pairs, the worst first (most of their first argmax ids "
    "differing, then the earliest): open a request for its graphs, kernels and bundle, and, where the candidate "
    "request is replayable, the replay command that names its fault."
)


def disagreeing_pairs(frame: pl.DataFrame) -> None:
    """The disagreeing pairs of the argmax-agreement check, each request a link to its request page (nothing when
    no pair disagrees)."""
    summary = disagreement_summary(frame)
    if not summary:
        return
    st.subheader(DISAGREEING)
    st.caption(f"{summary}. {PAIR_LINKS_NOTE}")
    lines = []
    for r in canary_rules.disagreements_of(frame).iter_rows(named=True):
        cand, base = str(r[canary_rules.CANDIDATE_REQUEST]), str(r[canary_rules.BASELINE_REQUEST])
        differing = int(r[canary_rules.ARGMAX_DIFFERING])
        how = f"{differing} of the first argmax ids differ" if differing else "first argmax ids agree or unknown"
        replayable = r.get(canary_rules.CANDIDATE_REPLAYABLE)
        # Replay refuses a candidate served without a bundle or without its inputs captured: say so, not offer it.
        replay = (
            "" if replayable is None  # an older service: not known
            else " · replayable" if replayable
            else f" · not replayable: the candidate was {NOT_REPLAYABLE}"
        )  # fmt: skip
        lines.append(
            f"- candidate [`{cand}`]({request_link('.', cand)}) · baseline [`{base}`]({request_link('.', base)}) · "
            f"input `{r[col.INPUT_DIGEST]}` · {how}{replay}"
        )
    st.markdown("\n".join(lines))


def comparison(params: Mapping[str, Any], frame: pl.DataFrame, *, several: bool) -> None:
    """One comparison's caption, verdict, charts, evidence and download (one per pool when ``several``)."""
    pool = params["hw_pool"]
    candidate, baseline = shown_id(params["candidate"]), shown_id(params["baseline"])
    st.caption(
        f"{params['model']} · candidate `{candidate}` vs baseline `{baseline}` · "
        f"{params['start']:%Y-%m-%d %H:%M} – {params['end']:%H:%M} UTC · pool {pool or 'all'}"
    )
    verdict_banner(frame)
    too_few_hint(frame, int(params["min_requests"]))
    evidence = frame.filter(pl.col("check") != "verdict")
    left, right = st.columns(2)
    charts.draw(left, charts.canary_latency(evidence))
    charts.draw(right, report_charts.canary_rates(evidence))
    st.subheader("Evidence")
    st.caption(
        "Each value in its unit: latency in ms (over the requests that did not compile in the request, as each "
        "latency rule says), its interval that of the ratio candidate / baseline (the number the threshold "
        "bounds, in multiples of the baseline), never of the candidate's latency; rates and agreement as a "
        "share, argmax agreement's baseline in input-matched pairs, output drift as medians and the KS distance "
        "D. The Markdown download has the numbers as computed."
    )
    suffix = f".{pool}" if several else ""
    show_table(evidence_table(frame), key=f"canary_evidence{suffix}")
    disagreeing_pairs(frame)
    label = f"{params['model']}: {candidate} vs {baseline}" + (f" on hardware pool {pool}" if several else "")
    st.download_button(
        "Download Markdown" + (f" ({pool})" if several else ""),
        render_canary_markdown(frame, label),
        file_name=f"canary{'-' + str(pool) if several else ''}.md",
        mime="text/markdown",
        key=f"canary_download{suffix}",
    )


def pool_verdicts(frames: Mapping[str | None, pl.DataFrame]) -> dict[str | None, pl.DataFrame]:
    """The worst pool's verdict as the headline, naming its pool, and every pool's verdict in a table, each pool's
    p-value checks first corrected for the pools judged (Holm–Bonferroni,
    :func:`~inferensics.analytics.canary_pools.correct_for_pools`, as ``inferensics canary compare`` corrects them,
    so the page and the command give the same verdicts). Returns the corrected frames, for the pools' sections."""
    corrected = correct_for_pools({str(pool): frame for pool, frame in frames.items()})
    frames = {pool: corrected[str(pool)] for pool in frames}
    per_pool = [PoolVerdict(str(pool), *verdict_of(frame)) for pool, frame in frames.items()]
    verdict, rule = worst_verdict(per_pool)
    show, icon = VERDICT_STYLE.get(verdict, (st.info, ":material/info:"))
    show(f"**Verdict: {verdict.upper()}** — {rule}", icon=icon)
    sizes = [frame.filter(pl.col("check") == "verdict").row(0, named=True) for frame in frames.values()]
    table = pl.DataFrame(
        {
            "hardware pool": [v.pool for v in per_pool],
            "verdict": [v.verdict.upper() for v in per_pool],
            "rule": [v.rule for v in per_pool],
            "baseline requests": [int(r["baseline"] or 0) for r in sizes],
            "candidate requests": [int(r["candidate"] or 0) for r in sizes],
        }
    )
    st.subheader("Verdict per hardware pool")
    show_table(table, key="canary_pool_verdicts")
    return frames


def compared_pools(choice: str, params: Mapping[str, Any]) -> list[str | None]:
    """The pools :func:`like_for_like` judges for ``choice`` (``None``: every pool at once), after saying which
    and why."""
    try:
        split = pool_split(params)
    except ServiceError as exc:
        if exc.status not in (400, 404, 422):
            raise
        st.warning(
            f"**Which pools each bundle served could not be read** ({said(exc)}): every pool is compared.",
            icon=":material/warning:",
        )
        return [None]
    pools, note = like_for_like(choice, split)
    if note is not None:
        kind, text = note
        if kind == "info":
            st.info(text, icon=":material/memory:")
        else:
            st.warning(text, icon=":material/warning:")
    return pools


def recorded_verdicts(model: str) -> None:
    """The verdicts ``inferensics canary compare`` recorded for ``model`` (any candidate), newest first."""
    st.subheader("Recorded verdicts")
    frame = section_query(queries.CANARY_VERDICTS, "recorded verdicts", model=model, limit=RECORDED_SHOWN)
    if frame is None:
        return
    st.caption(
        f"What `inferensics canary compare` said about {model}'s candidates, newest first (it records each "
        f"verdict it gives; the last {RECORDED_SHOWN})."
    )
    # Which pool each verdict compared: it may not be the one compared above.
    ids = pl.col(col.BASELINE, col.CANDIDATE)
    shown = frame.with_columns(
        pl.when(ids.str.contains(DIGEST_PATTERN)).then(ids.str.slice(0, DIGEST_SHOWN)).otherwise(ids),
        pl.col(col.HW_POOL).replace("", "all"),
    )
    order = (col.TS, col.CANDIDATE, col.BASELINE, col.TRAFFIC_CLASS, col.HW_POOL, col.WINDOW_START, col.WINDOW_END,
             col.VERDICT)  # fmt: skip
    show_table(
        shown,
        columns=[*order, col.RULE],
        empty=f"No verdict recorded for {model} yet: run `inferensics canary compare` to record one.",
        key="canary_recorded",
    )


if __name__ == "__main__":
    render()
