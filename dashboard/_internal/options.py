"""The values the sidebar filters offer: every model, pool, traffic class and bundle the store knows, and the hosts.

Values come from the ``dimension_values`` named query over all time (cheap: the hourly rollup), so a
filter stays selectable when the selected range happens to have no traffic for it. The rollups are not keyed by
host: hosts come from ``host_health`` over the range (the Hosts page's processes: those whose SDK reported in the
range or the week before it).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from inferensics.collector.client import ServiceError
from inferensics.dashboard._internal import queries
from inferensics.dashboard._internal.filters import Filters
from inferensics.dashboard._internal.service import QueryCall, run_query
from inferensics.schema import columns as col


@dataclass(frozen=True, slots=True)
class FilterOptions:
    """Known models, pools, traffic classes and bundles, busiest first; hosts by name."""

    models: list[str]
    pools: list[str]
    traffic_classes: list[str]
    bundles: list[str]
    hosts: list[str]


def hosts_call(filters: Filters) -> QueryCall:
    """The named query whose answer names the hosts offered for ``filters``' range (no other filter: the offered
    values do not depend on each other)."""
    return queries.HOST_HEALTH, {"start": filters.start, "end": filters.end}


def host_options(filters: Filters) -> list[str]:
    """The hosts offered for ``filters``' range, by name; none where the service rejects the query (the host box
    still takes a typed host)."""
    name, params = hosts_call(filters)
    try:
        health = run_query(name, "hosts", **params)
    except ServiceError as exc:
        if exc.status in (400, 404, 422):
            return []
        raise
    if health.is_empty() or col.HOST not in health.columns:
        return []
    return sorted({str(h) for h in health.get_column(col.HOST).to_list() if h})


def filter_options(filters: Filters | None = None) -> FilterOptions:
    """The known dimension values, and the hosts of ``filters``' range (none without ``filters``)."""
    values = run_query(queries.DIMENSION_VALUES, "filter values")

    def of(dimension: str) -> list[str]:
        if values.is_empty():
            return []
        rows = values.filter(pl.col("dimension") == dimension).get_column("value").to_list()
        return [str(v) for v in rows if v]

    return FilterOptions(
        of("model"), of("hw_pool"), of("traffic_class"), of("bundle"), [] if filters is None else host_options(filters)
    )
