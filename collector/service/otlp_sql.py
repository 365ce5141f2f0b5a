"""The SQL that turns OTLP trace requests into typed rows inside ClickHouse, generated from the models.

The collector spools raw ``ExportTraceServiceRequest`` bytes; the engine reads them with its ``Protobuf``
format (:mod:`inferensics.collector.service.otlp_proto`) and these queries map spans and span events to rows following
the contract of :mod:`inferensics.schema.otlp`, with the same validation as the Python reference decoder:

* a column's attribute must carry the exact OTLP kind of the column (string, int, double, bool, array of
  strings or ints); a float column also takes an int; unsigned ints must fit their width; OTLP bytes
  count as their hex string; timestamps other than the span's time travel as ISO-8601 strings
  (:data:`ISO_PATTERN`, years :data:`YEARS`); no model a span carries has a bytes column (the only one,
  ``blob_contents.data``, is written by the blob API alone), so no bytes column is decoded here;
* a required column that is missing, a whole map set as one attribute, parallel graph arrays of different
  lengths: the row is rejected, with the code of its reason in ``_reject`` (0 for good rows);
* unknown keys go into ``attrs`` as strings, ``inferensics.attrs.<k>`` entries override them;
* a span or span event of a table only the service's API writes
  (:data:`~inferensics.schema.otlp.API_ONLY_MODELS`) is refused (:data:`API_ONLY_TABLE`), the rest kept;
* an event row inherits :data:`~inferensics.schema.otlp.INHERITED` columns from its span; ``host`` falls
  back to the resource's ``host.name`` when empty.

Two steps per spool segment: :func:`records_sql` parses the requests once into the spans that carry rows
(``inferensics.*`` spans and spans with ``inferensics.*`` events), and :func:`rows_sql` pivots one
table's span and event rows into its columns plus ``_reject``. The pivot looks each attribute key up once
(``_c``, a column code per attribute) and finds a column's attribute with an integer ``indexOf``; the
engine's analysis of the generated query is a fixed cost per segment of the same order as the work on
20k rows, so the query is kept as small as the checks allow (see benchmarks/bench_collector_load.py).

Both decoders also apply :mod:`inferensics.collector.service.value_checks` (closed vocabularies, signs, hex
digests, no NUL in a dimension), leave out of ``attrs`` (and count as :data:`UNSUPPORTED_VALUE`) a value with no
text form, and keep at most :data:`MAX_MAP_ENTRIES` entries of a map (the rest counted as
:data:`TOO_MANY_ENTRIES`).

Attribute keys that a span, event or resource repeats (which OTLP forbids) keep their first value in both
decoders; the repeats of a row's own attributes are dropped and counted as :data:`DUPLICATE_KEY`.

Known differences from the Python reference: a float stringified into ``attrs`` uses the engine's
shortest form (``1e+20`` in Python is ``100000000000000000000`` here, ``5.0`` is ``5``); a ``kvlist``
value in a column, which the reference renders as JSON, is rejected here.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC
from typing import Final

import pyarrow as pa

from inferensics.collector.service.otlp_proto import KIND
from inferensics.collector.service.row_plan import no_bytes_column
from inferensics.collector.service.value_checks import value_checks
from inferensics.schema import columns as col
from inferensics.schema.arrow import arrow_schema, column_kind
from inferensics.schema.events import EVENT_MODELS
from inferensics.schema.otlp import INHERITED, MAP_COLUMNS, PREFIX, RESOURCE_HOST, span_name
from inferensics.schema.table import Event

REJECT: Final = "_reject"
"""The column of :func:`rows_sql` that says why a row is rejected: 0 when it is kept, else the 1-based
index of the message in :func:`reject_messages` (a number: a message string per row costs a copy per check)."""
NAME: Final = "_name"
"""The column of :func:`records_sql` that holds the span or event name."""
SPAN_KEY: Final = "_k"
"""The column of :func:`records_sql` that identifies a span (see :mod:`inferensics.schema.dedup`)."""
SPAN_SECOND: Final = "_b"
"""The column of :func:`records_sql` with the span's start in whole seconds (the dedup keys' sort prefix)."""
DROPPED_ATTRIBUTES: Final = "_dropped_attributes"
DROPPED_EVENTS: Final = "_dropped_events"

ISO_PATTERN: Final = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d{1,6})?(Z|[+-]\d{2}:\d{2})?$"
"""Timestamps set as attributes must match this (ISO-8601, at most microseconds, optional offset)."""
YEARS: Final = (1900, 2299)
"""The years a ``DateTime64(6)`` column holds."""

OUT_OF_RANGE_TIME: Final = "out_of_range_time"
"""The reject reason of a row whose time the table cannot keep (see :func:`time_window_us`)."""
API_ONLY_TABLE: Final = "api_only_table"
"""The reject reason of a span or span event named after a table that only the service's API writes
(:data:`~inferensics.schema.otlp.API_ONLY_MODELS`: the blob index and contents): counted, never stored."""
FUTURE_SKEW_S: Final = 86_400
"""How far ahead of the collector's clock a row's time may be (hosts' clock skew)."""
NOW_US: Final = "toUnixTimestamp64Micro(now64(6))"
"""The engine's clock in microseconds, the default ``now`` of :func:`rows_sql`."""


MAX_ID_BYTES: Final = 256
"""Longest identifier (a ``*_id`` string column) a row may carry; a longer one is rejected (a cut id is
another id). A required ``request_id`` must also be non-empty."""
MAX_TEXT_CHARS: Final = 65_536
"""Longest other string (and ``Map`` value) stored; longer ones are cut to this many characters, counted."""
TRUNCATED_VALUE: Final = "truncated_value"
"""The ``dropped`` reason counting string values cut to :data:`MAX_TEXT_CHARS`."""
MAX_MAP_ENTRIES: Final = 1024
"""Most entries a row's map column (``attrs``) keeps; the ones past it are dropped and counted. OpenTelemetry's
SDKs keep 128 attributes a span by default, so only a sender that lifted its limits, or a hostile one, meets this."""
TOO_MANY_ENTRIES: Final = "too_many_entries"
"""The ``dropped`` reason counting map entries past :data:`MAX_MAP_ENTRIES`."""
UNSUPPORTED_VALUE: Final = "unsupported_value"
"""The ``dropped`` reason counting attributes bound for a map column (``attrs``) whose value has no text form the
engine can read: a ``kvlist``, or an array holding arrays or kvlists (the engine's Protobuf structure reads one
level of array). They were stored as empty strings."""
UNSUPPORTED: Final = "_unsupported"
"""The column of :func:`rows_sql` that counts a row's :data:`UNSUPPORTED_VALUE` attributes."""
DUPLICATE_KEY: Final = "duplicate_key"
"""The ``dropped`` reason counting a row's own attributes whose key an earlier attribute of the same span or event
had (OTLP forbids repeated keys): the first value is kept, the repeats are dropped."""
DUPLICATES: Final = "_duplicates"
"""The column of :func:`rows_sql` that counts a row's :data:`DUPLICATE_KEY` attributes."""


def is_id_column(name: str) -> bool:
    """Whether a string column is an identifier (bounded, never cut)."""
    return name.endswith("_id")


def cut_columns(model: type[Event]) -> list[tuple[str, str]]:
    """``(name, kind)`` of the columns cut to :data:`MAX_TEXT_CHARS`: strings that are not ids, and maps."""
    out = []
    for f in arrow_schema(model):
        kind = column_kind(f.type)
        if (kind == "str" and not is_id_column(f.name)) or kind == "map":
            out.append((f.name, kind))
    return out


def insert_columns_sql(model: type[Event]) -> tuple[str, str, str]:
    """The select list that inserts a pivot's good rows (long strings cut, maps cut to :data:`MAX_MAP_ENTRIES`),
    the count of values cut and the count of map entries dropped."""
    cut = dict(cut_columns(model))
    exprs, counts, over = [], [], []
    n = MAX_MAP_ENTRIES
    for name in model.model_fields:
        kind = cut.get(name)
        if kind == "str":
            exprs.append(f"substringUTF8({name}, 1, {MAX_TEXT_CHARS}) AS {name}")
            counts.append(f"(lengthUTF8({name}) > {MAX_TEXT_CHARS})")
        elif kind == "map":
            kept = f"mapFromArrays(arraySlice(mapKeys({name}), 1, {n}), arraySlice(mapValues({name}), 1, {n}))"
            exprs.append(f"mapApply((k, v) -> (k, substringUTF8(v, 1, {MAX_TEXT_CHARS})), {kept}) AS {name}")
            counts.append(f"arrayCount(v -> lengthUTF8(v) > {MAX_TEXT_CHARS}, arraySlice(mapValues({name}), 1, {n}))")
            over.append(f"greatest(length({name}), {n}) - {n}")
        else:
            exprs.append(name)
    return ", ".join(exprs), " + ".join(counts) if counts else "0", " + ".join(over) if over else "0"


def time_window_us(ttl_days: int, now_us: int) -> tuple[int, int]:
    """``[low, high]`` in microseconds since the epoch of the times a table with ``ttl_days`` keeps: not older
    than its TTL (rows past it vanish at the next merge), not before 1970 (rollups keep ``DateTime``), not more
    than :data:`FUTURE_SKEW_S` ahead (a wrapped or wrong clock)."""
    low = max(0, now_us - ttl_days * 86_400_000_000) if ttl_days else 0
    return low, now_us + FUTURE_SKEW_S * 1_000_000


_INT_BITS: Final = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_PARALLEL: Final = (col.GRAPH_KEYS, col.GRAPH_ARTIFACTS, col.GRAPH_CALLS, col.GRAPH_US)


def _q(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _set(items: list[str]) -> str:
    return "(" + ", ".join(_q(i) for i in items) + ")" if items else "('')"


Field = Callable[[str], str]
"""An AnyValue as SQL: the expression of one of its fields (``value`` is the kind, see otlp_proto.KIND)."""


def tuple_value(expr: str) -> Field:
    """The fields of an AnyValue tuple expression (``kv.value`` inside a lambda)."""
    return lambda name: f"{expr}.{name}"


def indexed_value(array: str, index: str) -> Field:
    """The fields of element ``index`` of an attribute array, read through subcolumns (no tuple copies)."""
    return lambda name: f"{array}.value.{name}[{index}]"


def _stringlike(v: Field) -> str:
    """OTLP bytes travel as hex strings (schema/otlp.py), so a string column takes a bytes value too."""
    return f"{v(KIND)} IN ('string_value', 'bytes_value')"


def _string(v: Field) -> str:
    return f"if({v(KIND)} = 'bytes_value', lower(hex({v('bytes_value')})), {v('string_value')})"


def _falsy(v: Field) -> str:
    """Python truthiness of a decoded AnyValue (what ``not record.get('host')`` tests)."""
    k = v(KIND)
    return (
        f"multiIf({k} = 'string_value', {v('string_value')} = '', {k} = 'int_value', {v('int_value')} = 0, "
        f"{k} = 'double_value', {v('double_value')} = 0, {k} = 'bool_value', NOT {v('bool_value')}, "
        f"{k} = 'array_value', empty({v('array_value')}.values), {k} = 'bytes_value', "
        f"{v('bytes_value')} = '', {k} = 'kvlist_value', 0, 1)"
    )


def _scalar_text(v: Field) -> str:
    """A scalar AnyValue as the reference decoder stringifies it (floats: the engine's shortest form)."""
    k = v(KIND)
    return (
        f"multiIf({k} = 'string_value', {v('string_value')}, {k} = 'int_value', toString({v('int_value')}), "
        f"{k} = 'double_value', toString({v('double_value')}), {k} = 'bool_value', "
        f"if({v('bool_value')}, 'True', 'False'), {k} = 'bytes_value', lower(hex({v('bytes_value')})), "
        f"{k} IN ('array_value', 'kvlist_value'), '', 'None')"
    )


def _unsupported(v: Field) -> str:
    """Whether an AnyValue has no text form here: a kvlist, or an array holding arrays or kvlists."""
    nested = f"arrayExists(x -> x.{KIND} IN ('array_value', 'kvlist_value'), {v('array_value')}.values)"
    return f"({v(KIND)} = 'kvlist_value' OR ({v(KIND)} = 'array_value' AND {nested}))"


def _text(v: Field) -> str:
    """Any AnyValue as a string for ``attrs``: arrays joined with commas, as the reference does."""
    return (
        f"if({v(KIND)} = 'array_value', arrayStringConcat(arrayMap(x -> {_scalar_text(tuple_value('x'))}, "
        f"{v('array_value')}.values), ','), {_scalar_text(v)})"
    )


def _default(model: type[Event], name: str, kind: str, ch_type: str, bits: int) -> str:
    value = model.model_fields[name].get_default(call_default_factory=True)
    if kind == "map":
        return "CAST(map() AS Map(String, String))"
    if kind in ("strlist", "intlist"):
        return f"CAST([] AS {ch_type})"
    if kind == "bool":
        return "true" if value else "false"
    if kind == "str":
        return _q(str(value))
    if kind == "ts":  # a time column other than the row's own (``ts`` is the span's time when unset)
        return f"toDateTime64({_q(value.astimezone(UTC).strftime('%Y-%m-%d %H:%M:%S.%f'))}, 6, 'UTC')"
    if kind == "int":
        return f"toUInt{bits}({int(value)})"
    return f"toFloat64({float(value)!r})"


_CH_OF_KIND: Final = {
    "str": "String",
    "strlist": "Array(String)",
    "intlist": "Array(UInt32)",
    "bool": "Bool",
}


def _check(kind: str, v: Field, bits: int) -> tuple[str, str]:
    """(condition that the AnyValue ``v`` is acceptable, the column value taken from it)."""
    bound = 2**bits - 1
    k, i = v(KIND), v("int_value")
    if kind == "str":
        return _stringlike(v), _string(v)
    if kind == "int":
        upper = "" if bits == 64 else f" AND {i} <= {bound}"
        return f"({k} = 'int_value' AND {i} >= 0{upper})", f"toUInt{bits}({i})"
    if kind == "float":
        return f"{k} IN ('int_value', 'double_value')", f"if({k} = 'int_value', toFloat64({i}), {v('double_value')})"
    if kind == "bool":
        return f"{k} = 'bool_value'", v("bool_value")
    values = f"{v('array_value')}.values"
    if kind == "strlist":
        x = tuple_value("x")
        return (
            f"({k} = 'array_value' AND arrayAll(x -> {_stringlike(x)}, {values}))",
            f"arrayMap(x -> {_string(x)}, {values})",
        )
    if kind == "intlist":
        upper = "" if bits == 64 else f" AND x.int_value <= {bound}"
        return (
            f"({k} = 'array_value' AND arrayAll(x -> x.{KIND} = 'int_value' AND x.int_value >= 0{upper}, {values}))",
            f"arrayMap(x -> toUInt{bits}(x.int_value), {values})",
        )
    text = v("string_value")
    if kind == "ts":
        parsed = f"parseDateTime64BestEffortOrNull({text}, 6, 'UTC')"
        year = f"toInt32OrZero(substring({text}, 1, 4))"
        return (
            f"({k} = 'string_value' AND match({text}, {_q(ISO_PATTERN)}) "
            f"AND {year} BETWEEN {YEARS[0]} AND {YEARS[1]} AND isNotNull({parsed}))",
            f"assumeNotNull({parsed})",
        )
    raise ValueError(f"no SQL check for column kind {kind!r}")


def _validators(model: type[Event]) -> list[tuple[str, str]]:
    """SQL for the model's own validators: (condition that the row is bad, message)."""
    out: list[tuple[str, str]] = []
    for name in model.__pydantic_decorators__.model_validators:
        if name == "_parallel_graph_arrays":
            lengths = [f"length({c})" for c in _PARALLEL]
            bad = " OR ".join(f"{lengths[0]} != {n}" for n in lengths[1:])
            out.append((bad, "graph_keys, graph_artifacts, graph_calls and graph_us must have the same length"))
            continue
        raise NotImplementedError(
            f"{model.__name__} has model validator {name!r} with no SQL twin in "
            "inferensics.collector.service.otlp_sql; add one to _validators so the engine decoder rejects the "
            "same rows as the Python reference"
        )
    return out


def records_sql(source: str) -> str:
    """The spans of the requests in ``source`` that carry rows: ``inferensics.*`` spans and spans with events.

    ``source`` is a FROM item that yields ``ExportTraceServiceRequest`` messages with the structure of
    :func:`inferensics.collector.service.otlp_proto.structure` (``file(...)``, ``input(...)``). Columns: ``_name``,
    ``_t`` (start, nanoseconds), ``_k`` and ``_b`` (the span's dedup key and start second), ``_a``
    (attributes), ``_ev`` (events), ``_r`` (resource attributes) and the counts the sender's SDK dropped
    (spans that carry no rows are kept when they report drops).
    The engine parses the protobuf once, into a staging table of these; :func:`rows_sql` reads it per table.
    """
    prefix = _q(PREFIX)
    dropped_attributes = "sp.dropped_attributes_count + arraySum(e -> e.dropped_attributes_count, sp.events)"
    return (
        f"SELECT sp.name AS {NAME}, sp.start_time_unix_nano AS _t, sp.attributes AS _a, "
        f"sipHash128(sp.trace_id, sp.span_id, sp.name, sp.start_time_unix_nano) AS {SPAN_KEY}, "
        f"toUInt32(least(intDiv(sp.start_time_unix_nano, 1000000000), 4294967295)) AS {SPAN_SECOND}, "
        f"arrayFilter(e -> startsWith(e.name, {prefix}), sp.events) AS _ev, rs.resource.attributes AS _r, "
        f"{dropped_attributes} AS {DROPPED_ATTRIBUTES}, sp.dropped_events_count AS {DROPPED_EVENTS} "
        f"FROM {source} "
        "ARRAY JOIN resource_spans AS rs ARRAY JOIN rs.scope_spans AS ss ARRAY JOIN ss.spans AS sp "
        f"WHERE startsWith(sp.name, {prefix}) OR arrayExists(e -> startsWith(e.name, {prefix}), sp.events) "
        f"OR {DROPPED_ATTRIBUTES} > 0 OR {DROPPED_EVENTS} > 0"
    )


def dropped_sql(records: str) -> str:
    """What senders' SDKs reported dropping (OTLP ``dropped_*_count``): attributes and events."""
    return f"SELECT sum({DROPPED_ATTRIBUTES}), sum({DROPPED_EVENTS}) FROM {records}"


def names_sql(records: str) -> str:
    """Span and event names in ``records`` with how many spans and how many events carry each: which tables a
    segment has rows for, and whether they come from spans, span events or both (see :func:`rows_sql`)."""
    prefix = _q(PREFIX)
    return (
        f"SELECT name, sum(s), sum(e) FROM (SELECT {NAME} AS name, 1 AS s, 0 AS e FROM {records} "
        f"WHERE startsWith({NAME}, {prefix}) UNION ALL SELECT ev.name AS name, 0 AS s, 1 AS e FROM {records} "
        "ARRAY JOIN _ev AS ev) GROUP BY name"
    )


def api_only_text(name: str) -> str:
    """Why a span or span event called ``name`` (of an :data:`API_ONLY_TABLE` table) was refused: one line."""
    return f"{name.removeprefix(PREFIX)} is written only through the blob API (PUT /api/v1/blobs), never as spans"


def known_names() -> list[str]:
    """The span names that carry rows (``inferensics.<table>``)."""
    return [span_name(m) for m in EVENT_MODELS]


def _candidates(model: type[Event], records: str, *, spans: bool, events: bool) -> str:
    """The model's span rows and/or event rows as (_t, _a, _r, _own): ``_a`` is the row's own attributes (the
    first ``_own``) followed by those it may inherit from its span (only inheritable column keys, so every unknown
    key is its own)."""
    name = _q(span_name(model))
    mine = [c for c in INHERITED if c in model.model_fields]
    branches = []
    if spans:
        branches.append(f"SELECT _t, _a, _r, length(_a) AS _own FROM {records} WHERE {NAME} = {name}")
    if events:
        inherit = []
        for parent in EVENT_MODELS:
            keys = [PREFIX + c for c in mine if c in parent.model_fields]
            inherit.append(f"{NAME} = {_q(span_name(parent))}, kv.key IN {_set(keys)}")
        # a foreign span (or one of an unknown table) passes every inheritable attribute it has
        allowed = f"multiIf({', '.join(inherit)}, kv.key IN {_set([PREFIX + c for c in mine])})"
        branches.append(
            f"SELECT if(e.time_unix_nano = 0, _t, e.time_unix_nano) AS _t, "
            f"arrayConcat(e.attributes, arrayFilter(kv -> {allowed}, _a)) AS _a, _r, length(e.attributes) AS _own "
            f"FROM {records} ARRAY JOIN _ev AS e WHERE e.name = {name}"
        )
    if not branches:
        raise ValueError("rows_sql needs span rows, event rows or both")
    return " UNION ALL ".join(branches)


def rows_sql(
    model: type[Event], records: str, *, spans: bool = True, events: bool = True, now_us: int | None = None
) -> str:
    """``model``'s rows from the spans in ``records`` (a table or subquery of :func:`records_sql`).

    Columns: the model's fields in order, then ``_reject`` (see :data:`REJECT`), ``_unsupported`` (see
    :data:`UNSUPPORTED`) and ``_duplicates`` (see :data:`DUPLICATES`). ``spans`` / ``events``
    choose where rows come from (spans named after the table, span events named after it): leaving out a
    source that has no rows in ``records`` saves a pass over it. ``now_us`` is the clock the time window
    (:func:`time_window_us`) is measured from, the engine's own when ``None`` (tests inject one).
    """
    return _pivot(model, records, spans=spans, events=events, now_us=now_us)[0]


def reject_messages(model: type[Event]) -> list[str]:
    """The messages that :data:`REJECT` codes of ``model``'s rows stand for (code ``i`` is item ``i - 1``)."""
    return _pivot(model, "records", spans=True, events=True, now_us=0)[1]


def out_of_range_code(model: type[Event]) -> int:
    """The :data:`REJECT` code of a row whose time is outside its table's window (counted apart)."""
    messages = reject_messages(model)
    return next(i + 1 for i, m in enumerate(messages) if m.endswith(f"({OUT_OF_RANGE_TIME})"))


def _codes(model: type[Event]) -> tuple[str, dict[str, int], dict[str, int]]:
    """SQL for ``_c``, the code of every attribute in ``_a``: the 1-based index of the column whose key it is,
    a code past the columns for an entry of a map column (``inferensics.attrs.<k>``), 0 for an unknown key.
    One hashed lookup per attribute; each column then finds its attribute with an integer ``indexOf``."""
    names = list(model.model_fields)
    column = {n: i + 1 for i, n in enumerate(names)}
    entry: dict[str, int] = {h: len(names) + 1 + i for i, h in enumerate(h for h in MAP_COLUMNS if h in column)}
    if len(names) + len(entry) > 255:
        raise ValueError(f"{model.__name__}: more than 255 columns and map columns do not fit UInt8 codes")
    keys = "[" + ", ".join(_q(PREFIX + n) for n in names) + "]"
    codes = "[" + ", ".join(str(column[n]) for n in names) + "]::Array(UInt8)"
    expr = f"transform(k, {keys}, {codes}, 0::UInt8)"
    for h, code in entry.items():
        head = PREFIX + h + "."
        expr = f"if(startsWith(k, {_q(head)}) AND length(k) > {len(head)}, {code}::UInt8, {expr})"
    return f"arrayMap(k -> {expr}, _a.key)", column, entry


def _pivot(model: type[Event], records: str, *, spans: bool, events: bool, now_us: int | None) -> tuple[str, list[str]]:
    schema = arrow_schema(model)
    fields = model.model_fields
    codes, column, entry = _codes(model)
    # _u: 1 for the first attribute of each key, 2 for its first repeat...: only first ones are read (a column's
    # indexOf finds the first anyway; a map would keep every repeat)
    select: list[str] = [f"{codes} AS _c", "arrayEnumerateUniq(_a.key) AS _u"]
    value = tuple_value("v")

    def picked(code: int) -> tuple[str, str]:
        """The keys and texts of the attributes with ``code`` (bound for a map column: values with no text form
        are left out, and counted in :data:`UNSUPPORTED`)."""
        keep = f"c = {code} AND u = 1 AND NOT {_unsupported(value)}"
        keys = f"arrayFilter((k, v, c, u) -> {keep}, _a.key, _a.value, _c, _u)"
        texts = f"arrayMap(v -> {_text(value)}, arrayFilter((v, c, u) -> {keep}, _a.value, _c, _u))"
        return keys, texts

    to_maps = [*entry.values(), *([0] if col.ATTRS in column else [])]
    unsupported = (
        f"arrayCount((v, c, u) -> c IN ({', '.join(map(str, to_maps))}) AND u = 1 AND {_unsupported(value)}, "
        "_a.value, _c, _u)"
        if to_maps
        else "0"
    )
    # repeats among the row's own attributes (an event's inherited ones after them are overridden, not repeats)
    duplicates = "arrayCount((u, i) -> u > 1 AND i <= _own, _u, arrayEnumerate(_u))"

    for h, code in entry.items():
        keys, texts = picked(code)
        n = len(PREFIX + h) + 1
        select.append(f"mapFromArrays(arrayMap(k -> substring(k, {n + 1}), {keys}), {texts}) AS _e_{h}")
    bad: list[tuple[str, str]] = []
    outputs: list[str] = []
    window: list[str] = []
    for f in schema:
        name, kind = f.name, column_kind(f.type)
        if kind == "floatlist":
            raise NotImplementedError(f"{model.__name__}.{name}: no SQL decoding for lists of floats yet")
        if kind == "bytes":
            raise NotImplementedError(no_bytes_column(model, name))
        required = fields[name].is_required()
        bits = _INT_BITS.get(str(f.type.value_type if pa.types.is_list(f.type) else f.type), 0)
        ch_type = _CH_OF_KIND.get(kind, "")
        if kind == "map":
            entries = f"_e_{name}"
            whole = f"has(_c, {column[name]})"
            if name == col.ATTRS:
                extra_keys, extra_texts = picked(0)
                select.append(f"{extra_keys} AS _extra")
                outputs.append(f"mapUpdate(mapFromArrays(_extra, {extra_texts}), {entries}) AS {name}")
                whole_ok = f"(NOT empty({entries}) OR NOT empty(_extra))"
            else:
                outputs.append(f"{entries} AS {name}")
                whole_ok = f"NOT empty({entries})"
            bad.append((f"{whole} AND NOT {whole_ok}", f"{name}: a map travels as {PREFIX}{name}.<key>"))
            continue
        # own attributes come first in _a, so the first match is the row's own value, else its span's
        select.append(f"indexOf(_c, {column[name]}) AS _x_{name}")
        g = f"(_x_{name} > 0)"
        v = indexed_value("_a", f"_x_{name}")
        ok, taken = _check(kind, v, bits)
        if name == col.HOST:
            select.append(f"indexOf(_r.key, {_q(RESOURCE_HOST)}) AS _x_resource_host")
            use_resource = f"((NOT {g} OR {_falsy(v)}) AND _x_resource_host > 0)"
            select.append(f"{use_resource} AS _res_host")
            resource_text = _text(indexed_value("_r", "_x_resource_host"))
            default = "''" if required else _default(model, name, kind, ch_type, bits)
            outputs.append(f"multiIf(_res_host, {resource_text}, {g}, {taken}, {default}) AS {name}")
            bad.append((f"NOT _res_host AND {g} AND NOT {ok}", f"{name}: expected an OTLP string"))
            if required:
                bad.append((f"NOT _res_host AND NOT {g}", f"{name}: field required"))
            continue
        if kind == "ts" and name == col.TS:
            outputs.append(f"if({g}, {taken}, fromUnixTimestamp64Micro(toInt64(intDiv(_t, 1000)), 'UTC')) AS {name}")
            bad.append((f"{g} AND NOT {ok}", f"{name}: expected an ISO-8601 string"))
            # the time in microseconds before any conversion (a span time past 2262 wraps in DateTime64)
            select.append(f"if({g}, toUnixTimestamp64Micro({taken}), toInt64(intDiv(_t, 1000))) AS _us_{name}")
            window.append(f"_us_{name}")
            continue
        if required:
            outputs.append(f"{taken} AS {name}")
            bad.append((f"NOT {g}", f"{name}: field required"))
        else:
            outputs.append(f"if({g}, {taken}, {_default(model, name, kind, ch_type, bits)}) AS {name}")
        expected = _EXPECTED[kind] + (f" in 0..{2**bits - 1}" if bits else "")
        bad.append((f"{g} AND NOT {ok}", f"{name}: expected {expected}"))
        if kind == "float":
            stored = f"toFloat32({taken})" if pa.types.is_float32(f.type) else taken
            bad.append((f"{g} AND NOT isFinite({stored})", f"{name}: not a finite number (NaN or infinite)"))
        elif kind == "str" and is_id_column(name):
            empty = f" OR {taken} = ''" if name == col.REQUEST_ID and required else ""
            bad.append((f"{g} AND (length({taken}) > {MAX_ID_BYTES}{empty})",
                        f"{name}: an id must be 1 to {MAX_ID_BYTES} bytes"))  # fmt: skip
    bad += _validators(model)
    # the values' meaning, on the columns as computed above (a missing attribute's default always passes)
    bad += [(check.sql(check.column), check.message) for check in value_checks(model)]
    now = NOW_US if now_us is None else str(int(now_us))
    ttl = model.TABLE.ttl_days
    low = f"greatest(0, {now} - {ttl * 86_400_000_000})" if ttl else "0"
    high = f"{now} + {FUTURE_SKEW_S * 1_000_000}"
    for us in window:
        keep = (
            f"{ttl} days, at most {FUTURE_SKEW_S // 3600} h ahead"
            if ttl
            else f"from 1970, at most {FUTURE_SKEW_S // 3600} h ahead"
        )
        message = f"{us[4:]}: outside the times {model.TABLE.name} keeps ({keep}) ({OUT_OF_RANGE_TIME})"
        bad.append((f"({us} < {low} OR {us} > {high})", message))
    codes_sql = ", ".join(f"{cond}, {i + 1}" for i, (cond, _) in enumerate(bad))
    reject = f"toUInt16(multiIf({codes_sql}, 0)) AS {REJECT}"
    names = ", ".join(schema.names)
    inner = ", ".join([*select, *outputs, reject, f"toUInt32({unsupported}) AS {UNSUPPORTED}",
                       f"toUInt32({duplicates}) AS {DUPLICATES}"])  # fmt: skip
    source = _candidates(model, records, spans=spans, events=events)
    sql = f"SELECT {names}, {REJECT}, {UNSUPPORTED}, {DUPLICATES} FROM (SELECT {inner} FROM ({source}))"
    return sql, [message for _, message in bad]


_EXPECTED: Final = {
    "str": "an OTLP string",
    "int": "an OTLP int",
    "float": "an OTLP double or int",
    "bool": "an OTLP bool",
    "strlist": "an OTLP array of strings",
    "intlist": "an OTLP array of ints",
    "ts": "an ISO-8601 string",
}
