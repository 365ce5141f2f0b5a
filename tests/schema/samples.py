"""Sample events for every model, built from each field's ClickHouse type: typical and edge values."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from inferensics.schema.ddl import ch_type_of
from inferensics.schema.table import Event

LONG = "x" * 100_000 + "ü"
UNICODE = "模型-ü-😀-\u200b-'\"\\;\n\t"
FAR_PAST = datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=UTC)
FAR_FUTURE = datetime(2299, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)
TYPICAL_TS = datetime(2026, 11, 30, 12, 34, 56, 789012, tzinfo=UTC)


def _value(sql: str, variant: str, i: int) -> Any:
    edge = variant == "edge"
    if sql.startswith("DateTime64"):
        return {"typical": TYPICAL_TS, "edge": FAR_PAST if i % 2 else FAR_FUTURE, "empty": TYPICAL_TS}[variant]
    if sql in ("LowCardinality(String)", "String"):
        if variant == "empty":
            return ""
        return (LONG if i % 3 == 0 else UNICODE) if edge else f"value-{i}"
    if sql.startswith("UInt"):
        bits = int(sql[4:])
        return (2**bits - 1) if edge else (0 if variant == "empty" else 7 + i)
    if sql == "Bool":
        return edge
    if sql == "Float32":
        return (math.nan, math.inf, -math.inf, 3.4e38, -1e-30)[i % 5] if edge else 0.1 * i
    if sql == "Float64":
        return (math.nan, -math.inf, math.inf, 1e308, 5e-324)[i % 5] if edge else 0.1 * i
    if sql.startswith("Array("):
        inner = sql[len("Array(") : -1]
        if variant == "empty":
            return ()
        return tuple(_value(inner, variant, i + k) for k in range(3))
    if sql.startswith("Map("):
        if variant == "empty":
            return {}
        return {"k": "v", UNICODE: LONG} if edge else {"a": "1", "b": str(i)}
    raise AssertionError(f"no sample for {sql}")


def sample(model: type[Event], variant: str) -> Event:
    """One valid event of ``model``: ``typical``, ``edge`` (extremes) or ``empty`` (empties)."""
    data: dict[str, Any] = {}
    for i, (name, info) in enumerate(model.model_fields.items()):
        ch = ch_type_of(info)
        if info.annotation is bytes:
            data[name] = {"typical": b"print('hi')\n", "edge": bytes(range(256)) * 400, "empty": b""}[variant]
            continue
        data[name] = _value(ch.sql, variant, i)
    if "graph_keys" in data:  # parallel arrays (where the model has them) must agree in length
        n = len(data["graph_keys"])
        for k in ("graph_artifacts", "graph_calls", "graph_us"):
            if k in data:
                data[k] = tuple(data[k])[:n]
    return model.model_validate(data)


def comparable(event: Event) -> dict[str, Any]:
    """A dump where NaN compares equal to NaN."""

    def norm(v: Any) -> Any:
        if isinstance(v, float) and math.isnan(v):
            return "NaN"
        if isinstance(v, tuple | list):
            return [norm(x) for x in v]
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        return v

    return {k: norm(v) for k, v in event.model_dump().items()}
