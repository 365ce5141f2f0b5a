"""Arrow schemas and conversions derived from the event models (the batch-insert format)."""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, timedelta
from functools import cache
from itertools import accumulate
from typing import Any, Final, TypeVar

from inferensics.schema.install_hint import pip_install_hint

try:
    import pyarrow as pa
    import pyarrow.compute as pc
except ModuleNotFoundError as exc:  # the slim install (a serving host's) has no Arrow
    raise ModuleNotFoundError(
        f"inferensics.schema.arrow needs {exc.name}, which comes with the service extra: "
        + pip_install_hint("service"),
        name=exc.name,
    ) from None

from inferensics.schema.ddl import ch_type_of
from inferensics.schema.table import Event

E = TypeVar("E", bound=Event)

DIM_DICTIONARY: Final = pa.dictionary(pa.int32(), pa.string())
"""How a ``LowCardinality(String)`` column may travel as well as plain strings (see :func:`conform`)."""
_DIM: Final = "dictionary<values=string, indices=int32>"
ENCODE_MIN_ROWS: Final = 4096
"""Batches this long or longer send their plain-string LowCardinality columns dictionary-encoded."""

_ARROW_TYPES: dict[str, pa.DataType] = {
    "timestamp[us, tz=UTC]": pa.timestamp("us", tz="UTC"),
    _DIM: pa.string(),
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


def column_kind(t: pa.DataType) -> str:
    """How a column's values travel and are checked: ``ts``, ``map``, ``strlist``, ``intlist``, ``floatlist``,
    ``str``, ``bytes``, ``bool``, ``int`` or ``float`` (shared by the collector's decoders)."""
    if pa.types.is_timestamp(t):
        return "ts"
    if pa.types.is_map(t):
        return "map"
    if pa.types.is_list(t):
        inner = t.value_type
        return "strlist" if pa.types.is_string(inner) else ("intlist" if pa.types.is_integer(inner) else "floatlist")
    if pa.types.is_string(t) or pa.types.is_dictionary(t):
        return "str"
    if pa.types.is_binary(t):
        return "bytes"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    return "float"


def arrow_schema(model: type[Event]) -> pa.Schema:
    """The Arrow schema of ``model``'s table (non-nullable, as the ClickHouse columns are)."""
    fields = [
        pa.field(name, _ARROW_TYPES[ch_type_of(info).arrow], nullable=False)
        for name, info in model.model_fields.items()
    ]
    return pa.schema(fields)


def events_to_arrow(model: type[E], events: Iterable[E]) -> pa.Table:
    """Build one Arrow table from validated events of one kind.

    The columns are built from buffers (:func:`values_array`), not by ``pa.array`` over Python lists: that
    converter imports pandas on its first call (to recognise pandas' missing values), which a serving host would
    pay on the first verdict or record it stores, though nothing here is a pandas object.
    """
    schema = arrow_schema(model)
    names = schema.names
    columns: dict[str, list[Any]] = {n: [] for n in names}
    for ev in events:
        for n in names:
            value = getattr(ev, n)
            if isinstance(value, dict):
                value = list(value.items())  # pyright: ignore[reportUnknownArgumentType]
            columns[n].append(value)
    return pa.Table.from_arrays([values_array(columns[n], schema.field(n).type) for n in names], schema=schema)


_ARRAY_CODES: Final = {"uint8": "B", "uint16": "H", "uint32": "I" if array("I").itemsize == 4 else "L", "uint64": "Q",
                       "float": "f", "double": "d"}  # fmt: skip
"""The ``array`` module's type code of each fixed-width Arrow type of :data:`_ARROW_TYPES` (bool and timestamps
aside)."""
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)


