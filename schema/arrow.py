"""Arrow schemas and conversions derived from the event models (the batch-insert format)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import pyarrow as pa

from inferensics.schema.ddl import ch_type_of
from inferensics.schema.table import Event

E = TypeVar("E", bound=Event)

_ARROW_TYPES: dict[str, pa.DataType] = {
    "timestamp[us, tz=UTC]": pa.timestamp("us", tz="UTC"),
    "dictionary<values=string, indices=int32>": pa.string(),
    "string": pa.string(),
    "binary": pa.binary(),
    "uint8": pa.uint8(),
    "uint16": pa.uint16(),
    "uint32": pa.uint32(),
    "uint64": pa.uint64(),
    "bool": pa.bool_(),
    "float32": pa.float32(),
    "float64": pa.float64(),
    "list<string>": pa.list_(pa.string()),
    "list<uint32>": pa.list_(pa.uint32()),
    "list<float32>": pa.list_(pa.float32()),
    "map<string, string>": pa.map_(pa.string(), pa.string()),
}


def arrow_schema(model: type[Event]) -> pa.Schema:
    """The Arrow schema of ``model``'s table (non-nullable, as the ClickHouse columns are)."""
    fields = [
        pa.field(name, _ARROW_TYPES[ch_type_of(info).arrow], nullable=False)
        for name, info in model.model_fields.items()
    ]
    return pa.schema(fields)


def events_to_arrow(model: type[E], events: Iterable[E]) -> pa.Table:
    """Build one Arrow table from validated events of one kind."""
    schema = arrow_schema(model)
    names = schema.names
    columns: dict[str, list[Any]] = {n: [] for n in names}
    for ev in events:
        for n in names:
            value = getattr(ev, n)
            if isinstance(value, dict):
                value = list(value.items())  # pyright: ignore[reportUnknownArgumentType]
            columns[n].append(value)
    return pa.table({n: pa.array(columns[n], type=schema.field(n).type) for n in names}, schema=schema)


def conform(model: type[Event], table: pa.Table) -> pa.Table:
    """Cast ``table`` to ``model``'s Arrow schema, filling absent columns with the model's defaults.

    Raises:
        ValueError: a column that the model has no field for, or a required column that is missing,
            naming the column and the table.
    """
    schema = arrow_schema(model)
    unknown = sorted(set(table.column_names) - set(schema.names))
    if unknown:
        raise ValueError(f"{model.TABLE.name}: unknown columns {unknown}; known: {schema.names}")
    arrays: list[pa.Array | pa.ChunkedArray] = []
    for f in schema:
        if f.name in table.column_names:
            arrays.append(table.column(f.name).cast(f.type))
            continue
        info = model.model_fields[f.name]
        if info.is_required():
            raise ValueError(f"{model.TABLE.name}: required column {f.name!r} is missing")
        default = info.get_default(call_default_factory=True)
        if isinstance(default, dict):
            default = list(default.items())  # pyright: ignore[reportUnknownArgumentType]
        arrays.append(pa.array([default] * table.num_rows, type=f.type))
    return pa.Table.from_arrays(arrays, schema=schema)


def arrow_to_events(model: type[E], table: pa.Table) -> list[E]:
    """Turn rows read back from the store into validated events."""
    schema = arrow_schema(model)
    cols: dict[str, list[Any]] = {}
    for f in schema:
        column = table.column(f.name)
        if pa.types.is_binary(f.type):
            column = column.cast(pa.binary())
        values = column.to_pylist()
        if pa.types.is_map(f.type):
            values = [dict(v) for v in values]
        cols[f.name] = values
    return [model.model_validate({n: cols[n][i] for n in cols}) for i in range(table.num_rows)]


def events_by_model(events: Sequence[Event]) -> dict[type[Event], list[Event]]:
    """Group a mixed sequence of events by model, keeping order within each kind."""
    out: dict[type[Event], list[Event]] = {}
    for ev in events:
        out.setdefault(type(ev), []).append(ev)
    return out
