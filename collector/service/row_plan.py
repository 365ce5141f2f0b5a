"""Rows straight into column lists: the decoder's hot path, with pydantic as the authority for the rest.

For the common case (every attribute of the exact OTLP type its column expects, the time taken from the
span) a row goes from protobuf attributes straight into per-column lists, without building a record dict or
a model instance. Anything unusual (a value of another type that pydantic might coerce, a time set as an
attribute, a map column set whole, a key repeated) returns ``None`` and the caller takes the slow path:
``schema.otlp.attributes_to_record`` and the model's own validation, which decides acceptance and writes
the rejection message. ``tests/collector/service/test_decode_fuzz.py`` checks that both paths produce the
same rows for the same spans.

Integer columns have no range in the models, so both paths check the ClickHouse range here: a value that
does not fit is a rejected row, not an Arrow error that fails the whole request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import pyarrow as pa

from inferensics.schema import columns as col
from inferensics.schema.arrow import arrow_schema, column_kind
from inferensics.schema.otlp import INHERITED, MAP_COLUMNS, PREFIX
from inferensics.schema.table import Event

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_INT_BITS: Final = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_FAST_VALIDATORS: Final = frozenset({"_parallel_graph_arrays"})
_PARALLEL: Final = (col.GRAPH_KEYS, col.GRAPH_ARTIFACTS, col.GRAPH_CALLS, col.GRAPH_US)


def no_bytes_column(model: type[Event], name: str) -> str:
    """Why neither decoder plans ``model``: its column ``name`` holds bytes, which no span carries.

    The only bytes column, ``blob_contents.data``, is written by the blob API alone
    (:data:`~inferensics.schema.otlp.API_ONLY_MODELS`); a span model given one needs its OTLP decoding (and the
    engine twin in ``otlp_sql``) written and compared first, not a path kept unreached until then.
    """
    return (
        f"{model.__name__}.{name} is a bytes column, which no span carries (blobs come in through "
        "PUT /api/v1/blobs); decoding it over OTLP needs a check in both decoders"
    )


@dataclass
class Plan:
    """How one model's rows are laid out as columns, computed once per model."""

    model: type[Event]
    schema: pa.Schema
    names: list[str]
    kinds: list[str]
    index: dict[str, int]
    defaults: list[Any]
    required: frozenset[int]
    bounds: dict[int, int]
    fast: bool
    ts: int
    host: int
    attrs: int
    inherited: list[tuple[int, str]]
    parallel: list[int]

    @classmethod
    def of(cls, model: type[Event]) -> Plan:
        """Build the plan for ``model``."""
        schema = arrow_schema(model)
        names = schema.names
        kinds = [column_kind(f.type) for f in schema]
        if "bytes" in kinds:
            raise NotImplementedError(no_bytes_column(model, names[kinds.index("bytes")]))
        defaults: list[Any] = []
        required: set[int] = set()
        for i, name in enumerate(names):
            info = model.model_fields[name]
            if info.is_required():
                required.add(i)
                defaults.append(None)
            else:
                d = info.get_default(call_default_factory=True)
                if isinstance(d, datetime):  # a time column's values are microseconds (``ColumnBuffer.to_arrow``)
                    d = _micros(d)
                defaults.append(list(d) if isinstance(d, tuple) else d)
        bounds = {}
        for i, f in enumerate(schema):
            t = f.type.value_type if pa.types.is_list(f.type) else f.type
            if str(t) in _INT_BITS:
                bounds[i] = 2 ** _INT_BITS[str(t)] - 1
        validators = set(model.__pydantic_decorators__.model_validators)
        pos = {n: i for i, n in enumerate(names)}
        return cls(
            model=model,
            schema=schema,
            names=names,
            kinds=kinds,
            index={PREFIX + n: i for i, n in enumerate(names) if kinds[i] not in ("map", "ts")},
            defaults=defaults,
            required=frozenset(required),
            bounds=bounds,
            fast=validators <= _FAST_VALIDATORS,
            ts=pos.get(col.TS, -1),
            host=pos.get(col.HOST, -1),
            attrs=pos.get(col.ATTRS, -1),
            inherited=[(pos[n], n) for n in INHERITED if n in pos],
            parallel=[pos[n] for n in _PARALLEL if n in pos] if "_parallel_graph_arrays" in validators else [],
        )


_PLANS: dict[type[Event], Plan] = {}


def plan_for(model: type[Event]) -> Plan:
    """The cached plan of ``model``."""
    plan = _PLANS.get(model)
    if plan is None:
        plan = _PLANS[model] = Plan.of(model)
    return plan


_SLOW: Final = object()


def _scalar(v: Any) -> Any:
    s = v.string_value
    if s:
        return s
    which = v.WhichOneof("value")
    if which is None:
        return _SLOW
    if which == "array_value":
        return [_scalar(x) for x in v.array_value.values]
    if which in ("bytes_value", "kvlist_value"):
        return _SLOW
    return getattr(v, which)


