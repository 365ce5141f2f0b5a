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
from dataclasses import dataclass, field
from pathlib import Path

import altair as alt
import polars as pl

from inferensics.analytics.report.tables import html_table

_STYLE = """
body{font-family:system-ui,sans-serif;margin:2rem auto;max-width:1100px;color:#222}
h1{font-size:1.6rem}h2{font-size:1.2rem;margin-top:2rem;border-bottom:1px solid #ddd}
table{border-collapse:collapse;font-size:.85rem;margin:.5rem 0}td,th{border:1px solid #ddd;padding:2px 6px}
th{background:#f4f4f4}.none,.more{color:#777;font-style:italic}.verdict{font-size:1.3rem;font-weight:bold}
"""


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


def render_page(title: str, sections: list[Section], *, subtitle: str = "") -> str:
    """The page's HTML. Paragraphs are HTML-escaped; charts are embedded from their specs."""
    parts: list[str] = []
    specs: list[dict[str, object]] = []
    for section in sections:
        parts.append(f"<h2>{html.escape(section.title)}</h2>")
        parts.extend(f"<p>{html.escape(p)}</p>" for p in section.paragraphs)
        for chart in section.charts:
            parts.append(f"<div class='chart' id='chart-{len(specs)}'></div>")
            specs.append(chart.to_dict())
        parts.extend(html_table(frame, columns) for frame, columns in section.tables)
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
