"""The values the sidebar filters offer: every model, pool, traffic class, bundle and host the store knows.

Values come from the ``dimension_values`` named query over all time (cheap: the hourly rollup, and for hosts, which
the rollups are not keyed by, the serving processes' health records), so a filter stays selectable when the selected
range happens to have no traffic for it. The heavier ``host_health`` (the Hosts page's) is not asked on every page.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from inferensics.dashboard._internal import queries
from inferensics.dashboard._internal.service import run_query


@dataclass(frozen=True, slots=True)
class FilterOptions:
    """Known models, pools, traffic classes and bundles, busiest first; hosts by name."""

    models: list[str]
    pools: list[str]
    traffic_classes: list[str]
    bundles: list[str]
    hosts: list[str]


def filter_options() -> FilterOptions:
    """The known dimension values (hosts by name, the others busiest first)."""
    values = run_query(queries.DIMENSION_VALUES, "filter values")

    def of(dimension: str) -> list[str]:
        if values.is_empty():
            return []
        rows = values.filter(pl.col("dimension") == dimension).get_column("value").to_list()
        return [str(v) for v in rows if v]

    return FilterOptions(of("model"), of("hw_pool"), of("traffic_class"), of("bundle"), sorted(of("host")))
