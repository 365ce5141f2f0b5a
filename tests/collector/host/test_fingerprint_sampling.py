"""The fingerprint sampling rule: which requests' outputs are fingerprinted, and how each record says so.

On a CPU server the SDK fingerprints one request in 32 by default (issue 25: the fingerprint cost as much as
a small model's request); device outputs are all fingerprinted. The choice is a function of the request id
alone, so two hosts, two bundles and a replay choose the same requests; every record carries ``fp_status``
and ``fp_rate`` so that no comparison reads an unsampled request's empty columns as a measurement.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
import torch

from inferensics.collector.host import NullExporter, SdkConfig, instrument
from inferensics.collector.host.config import CPU_FINGERPRINT_RATE, DEVICE_FINGERPRINT_RATE
from inferensics.collector.host.fingerprint_sampling import FingerprintRule, fingerprint_rules, request_hash
from inferensics.schema import columns as col
from inferensics.schema.events import FP_FAILED, FP_NONE, FP_OK, FP_UNSAMPLED, RequestEvent
from inferensics.schema.migrations import LATEST_VERSION, MIGRATIONS
from inferensics.schema.store import Store
from inferensics.schema.table import Event


class _ListExporter(NullExporter):
    def __init__(self) -> None:
        super().__init__()
        self.events: list[RequestEvent] = []

    def export_request(self, request: RequestEvent, children: Sequence[Event]) -> None:
        self.events.append(request)


def _serve(
    config: SdkConfig, ids: Sequence[str], output: torch.Tensor
) -> tuple[dict[str, RequestEvent], dict[str, int]]:
    exporter = _ListExporter()
    tracker = instrument(exporter=exporter, host="h", model="m", config=config)
    try:
        for rid in ids:
            with tracker.request(rid) as req:
                req.set_output(output)
        tracker.flush()
    finally:
        tracker.shutdown()
    return {e.request_id: e for e in exporter.events}, tracker.stats()


IDS = [f"req-{i:05d}" for i in range(400)]
LOGITS = torch.arange(24, dtype=torch.float32).reshape(2, 3, 4)


def test_the_hash_is_pinned_and_the_choice_even() -> None:
    # The choice must be the same on every host, process and release: a change here is a change of the
    # rule that makes old and new records incomparable, so it is pinned.
    assert [request_hash(r) for r in ("req-1", "", "a")] == [2698180065, 0, 4200413011]
    for rate in (1 / 16, 1 / 32):
        rule = FingerprintRule(rate)
        for ids in ([f"r{i}" for i in range(20_000)], [str(i) for i in range(20_000)]):
            assert 0.85 * rate < sum(map(rule.chosen, ids)) / len(ids) < 1.15 * rate
    assert not any(FingerprintRule(0.0).chosen(r) for r in IDS)
    assert all(FingerprintRule(1.0).chosen(r) for r in IDS)


def test_cpu_outputs_are_sampled_by_default_and_every_record_says_how() -> None:
    assert fingerprint_rules(SdkConfig())[0].rate == CPU_FINGERPRINT_RATE == 1 / 32
    assert fingerprint_rules(SdkConfig())[1].rate == DEVICE_FINGERPRINT_RATE == 1.0
    rows, stats = _serve(SdkConfig(trace_compiles=False), IDS, LOGITS)
    rule = FingerprintRule(CPU_FINGERPRINT_RATE)
    chosen = {r for r in IDS if rule.chosen(r)}
    assert 6 <= len(chosen) <= 25  # 12 of these 400 ids
    assert {r for r, e in rows.items() if e.fp_status == FP_OK} == chosen
    assert {r for r, e in rows.items() if e.fp_status == FP_UNSAMPLED} == set(IDS) - chosen
    assert {e.fp_rate for e in rows.values()} == {0.03125}
    assert stats["fingerprint_unsampled"] == len(IDS) - len(chosen)
    assert stats["requests"] == len(IDS)
    for r in chosen:
        assert rows[r].fp_argmax_head == (3, 3, 3, 3, 3, 3)
        assert rows[r].fp_argmax_digest
    # An unsampled request's fingerprint columns are empty, not a fingerprint of zeros.
    for r in set(IDS) - chosen:
        e = rows[r]
        assert (e.fp_argmax_digest, e.fp_argmax_head, e.fp_nan, e.fp_inf, e.fp_mean, e.fp_std, e.fp_absmax) == (
            "",
            (),
            0,
            0,
            0.0,
            0.0,
            0.0,
        )


def test_the_choice_is_the_same_in_another_tracker_and_follows_the_configured_rate() -> None:
    first, _ = _serve(SdkConfig(trace_compiles=False), IDS, LOGITS)
    again, _ = _serve(SdkConfig(trace_compiles=False), list(reversed(IDS)), LOGITS * 2)
    assert {r for r, e in first.items() if e.fp_status == FP_OK} == {
        r for r, e in again.items() if e.fp_status == FP_OK
    }
    every, stats = _serve(SdkConfig(trace_compiles=False, fingerprint_rate=1.0), IDS[:20], LOGITS)
    assert {(e.fp_status, e.fp_rate) for e in every.values()} == {(FP_OK, 1.0)}
    assert stats["fingerprint_unsampled"] == 0
    none, _ = _serve(SdkConfig.from_env({"INFERENSICS_FINGERPRINT_RATE": "0"}, trace_compiles=False), IDS[:20], LOGITS)
    assert {(e.fp_status, e.fp_rate, e.fp_argmax_digest) for e in none.values()} == {(FP_UNSAMPLED, 0.0, "")}
    quarter, _ = _serve(SdkConfig(trace_compiles=False, fingerprint_rate=0.25), IDS, LOGITS)
    rule = FingerprintRule(0.25)
    assert {r for r, e in quarter.items() if e.fp_status == FP_OK} == {r for r in IDS if rule.chosen(r)}
    assert {e.fp_rate for e in quarter.values()} == {0.25}


def test_no_output_and_unreadable_outputs_are_marked_apart_from_unsampled() -> None:
    exporter = _ListExporter()
    tracker = instrument(exporter=exporter, host="h", model="m", config=SdkConfig(trace_compiles=False))
    try:
        with tracker.request("no-output"):
            pass
        with tracker.request("not-a-tensor") as req:
            req.set_output({"text": "hello"})
        # A device output takes the device rule (every request): a meta tensor's fingerprint fails.
        with tracker.request("meta") as req:
            req.set_output(torch.empty(2, 4, device="meta"))
        # A chosen CPU output changed in place after set_output: read back as failed, never as a fingerprint.
        rid = next(r for r in IDS if FingerprintRule(CPU_FINGERPRINT_RATE).chosen(r))
        out = torch.ones(2, 4)
        with tracker.request(rid) as req:
            req.set_output(out)
        out.add_(1)
        tracker.flush()
    finally:
        tracker.shutdown()
    rows = {e.request_id: e for e in exporter.events}
    assert (rows["no-output"].fp_status, rows["no-output"].fp_rate) == (FP_NONE, 0.0)
    assert (rows["not-a-tensor"].fp_status, rows["not-a-tensor"].fp_rate) == (FP_NONE, 0.0)
    assert (rows["meta"].fp_status, rows["meta"].fp_rate) == (FP_FAILED, 1.0)
    assert (rows[rid].fp_status, rows[rid].fp_rate, rows[rid].fp_argmax_digest) == (FP_FAILED, 0.03125, "")
    assert tracker.stats()["fingerprint_output_modified"] == 1


def test_the_background_thread_polls_only_while_most_cpu_outputs_are_held() -> None:
    for rate, polls in ((None, False), (0.25, False), (1.0, True)):
        tracker = instrument(
            exporter=NullExporter(), host="h", model="m", config=SdkConfig(trace_compiles=False, fingerprint_rate=rate)
        )
        try:
            assert tracker.pipeline._poll_cpu is polls, rate
        finally:
            tracker.shutdown()


def test_the_fingerprint_status_migration_adds_both_columns_after_fp_absmax(store_dsn: str) -> None:
    s = Store.open(store_dsn)
    try:
        assert s.migrate() == LATEST_VERSION
        table = f"{s.database}.{RequestEvent.TABLE.name}"
        # The per-minute rollup's view reads fp_status since migration 17 (which recreates it): a store from
        # before migration 16 had a view that did not.
        s.client.command(f"DROP VIEW {s.database}.requests_1m_mv")
        for name in (col.FP_STATUS, col.FP_RATE):
            s.client.command(f"ALTER TABLE {table} DROP COLUMN {name}")
        version = next(m.version for m in MIGRATIONS if m.name == "request fingerprint status and sampling rate")
        s.client.command(
            f"ALTER TABLE {s.database}.schema_migrations DELETE WHERE version >= {version} SETTINGS mutations_sync = 1"
        )
        assert s.schema_version() == version - 1
        assert s.migrate() == LATEST_VERSION
        rows = s.query_rows(
            "SELECT name FROM system.columns WHERE database = {db:String} AND table = {t:String} ORDER BY position",
            {"db": s.database, "t": RequestEvent.TABLE.name},
        )
        columns = [r[0] for r in rows]
        at = columns.index(col.FP_ABSMAX)
        assert columns[at : at + 3] == [col.FP_ABSMAX, col.FP_STATUS, col.FP_RATE]
        event = RequestEvent(
            request_id="r", ts=datetime.now(UTC), host="h", model="m", hw_pool="p", traffic_class="t",
            fp_status=FP_UNSAMPLED, fp_rate=0.0625,
        )  # fmt: skip
        s.insert_events([event])
        assert s.query_rows(f"SELECT fp_status, fp_rate FROM {table}") == [(FP_UNSAMPLED, 0.0625)]
        assert s.migrate() == LATEST_VERSION
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


@pytest.mark.parametrize("rate", [0.0, 0.1, 1 / 16, 1.0])
def test_a_rule_records_its_rate(rate: float) -> None:
    assert FingerprintRule(rate).rate == rate
    assert FingerprintRule(rate).every is (rate >= 1.0)
