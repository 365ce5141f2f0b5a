"""Request drill-down: one request id → how it was served, its graphs, kernels, generated code, inputs."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import polars as pl
import streamlit as st

from inferensics.analytics.drilldown import (
    NONFINITE_BY_PATH,
    SAME_REQUEST,
    bundle_lines,
    graph_break_id,
    graph_break_text,
    shown_status,
    uncaptured_text,
)
from inferensics.collector.client import ServiceError
from inferensics.dashboard._internal import charts, queries
from inferensics.dashboard._internal.codemap import kernel_lines
from inferensics.dashboard._internal.filters import now
from inferensics.dashboard._internal.kernel_decisions import provider_decisions, providers_section
from inferensics.dashboard._internal.links import REQUEST_ID_PARAM, bundle_link
from inferensics.dashboard._internal.replay_command import (
    RELEASE_QUERY,
    release_window,
    replay_command,
    unpushed_bundle,
)
from inferensics.dashboard._internal.service import error_panel, fetch_blob, run_query, said, service_errors
from inferensics.dashboard._internal.settings import current_settings
from inferensics.dashboard._internal.tables import MISSING, byte_size, duration_ms, show_table
from inferensics.schema import RequestEvent
from inferensics.schema import columns as col

CACHE_SHOWN = {"none": MISSING}  # the request compiled nothing (a longer word does not fit the cell)
_GRAPH_COLUMNS = (
    "position", "calls", "graph_us", "code_location", "compile_host", "compile_origin", "compile_cache_status",
    "compile_seconds",
)  # fmt: skip
"""The compiled-graphs table's first columns (which host's compile is shown, beside the request's host in the
headline); the others (keys, ids, compile time) follow."""
ID_KEY = "drill.request_id"


PICK_KEY = "drill.pick"


MARKDOWN_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+!|~<>$])")
"""Characters Markdown (and Streamlit's LaTeX ``$``) would read as markup in a recorded value."""


def _escaped(text: str) -> str:
    """``text`` with its Markdown characters shown as themselves."""
    return MARKDOWN_SPECIAL.sub(r"\\\1", text)


def _text(value: Any) -> str | None:
    """A recorded value as text, stripped; ``None`` when there is none: a null, a blank string, an empty list or
    mapping. A 0 or False is a value: it is shown, never read as missing."""
    if value is None or (isinstance(value, list | tuple | dict) and not value):
        return None
    return str(value).strip() or None


def _bold(value: Any) -> str:
    """A recorded value in bold, its Markdown characters shown as themselves; :data:`MISSING` when there is
    none (an empty traffic class read ``****``)."""
    text = _text(value)
    return MISSING if text is None else "**" + _escaped(text) + "**"


def _code(value: Any) -> str:
    """A recorded value as inline code; :data:`MISSING` when there is none (an empty shape read as a bare
    backtick pair)."""
    text = _text(value)
    return MISSING if text is None else "`" + text.replace("`", "'") + "`"


def request_id_input() -> str:
    """The request id box, prefilled from ``?request_id=`` (links from the overview) or from the recent
    requests worth opening (:func:`recent_picker`)."""
    linked = st.query_params.get(REQUEST_ID_PARAM)
    if linked and st.session_state.get("drill.linked") != linked:
        st.session_state[ID_KEY] = linked
        st.session_state["drill.linked"] = linked
    value = st.text_input("Request id", key=ID_KEY, placeholder="paste a request id, or pick one below")
    return value.strip()


OCCURRENCE_KEY = "drill.occurrence"  # which of the requests sharing the id is shown (1 for the earliest)
OCCURRENCE_PARAM = "occurrence"  # ?occurrence=N beside ?request_id=


def occurrence_input(request_id: str) -> int | None:
    """Which request of the id to show: ``?occurrence=`` or the chooser of :func:`occurrence_chooser`, reset when
    the id changes; ``None`` (the earliest) by default."""
    if st.session_state.get("drill.occurrence_of") != request_id:
        st.session_state["drill.occurrence_of"] = request_id
        linked = st.query_params.get(OCCURRENCE_PARAM)
        st.session_state[OCCURRENCE_KEY] = int(linked) if linked and linked.isdigit() and int(linked) > 0 else None
    value = st.session_state.get(OCCURRENCE_KEY)
    return int(value) if value else None


def occurrence_chooser(d: dict[str, Any]) -> None:
    """Where requests share the id (a re-run client reuses its ids): say how many, which one is shown, and let the
    reader pick another; the page's graphs, reasons and timings are the shown request's own."""
    n, k = int(d.get("occurrences") or 1), int(d.get("occurrence") or 1)
    if n < 2:
        return
    starts = list(d.get("occurrence_starts") or [])
    labels = [f"{i + 1} of {n} · started {t:%Y-%m-%d %H:%M:%S} UTC" for i, t in enumerate(starts)]
    st.warning(
        f"{n:,} requests share the id {_code(d[col.REQUEST_ID])} (a client re-run reuses its ids). Showing request "
        f"{k} of {n}, started {d[col.TS]:%Y-%m-%d %H:%M:%S} UTC on {_code(d[col.HOST])}; its recompiles, guard "
        "failures and timings are its own (its host's, from its start to the next one's). Pick another below.",
        icon=":material/content_copy:",
    )
    picked = st.selectbox("Request of this id", labels, index=k - 1, key="drill.occurrence_pick")
    if picked and labels.index(picked) + 1 != k:
        st.session_state[OCCURRENCE_KEY] = labels.index(picked) + 1
        st.rerun()


def _pick() -> None:
    picked = st.session_state.get(PICK_KEY)
    if picked:
        st.session_state[ID_KEY] = str(picked).split(" ", 1)[0]


def recent_picker() -> None:
    """A picker of the last hour's requests worth opening: failed, non-finite, fallbacks, recompiles and first
    compiles (analytics ``notable_requests``); choosing one fills the id box."""
    end = now()
    notable = run_query(queries.NOTABLE_REQUESTS, "recent requests", start=end - timedelta(hours=1), end=end)
    if notable.is_empty():
        st.caption("No failed, non-finite, fallback, recompiling or compiling request in the last hour.")
        return
    options = [
        f"{r[col.REQUEST_ID]} · {r['why']} · {r[col.MODEL]} / {r[col.HW_POOL]} · {r[col.TS]:%H:%M:%S} UTC"
        for r in notable.iter_rows(named=True)
    ]
    st.selectbox(
        "Or pick a recent request worth opening (last hour, newest first)",
        options, index=None, key=PICK_KEY, on_change=_pick, placeholder=f"{len(options)} requests",
    )  # fmt: skip


def summary(d: dict[str, Any]) -> None:
    """How the request was served, in headline numbers and one line of context."""
    # Outcome gets the widest cell: "recompile" and "fallback" did not fit a sixth of a laptop screen (shown
    # as "recomp…"), nor did "3,100.0 ms" (durations now switch to seconds above one).
    cells = st.columns([1.5, 1.5, 1.2, 1.2, 0.9, 1])  # "non-finite" needs the wider status cell
    nonfinite = int(d.get(col.FP_NAN) or 0) + int(d.get(col.FP_INF) or 0)
    cells[0].metric("Outcome", str(d[col.OUTCOME]))
    cells[1].metric("Status", shown_status(d))
    cells[2].metric("Latency", duration_ms(d[col.LATENCY_MS]))
    cells[3].metric("Compile in request", duration_ms(d[col.COMPILE_MS]))
    cells[4].metric("Guards", str(d[col.GUARD_OUTCOME]))
    cells[5].metric(
        "Graph cache",
        CACHE_SHOWN.get(str(d[col.CACHE_STATUS]), str(d[col.CACHE_STATUS])),
        help=f"Cache result of the compiles this request triggered ({MISSING} when it compiled nothing): hit, miss (it "
        "compiled; a compile with no cache lookup counts as one) or mixed (some of each). A hit still runs Dynamo "
        "and loads the cached kernels, so its compile time is the time in the request column beside it.",
    )
    st.markdown(
        f"{_bold(d[col.MODEL])} on {_code(d[col.HOST])} · pool {_bold(d[col.HW_POOL])} · "
        f"traffic {_bold(d[col.TRAFFIC_CLASS])} · {bundle_words(d)} · "
        f"{d[col.TS]:%Y-%m-%d %H:%M:%S} UTC · shape {_code(d[col.SHAPE])}"
    )
    if nonfinite:
        st.error(
            f"**Non-finite output:** {int(d.get(col.FP_NAN) or 0):,} NaN and {int(d.get(col.FP_INF) or 0):,} inf "
            "values in its logits.",
            icon=":material/error:",
        )
    if d[col.STATUS] == "error" and d[col.ERROR]:
        # Its first line in the alert, the whole text as written below it: Markdown ran a multi-line error
        # (Dynamo's, with its user-code trace and ^^^^ markers) into one paragraph, and read `*args, **kwargs`
        # as emphasis.
        first, _, rest = str(d[col.ERROR]).strip().partition("\n")
        st.error(f"**Error:** {_escaped(first)}", icon=":material/error:")
        if rest.strip():
            st.code(str(d[col.ERROR]).strip(), language=None, wrap_lines=True)
    if d[col.FALLBACK_REASON] and d[col.OUTCOME] != "fallback" and graph_break_id(d[col.FALLBACK_REASON]):
        st.info(fallback_text(d), icon=":material/call_split:")  # compiled graphs served it: no fallback to warn of
    elif d[col.FALLBACK_REASON]:
        st.warning(fallback_text(d), icon=":material/slow_motion_video:")
    for label, key in (("Guard failures", "guard_failure_reasons"), ("Recompile reasons", "recompile_reasons")):
        reasons = d.get(key) or []
        if reasons:
            st.markdown(f"**{label}:**\n" + "\n".join(f"- `{r}`" for r in reasons))


def bundle_words(d: dict[str, Any]) -> str:
    """The headline's bundle: its name and id (the id opens the bundle's manifest and qualification report: the page
    named the bundle a request ran but gave no way to it); **no bundle** for a request served without one (it read
    "bundle unregistered –"); for an id no host registered (no ``bundles`` row: ``bundle_signature_state`` empty),
    that it is not registered, and for a registration without a name, the id alone."""
    bundle_id = _text(d[col.BUNDLE_ID])
    if bundle_id is None:
        return "**no bundle**"
    shown_id = f"[{_code(bundle_id)}]({bundle_link('.', bundle_id)})"
    name = _text(d.get("bundle_name"))
    if name is not None:
        return f"bundle {_bold(name)} {shown_id}"
    registered = _text(d.get("bundle_signature_state")) is not None
    return f"bundle {shown_id}" + ("" if registered else " (not registered by any host)")


def fallback_text(d: dict[str, Any]) -> str:
    """What the request's ``fallback_reason`` says happened: an eager run only where the request was served by
    one (outcome ``fallback``, as the overview's eager fallback rate counts); a request that raised was not. A graph
    break is worded as what it did (:func:`~inferensics.analytics.drilldown.graph_break_text`): a request that
    compiled graphs served ran its frame split at the break, which is no fallback.

    >>> fallback_text({"outcome": "fallback", "status": "ok", "fallback_reason": "recompile_limit"})
    '**Ran eagerly:** recompile_limit'
    >>> fallback_text({"outcome": "error", "status": "error", "fallback_reason": "compile_error"})[:60]
    '**The compile failed and the request raised** (`compile_erro'
    >>> fallback_text({"outcome": "hit", "status": "ok", "fallback_reason": "graph_break:GB0124"})[:72]
    '**Split at graph break GB0124:** compiled graphs ran, with the code at t'
    """
    reason = str(d[col.FALLBACK_REASON])
    broke = graph_break_text(d)
    if broke is not None:
        head, _, rest = broke.partition(": ")
        return f"**{_escaped(head[:1].upper() + head[1:])}:** {_escaped(rest)}."
    if d[col.OUTCOME] == "fallback":
        return f"**Ran eagerly:** {reason}"
    what = "The compile failed" if reason == "compile_error" else "The compiled path gave up"
    raised = "and the request raised" if d[col.STATUS] != "ok" else "and no eager run served the request"
    return (
        f"**{what} {raised}** (`{reason}`): it did not run eagerly, so the overview's eager fallback rate leaves it "
        "out" + ("; its error rate counts it." if d[col.STATUS] != "ok" else ".")
    )


_BUNDLE_ALERTS = {
    "ok": (st.success, ":material/verified:"),
    "warn": (st.warning, ":material/package_2:"),
    "info": (st.info, ":material/package_2:"),
}
"""How each level of :func:`~inferensics.analytics.drilldown.bundle_lines` is shown."""


def bundle_panel(d: dict[str, Any]) -> None:
    """What the request's bundle did for it: ran from the verified bundle, a bundle miss (each miss's action,
    differing factors and why), or a shape the bundle never qualified; nothing for a request served without one."""
    for level, text in bundle_lines(d):
        alert, icon = _BUNDLE_ALERTS[level]
        alert(_escaped(text[:1].upper() + text[1:]), icon=icon)


def inputs_panel(d: dict[str, Any]) -> None:
    """Whether the inputs were captured (what replay needs)."""
    if d.get("inputs_captured"):
        size = d.get("capture_bytes")
        stored = f"{byte_size(size)} stored" if size is not None else "blob not found in the store"
        st.success(
            f"**Inputs captured** · blob `{d[col.CAPTURE_BLOB]}` ({stored}).",
            icon=":material/inventory_2:",
        )
    else:
        why = uncaptured_text(d)
        st.info(f"**Inputs not captured** for this request: {_escaped(why)}.", icon=":material/inbox:")


def _verdict_fields(r: dict[str, Any]) -> list[str]:
    """What a replay verdict names, each field only when it has a value (an ``inputs`` verdict names an input
    and no op or kernel: it read "op – · node – ... kernel –")."""
    detail = _text(r[col.DETAIL])
    named = None
    if detail is not None and detail != r[col.ATTRIBUTION]:  # "inputs" of an inputs verdict names nothing more
        what, _, name = detail.partition(" ")
        # An inputs verdict's detail names the input ("input k_cache") or what raised ("fp64 eager raised").
        named = f"input {_code(name)}" if what == "input" and name else _escaped(detail)
    fields = [named] if r[col.ATTRIBUTION] == "inputs" and named else []
    fields += [f"{label} {_code(r[key])}" for label, key in (("op", col.OP), ("node", col.FX_NODE)) if _text(r[key])]
    if _text(r[col.SOURCE_FILE]):
        fields.append(
            f"`{r[col.SOURCE_FILE]}:{r[col.SOURCE_LINE]}`"
            + (f" {_code(r[col.SOURCE_TEXT])}" if _text(r[col.SOURCE_TEXT]) else "")
        )
    if _text(r[col.KERNEL]):
        fields.append(f"kernel {_code(r[col.KERNEL])}")
    if r[col.ATTRIBUTION] != "inputs" and named:
        fields.append(named)
    return fields


def nonfinite_by_path(raw: str | None) -> str | None:
    """A verdict's non-finite counts per path (its evidence's JSON object, :data:`NONFINITE_BY_PATH`) as one
    line: fp64 first, then eager, then the served path; ``None`` when the verdict counted none.

    >>> nonfinite_by_path('{"eager float32": {"nan": 8, "inf": 0, "total": 8}, "fp64": {"nan": 6, "inf": 2, '
    ...                   '"total": 8}, "served": {"nan": 0, "inf": 0, "total": 0}}')
    'fp64 **6 NaN, 2 inf** · eager float32 **8 NaN** · served none'
    >>> nonfinite_by_path("") is None
    True
    """
    try:
        counts = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(counts, dict) or not counts:
        return None

    def shown(path: str, c: Any) -> str:
        c = c if isinstance(c, dict) else {}
        parts = [f"{int(c.get(k) or 0):,} {label}" for k, label in (("nan", "NaN"), ("inf", "inf")) if c.get(k)]
        return f"{_escaped(path)} " + (f"**{', '.join(parts)}**" if parts else "none")

    order = sorted(counts, key=lambda p: (p != "fp64", not p.startswith("eager")))  # stable: the rest as recorded
    return " · ".join(shown(p, counts[p]) for p in order)


def replay_command_block(request_id: str, occurrence: int | None = None, d: dict[str, Any] | None = None) -> None:
    """The replay command of ``request_id`` (its ``occurrence``-th request where several share the id) as a code
    block to copy, with what to put in place of each placeholder it holds
    (:mod:`inferensics.dashboard._internal.replay_command`). Where the request (its detail row ``d``) was served from
    a bundle this service holds no push of, the command takes ``--bundle DIR``: replay could not pull it."""
    settings = current_settings()
    bundle_id = str((d or {}).get(col.BUNDLE_ID) or "")
    unpushed = None
    if bundle_id:
        try:  # not known (an older service): the command as before
            release = run_query(RELEASE_QUERY, "the bundle's push", **release_window(now()))
            unpushed = unpushed_bundle(
                release.iter_rows(named=True), bundle_id, str((d or {}).get("bundle_name") or "")
            )
        except ServiceError:
            unpushed = None
    shown = replay_command(
        request_id, service_url=settings.service_url, keyring=settings.keyring, token=bool(settings.token),
        occurrence=occurrence, unpushed=unpushed,
    )  # fmt: skip
    st.code(shown.command, language="bash", wrap_lines=True)
    if shown.fill_in:
        st.caption("Fill in " + " ".join(shown.fill_in))


def shared_id_replays_note(d: dict[str, Any], replays: pl.DataFrame) -> None:
    """Where requests share the id: how the verdicts shown were told apart from the other requests' (a verdict
    names the request by its id only), and which of them cannot be."""
    if int(d.get("occurrences") or 1) < 2:
        return
    blob = _text(d.get(col.CAPTURE_BLOB))
    untied = int(replays.get_column(SAME_REQUEST).is_null().sum()) if replays.height else 0
    st.caption(
        "A replay verdict names its request by id alone, and requests share this id: the verdicts shown are the "
        + (f"ones that replayed this request's inputs (sha256 `{blob[:12]}…`) against its bundle"
           if blob else "ones that can be tied to no request (this request's inputs were not captured)")
        + (f"; {untied:,} of them name{'s' if untied == 1 else ''} no inputs digest and may be another request's "
           "of the id (telling them apart would need the replayed request's host and start time in replay_results)"
           if untied else "")
        + "."
    )  # fmt: skip


def replay_panel(d: dict[str, Any], replays: pl.DataFrame) -> None:
    """The latest replay verdict (what it names: category, op, source line, kernel, or the input), or, for a
    request that failed or gave non-finite output, the command that produces one."""
    shared = int(d.get("occurrences") or 1) > 1
    occurrence = int(d.get("occurrence") or 1) if shared else None
    shared_id_replays_note(d, replays)
    if not replays.height:
        faulty = d[col.STATUS] == "error" or int(d.get(col.FP_NAN) or 0) + int(d.get(col.FP_INF) or 0) > 0
        if d.get("inputs_captured"):
            if faulty:
                hint = "**Not replayed yet.** Name the fault with `inferensics replay`:"
            else:  # a sampled request that completed fine: nothing to hunt, though its numbers can be checked
                hint = (
                    "**Not replayed.** It completed without a fault; this re-executes it against its bundle, eager "
                    "and fp64 if you want to check its numbers."
                )
            st.info(hint, icon=":material/history:")
            replay_command_block(str(d[col.REQUEST_ID]), occurrence, d)
        elif faulty:  # replay re-executes captured inputs: without them it has nothing to run
            st.info(
                "**Cannot be replayed:** its inputs were not captured (with capture on, a host captures the inputs "
                "of requests that raise or give non-finite output).",
                icon=":material/history:",
            )
        return
    r = replays.row(0, named=True)
    device = _text(r[col.DEVICE_NAME])
    when = f"{'on ' + device + ' ' if device else ''}{r[col.TS]:%Y-%m-%d %H:%M} UTC"
    count = f"{replays.height} replay{'s' if replays.height > 1 else ''}"
    st.markdown(" · ".join([f"**Replay verdict: {r[col.ATTRIBUTION]}**", *_verdict_fields(r), f"{when} ({count})"]))
    counted = nonfinite_by_path(r.get(NONFINITE_BY_PATH))
    if counted:  # how many NaN and inf each path gave: whether the compiled path alone has them, or fp64 too
        st.markdown(f"**Non-finite values per path:** {counted}")
    if r.get("summary"):  # the verdict's own sentence: what the evidence says (the error every path raises, ...)
        st.caption(_escaped(str(r["summary"])))


_GRAPH_CALL_COLUMNS = (
    "position",
    col.CALLS,
    col.TOTAL_US,
    col.DEVICE,
    col.ARTIFACT_ID,
    col.FX_CACHE_KEY,
    col.GRAPH_KEY,
)
"""The whole-graph calls table: which graph (its position among the graphs above), then the profiler's time."""


def graph_calls_section(calls: pl.DataFrame) -> None:
    """The profiler's time of each compiled graph's whole calls (analytics ``request_graph_calls``): a graph's
    call time, never a kernel's, so it has its own table; shown only for a profiled request."""
    if not calls.height:
        return
    st.markdown("**Whole compiled-graph calls (profiled)**")
    st.caption(
        "The profiler's time of each compiled graph's calls in this request: Inductor's "
        "`## Call CompiledFxGraph <key> ##` range around a whole call (all of its kernels and the code between "
        "them), tied to the graph by its FX-graph-cache key. A graph's call time, not a kernel: position is the "
        "graph's row above (empty when the request is not recorded calling it)."
    )
    show_table(
        calls,
        columns=_GRAPH_CALL_COLUMNS,
        key="graph_calls",
        overrides={
            col.TOTAL_US: st.column_config.NumberColumn(
                "graph call µs", format="%.0f µs", help="Profiler time of the graph's whole calls, summed."
            )
        },
    )


def kernels_section(kernels: pl.DataFrame, sampled: bool) -> None:
    """Kernels of the serving artifacts with their FX nodes and source lines (Inductor provenance), and the
    sampled timings when this request was profiled."""
    st.subheader("Kernels → source lines")
    timed = kernels.filter(pl.col(col.TOTAL_US).is_not_null()) if col.TOTAL_US in kernels.columns else kernels.clear()
    columns = [col.KERNEL_NAME, col.KERNEL_BACKEND, col.SOURCE_LINES, col.POST_GRAD_NODES]
    if timed.height:
        columns += [col.CALLS, col.TOTAL_US, col.DEVICE]
    elif kernels.height:
        st.caption(
            "Kernel timings: none, this request was not profiled"
            if not sampled
            else "Kernel timings: this request was profiled, but the profiler timed none of its artifacts' kernels "
            "(C++ kernels are timed only when compiled with `cpp.enable_kernel_profile`); whole compiled-graph "
            "call times, when it saw any, are in their own table above."
        )
    mapped = int((kernels.get_column(col.SOURCE_LINES).list.len() > 0).sum()) if kernels.height else 0
    if mapped:
        st.caption(
            f"{mapped} of {kernels.height} kernels map to user source lines (Inductor provenance tracking, on by "
            "default in the host SDK)."
        )
    elif kernels.height:
        st.warning(
            "No kernel carries its FX nodes and source lines: the artifacts were compiled without Inductor "
            "provenance tracking. The host SDK turns it on by default (`SdkConfig(provenance_level=1)`); "
            "compiles made with `provenance_level=0` or outside `tracker.compile` have none.",
            icon=":material/link_off:",
        )
    show_table(
        kernels,
        columns=(*columns, col.ARTIFACT_ID),
        empty="No kernels recorded for this request's artifacts.",
        key="kernels",
    )
    if timed.height:
        charts.draw(
            st,
            charts.ranked_bars(
                timed, col.KERNEL_NAME, col.TOTAL_US, "Sampled kernel time", value_title="kernel time (µs)"
            ),
        )


def code_section(graphs: pl.DataFrame, kernels: pl.DataFrame) -> None:
    """The generated code of a serving artifact, with where each of its kernels sits in it."""
    st.subheader("Generated code")
    artifacts = [a for a in graphs.get_column(col.ARTIFACT_ID).to_list() if a] if graphs.height else []
    if not artifacts:
        st.info("No artifact recorded for this request (it ran eagerly or before compilation).")
        return
    artifact = st.selectbox("Artifact", artifacts, key="drill.artifact") if len(artifacts) > 1 else artifacts[0]
    try:
        code = fetch_blob(artifact, "generated code").decode("utf-8", errors="replace")
    except ServiceError as exc:
        if exc.status == 404:
            st.info(f"The output code of artifact `{artifact}` was not uploaded to the service.")
            return
        error_panel(exc)
        return
    own = kernels.filter(pl.col(col.ARTIFACT_ID) == artifact) if kernels.height else kernels
    names = own.get_column(col.KERNEL_NAME).to_list() if own.height else []
    mapping = kernel_lines(code, names)
    if own.height:
        mapping = mapping.join(own.select(col.KERNEL_NAME, col.SOURCE_LINES), on=col.KERNEL_NAME, how="left")
    lines = len(code.splitlines())
    st.caption(f"artifact `{artifact}` · {lines:,} lines")
    show_table(
        mapping,
        key="code_map",
        empty="No kernels to locate in this code.",
        # A line number (a float only because a kernel defined elsewhere has none), never "1.23e+03".
        overrides={"defined_at": st.column_config.NumberColumn("defined_at", format="%d")},
    )
    with st.expander(f"The generated code ({lines:,} lines)"):
        st.code(code, language="python", line_numbers=True, height=600)


def _field_text(value: Any) -> str:
    """A recorded value as text (as recorded, not stripped), :data:`MISSING` when :func:`_text` finds none, as
    the headline line shows it."""
    return MISSING if _text(value) is None else str(value)


def recorded_fields(d: dict[str, Any]) -> pl.DataFrame:
    """The request's every field as text, one row each (columns: field, value); a null or empty value reads
    :data:`MISSING`, not "None" or "[]"."""
    return pl.DataFrame({"field": list(d), "value": [_field_text(v) for v in d.values()]})


def render() -> None:
    """Draw the page."""
    st.title("Request drill-down")
    request_id = request_id_input()
    with service_errors():
        recent_picker()
    if not request_id:
        st.info("Paste or pick a request id to see how it was served: graphs, guards, kernels, generated code, inputs.")
        return
    occurrence = occurrence_input(request_id)
    which: dict[str, Any] = {"occurrence": occurrence} if occurrence else {}
    with service_errors():
        try:
            detail = run_query(queries.REQUEST_DETAIL, "request", request_id=request_id, **which)
        except ServiceError as exc:
            if exc.status in (400, 404):
                st.warning(said(exc), icon=":material/search:")
                return
            raise
        d = detail.row(0, named=True)
        occurrence_chooser(d)
        summary(d)
        bundle_panel(d)
        inputs_panel(d)
        replay_panel(d, run_query(queries.REQUEST_REPLAYS, "replays", request_id=request_id, **which))
        graphs = run_query(queries.REQUEST_GRAPHS, "graphs", request_id=request_id, **which)
        st.subheader("Compiled graphs that served it")
        if graphs.height:
            st.caption(
                "Each graph's compile is the one its own host did: the latest compile of its artifact that the "
                f"request's host ({_code(d[col.HOST])}) started before the request ended. Where that host has none "
                "stored, compile_origin says so, and the compile shown is that host's later one, else another "
                "host's (compile_host)."
            )
        # What a person reads first (calls, host time, where the graph comes from) before the 64-digit keys.
        shown = graphs
        if col.KERNEL_PROVIDERS in graphs.columns:  # each decision once, as the list below the table reads
            decisions = [None if v is None else provider_decisions(v) for v in graphs[col.KERNEL_PROVIDERS].to_list()]
            shown = graphs.with_columns(pl.Series(col.KERNEL_PROVIDERS, decisions, dtype=pl.List(pl.String)))
        show_table(
            shown,
            columns=[*_GRAPH_COLUMNS, *(c for c in graphs.columns if c not in _GRAPH_COLUMNS)],
            key="graphs",
            empty="No compiled graph served this request.",
            overrides={
                col.GRAPH_US: st.column_config.NumberColumn(
                    col.GRAPH_US, format="%.0f µs", help=RequestEvent.model_fields[col.GRAPH_US].description
                )
            },
        )
        decided = run_query(queries.REQUEST_KERNEL_DECISIONS, "kernel decisions", request_id=request_id, **which)
        providers_section(graphs, decided)
        if d.get(col.SAMPLED):  # only a profiled request has whole-graph call times
            graph_calls_section(run_query(queries.REQUEST_GRAPH_CALLS, "graph calls", request_id=request_id, **which))
        kernels = run_query(queries.REQUEST_KERNELS, "kernels", request_id=request_id, **which)
        kernels_section(kernels, bool(d.get(col.SAMPLED)))
        code_section(graphs, kernels)
        with st.expander("Every recorded field"):
            show_table(recorded_fields(d), key="recorded_fields")


if __name__ == "__main__":
    render()
