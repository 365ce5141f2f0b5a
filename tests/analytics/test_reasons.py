"""Reasons grouped by cause: the pattern masks the values a guard met and keeps what names something.

Real parts: the texts are Dynamo's own formats (torch 2.x guard failure and recompile reasons), the pattern
runs in chDB, and the grouped queries read an embedded store.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from inferensics.analytics import SliceParams, guard_failures, recompile_reasons
from inferensics.analytics.reasons import reason_pattern_sql
from inferensics.schema import GuardFailureEvent, RecompileEvent
from inferensics.schema import columns as col
from inferensics.schema.store import Store
from tests.seeding import seed

CASES = [
    (
        "tensor 'x' size mismatch at index 0. expected 16, actual 24",
        "tensor 'x' size mismatch at index 0. expected N, actual N",
    ),
    (
        "tensor 'L['x']' stride mismatch at index 1. expected 4, actual 1",
        "tensor 'L['x']' stride mismatch at index 1. expected N, actual N",
    ),
    (
        "tensor 'x' dtype mismatch. expected Float, actual Half",
        "tensor 'x' dtype mismatch. expected Float, actual Half",
    ),
    ("L['k'] == 2", "L['k'] == N"),
    ("L['k'] == -3", "L['k'] == N"),
    ("L['eps'] == 1e-05", "L['eps'] == N"),
    ("___check_obj_id(L['self'].cfg, 140596938461904)", "___check_obj_id(L['self'].cfg, N)"),
    ("len(L['args']) == 3", "len(L['args']) == N"),
    ("2 <= L['x'].size()[0]", "N <= L['x'].size()[0]"),
    ("Ne(L['x'].size()[1], 1)", "Ne(L['x'].size()[1], N)"),
    ("Eq(s0, 5)", "Eq(s0, N)"),
    ("<function f at 0x7f00ab12cd30> changed", "<function f at 0x…> changed"),
    ("guard at model.py:10 failed", "guard at model.py:10 failed"),
    ("___check_global_state()", "___check_global_state()"),
    ("", ""),
]


@pytest.fixture(scope="module")
def store(chdb_dir: Path) -> Store:
    return Store.open(f"chdb://{chdb_dir}?database=reasons_{uuid.uuid4().hex[:8]}")


def test_the_pattern_masks_values_and_keeps_names(store: Store) -> None:
    texts = [text for text, _ in CASES]
    got = store.client.query(
        f"SELECT {reason_pattern_sql('r')} FROM (SELECT arrayJoin({{texts:Array(String)}}) AS r)",
        parameters={"texts": texts},
    ).result_rows
    assert [row[0] for row in got] == [pattern for _, pattern in CASES]


def test_recompiles_and_guard_failures_group_by_pattern(store: Store) -> None:
    t0 = datetime(2026, 3, 2, 10, tzinfo=UTC)
    sizes = [(16, 24), (24, 32), (32, 40)]
    texts = [f"tensor 'L['x']' size mismatch at index 1. expected {a}, actual {b}" for a, b in sizes]
    other = "tensor 'L['x']' size mismatch at index 0. expected 1, actual 2"  # another dimension: another cause
    labels = dict(host="h", model="m", hw_pool="p", code_location="model.py:10:forward")
    recompiles = [
        RecompileEvent(ts=t0 + timedelta(minutes=i), request_id=f"r{i}", reason=t, reasons=(t,), **labels)
        for i, t in enumerate([*texts, other])
    ]
    guards = [
        GuardFailureEvent(ts=t0 + timedelta(minutes=i), request_id=f"r{i}", reason=t, **labels)
        for i, t in enumerate([*texts, texts[0]])
    ]
    seed(store, events=[*recompiles, *guards])
    params = SliceParams(start=t0, end=t0 + timedelta(hours=1))

    reasons = recompile_reasons(store, params)
    assert reasons.select(col.REASON, "recompiles", "requests", "variants", "example_reason").rows() == [
        ("tensor 'L['x']' size mismatch at index 1. expected N, actual N", 3, 3, 3, texts[-1]),
        ("tensor 'L['x']' size mismatch at index 0. expected N, actual N", 1, 1, 1, other),
    ]
    assert guard_failures(store, params).select(col.REASON, "failures", "variants", "example_reason").rows() == [
        ("tensor 'L['x']' size mismatch at index 1. expected N, actual N", 4, 3, texts[0]),
    ]
