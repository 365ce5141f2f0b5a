"""The SQL that turns OTLP trace requests into typed rows inside ClickHouse, generated from the models.

The collector spools raw ``ExportTraceServiceRequest`` bytes; the engine reads them with its ``Protobuf``
format (:mod:`inferensics.schema.otlp_proto`) and these queries map spans and span events to rows following
the contract of :mod:`inferensics.schema.otlp`, with the same validation as the Python reference decoder:

* a column's attribute must carry the exact OTLP kind of the column (string, int, double, bool, array of
  strings or ints); a float column also takes an int; unsigned ints must fit their width;
  bytes travel as hex strings, timestamps other than the span's time as ISO-8601 strings;
* a required column that is missing, a whole map set as one attribute, parallel graph arrays of different
  lengths: the row is rejected, with a message in ``_reject`` (empty for good rows);
* unknown keys go into ``attrs`` as strings, ``inferensics.attrs.<k>`` entries override them;
* an event row inherits :data:`~inferensics.schema.otlp.INHERITED` columns from its span; ``host`` falls
  back to the resource's ``host.name`` when empty.

Two steps per spool segment: :func:`records_sql` flattens every ``inferensics.*`` span and span event
into one row (name, time, attributes, inheritable parent attributes, resource attributes), and
:func:`rows_sql` pivots the records of one table into its columns plus ``_reject``.
"""

from __future__ import annotations

from typing import Final

import pyarrow as pa

from inferensics.schema import columns as col
from inferensics.schema.arrow import arrow_schema
from inferensics.schema.events import EVENT_MODELS
from inferensics.schema.otlp import INHERITED, MAP_COLUMNS, PREFIX, RESOURCE_HOST, span_name
from inferensics.schema.table import Event

REJECT: Final = "_reject"
"""The column of :func:`rows_sql` that holds why a row is rejected (empty when it is kept)."""
NAME: Final = "_name"
"""The column of :func:`records_sql` that holds the span or event name."""

ISO_PATTERN: Final = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?$"
"""Timestamps set as attributes must match this (ISO-8601, at most microseconds, optional offset)."""
HEX_PATTERN: Final = r"^([0-9a-fA-F]{2})*$"
"""Bytes columns travel as hex strings matching this."""
YEARS: Final = (1900, 2299)
"""The years a ``DateTime64(6)`` column holds."""

_INT_BITS: Final = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_PARALLEL: Final = (col.GRAPH_KEYS, col.GRAPH_ARTIFACTS, col.GRAPH_CALLS, col.GRAPH_US)


def _q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _array(items: list[str]) -> str:
    return "CAST([" + ", ".join(_q(i) for i in items) + "] AS Array(String))"


def _set(items: list[str]) -> str:
    return "(" + ", ".join(_q(i) for i in items) + ")" if items else "('')"


def _falsy(v: str) -> str:
    """Python truthiness of a decoded AnyValue (what ``not record.get('host')`` tests)."""
    return (
        f"multiIf({v}.value = 'string_value', {v}.string_value = '', {v}.value = 'int_value', {v}.int_value = 0, "
        f"{v}.value = 'double_value', {v}.double_value = 0, {v}.value = 'bool_value', NOT {v}.bool_value, "
        f"{v}.value = 'array_value', empty({v}.array_value.values), {v}.value = 'bytes_value', "
        f"{v}.bytes_value = '', {v}.value = 'kvlist_value', 0, 1)"
    )


def _scalar_text(v: str) -> str:
    """A scalar AnyValue as the reference decoder stringifies it (floats: the engine's shortest form)."""
    return (
        f"multiIf({v}.value = 'string_value', {v}.string_value, {v}.value = 'int_value', toString({v}.int_value), "
        f"{v}.value = 'double_value', toString({v}.double_value), {v}.value = 'bool_value', "
        f"if({v}.bool_value, 'True', 'False'), {v}.value = 'bytes_value', lower(hex({v}.bytes_value)), "
        f"{v}.value IN ('array_value', 'kvlist_value'), '', 'None')"
    )