def values_array(values: Sequence[Any], type_: pa.DataType) -> pa.Array:
    """An Arrow array of ``values`` (Python values of one column of :data:`_ARROW_TYPES`' types: a map's as lists
    of key-value pairs), as ``pa.array(values, type=type_)`` gives it, built from buffers.

    >>> values_array([[("k", "v")], []], pa.map_(pa.string(), pa.string())).to_pylist()
    [[('k', 'v')], []]
    >>> values_array([datetime(2026, 3, 3, 12, tzinfo=UTC)], pa.timestamp("us", tz="UTC")).cast(pa.int64()).to_pylist()
    [1772539200000000]
    """
    n = len(values)
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        data = [v.encode() if isinstance(v, str) else bytes(v) for v in values]
        return pa.Array.from_buffers(type_, n, [None, _offsets(len(d) for d in data), pa.py_buffer(b"".join(data))])
    if pa.types.is_map(type_):
        pairs = [pair for v in values for pair in v]
        entries = pa.StructArray.from_arrays(
            [values_array([k for k, _ in pairs], type_.key_type), values_array([i for _, i in pairs], type_.item_type)],
            fields=[type_.key_field, type_.item_field],
        )
        return pa.Array.from_buffers(type_, n, [None, _offsets(len(v) for v in values)], children=[entries])
    if pa.types.is_list(type_):
        child = values_array([x for v in values for x in v], type_.value_type)
        return pa.Array.from_buffers(type_, n, [None, _offsets(len(v) for v in values)], children=[child])
    if pa.types.is_boolean(type_):
        bits = sum(1 << i for i, v in enumerate(values) if v)
        return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(bits.to_bytes((n + 7) // 8, "little"))])
    if pa.types.is_timestamp(type_):
        micros = [((v if v.tzinfo else v.replace(tzinfo=UTC)) - _EPOCH) // _MICROSECOND for v in values]
        return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(array("q", micros))])
    try:
        fixed = array(_ARRAY_CODES[str(type_)], values)
    except OverflowError as exc:  # what pa.array raises for a value its type cannot hold
        raise pa.ArrowInvalid(f"a value too large to fit in {type_}: {exc}") from None
    return pa.Array.from_buffers(type_, n, [None, pa.py_buffer(fixed)])


def _offsets(lengths: Iterable[int]) -> pa.Buffer:
    """The int32 offsets buffer of a string, binary, list or map array whose elements have ``lengths``."""
    return pa.py_buffer(array("i", [0, *accumulate(lengths)]))


def conform(model: type[Event], table: pa.Table, *, omit_type_defaults: bool = False) -> pa.Table:
    """Cast ``table`` to ``model``'s Arrow schema, filling absent columns with the model's defaults.

    With ``omit_type_defaults`` an absent column whose model default is also the ClickHouse column's own
    default (empty string, zero, false, empty array or map) is left out instead of filled: an insert that
    names only the columns it carries gets exactly those values from the engine, and the batch is
    smaller to build, ship and parse.

    A ``LowCardinality(String)`` column travels dictionary-encoded (``DIM_DICTIONARY``, one dictionary per
    column): a dictionary column (a Polars ``Categorical``, a ``pa.DictionaryArray``) as it comes, plain
    strings encoded here once the batch has ``ENCODE_MIN_ROWS`` rows. The engine then builds the column from
    the dictionary and its indices instead of hashing every value (benchmarks/bench_store_insert.py measures
    both against plain strings). Other columns are cast to the model's Arrow type.

    Raises:
        ValueError: a column that the model has no field for, or a required column that is missing,
            naming the column and the table.
    """
    schema = arrow_schema(model)
    unknown = sorted(set(table.column_names) - set(schema.names))
    if unknown:
        raise ValueError(f"{model.TABLE.name}: unknown columns {unknown}; known: {schema.names}")
    fields: list[pa.Field] = []
    arrays: list[pa.Array | pa.ChunkedArray] = []
    dims = dimension_fields(model)
    encode = table.num_rows >= ENCODE_MIN_ROWS
    for f in schema:
        if f.name in table.column_names:
            column = table.column(f.name)
            if f.name in dims and encode and not pa.types.is_dictionary(column.type):
                column = pc.dictionary_encode(column if column.type == f.type else column.cast(f.type))
            field = f.with_type(DIM_DICTIONARY) if f.name in dims and pa.types.is_dictionary(column.type) else f
            fields.append(field)
            arrays.append(column if column.type == field.type else column.cast(field.type))
            continue
        info = model.model_fields[f.name]
        if info.is_required():
            raise ValueError(f"{model.TABLE.name}: required column {f.name!r} is missing")
        default = info.get_default(call_default_factory=True)
        if omit_type_defaults and _is_type_default(default):
            continue
        if f.name in dims and encode:
            # one value, every index 0: nothing to hash, here or in the engine
            fields.append(f.with_type(DIM_DICTIONARY))
            indices = pa.repeat(pa.scalar(0, pa.int32()), table.num_rows)
            arrays.append(pa.DictionaryArray.from_arrays(indices, pa.array([default], pa.string())))
            continue
        fields.append(f)
        arrays.append(constant_array(default, f.type, table.num_rows))
    out = pa.Table.from_arrays(arrays, schema=pa.schema(fields))
    # An Arrow IPC file holds one dictionary per column: chunks with dictionaries of their own are unified.
    return out.unify_dictionaries() if any(pa.types.is_dictionary(f.type) for f in fields) else out


@cache
def dimension_fields(model: type[Event]) -> frozenset[str]:
    """Names of ``model``'s ``LowCardinality(String)`` fields (the ones that may travel as dictionaries)."""
    return frozenset(name for name, info in model.model_fields.items() if ch_type_of(info).arrow == _DIM)


def _is_type_default(value: object) -> bool:
    """Whether ``value`` is what ClickHouse stores in a column left out of an insert."""
    if isinstance(value, bool):
        return value is False
    if isinstance(value, int | float):
        return value == 0 and math.copysign(1.0, value) > 0
    if isinstance(value, str | bytes | tuple | list | dict):
        return len(value) == 0  # pyright: ignore[reportUnknownArgumentType]
    return False


def constant_array(value: Any, type_: pa.DataType, n: int) -> pa.Array:
    """An Arrow array of ``n`` copies of ``value``, built from buffers (a Python list of ``n`` is slow).

    >>> constant_array("ok", pa.string(), 3).to_pylist()
    ['ok', 'ok', 'ok']
    >>> constant_array({}, pa.map_(pa.string(), pa.string()), 2).to_pylist()
    [[], []]
    """
    if pa.types.is_string(type_) or pa.types.is_binary(type_):
        data = value.encode() if isinstance(value, str) else bytes(value)
        offsets = pa.py_buffer(array("i", range(0, (n + 1) * len(data), len(data))) if data else bytes(4 * (n + 1)))
        return pa.Array.from_buffers(type_, n, [None, offsets, pa.py_buffer(data * n)])
    zero_offsets = pa.py_buffer(bytes(4 * (n + 1)))
    if pa.types.is_map(type_) and not value:
        entries = pa.StructArray.from_arrays(
            [pa.array([], type_.key_type), pa.array([], type_.item_type)], fields=[type_.key_field, type_.item_field]
        )
        return pa.Array.from_buffers(type_, n, [None, zero_offsets], children=[entries])
    if pa.types.is_list(type_) and not value:
        return pa.Array.from_buffers(type_, n, [None, zero_offsets], children=[pa.array([], type_.value_type)])
    if pa.types.is_primitive(type_):
        return pa.repeat(pa.scalar(value, type=type_), n)
    if isinstance(value, dict):
        value = list(value.items())  # pyright: ignore[reportUnknownArgumentType]
    return pa.array([value] * n, type=type_)


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
