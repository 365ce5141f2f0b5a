"""A self-contained HTML page: Vega, Vega-Lite and vega-embed inlined from vl-convert, so it works offline.

Each chart is embedded with the SVG renderer. The page counts charts that finished rendering in
``window.__chartsRendered`` and records failures in ``window.__chartErrors`` (and on the console), which is
what the headless-browser test reads.
"""

from __future__ import annotations

import contextlib
import functools
import html
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import polars as pl

from inferensics.analytics.report.tables import MAX_ROWS, html_table

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}td,th{border:1px solid #ddd;padding:2px 6px}
th{background:#f4f4f4}.none,.more{color:#777;font-style:italic}.verdict{font-size:1.3rem;font-weight:bold}
code{background:#f4f4f4;padding:0 2px}.chart{max-width:100%;overflow-x:auto}
"""
_STRONG = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"``(.+?)``|`([^`]+)`")


def inline_markdown(text: str) -> str:
    """``text`` HTML-escaped, with Markdown's inline ``**bold**`` and backquoted code turned into tags (the
    paragraphs come from docstrings and Markdown summaries, whose markers must not show as characters)."""
    escaped = html.escape(text)
    escaped = _STRONG.sub(r"<strong>\1</strong>", escaped)
    return _CODE.sub(lambda m: f"<code>{m.group(1) or m.group(2)}</code>", escaped)


def _has_data(spec: dict[str, object]) -> bool:
    """Whether a chart spec holds at least one row: an empty one draws nothing useful, and Vega sizes a
    step-height or faceted chart without rows to an unbounded height."""
    datasets = spec.get("datasets")
    if isinstance(datasets, dict):
        return any(bool(rows) for rows in datasets.values())
    data = spec.get("data")
    if isinstance(data, dict) and "values" in data:
        return bool(data["values"])
    return True


_GLOBALS = "window.vegaEmbed=vegaEmbed;window.vega=vega;window.vegaLite=vegaLite;"


@functools.cache
def vega_bundle() -> str:
    """The Vega + Vega-Lite + vega-embed JavaScript bundle from vl-convert.

    Bundling takes about 10 s, so the result is kept per process and on disk under the user's cache
    directory (``$XDG_CACHE_HOME/inferensics``), keyed by the vl-convert version.
    """
    import vl_convert

    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "inferensics"
    version = getattr(vl_convert, "__version__", "unknown")
    path = cache / f"vega-bundle-{version}.js"
    with contextlib.suppress(OSError):
        return path.read_text(encoding="utf-8")
    bundle = str(vl_convert.javascript_bundle(_GLOBALS)).replace("</script", "<\\/script")
    with contextlib.suppress(OSError):
        cache.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(bundle, encoding="utf-8")
        tmp.replace(path)
    return bundle


@dataclass
class Section:
    """One section of a page: a heading, paragraphs, charts and tables in that order."""

    title: str
    paragraphs: list[str] = field(default_factory=list)
    charts: list[alt.TopLevelMixin] = field(default_factory=list)
    tables: list[tuple[pl.DataFrame, list[str]]] = field(default_factory=list)
    limit: int = MAX_ROWS
    """Rows each table shows (a top list is cut; a table whose every row is a figure of its own is not)."""


def render_page(title: str, sections: list[Section], *, subtitle: str = "") -> str:
    """The page's HTML. Paragraphs are HTML-escaped (inline Markdown becomes tags); charts are embedded from
    their specs, and a chart without data is a line saying so."""
    parts: list[str] = []
    specs: list[dict[str, object]] = []
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts.extend(f"<p>{inline_markdown(p)}</p>" for p in section.paragraphs)
        for chart in section.charts:
            spec = chart.to_dict()
            if not _has_data(spec):
                chart_title = spec.get("title")
                named = f"{chart_title}: " if isinstance(chart_title, str) else ""
                parts.append(f"<p class='none'>{html.escape(named)}no data in this period</p>")
                continue
            parts.append(f"<div class='chart' id='chart-{len(specs)}'></div>")
            specs.append(spec)
        parts.extend(html_table(frame, columns, section.limit) for frame, columns in section.tables)
    specs_json = json.dumps(specs, sort_keys=True).replace("</", "<\\/")
    script = (
        "window.__chartsRendered=0;window.__chartErrors=[];"
        f"const specs={specs_json};"
        "specs.forEach((s,i)=>vegaEmbed('#chart-'+i,s,{renderer:'svg',actions:false})"
        ".then(()=>{window.__chartsRendered+=1;})"
        ".catch(e=>{window.__chartErrors.push(String(e));console.error(e);}));"
    )
    sub = f"<p>{html.escape(subtitle)}</p>" if subtitle else ""
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style>"
        f"<script>{vega_bundle()}</script></head><body>"
        f"<h1>{html.escape(title)}</h1>{sub}{''.join(parts)}"
        f"<script data-charts='{len(specs)}'>{script}</script></body></html>"
    )