def _text(v: str) -> str:
    """Any AnyValue as a string for ``attrs``: arrays joined with commas, as the reference does."""
    return (
        f"if({v}.value = 'array_value', arrayStringConcat(arrayMap(x -> {_scalar_text('x')}, "
        f"{v}.array_value.values), ','), {_scalar_text(v)})"
    )


def _kind(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return "ts"
    if pa.types.is_map(t):
        return "map"
    if pa.types.is_list(t):
        return "strlist" if pa.types.is_string(t.value_type) else "intlist"
    if pa.types.is_binary(t):
        return "bytes"
    if pa.types.is_string(t) or pa.types.is_dictionary(t):
        return "str"
    if pa.types.is_boolean(t):
        return "bool"
    if pa.types.is_integer(t):
        return "int"
    return "float"


def _default(model: type[Event], name: str, kind: str, ch_type: str, bits: int) -> str:
    value = model.model_fields[name].get_default(call_default_factory=True)
    if kind == "map":
        return "CAST(map() AS Map(String, String))"
    if kind in ("strlist", "intlist"):
        return f"CAST([] AS {ch_type})"
    if kind == "bool":
        return "true" if value else "false"
    if kind in ("str", "bytes"):
        return _q(str(value.hex() if isinstance(value, bytes) else value))
    if kind == "ts":
        raise ValueError(f"{model.TABLE.name}.{name}: a timestamp column needs no default here")
    if kind == "int":
        return f"toUInt{bits}({int(value)})"
    return f"toFloat64({float(value)!r})"


_CH_OF_KIND: Final = {
    "str": "String",
    "strlist": "Array(String)",
    "intlist": "Array(UInt32)",
    "bool": "Bool",
    "bytes": "String",
}


def _check(kind: str, v: str, bits: int) -> tuple[str, str]:
    """(condition that the AnyValue ``v`` is acceptable, the column value taken from it)."""
    bound = 2**bits - 1
    if kind == "str":
        return f"{v}.value = 'string_value'", f"{v}.string_value"
    if kind == "int":
        upper = "" if bits == 64 else f" AND {v}.int_value <= {bound}"
        return f"({v}.value = 'int_value' AND {v}.int_value >= 0{upper})", f"toUInt{bits}({v}.int_value)"
    if kind == "float":
        return (
            f"{v}.value IN ('int_value', 'double_value')",
            f"if({v}.value = 'int_value', toFloat64({v}.int_value), {v}.double_value)",
        )
    if kind == "bool":
        return f"{v}.value = 'bool_value'", f"{v}.bool_value"
    if kind == "strlist":
        return (
            f"({v}.value = 'array_value' AND arrayAll(x -> x.value = 'string_value', {v}.array_value.values))",
            f"arrayMap(x -> x.string_value, {v}.array_value.values)",
        )
    if kind == "intlist":
        upper = "" if bits == 64 else f" AND x.int_value <= {bound}"
        return (
            f"({v}.value = 'array_value' AND arrayAll(x -> x.value = 'int_value' AND x.int_value >= 0{upper}, "
            f"{v}.array_value.values))",
            f"arrayMap(x -> toUInt{bits}(x.int_value), {v}.array_value.values)",
        )
    if kind == "bytes":
        return (
            f"({v}.value = 'string_value' AND match({v}.string_value, {_q(HEX_PATTERN)}))",
            f"unhex({v}.string_value)",
        )
    if kind == "ts":
        parsed = f"parseDateTime64BestEffortOrNull({v}.string_value, 6, 'UTC')"
        year = f"toInt32OrZero(substring({v}.string_value, 1, 4))"
        return (
            f"({v}.value = 'string_value' AND match({v}.string_value, {_q(ISO_PATTERN)}) "
            f"AND {year} BETWEEN {YEARS[0]} AND {YEARS[1]} AND isNotNull({parsed}))",
            f"assumeNotNull({parsed})",
        )
    raise ValueError(f"no SQL check for column kind {kind!r}")


def _validators(model: type[Event], present: set[str]) -> list[tuple[str, str]]:
    """SQL for the model's own validators: (condition that the row is bad, message)."""
    out: list[tuple[str, str]] = []
    for name in model.__pydantic_decorators__.model_validators:
        if name == "_parallel_graph_arrays":
            lengths = [f"length({c})" for c in _PARALLEL]
            bad = " OR ".join(f"{lengths[0]} != {n}" for n in lengths[1:])
            out.append((bad, "graph_keys, graph_artifacts, graph_calls and graph_us must have the same length"))
            continue
        raise NotImplementedError(
            f"{model.__name__} has model validator {name!r} with no SQL twin in inferensics.schema.otlp_sql; "
            "add one to _validators so the engine decoder rejects the same rows as the Python reference"
        )
    return out


def records_sql(source: str) -> str:
    """One row per ``inferensics.*`` span or span event of the requests in ``source``.

    ``source`` is a FROM item that yields ``ExportTraceServiceRequest`` messages with the structure of
    :func:`inferensics.schema.otlp_proto.structure` (``file(...)``, ``input(...)``). Columns: ``_name``,
    ``_t`` (nanoseconds: the event's time, else its span's start), ``_a`` (its attributes), ``_p`` (the
    parent span's attributes that an event inherits; empty for spans) and ``_r`` (resource attributes).
    """
    known = {span_name(m): [PREFIX + c for c in INHERITED if c in m.model_fields] for m in EVENT_MODELS}
    branches = ", ".join(f"sp.name = {_q(n)}, {_array(keys)}" for n, keys in known.items())
    allowed = f"multiIf({branches}, {_array([PREFIX + c for c in INHERITED])})"
    prefix = _q(PREFIX)
    return (
        f"SELECT rec.1 AS {NAME}, rec.2 AS _t, rec.3 AS _a, rec.4 AS _p, rs.resource.attributes AS _r "
        f"FROM {source} "
        "ARRAY JOIN resource_spans AS rs ARRAY JOIN rs.scope_spans AS ss ARRAY JOIN ss.spans AS sp "
        "ARRAY JOIN arrayConcat("
        f"if(startsWith(sp.name, {prefix}), "
        "[(sp.name, sp.start_time_unix_nano, sp.attributes, arrayFilter(kv -> 0, sp.attributes))], []), "
        "arrayMap(e -> (e.name, if(e.time_unix_nano = 0, sp.start_time_unix_nano, e.time_unix_nano), e.attributes, "
        f"arrayFilter(kv -> has({allowed}, kv.key), sp.attributes)), "
        f"arrayFilter(e -> startsWith(e.name, {prefix}), sp.events))) AS rec"
    )


def known_names() -> list[str]:
    """The span names that carry rows (``inferensics.<table>``)."""
    return [span_name(m) for m in EVENT_MODELS]


def rows_sql(model: type[Event], records: str) -> str:
    """``model``'s rows from the records in ``records`` (a table or subquery of :func:`records_sql`).

    Columns: the model's fields in order, then ``_reject``.
    """
    schema = arrow_schema(model)
    fields = model.model_fields
    has_attrs = col.ATTRS in fields
    column_keys = [PREFIX + n for n in fields]
    map_heads = [h for h in MAP_COLUMNS if h in fields]
    entry = {h: f"startsWith(kv.key, {_q(PREFIX + h + '.')}) AND length(kv.key) > {len(PREFIX + h + '.')}" for h in map_heads}
    is_extra = f"kv.key NOT IN {_set(column_keys)}" + "".join(f" AND NOT ({e})" for e in entry.values())
    select: list[str] = [
        # own attributes first: a map lookup returns the first match, so an event's own value wins
        "arrayConcat(_a, _p) AS _ap",
        "mapFromArrays(arrayMap(kv -> kv.key, _ap), arrayMap(kv -> kv.value, _ap)) AS _m",
        f"arrayFilter(kv -> {is_extra}, _a) AS _extra",
    ]
    for h in map_heads:
        n = len(PREFIX + h + ".")
        select.append(
            f"mapFromArrays(arrayMap(kv -> substring(kv.key, {n + 1}), arrayFilter(kv -> {entry[h]}, _a)), "
            f"arrayMap(kv -> {_text('kv.value')}, arrayFilter(kv -> {entry[h]}, _a))) AS _e_{h}"
        )
    bad: list[tuple[str, str]] = []
    outputs: list[str] = []
    present: set[str] = set()
    for f in schema:
        name, kind = f.name, _kind(f.type)
        key = _q(PREFIX + name)
        info = fields[name]
        required = info.is_required()
        bits = _INT_BITS.get(str(f.type.value_type if pa.types.is_list(f.type) else f.type), 0)
        ch_type = _CH_OF_KIND.get(kind, "")
        if kind == "map":
            entries = f"_e_{name}"
            if name == col.ATTRS:
                extra = "mapFromArrays(arrayMap(kv -> kv.key, _extra), arrayMap(kv -> " + _text("kv.value") + ", _extra))"
                outputs.append(f"mapUpdate({extra}, {entries}) AS {name}")
                whole_ok = f"(NOT empty({entries}) OR NOT empty(_extra))"
            else:
                outputs.append(f"{entries} AS {name}")
                whole_ok = f"NOT empty({entries})"
            bad.append((f"mapContains(_m, {key}) AND NOT {whole_ok}", f"{name}: a map travels as {PREFIX}{name}.<key>"))
            continue
        value = f"_m[{key}]"
        given = f"mapContains(_m, {key})"
        select.append(f"{value} AS _v_{name}")
        select.append(f"{given} AS _g_{name}")
        v, g = f"_v_{name}", f"_g_{name}"
        ok, taken = _check(kind, v, bits)
        if name == col.HOST:
            host = _q(RESOURCE_HOST)
            resource = f"mapFromArrays(arrayMap(kv -> kv.key, _r), arrayMap(kv -> kv.value, _r))"
            select.append(f"{resource} AS _rm")
            use_resource = f"((NOT {g} OR {_falsy(v)}) AND mapContains(_rm, {host}))"
            select.append(f"{use_resource} AS _res_host")
            resource_text = _text(f"_rm[{host}]")
            default = "''" if required else _default(model, name, kind, ch_type, bits)
            outputs.append(f"multiIf(_res_host, {resource_text}, {g}, {taken}, {default}) AS {name}")
            bad.append((f"NOT _res_host AND {g} AND NOT {ok}", f"{name}: expected an OTLP string"))
            if required:
                bad.append((f"NOT _res_host AND NOT {g}", f"{name}: field required"))
            present.add(name)
            continue
        if kind == "ts" and name == col.TS:
            outputs.append(f"if({g}, {taken}, fromUnixTimestamp64Micro(toInt64(intDiv(_t, 1000)), 'UTC')) AS {name}")
            bad.append((f"{g} AND NOT {ok}", f"{name}: expected an ISO-8601 string"))
            continue
        if required:
            outputs.append(f"{taken} AS {name}")
            bad.append((f"NOT {g}", f"{name}: field required"))
        else:
            outputs.append(f"if({g}, {taken}, {_default(model, name, kind, ch_type, bits)}) AS {name}")
        bad.append((f"{g} AND NOT {ok}", f"{name}: expected {_EXPECTED[kind]}" + (f" in 0..{2**bits - 1}" if bits else "")))
    bad += _validators(model, present)
    reject = "multiIf(" + ", ".join(f"{cond}, {_q(msg)}" for cond, msg in bad) + ", '') AS " + REJECT
    names = ", ".join(schema.names)
    inner = ", ".join(select + outputs + [reject])
    return f"SELECT {names}, {REJECT} FROM (SELECT {inner} FROM {records} WHERE {NAME} = {_q(span_name(model))})"


_EXPECTED: Final = {
    "str": "an OTLP string",
    "int": "an OTLP int",
    "float": "an OTLP double or int",
    "bool": "an OTLP bool",
    "strlist": "an OTLP array of strings",
    "intlist": "an OTLP array of ints",
    "bytes": "a hex string",
    "ts": "an ISO-8601 string",
}
