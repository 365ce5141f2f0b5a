"""The weekly report's word on bundle hits at unqualified sizes: requests a release bundle served at sizes it was
never qualified at (its accuracy and latency unchecked there), per model and bundle, with the command that
qualifies them. Said only where there are some: a fleet without bundles reads as before."""

from __future__ import annotations

from typing import Final

import polars as pl

from inferensics.analytics.bundle_unqualified import (
    BUNDLE_REQUESTS,
    TOP_SIZE_REQUESTS,
    TOP_SIZES,
    UNQUALIFIED_CALLS,
    UNQUALIFIED_REQUESTS,
)
from inferensics.analytics.report.page import Section
from inferensics.schema import columns as col
from inferensics.schema.shape_text import graph_size_text

BUNDLE_ID_DIGITS: Final = 12
"""Digits of a bundle id shown (as the report's bundle misses show them)."""
TITLE: Final = "Bundle hits at unqualified sizes"


def rebuild_command(model: str) -> str:
    """The command that rebuilds a bundle of ``model`` with the sizes its traffic had.

    >>> rebuild_command("llama")  # doctest: +NORMALIZE_WHITESPACE
    'inferensics bundle build --model <factory> --key <key> --out <dir> --shapes-from-service <service URL>
     --traffic-model llama'
    """
    return (
        "inferensics bundle build --model <factory> --key <key> --out <dir> --shapes-from-service <service URL> "
        f"--traffic-model {model}"
    )


def _sizes(row: dict[str, object]) -> str:
    sizes, counts = row[TOP_SIZES] or [], row[TOP_SIZE_REQUESTS] or []
    return ", ".join(f"{graph_size_text(s)} in {n:,}" for s, n in zip(sizes, counts, strict=True))  # type: ignore[call-overload]


def unqualified_line(frame: pl.DataFrame) -> str | None:
    """The summary's sentence (``None`` when no request ran at an unqualified size): each model and bundle, its
    requests at unqualified sizes against all its bundle's, the most common sizes, and what to do."""
    if frame.is_empty():
        return None
    said = [
        f"{r[UNQUALIFIED_REQUESTS]:,} of {r[BUNDLE_REQUESTS]:,} requests of {r[col.MODEL] or '(no model)'} on bundle "
        f"{str(r[col.BUNDLE_ID])[:BUNDLE_ID_DIGITS]} (most common: {_sizes(r)})"
        for r in frame.iter_rows(named=True)
    ]
    models = list(dict.fromkeys(str(m) for m in frame.get_column(col.MODEL)))
    return (
        f"Requests served at sizes their bundle was not qualified at (accuracy and latency unchecked there): "
        f"{'; '.join(said)}. Rebuild the bundle with those shapes: `{rebuild_command(models[0])}`"
        + (f" (and likewise for {', '.join(models[1:])})" if len(models) > 1 else "")
        + ", or add them to its --shapes file."
    )


def unqualified_section(frame: pl.DataFrame) -> list[Section]:
    """The section (none when no request ran at an unqualified size)."""
    if frame.is_empty():
        return []
    shown = frame.with_columns(
        pl.col(col.BUNDLE_ID).str.head(BUNDLE_ID_DIGITS),
        pl.Series(
            TOP_SIZES,
            [[graph_size_text(s) for s in sizes or []] for sizes in frame.get_column(TOP_SIZES).to_list()],
            dtype=pl.List(pl.String()),
        ),
    )
    return [
        Section(
            TITLE,
            [
                "Requests a bundle hit served at sizes the bundle never qualified its graph at (the host SDK's "
                "attrs['bundle_unqualified_shape']): unqualified_requests of bundle_requests (every request a graph "
                "of the bundle served), unqualified_calls (their calls at those sizes), top_sizes (the graph's sizes "
                "at one call each, one list per input with a symbol, a tuple of them where it has several; most "
                f"requests first, top_size_requests each). Bundle ids show their first {BUNDLE_ID_DIGITS} digits. "
                "Rebuild the bundle with those shapes "
                f"(`{rebuild_command('<model>')}`) or add them to its --shapes file."
            ],
            [],
            [
                (
                    shown,
                    [
                        col.MODEL,
                        col.BUNDLE_ID,
                        UNQUALIFIED_REQUESTS,
                        BUNDLE_REQUESTS,
                        UNQUALIFIED_CALLS,
                        TOP_SIZES,
                        TOP_SIZE_REQUESTS,
                    ],
                )
            ],
        )
    ]
