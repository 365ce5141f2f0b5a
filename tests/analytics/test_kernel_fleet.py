"""The ``kernel_providers``, ``kernel_skips`` and ``kernel_qualifications`` queries over the decisions and
qualification records of a small fleet in a real embedded store (:mod:`tests.analytics.kernel_events`)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from inferensics.analytics import LocalRunner, UnknownFilterValue, UnsupportedFilter
from inferensics.analytics.filters import SliceParams
from inferensics.analytics.kernel_fleet import (
    PROVIDER_COLUMNS,
    QUALIFICATION_COLUMNS,
    SKIP_COLUMNS,
    kernel_providers,
    kernel_qualifications,
    kernel_skips,
)
from inferensics.schema.store import Store
from tests.analytics.kernel_events import (
    BUCKET,
    CPU_MODEL,
    CPU_POOL,
    GPU_MODEL,
    GPU_POOL,
    H200,
    ON_CPU,
    RAISED,
    REQUEST,
    decision_events,
    qualification_events,
)
from tests.seeding import scratch_store

NOW = datetime.now(UTC).replace(second=0, microsecond=0)
HOUR = SliceParams(start=NOW - timedelta(hours=1), end=NOW)


@pytest.fixture(scope="module")
def kernel_store(chdb_dir: Path) -> Iterator[Store]:
    """A migrated store holding the decisions and qualification records, read by every test of the module."""
    with scratch_store(chdb_dir, "kernels") as store:
        store.insert_events(decision_events(NOW))
        store.insert_events(qualification_events(NOW))
        yield store


def _rows(frame: pl.DataFrame, *fields: str) -> list[tuple[Any, ...]]:
    return [tuple(r[f] for f in fields) for r in frame.iter_rows(named=True)]


def test_one_row_per_model_pool_op_provider_and_compiled_fallbacks_first(kernel_store: Store) -> None:
    frame = kernel_providers(kernel_store, HOUR)
    assert frame.columns == list(PROVIDER_COLUMNS)
    keys = [(r["model"], r["hw_pool"], r["op"], r["provider"], r["compiled"]) for r in frame.iter_rows(named=True)]
    assert keys == [
        (GPU_MODEL, GPU_POOL, "rms_norm", "inductor", True),  # the quarantine's fallback
        (CPU_MODEL, CPU_POOL, "rotary_embedding", "reference", False),
        (CPU_MODEL, CPU_POOL, "silu_mul", "inductor", True),
        (GPU_MODEL, GPU_POOL, "rms_norm", "triton", True),  # 3 decisions
        (GPU_MODEL, GPU_POOL, "paged_decode_attention", "triton", True),
        (GPU_MODEL, GPU_POOL, "rms_norm", "triton", False),
        (GPU_MODEL, GPU_POOL, "silu_mul", "triton", True),  # not the reference decision two hours before
    ]
    served = frame.row(3, named=True)
    assert (served["decisions"], served["fallbacks"], served["signatures"], served["hosts"], served["graphs"]) == (
        3, 0, 2, 2, 1,
    )  # fmt: skip
    assert (served["example_request"], served["skipped_before"]) == (REQUEST, [])
    eager = frame.row(5, named=True)
    assert (eager["graphs"], eager["example_request"]) == (0, "")
    quarantined = frame.row(0, named=True)
    assert (quarantined["fallbacks"], quarantined["skipped_before"]) == (1, [f"triton: {RAISED}"])
    assert frame.get_column("first_seen").dtype.time_zone == "UTC"  # type: ignore[attr-defined]
    assert int(frame.get_column("decisions").sum()) == 9


def test_skips_split_provider_and_reason(kernel_store: Store) -> None:
    frame = kernel_skips(kernel_store, HOUR)
    assert frame.columns == list(SKIP_COLUMNS)
    rows = _rows(frame, "op", "skipped_provider", "reason", "decisions", "chosen")
    assert rows == [
        ("rms_norm", "triton", RAISED, 1, ["inductor"]),
        ("rotary_embedding", "triton", ON_CPU, 1, ["reference"]),
        ("silu_mul", "triton", ON_CPU, 1, ["inductor"]),
    ]
    assert frame.row(0, named=True)["models"] == [GPU_MODEL]
    assert frame.row(1, named=True)["pools"] == [CPU_POOL]


def test_the_slice_filters_that_decisions_carry_apply_and_the_others_are_refused(kernel_store: Store) -> None:
    mistral = HOUR.model_copy(update={"model": CPU_MODEL})
    assert set(kernel_providers(kernel_store, mistral).get_column("model")) == {CPU_MODEL}
    assert kernel_skips(kernel_store, mistral.model_copy(update={"host": "c1"})).height == 2
    for name, value in (("traffic_class", "chat"), ("bundle", "b" * 64)):
        with pytest.raises(UnsupportedFilter, match=f"the {name} filter does not apply to kernel-registry decisions"):
            kernel_providers(kernel_store, HOUR.model_copy(update={name: value}))
    with pytest.raises(UnknownFilterValue, match="lama-8b"):
        kernel_skips(kernel_store, HOUR.model_copy(update={"model": "lama-8b"}))


def test_the_newest_record_per_provider_with_its_ratio_to_the_fastest(kernel_store: Store) -> None:
    frame = kernel_qualifications(kernel_store, HOUR)
    assert frame.columns == list(QUALIFICATION_COLUMNS)
    rows = _rows(frame, "device_name", "provider", "status", "median_us", "vs_best")
    assert rows == [
        ("NVIDIA H200 (sm_90)", "inductor", "measured", 2.4, 1.0),
        ("NVIDIA H200 (sm_90)", "triton", "measured", 3.0, pytest.approx(1.25)),  # the newer run, not 9 us
        ("NVIDIA H200 (sm_90)", "reference", "measured", 15.0, pytest.approx(6.25)),
        ("NVIDIA H200 (sm_90)", "planted_wrong", "refused", None, None),  # refused: not the fastest at 1 us
        ("cpu", "reference", "measured", 20.0, 1.0),
        ("cpu", "triton", "unsupported", None, None),
    ]
    h200 = frame.filter(frame["device_name"] == H200)
    assert set(h200.get_column("bucket")) == {BUCKET}
    refused = h200.row(3, named=True)
    assert (refused["accuracy_passed"], refused["decision"], refused["max_abs_err"]) == (False, "refused", 0.5)
    assert refused["ci_low_us"] is None
    assert frame.row(0, named=True)["timing"] == "cuda_graph"
    with pytest.raises(UnsupportedFilter, match="the model filter does not apply to kernel qualification records"):
        kernel_qualifications(kernel_store, HOUR.model_copy(update={"model": GPU_MODEL}))
    assert set(kernel_qualifications(kernel_store, HOUR.model_copy(update={"host": "c1"})).get_column("host")) == {"c1"}


def test_the_named_queries_answer_through_the_runner(kernel_store: Store) -> None:
    runner = LocalRunner(kernel_store)
    window = {"start": HOUR.start, "end": HOUR.end}
    assert runner.query("kernel_providers", **window).height == 7
    assert runner.query("kernel_skips", **window).height == 3
    assert runner.query("kernel_qualifications", **window).height == 6


def test_every_shape_of_a_bucket_keeps_its_records_and_vs_best_compares_one_shape(chdb_dir: Path) -> None:
    """Tokens 3 and 4 share the bucket ``t4``, measured in one run (one ``ts``): keyed by bucket alone, one shape's
    records were kept at random and ``vs_best`` divided a median at 4 rows by one at 3 (issue walk41 #11)."""
    from inferensics.schema.events import KernelQualificationEvent

    t = NOW - timedelta(minutes=10)

    def record(tokens: int, provider: str, median: float) -> KernelQualificationEvent:
        return KernelQualificationEvent(
            ts=t, host="c1", device_name="cpu", op="rms_norm", provider=provider, bucket="float32/n64/t4",
            shape=f"tokens={tokens},hidden=64", dtype="float32", status="measured", accuracy_passed=True,
            median_us=median, ci_low_us=median, ci_high_us=median, trials=3, timing="wall", evidence_digest="d" * 64,
        )  # fmt: skip

    run = [record(3, "a", 10.0), record(3, "reference", 20.0), record(4, "a", 50.0), record(4, "b", 12.5),
           record(4, "reference", 25.0)]  # fmt: skip
    with scratch_store(chdb_dir, "kshapes") as store:
        store.insert_events(run)
        frame = kernel_qualifications(store, HOUR)
    assert frame.columns == list(QUALIFICATION_COLUMNS)
    assert _rows(frame, "shape", "provider", "median_us", "vs_best") == [
        ("tokens=3,hidden=64", "a", 10.0, 1.0),
        ("tokens=3,hidden=64", "reference", 20.0, 2.0),
        ("tokens=4,hidden=64", "b", 12.5, 1.0),
        ("tokens=4,hidden=64", "reference", 25.0, 2.0),
        ("tokens=4,hidden=64", "a", 50.0, 4.0),
    ]
