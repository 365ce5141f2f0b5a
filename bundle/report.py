"""The qualification report: what the bundle accepts and what it costs, as JSON, Markdown and offline HTML.

Traffic-weighted over the shape distribution: accepted shapes, graph coverage (share of traffic served by
compiled graphs), graph-break locations, guard failures, specialization count, cache size per artifact and
in total, compile time per shape, eager fallbacks, value guards (graphs pinned to one value of a Python number they
receive, which recompile for another), the cold-miss cost (time to first served request from an
empty cache against with the bundle), each shape's accuracy (its compiled output against eager and fp64, by
the error-ratio rule of :mod:`inferensics.bundle.tolerance`), and the shape-policy advice.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from inferensics.bundle import accuracy, advice, latency, torch_adapter
from inferensics.bundle.qualify import PolicyRun
from inferensics.bundle.tolerance import EAGER_LIMIT, RATIO_LIMIT

if TYPE_CHECKING:
    from inferensics.bundle.build import BuildSpec


def qualification(
    spec: BuildSpec,
    main: PolicyRun,
    warm: PolicyRun,
    policies: list[PolicyRun],
    identity: dict[str, Any],
    *,
    name: str,
) -> dict[str, Any]:
    """The report's data."""
    shares = spec.shapes.shares
    warm_by_shape = {r.shape: r for r in warm.shapes}
    shapes: list[dict[str, Any]] = []
    for r in main.shapes:
        w = warm_by_shape.get(r.shape)
        shapes.append(
            {
                "shape": list(r.shape),
                "share": round(shares[r.shape], 6),
                "compiled": bool(r.graphs),
                "graphs": len(r.graphs),
                "new_graphs": r.new_graphs,
                "compile_s": round(r.compile_s, 4),
                "first_request_cold_s": round(r.first_s, 4),
                "first_request_bundle_s": round(w.first_s, 4) if w else None,
                "latency_ms": round(r.latency_s * 1e3, 4),
                "accuracy": r.accuracy.to_dict() if r.accuracy is not None else None,
            }
        )
    coverage = sum(s["share"] for s in shapes if s["compiled"])
    graph_hits = {g.fx_key: g.fx_status for g in warm.graphs if g.fx_key}
    artifacts = [
        {"artifact": f"graphs/{g.fx_key}/output_code.py", "bytes": len(g.output_code.encode())}
        for g in main.graphs
        if g.fx_key
    ]
    artifacts.append({"artifact": "megacache.bin", "bytes": len(main.blob)})
    summaries = [advice.summarise(p, spec.shapes) for p in policies]
    best, why = advice.recommend(summaries)
    return {
        "bundle": name,
        "model": spec.model,
        "device": spec.device,
        "compile": spec.compile_args(),
        "shapes": shapes,
        "graph_coverage": round(coverage, 6),
        "specializations": len(main.graphs),
        "graph_breaks": main.graph_breaks,
        "guard_failures": main.guard_failures,
        "value_guards": value_guards(main),
        "eager_fallbacks": [s["shape"] for s in shapes if not s["compiled"]],
        "cache_bytes": {"artifacts": artifacts, "total": sum(a["bytes"] for a in artifacts)},
        "compile_s_total": round(main.compile_s, 4),
        "warm_start": {
            "graphs": len(graph_hits),
            "cache_hits": sum(1 for s in graph_hits.values() if s == "hit"),
            "status": graph_hits,
        },
        "customisations": identity.get("customisations", []),
        "left_out_shapes": [s.to_json() for s in spec.left_out_shapes],
        "accuracy": _accuracy_summary(shapes, allow_inaccurate=spec.allow_inaccurate),
        "policies": [s.__dict__ for s in summaries],
        "bucket_edges": advice.bucket_edges(spec.shapes),
        "recommendation": best.name if best else "",
        "recommendation_reason": why,
        "recommendation_rule": (
            f"lowest compile seconds + {advice.REQUESTS_PER_WINDOW:,} requests × traffic-weighted latency (latency: "
            f"median of at least {advice.ADVICE_ROUNDS} interleaved rounds, with its {latency.CONFIDENCE:.0%} "
            "interval); no clear winner when the cheapest policy's cost interval overlaps another's"
        ),
    }


def value_guards(run: PolicyRun) -> list[dict[str, Any]]:
    """The values the run's compiled graphs are pinned to (:func:`~inferensics.bundle.torch_adapter.value_guards`),
    one entry per guarded local and source line: the values qualification saw there and the shapes whose graphs
    hold them. Qualification serves one input per shape, so it never sees such a graph recompile; a host does,
    for every request whose value differs."""
    shapes_of: dict[int, list[list[int]]] = {}
    for r in run.shapes:
        for i in r.graphs:
            shapes_of.setdefault(i, []).append(list(r.shape))
    found: dict[tuple[str, str], dict[str, Any]] = {}
    for g in run.graphs:
        for local, value, source in torch_adapter.value_guards(g.guards):
            entry = found.setdefault((local, source), {"local": local, "source": source, "values": [], "shapes": []})
            if value not in entry["values"]:
                entry["values"].append(value)
            entry["shapes"] += [s for s in shapes_of.get(g.index, []) if s not in entry["shapes"]]
    return [found[k] for k in sorted(found)]