def _fits(kind: str, value: Any, bound: int) -> bool:
    t = type(value)
    if kind == "str":
        return t is str
    if kind == "int":
        return t is int and 0 <= value <= bound
    if kind == "float":
        return t is float or t is int
    if kind == "bool":
        return t is bool
    if t is not list:
        return False
    if kind == "strlist":
        return all(type(x) is str for x in value)
    if kind == "intlist":
        return all(type(x) is int and 0 <= x <= bound for x in value)
    return all(type(x) is float or type(x) is int for x in value)


def fast_row(
    plan: Plan,
    attributes: Any,
    time_us: int,
    inherited: Mapping[str, object] | None,
    resource_host: object,
) -> tuple[list[Any], set[int]] | None:
    """The row's column values and the columns it set, or ``None`` when it needs the slow path."""
    if not plan.fast:
        return None
    if len({kv.key for kv in attributes}) != len(attributes):
        return None  # a key repeated (OTLP forbids it): the slow path keeps the first and counts the rest
    row = list(plan.defaults)
    seen: set[int] = set()
    index, kinds, bounds = plan.index, plan.kinds, plan.bounds
    extra: dict[str, str] | None = None
    mapped: dict[str, str] | None = None
    for kv in attributes:
        key = kv.key
        v = kv.value
        value = v.string_value  # most attributes are non-empty strings: skip WhichOneof for them
        i = index.get(key)
        if value and i is not None and kinds[i] == "str":
            row[i] = value
            seen.add(i)
            continue
        if not value:
            value = _scalar(v)
            if value is _SLOW:
                return None
        if i is not None:
            kind = kinds[i]
            if not _fits(kind, value, bounds.get(i, 0)):
                return None
            row[i] = float(value) if kind == "float" else value
            seen.add(i)
            continue
        if key.startswith(PREFIX):
            name = key[len(PREFIX) :]
            head, _, tail = name.partition(".")
            if head in MAP_COLUMNS:
                if head != col.ATTRS or plan.attrs < 0 or not tail or type(value) is not str:
                    return None  # compiler_config, a whole map, or a non-string entry
                if mapped is None:
                    mapped = {}
                mapped[tail] = value
                continue
            if name in plan.model.model_fields:
                return None  # a time column set as an attribute
        if type(value) is not str:
            return None
        if extra is None:
            extra = {}
        extra[key] = value
    if plan.attrs >= 0 and (extra or mapped):
        row[plan.attrs] = {**(extra or {}), **(mapped or {})}
    elif extra:
        return None  # dropped by the slow path too, but let it decide
    if inherited:
        for i, name in plan.inherited:
            if i not in seen and name in inherited:
                value = inherited[name]
                if type(value) is not str:
                    return None
                row[i] = value
                seen.add(i)
    if plan.host >= 0 and not row[plan.host] and resource_host is not None:
        if type(resource_host) is not str:
            return None
        row[plan.host] = resource_host
        seen.add(plan.host)
    if plan.ts >= 0:
        row[plan.ts] = time_us
        seen.add(plan.ts)
    if not plan.required <= seen:
        return None
    if plan.parallel and len({len(row[i]) for i in plan.parallel}) != 1:
        return None
    return row, seen


def event_row(plan: Plan, event: Event) -> list[Any] | str:
    """A validated event's column values, or the rejection message when an integer is out of range."""
    row = []
    values = event.__dict__
    for i, name in enumerate(plan.names):
        value = values[name]
        kind = plan.kinds[i]
        if i in plan.bounds:
            bound = plan.bounds[i]
            items = value if kind == "intlist" else (value,)
            if any(not 0 <= x <= bound for x in items):
                return f"{name}: {value!r} is out of range for {plan.schema.field(name).type}"
        if kind == "ts":
            value = _micros(value)
        elif kind == "map":
            value = dict(value)
        elif isinstance(value, tuple):
            value = list(value)
        row.append(value)
    return row


def _micros(value: datetime) -> int:
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


@dataclass
class ColumnBuffer:
    """Rows of one model accumulated column by column."""

    plan: Plan
    columns: list[list[Any]] = field(default_factory=list)
    rows: int = 0

    def __post_init__(self) -> None:
        self.columns = [[] for _ in self.plan.names]

    def append(self, row: list[Any]) -> None:
        """Add one row (values in schema order)."""
        for column, value in zip(self.columns, row, strict=True):
            column.append(value)
        self.rows += 1

    def to_arrow(self) -> pa.Table:
        """The rows as an Arrow table in the model's schema."""
        arrays = []
        for f, values in zip(self.plan.schema, self.columns, strict=True):
            if pa.types.is_map(f.type):
                arrays.append(pa.array([list(m.items()) for m in values], type=f.type))
            elif pa.types.is_timestamp(f.type):
                arrays.append(pa.array(values, type=pa.int64()).cast(f.type))
            else:
                arrays.append(pa.array(values, type=f.type))
        return pa.Table.from_arrays(arrays, schema=self.plan.schema)
