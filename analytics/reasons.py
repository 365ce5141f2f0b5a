"""Recompile and guard-failure reasons grouped by cause, not by the values each one happened to meet.

Dynamo's reason texts carry the values of the call that failed a guard: ``tensor 'x' size mismatch at index
0. expected 16, actual 24``, ``L['k'] == 3``, ``___check_obj_id(L['self'].cfg, 140596938461904)``. A storm
of one cause (a dimension that varies) is as many distinct texts as values it met, each counted once. The
analytics group by the text's **pattern**: number literals read ``N`` and addresses ``0x…``, except where a
number names something (an index ``[0]`` or ``index 0``, part of a name such as ``s0``, a ``file.py:10``).
Each group keeps its latest text as ``example_reason`` and counts its distinct texts as ``variants``.
"""

from __future__ import annotations

from typing import Final

import polars as pl

from inferensics.schema import columns as col

PATTERN: Final = "reason_pattern"
"""The column a grouped query names the pattern by until :func:`as_reason`."""

_INDEX: Final = "\\x01"
"""Marks the number of ``index 0`` so the masking leaves it (a control character no reason carries)."""


PATTERN_NOTE: Final = (
    "Reasons are grouped by cause: the values a guard met read N (an index or a name keeps its number); "
    "variants counts a group's distinct texts, example_reason (where shown) is its latest."
)
"""The one-line explanation the pages and the report print beside a table of patterns."""


def reason_pattern_sql(column: str) -> str:
    """SQL for ``column``'s pattern (the module docstring's rule), in ClickHouse's re2 dialect."""
    marked = f"replaceRegexpAll({column}, 'index ([0-9]+)', 'index {_INDEX}\\\\1')"
    addresses = f"replaceRegexpAll({marked}, '0x[0-9a-fA-F]+', '0x…')"
    numbers = (
        f"replaceRegexpAll({addresses}, '(^|[^\\\\w\\\\[\\\\].:{_INDEX}-])-?[0-9]+(\\\\.[0-9]+)?([eE]-?[0-9]+)?\\\\b', "
        "'\\\\1N')"
    )
    return f"replaceAll({numbers}, '{_INDEX}', '')"


LAST_SEEN: Final = f"max({col.TS}) AS last_seen"
"""SQL of the inner query, grouped by the reason's text: its latest time, which :func:`pattern_columns` reads."""


def pattern_columns() -> str:
    """SQL selecting ``reason_pattern`` (:func:`reason_pattern_sql` of ``reason``), ``example_reason`` (the
    group's latest text) and ``variants`` (its distinct texts), over an inner query grouped by the text that
    selects :data:`LAST_SEEN`: the pattern then runs once per distinct text, not once per event, and the
    outer query merges the inner one's aggregate states. ClickHouse resolves an alias before a column of the
    same name, so the pattern is not aliased ``reason``: :func:`as_reason` renames it once the rows are read."""
    return (
        f"{reason_pattern_sql(col.REASON)} AS {PATTERN}, "
        f"argMax({col.REASON}, (last_seen, {col.REASON})) AS example_reason, toUInt64(count()) AS variants"
    )


def as_reason(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its ``reason_pattern`` column named ``reason``."""
    return frame.rename({PATTERN: col.REASON})
