"""The request page's kernel-registry decisions: which provider computed each registry op the request called, eager
or in a graph that served it, and why the providers before it were skipped (analytics ``request_kernel_decisions``).

The page listed only the providers its graphs' compiles recorded (``compiles.kernel_providers``): an eager request
showed none though the store held its decisions, and a compiled one did not say that a provider raised and was
taken out, which is why its graph holds Inductor's code.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def decisions_section(decisions: pl.DataFrame) -> None:
    """A warning per provider that raised, then the decisions, eager and compiled, with their skip reasons."""
    st.markdown("**Kernel-registry decisions** (eager calls and the graphs that served it)")
    if decisions.is_empty():
        st.caption(NONE_RECORDED)
        return
    for line in raised_lines(decisions):
        st.warning(line, icon=":material/warning:")
    eager = int((~decisions.get_column(col.COMPILED)).sum())
    st.caption(
        f"{eager:,} eager and {decisions.height - eager:,} compiled decisions. this_request: made in this request "
        "(an eager call whose op signature its process met first here, or its own compile); otherwise traced into a "
        "graph that served it by an earlier request's compile on its host. skipped: the providers tried first, "
        "each with why; position: the graph's row above."
    )
    show_table(decisions, columns=COLUMNS, key="kernel_decisions")
