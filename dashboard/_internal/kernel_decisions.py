"""The request page's kernel providers: which provider computed each registry op the request called, in a graph
that served it (its compile record's ``kernel_providers``) or in an eager call, and why the providers before it were
skipped (analytics ``request_kernel_decisions``), in one section.

The page had two sections that could contradict each other: "Kernel providers" listed a graph's providers from its
compile record while "Kernel-registry decisions" below it said no decision was recorded and that the request
"called no op" of the registry (the skip-reason rows are stored once per process and signature, and a host may not
have sent them). Now the providers are listed once, graph by graph and then the eager calls, and the decisions table
gives the reasons where the store holds them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Final

import polars as pl
import streamlit as st

from inferensics.dashboard._internal.tables import show_table
from inferensics.schema import columns as col

COLUMNS: Final = (
    "this_request", col.COMPILED, "position", col.OP, col.PROVIDER, col.SIGNATURE, col.SKIPPED, col.FALLBACK,
    "bucket", col.TS, col.GRAPH_KEY,
)  # fmt: skip
NONE_RECORDED: Final = (
    "No kernel-registry decision recorded for this request: it called no op of `inferensics.kernels`, or its "
    "process had decided those op signatures in an earlier request (a process records each decision once, with "
    "the request that made it first)."
)
REASONS_MISSING: Final = (
    "The store holds no decision rows behind the providers listed above, so why the providers before each were "
    "skipped is not known here: a process records each decision once per op signature, and this host's rows were "
    "not stored (an older SDK, or rows dropped before the store; the host's SDK health on the Hosts page says which)."
)
HEADING: Final = (
    "**Kernel providers** (registry op = provider that computed it; ×N: chosen at N argument signatures, each a "
    "dtype, shape and strides):"
)


def provider_decisions(entries: Sequence[str] | None) -> list[str]:
    """A graph's ``kernel_providers`` as read: each distinct ``op=provider`` once, in recorded order, with how
    many argument signatures it was chosen for when more than one.

    The compile record keeps one entry per op signature (one per ``kernel_decisions`` row, which holds the
    signature and why the other providers were skipped), so an op traced at four shapes read
    ``rms_norm=inductor`` four times. An op served by two providers at different signatures keeps both.

    >>> provider_decisions(["rms_norm=triton", "silu_mul=triton", "rms_norm=triton"])
    ['rms_norm=triton ×2', 'silu_mul=triton']
    """
    counts = Counter(entries or ())
    return [f"{d} ×{n}" if n > 1 else d for d, n in counts.items()]


def provider_lines(graphs: pl.DataFrame, decisions: pl.DataFrame) -> list[str]:
    """One line per serving graph whose compile record names providers, then one for the request's eager calls
    (from its decision rows): what computed each registry op."""
    lines = []
    if col.KERNEL_PROVIDERS in graphs.columns:
        lines = [
            f"- graph {g['position']}: " + ", ".join(f"`{p}`" for p in provider_decisions(g[col.KERNEL_PROVIDERS]))
            for g in graphs.iter_rows(named=True)
            if g[col.KERNEL_PROVIDERS]
        ]
    eager = decisions.filter(~pl.col(col.COMPILED)) if decisions.height else decisions
    if eager.height:
        called = [f"{r[col.OP]}={r[col.PROVIDER]}" for r in eager.iter_rows(named=True)]
        lines.append("- eager calls: " + ", ".join(f"`{p}`" for p in provider_decisions(called)))
    return lines


def _where(r: Mapping[str, Any]) -> str:
    """Where a decision served: an eager call, or a graph (and whether this request's compile made it)."""
    if not r[col.COMPILED]:
        return "an eager call"
    graph = f"graph {r['position']}" if r["position"] is not None else "a compiled graph"
    return graph if r["this_request"] else f"{graph}, traced in an earlier request's compile on this host"


def raised_lines(decisions: pl.DataFrame) -> list[str]:
    """One line per provider that raised in a decision: what it raised, for which op and signature, and which
    provider served instead."""
    lines = []
    for r in decisions.iter_rows(named=True):
        for entry in r["raised"] or []:
            provider, _, reason = str(entry).partition(": ")
            lines.append(
                f"**{provider}** for `{r[col.OP]}` raised and was taken out for signature `{r[col.SIGNATURE]}`; "
                f"**{r[col.PROVIDER]}** served {_where(r)} instead: `{reason.removeprefix('raised ')}`"
            )
    return lines


def providers_section(graphs: pl.DataFrame, decisions: pl.DataFrame) -> None:
    """What computed each registry op (graph by graph, then the eager calls), a warning per provider that raised,
    then the decision rows with their skip reasons."""
    lines = provider_lines(graphs, decisions)
    if lines:
        st.markdown(HEADING + "\n" + "\n".join(lines))
    else:
        st.markdown("**Kernel providers**")
    if decisions.is_empty():
        st.caption(REASONS_MISSING if lines else NONE_RECORDED)
        return
    for line in raised_lines(decisions):
        st.warning(line, icon=":material/warning:")
    eager = int((~decisions.get_column(col.COMPILED)).sum())
    st.caption(
        f"Why: {eager:,} eager and {decisions.height - eager:,} compiled decisions. this_request: made in this "
        "request (an eager call whose op signature its process met first here, or its own compile); otherwise traced "
        "into a graph that served it by an earlier request's compile on its host. skipped: the providers tried "
        "first, each with why; position: the graph's row above."
    )
    show_table(decisions, columns=COLUMNS, key="kernel_decisions")
