"""The named queries run in this process: the CLI's ``--dsn`` path of the reports.

It lives apart from :mod:`inferensics.analytics.client` because it imports the registry, and the registry
imports every query module, each of which imports the client's protocols: keeping them in one module made
a loop of twelve files.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from inferensics.analytics.client import QueryClient
from inferensics.analytics.errors import AnalyticsError
from inferensics.analytics.registry import NAMED_QUERIES


class LocalRunner:
    """A :class:`~inferensics.analytics.client.QueryRunner` over a query client in this process.

    >>> runner = LocalRunner(store)                                   # doctest: +SKIP
    >>> runner.query("fleet_overview", start="2026-03-02", end="2026-03-09")   # doctest: +SKIP
    """

    def __init__(self, client: QueryClient) -> None:
        self.client = client

    def query(self, name: str, **params: Any) -> pl.DataFrame:
        """Run the named query ``name`` on this runner's client.

        Raises:
            AnalyticsError: ``name`` is no named query, or ``params`` do not validate.
        """
        named = NAMED_QUERIES.get(name)
        if named is None:
            raise AnalyticsError(f"unknown query {name!r}; known: {', '.join(sorted(NAMED_QUERIES))}")
        return named.run(self.client, named.params.model_validate(params))
