"""Batch inserts: partial batches read back with the model's defaults, and what is deduplicated."""

from __future__ import annotations

from datetime import UTC, datetime

import polars as pl
import pyarrow as pa
import pytest

from inferensics.schema import EVENT_MODELS, RequestEvent
from inferensics.schema import columns as c
from inferensics.schema.arrow import DIM_DICTIONARY, ENCODE_MIN_ROWS, arrow_schema, conform, constant_array
from inferensics.schema.store import Store
from inferensics.schema.table import Event

TS = datetime.now(UTC).replace(microsecond=0)
"""Inside the request table's 30-day TTL, which drops an expired insert at once."""


def _required_only(n: int) -> pa.Table:
    return pa.table(
        {
            c.REQUEST_ID: [f"req-{i}" for i in range(n)],
            c.TS: pa.array([TS] * n, pa.timestamp("us", tz="UTC")),
            c.HOST: ["h1"] * n,
            c.MODEL: ["m1"] * n,
            c.HW_POOL: ["p1"] * n,
            c.TRAFFIC_CLASS: ["interactive"] * n,
        }
    )


@pytest.mark.parametrize("model", EVENT_MODELS, ids=lambda m: m.TABLE.name)
def test_constant_array_equals_a_list_built_array_for_every_default(model: type[Event]) -> None:
    schema = arrow_schema(model)
    for name, info in model.model_fields.items():
        if info.is_required():
            continue
        default = info.get_default(call_default_factory=True)
        type_ = schema.field(name).type
        as_list = list(default.items()) if isinstance(default, dict) else default
        for n in (0, 1, 5):
            got = constant_array(default, type_, n)
            got.validate(full=True)
            assert got.equals(pa.array([as_list] * n, type=type_)), (model.__name__, name, n)


def test_conform_fills_every_column_unless_asked_to_leave_type_defaults_out() -> None:
    batch = _required_only(3)
    full = conform(RequestEvent, batch)
    assert full.schema == arrow_schema(RequestEvent)
    assert full.column(c.STATUS).to_pylist() == ["ok"] * 3
    assert full.column(c.ATTRS).to_pylist() == [[]] * 3
    lean = conform(RequestEvent, batch, omit_type_defaults=True)
    # Only the defaults ClickHouse would not produce itself travel: ``ok``, ``hit``, ``hit``, ``none``.
    extra = [n for n in lean.column_names if n not in batch.column_names]
    assert extra == [c.STATUS, c.OUTCOME, c.GUARD_OUTCOME, c.CACHE_STATUS]
    assert lean.column(c.CACHE_STATUS).to_pylist() == ["none"] * 3


def test_conform_names_the_unknown_and_the_missing_column() -> None:
    with pytest.raises(ValueError, match=r"requests: unknown columns \['latency'\]"):
        conform(RequestEvent, _required_only(1).append_column("latency", pa.array([1.0])))
    with pytest.raises(ValueError, match="requests: required column 'host' is missing"):
        conform(RequestEvent, _required_only(1).drop_columns([c.HOST]))


def test_dictionary_encoded_dimensions_travel_as_dictionaries_and_read_back_as_their_values(store: Store) -> None:
    """A Polars Categorical (uint32 indices, large_string values) and a chunked pa.DictionaryArray whose
    chunks have dictionaries of their own: the LowCardinality columns stay dictionaries (one per column),
    a dictionary for a plain String column is decoded, and every value reads back as sent."""
    n = 6
    polars_categorical = pl.Series([f"model-{i % 2}" for i in range(n)]).cast(pl.Categorical).to_arrow()
    pools = pa.chunked_array(
        [pa.array(["p1", "p2", "p1"]).dictionary_encode(), pa.array(["p3", "p3", "p1"]).dictionary_encode()]
    )
    batch = _required_only(n).set_column(3, c.MODEL, polars_categorical).set_column(4, c.HW_POOL, pools)
    batch = batch.append_column(c.SHAPE, pa.array(["2x8"] * n).dictionary_encode())  # a String column
    data = conform(RequestEvent, batch)
    assert data.schema.field(c.MODEL).type == DIM_DICTIONARY
    assert data.schema.field(c.HW_POOL).type == DIM_DICTIONARY
    assert data.schema.field(c.SHAPE).type == pa.string()
    assert data.schema.field(c.HOST).type == pa.string()  # plain strings stay plain
    assert data.column(c.HW_POOL).chunk(0).dictionary.equals(data.column(c.HW_POOL).chunk(1).dictionary)
    assert store.insert_arrow(RequestEvent, batch) == n
    back = store.select_events(RequestEvent, order_by=c.REQUEST_ID)
    assert [e.model for e in back] == [f"model-{i % 2}" for i in range(n)]
    assert [e.hw_pool for e in back] == ["p1", "p2", "p1", "p3", "p3", "p1"]
    assert {e.shape for e in back} == {"2x8"}


def test_a_long_batch_sends_its_plain_string_dimensions_and_their_defaults_as_dictionaries(store: Store) -> None:
    n = ENCODE_MIN_ROWS
    batch = _required_only(n).set_column(3, c.MODEL, pa.array([f"m{i % 3}" for i in range(n)], pa.large_string()))
    data = conform(RequestEvent, batch, omit_type_defaults=True)
    for name in (c.HOST, c.MODEL, c.HW_POOL, c.TRAFFIC_CLASS, c.STATUS, c.CACHE_STATUS):
        assert data.schema.field(name).type == DIM_DICTIONARY, name
    assert data.schema.field(c.REQUEST_ID).type == pa.string()
    assert data.column(c.STATUS).chunk(0).dictionary.to_pylist() == ["ok"]
    assert conform(RequestEvent, batch.slice(0, n - 1)).schema.field(c.MODEL).type == pa.string()  # short: plain
    assert store.insert_arrow(RequestEvent, batch) == n
    got = store.query_rows(
        f"SELECT {c.MODEL}, {c.STATUS}, {c.CACHE_STATUS}, count() FROM {store.database}.requests GROUP BY ALL "
        "ORDER BY ALL"
    )
    assert got == [(f"m{k}", "ok", "none", len(range(k, n, 3))) for k in range(3)]


def test_a_partial_batch_reads_back_as_the_models_defaults(store: Store) -> None:
    assert store.insert_arrow(RequestEvent, _required_only(4)) == 4
    back = store.select_events(RequestEvent, order_by=c.REQUEST_ID)
    want = [
        RequestEvent(request_id=f"req-{i}", ts=TS, host="h1", model="m1", hw_pool="p1", traffic_class="interactive")
        for i in range(4)
    ]
    assert back == want


def test_equal_batches_without_a_token_are_both_stored(store: Store) -> None:
    batch = _required_only(10)
    store.insert_arrow(RequestEvent, batch)
    store.insert_arrow(RequestEvent, batch)
    store.insert_arrow(RequestEvent, batch, dedup_token="once")
    store.insert_arrow(RequestEvent, batch, dedup_token="once")
    assert store.query_rows(f"SELECT count() FROM {store.database}.requests")[0][0] == 30
    # The rollups count every stored row, and only those: the replayed token batch reaches none of them.
    for rollup in ("requests_1m", "requests_1h", "requests_1d"):
        assert store.query_rows(f"SELECT sum(requests) FROM {store.database}.{rollup}")[0][0] == 30, rollup