def value_guard_lines(q: dict[str, Any]) -> list[str]:
    """One line per value guard of the report (``[]`` when none, or for a report written before builds recorded
    them)."""
    return [
        f"Value guard: a compiled graph is pinned to {v['local']} == {' or '.join(v['values'])}"
        + (f" (from {v['source']})" if v["source"] else "")
        + (f" at {', '.join(_fmt(s) for s in v['shapes'])}" if v["shapes"] else "")
        + ": a request with another value recompiles on the host (a bundle miss); keep such a value in a tensor."
        for v in q.get("value_guards") or []
    ]


def _accuracy_summary(shapes: list[dict[str, Any]], *, allow_inaccurate: bool) -> dict[str, Any]:
    """The whole build's accuracy: the rule, the worst shape, the shapes outside tolerance or left unchecked."""
    checked = [s for s in shapes if s["accuracy"] and s["accuracy"]["checked"]]
    worst = max(checked, key=lambda s: float(s["accuracy"]["ratio"]), default=None)  # "inf" is a string in JSON
    return {
        "rule": accuracy.RULE,
        "ratio_limit": RATIO_LIMIT,
        "checked": len(checked),
        "worst_ratio": worst["accuracy"]["ratio"] if worst else None,
        "worst_shape": worst["shape"] if worst else None,
        "failed": [s["shape"] for s in checked if not s["accuracy"]["passed"]],
        "eager_wrong": [s["shape"] for s in checked if s["accuracy"].get("eager_wrong")],
        "unchecked": [
            {"shape": s["shape"], "why": s["accuracy"]["unchecked"] if s["accuracy"] else "not checked"}
            for s in shapes
            if not (s["accuracy"] and s["accuracy"]["checked"])
        ],
        "allow_inaccurate": allow_inaccurate,
    }


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list | tuple):
        return "x".join(map(str, v)) if all(isinstance(x, int) for x in v) else ", ".join(map(str, v))
    return str(v)


def _tables(q: dict[str, Any]) -> list[tuple[str, list[str], list[list[Any]]]]:
    shape_cols = ["shape", "share", "compiled", "graphs", "compile_s", "first_request_cold_s", "first_request_bundle_s",
                  "latency_ms"]  # fmt: skip
    policy_cols = ["name", "specializations", "compile_s", "cache_bytes", "latency_ms", "latency_low_ms",
                   "latency_high_ms", "latency_samples", "padding_waste", "cost_s"]  # fmt: skip
    return [
        ("Accepted shapes, compile time and cold-miss cost", shape_cols,
         [[s[c] for c in shape_cols] for s in q["shapes"]]),
        ("Graph breaks", ["where", "reason", "id", "explanation"],
         [[b["where"], b["reason"], b.get("registry_id", ""), b.get("explanation", "")] for b in q["graph_breaks"]]),
        ("Accuracy against eager and fp64", ACCURACY_COLS, _accuracy_rows(q)),
        ("Guard failures", ["reason"], [[r] for r in q["guard_failures"]]),
        ("Cache size", ["artifact", "bytes"],
         [[a["artifact"], a["bytes"]] for a in q["cache_bytes"]["artifacts"]] + [["total", q["cache_bytes"]["total"]]]),
        ("Shape-policy advice", policy_cols, [[p.get(c, "") for c in policy_cols] for p in q["policies"]]),
    ]  # fmt: skip


ACCURACY_COLS = ["shape", "error ratio", "limit", "within", "max abs error", "eager max abs error", "RMSE",
                 "eager RMSE", "new non-finite", "eager rounding units"]  # fmt: skip


def _accuracy_rows(q: dict[str, Any]) -> list[list[Any]]:
    rows: list[list[Any]] = []
    for s in q["shapes"]:
        a = s.get("accuracy")
        if not a:
            continue
        if not a["checked"]:
            rows.append([s["shape"], f"not checked: {a['unchecked']}", a["ratio_limit"], "", "", "", "", "", "", ""])
            continue
        rows.append([s["shape"], a["ratio"], a["ratio_limit"], "yes" if a["passed"] else "NO", a["max_abs"],
                     a["anchor_max_abs"], a["rmse"], a["anchor_rmse"], a["nonfinite_new"],
                     a.get("eager_rounding_units", "")])  # fmt: skip
    return rows


