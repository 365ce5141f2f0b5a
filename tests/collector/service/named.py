"""A small named query with the analytics registry's interface, for testing the query endpoint."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import polars as pl
from pydantic import BaseModel, ConfigDict


class UnknownFilterValue(ValueError):  # noqa: N818 (the analytics name)
    """Stands in for analytics' AnalyticsError subclasses (ValueError → 400)."""


class CountParams(BaseModel):
    """Parameters of ``request_count``."""

    model_config = ConfigDict(extra="forbid")
    model: str
    limit: int = 10
    order: Literal["asc", "desc"] = "desc"


@dataclass(frozen=True)
class NamedQuery:
    """Same shape as inferensics.analytics.registry.NamedQuery."""

    name: str
    params: type[BaseModel]
    run: Any
    description: str


def _run(client: Any, params: BaseModel) -> pl.DataFrame:
    assert isinstance(params, CountParams)
    if params.model == "no-such-model":
        raise UnknownFilterValue(f"unknown model {params.model!r}")
    frame: pl.DataFrame = client.query_frame(
        f"SELECT model, count() AS n FROM {client.database}.requests WHERE model = {{m:String}} GROUP BY model",
        {"m": params.model},
    )
    return frame


TEST_QUERIES = {"request_count": NamedQuery("request_count", CountParams, _run, "Requests of one model.")}
