"""What analytics needs from a store, and how reports reach named queries locally or through the service.

Two narrow interfaces keep the reports independent of where the store lives:

* :class:`QueryClient` runs parameterized SQL and returns Polars (``inferensics.schema.store.Store``
  satisfies it). Every analytics function takes one.
* :class:`QueryRunner` runs a *named* query (``runner.query("fleet_overview", start=..., end=...)``).
  ``inferensics.collector.client.ServiceClient`` satisfies it over HTTP;
  :class:`~inferensics.analytics.local_runner.LocalRunner` satisfies it over a :class:`QueryClient`.
  The weekly report and the canary page are built from a runner, so the CLI's ``--service`` path is the
  same code with a different runner.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import polars as pl


@runtime_checkable
class QueryClient(Protocol):
    """Runs parameterized SQL (``{name:Type}`` placeholders) against the inferensics database."""

    database: str

    def query_frame(self, sql: str, parameters: Mapping[str, Any] | None = None) -> pl.DataFrame:
        """Run ``sql`` with ``parameters`` and return the rows as a Polars frame."""
        ...


class QueryRunner(Protocol):
    """Runs a named query of :data:`inferensics.analytics.registry.NAMED_QUERIES` by name."""

    def query(self, name: str, **params: Any) -> pl.DataFrame:
        """Validate ``params`` against the query's parameter model, run it, return its frame."""
        ...