def accuracy_line(q: dict[str, Any]) -> list[str]:
    """The report's accuracy sentence (``[]`` for a report written before builds checked accuracy)."""
    a = q.get("accuracy")
    if not a:  # a report from before the accuracy check
        return []
    unchecked = "; ".join(f"{_fmt(u['shape'])} ({u['why']})" for u in a["unchecked"])
    if not a["checked"]:
        return [f"Accuracy: not checked: {unchecked or 'no shape'}."]
    ratio, limit = _fmt(float(a["worst_ratio"])), f"{a['ratio_limit']:g}"
    worst = f"worst error ratio {ratio} at {_fmt(a['worst_shape'])}, limit {limit}"
    if a["failed"]:
        line = (f"Accuracy: OUTSIDE tolerance at {', '.join(_fmt(f) for f in a['failed'])} ({worst}); "
                "signed anyway (--allow-inaccurate).")  # fmt: skip
    else:
        line = f"Accuracy: every checked shape within tolerance against eager and fp64 ({worst})."
    if a.get("eager_wrong"):
        line += (f" Eager itself is far from fp64 at {', '.join(_fmt(f) for f in a['eager_wrong'])} (beyond "
                 f"{EAGER_LIMIT:g} rounding units): the model's own ops or a kernel provider, which the compiled code "
                 "follows; `inferensics replay` names which.")  # fmt: skip
    return [line + (f" Not checked: {unchecked}." if unchecked else "")]


def left_out_lines(q: dict[str, Any]) -> list[str]:
    """One line per traffic shape the build left out of qualification, with why (``[]`` when none, or for a
    report written before builds recorded them)."""
    return [
        f"Left out of qualification: shape {_fmt(s['shape'])} ({s['reason']}"
        + (f"; {s['requests']}" if s.get("requests") else "")
        + ")."
        for s in q.get("left_out_shapes") or []
    ]


def _summary_lines(q: dict[str, Any]) -> list[str]:
    warm = q["warm_start"]
    return [
        f"Model `{q['model']}` on `{q['device']}`, compile {json.dumps(q['compile'], sort_keys=True)}.",
        f"Graph coverage: {q['graph_coverage']:.1%} of traffic served by compiled graphs; "
        f"{q['specializations']} specialization(s); {q['compile_s_total']:.3g} s compiling.",
        f"Eager fallbacks: {', '.join(_fmt(s) for s in q['eager_fallbacks']) or 'none'}.",
        f"Warm start from the bundle: {warm['cache_hits']} of {warm['graphs']} graph keys were cache hits.",
        f"Customisations: {', '.join(c['import_path'] for c in q['customisations']) or 'none'}.",
        *left_out_lines(q),
        *value_guard_lines(q),
        *accuracy_line(q),
    ]


def to_markdown(q: dict[str, Any]) -> str:
    """The report as Markdown."""
    lines = [f"# Qualification report: {q['bundle']}", "", *_summary_lines(q), ""]
    for title, cols, rows in _tables(q):
        lines += [f"## {title}", ""]
        if not rows:
            lines += ["None.", ""]
            continue
        lines += ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
        lines += ["| " + " | ".join(_fmt(v).replace("|", "\\|") for v in row) + " |" for row in rows]
        lines.append("")
    lines += [f"**{advice_line(q)}** ({q['recommendation_rule']}). Proposed bucket edges per dimension: "
              f"{q['bucket_edges']}.", ""]  # fmt: skip
    return "\n".join(lines)


def advice_line(q: dict[str, Any]) -> str:
    """The shape-policy advice in one sentence: the recommended policy, or no clear winner, with why."""
    why = q.get("recommendation_reason", "")
    if q["recommendation"]:
        return f"Recommended shape policy: {q['recommendation']}" + (f": {why}" if why else "")
    return f"Shape policy: {why or advice.NO_CLEAR_WINNER}"


def to_html(q: dict[str, Any]) -> str:
    """The report as one offline HTML page (no scripts, no external resources)."""
    e = html.escape
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'>",
        f"<title>Qualification report: {e(q['bundle'])}</title>",
        "<style>body{font-family:sans-serif;margin:2em;max-width:70em}"
        "table{border-collapse:collapse;margin:.5em 0 1.5em}"
        "td,th{border:1px solid #ccc;padding:.2em .6em;text-align:left}th{background:#f3f3f3}"
        ".rec{background:#e8f5e9;padding:.6em;border-left:4px solid #2e7d32}</style></head><body>",
        f"<h1>Qualification report: {e(q['bundle'])}</h1>",
        *[f"<p>{e(line).replace('`', '')}</p>" for line in _summary_lines(q)],
    ]
    for title, cols, rows in _tables(q):
        parts.append(f"<h2>{e(title)}</h2>")
        if not rows:
            parts.append("<p>None.</p>")
            continue
        head = "".join(f"<th>{e(c)}</th>" for c in cols)
        body = "".join("<tr>" + "".join(f"<td>{e(_fmt(v))}</td>" for v in row) + "</tr>" for row in rows)
        parts.append(f"<table><tr>{head}</tr>{body}</table>")
    parts.append(
        f"<p class='rec'><b>{e(advice_line(q))}</b> ({e(q['recommendation_rule'])}). "
        f"Proposed bucket edges per dimension: {e(str(q['bucket_edges']))}.</p></body></html>"
    )
    return "".join(parts)


def write(q: dict[str, Any], directory: Path) -> None:
    """Write ``qualification.json``, ``.md`` and ``.html`` into ``directory``."""
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "qualification.json").write_text(json.dumps(q, indent=1, sort_keys=True))
    (directory / "qualification.md").write_text(to_markdown(q))
    (directory / "qualification.html").write_text(to_html(q))
