"""A store that counts the engine queries it answers: the canary tests pin how many queries a comparison costs."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import polars as pl

from inferensics.schema.store import Store


class CountingStore:
    """``store``'s ``query_frame`` (all the comparison calls), counting each call in :attr:`queries`."""

    def __init__(self, store: Store) -> None:
        self.store, self.database, self.queries = store, store.database, 0

    def query_frame(self, sql: str, parameters: Mapping[str, Any] | None = None) -> pl.DataFrame:
        self.queries += 1
        return self.store.query_frame(sql, parameters)
