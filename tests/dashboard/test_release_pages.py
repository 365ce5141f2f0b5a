"""The canary comparison and bundles pages against the seeded service."""

from __future__ import annotations

import base64
import io
import json
import tarfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from inferensics.analytics.canary import CanaryParams
from inferensics.analytics.report.evidence import evidence_kind
from inferensics.bundle.manifest import Manifest, Resource
from inferensics.collector.client import ServiceClient
from inferensics.collector.host.otlp_exporter import OtlpExporter
from inferensics.dashboard._internal.settings import TOKEN_STATE_KEY, URL_STATE_KEY
from inferensics.schema import BundleEvent
from inferensics.schema.events import BundleStateEvent
from tests.collector.service.harness import INGEST, READ, new_service
from tests.dashboard.apptest import TIMEOUT_S, assert_clean, metric, open_page
from tests.dashboard.conftest import SeededService
from tests.dashboard.seed import BASELINE, CANDIDATE, LLAMA, SeedFacts
from tests.polling import poll

pytestmark = pytest.mark.slow


def test_canary_defaults_to_newest_against_previous_bundle_and_fails(seeded: SeededService) -> None:
    at = open_page(seeded, "views/canary.py")
    assert_clean(at)
    assert at.selectbox(key="canary.model").value == LLAMA
    assert at.selectbox(key="canary.candidate").value == CANDIDATE  # registered last
    assert at.selectbox(key="canary.baseline").value == BASELINE
    rules = CanaryParams.model_fields  # the form starts at the analytics defaults, as `canary compare` does
    assert at.number_input(key="canary.tolerance").value == rules["latency_tolerance"].default
    assert at.number_input(key="canary.min_requests").value == rules["min_requests"].default
    assert at.number_input(key="canary.min_pairs").value == rules["min_pairs"].default
    end = seeded.facts.now + timedelta(minutes=1)
    window = [r for r in seeded.facts.requests if r.model == LLAMA and end - timedelta(hours=6) <= r.ts < end]
    assert metric(at, "Baseline requests") == f"{sum(r.bundle_id == BASELINE for r in window):,}"
    assert metric(at, "Candidate requests") == f"{sum(r.bundle_id == CANDIDATE for r in window):,}"
    banner = at.error[0].value
    assert banner.startswith("**Verdict: FAIL**")
    # The candidate fails on its error rate (24/132 vs 2/161) and on argmax agreement (a fifth drifted).
    assert "error_rate" in banner
    assert "argmax_agreement" in banner
    evidence = next(d.value for d in at.dataframe if "p_value" in d.value.columns)
    assert evidence["outcome"].iloc[-1] == "fail"
    assert set(evidence["check"]) >= {"latency", "rate", "verdict"}
    assert len(at.get("vega_lite_chart")) == 2
    # What `canary compare` recorded for the model, newest first.
    recorded = next(d.value for d in at.dataframe if "rule" in d.value.columns and "window_end" in d.value.columns)
    assert recorded["verdict"].tolist() == ["fail", "inconclusive"]
    assert recorded["rule"].tolist() == ["failed: error_rate", "too few requests"]
    assert set(recorded["candidate"]) == {CANDIDATE[:12]}
    assert recorded["hw_pool"].tolist() == ["all", "all"]  # the pool each compared (none named: every pool)


def test_canary_form_swaps_the_sides(seeded: SeededService) -> None:
    at = open_page(seeded, "views/canary.py")
    at.selectbox(key="canary.candidate").select(BASELINE)
    at.selectbox(key="canary.baseline").select(CANDIDATE)
    at.button[0].click().run()  # the form's Compare button
    assert_clean(at)
    llama = [r for r in seeded.facts.requests if r.model == LLAMA]
    assert metric(at, "Candidate requests") == f"{sum(r.bundle_id == BASELINE for r in llama):,}"
    # The old bundle is faster and fails less, so only the symmetric check still fails: argmax agreement.
    assert at.error[0].value == "**Verdict: FAIL** — failed: argmax_agreement"


def test_bundles_page_lists_hosts_pools_and_traffic(seeded: SeededService) -> None:
    at = open_page(seeded, "views/bundles.py")
    assert_clean(at)
    registrations = [e for e in seeded.facts.others if isinstance(e, BundleEvent)]
    assert metric(at, "Bundles seen") == "2"
    assert metric(at, "Hosts registered") == str(len({e.host for e in registrations}))
    assert metric(at, "Pools") == str(len({e.hw_pool for e in registrations}))
    assert metric(at, "Requests served") == f"{len(seeded.facts.requests):,}"
    table = next(d.value for d in at.dataframe if "hosts" in d.value.columns)
    assert table["bundle_id"].tolist() == [BASELINE, CANDIDATE]
    for row in table.itertuples():
        assert sorted(row.hosts) == sorted({e.host for e in registrations if e.bundle_id == row.bundle_id})
        assert row.requests == sum(r.bundle_id == row.bundle_id for r in seeded.facts.requests)
    assert table["bundle_name"].tolist() == ["baseline", "canary-2026-11-30"]
    assert len(at.get("vega_lite_chart")) == 1


def test_canary_evidence_says_the_unit_of_every_value(seeded: SeededService) -> None:
    at = open_page(seeded, "views/canary.py")
    assert_clean(at)
    evidence = next(d.value for d in at.dataframe if "p_value" in d.value.columns)
    # Every check the analytics emitted (each comparison emits all of them) has a known unit, none the fallback.
    assert [(r.check, r.metric) for r in evidence.itertuples() if evidence_kind(r.check, r.metric) is None] == []
    rows = {r.metric: r for r in evidence.itertuples()}
    end = seeded.facts.now + timedelta(minutes=1)
    window = [r for r in seeded.facts.requests if r.model == LLAMA and end - timedelta(hours=6) <= r.ts < end]
    sides = {b: [r for r in window if r.bundle_id == b] for b in (BASELINE, CANDIDATE)}
    for quantile in ("p50_ms", "p95_ms", "p99_ms"):
        row = rows[quantile]
        assert all(v.endswith(" ms") for v in (row.baseline, row.candidate)), row
        # The interval is the ratio's, in multiples of the baseline as the threshold (in ms it read as the
        # candidate's latency: walk 39's "202.9 – 829,708.6 ms" for a run whose longest request took 36 s).
        assert row.interval.endswith(" × baseline"), row
        assert row.threshold.endswith(" × baseline"), row
    errors = {b: 100 * sum(r.status == "error" for r in rs) / len(rs) for b, rs in sides.items()}
    assert (rows["error_rate"].baseline, rows["error_rate"].candidate) == (
        f"{errors[BASELINE]:.2f} %", f"{errors[CANDIDATE]:.2f} %",
    )  # fmt: skip
    assert rows["fallback_rate"].interval.endswith(" %")
    assert rows["argmax_agreement"].baseline.endswith(" pairs")
    assert rows["argmax_agreement"].candidate.endswith(" %")
    assert rows["fp_mean_ks"].interval.startswith("D = ")
    assert (rows["requests"].baseline, rows["requests"].candidate) == (
        f"{len(sides[BASELINE]):,} requests", f"{len(sides[CANDIDATE]):,} requests",
    )  # fmt: skip


FILES = (("weights.bin", 4 * 1024**2), ("config.json", 512), ("cache/fx_graph.pt", 12_345))
"""A pushed bundle's files and their sizes in bytes."""


def _pushed_bundle() -> bytes:
    """A packed bundle as the Bundles page reads it: a tar whose ``manifest.json`` envelope carries the
    statement (unsigned: the page shows the manifest, the hosts verify it)."""
    manifest = Manifest(
        name="tiny",
        identity={"accepted_shapes": {"shapes": [[1, 8]]}},
        resources=[Resource(name=name, digest=f"{i:064x}", size=size) for i, (name, size) in enumerate(FILES)],
        build={"builder_keyid": "k" * 64},
    )
    envelope = json.dumps({"payload": base64.b64encode(json.dumps(manifest.statement()).encode()).decode()})
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w") as tar:
        info = tarfile.TarInfo("manifest.json")
        info.size = len(envelope.encode())
        tar.addfile(info, io.BytesIO(envelope.encode()))
    return out.getvalue()


def _manifest_section(release: object) -> None:
    """The Bundles page's manifest section of ``release`` (an AppTest script: its own imports, and an annotation
    that needs none)."""
    import polars as pl

    from inferensics.dashboard.views.bundles import manifest_and_report

    assert isinstance(release, pl.DataFrame)
    manifest_and_report(release)


def test_a_pushed_bundles_files_show_their_sizes_readable_and_exact(seeded: SeededService) -> None:
    """The manifest's files table showed each size as a bare count of bytes (4194304). It now shows it as a size
    ("4.2MB", the tables' format for a size, still sorting as a number) beside the exact bytes."""
    with ServiceClient(seeded.url, token=INGEST) as ingest:
        blob = ingest.put_blob(_pushed_bundle(), "bundle", media_type="application/x-tar")
    release = pl.DataFrame(
        {"bundle_id": ["b" * 64], "pack_blob": [blob], "signature_state": ["verified"], "state": ["pushed"],
         "channel": [""]}
    )  # fmt: skip
    at = AppTest.from_function(_manifest_section, args=(release,), default_timeout=TIMEOUT_S)
    at.session_state[URL_STATE_KEY] = seeded.url
    at.session_state[TOKEN_STATE_KEY] = seeded.token
    at.run()
    assert_clean(at)
    (table,) = [d for d in at.dataframe if "digest" in d.value.columns]
    config = json.loads(table.proto.columns)
    shown_as_size = [c for c, v in config.items() if v.get("type_config", {}).get("format") == "bytes"]
    assert len(shown_as_size) == 1, config
    files = table.value
    assert files[shown_as_size[0]].tolist() == [size for _, size in FILES]  # a number: it sorts by size
    exact = [c for c in files.columns if c not in shown_as_size and files[c].tolist() == [size for _, size in FILES]]
    assert len(exact) == 1, files.columns
    assert config[exact[0]]["type_config"]["format"] != "bytes"
    assert files["name"].tolist() == [name for name, _ in FILES]


def test_the_bundles_page_opens_on_the_bundle_a_link_names(seeded: SeededService) -> None:
    """A request's page links to the bundle it ran (``/bundles?bundle_id=``); the page opened on whichever pushed
    bundle came first, and an id that was never pushed left the reader looking for it in the list."""
    with ServiceClient(seeded.url, token=INGEST) as ingest:
        blob = ingest.put_blob(_pushed_bundle(), "bundle", media_type="application/x-tar")
    release = pl.DataFrame(
        {"bundle_id": ["a" * 64, "b" * 64], "pack_blob": [blob, blob], "signature_state": ["verified"] * 2,
         "state": ["pushed"] * 2, "channel": [""] * 2}
    )  # fmt: skip
    at = AppTest.from_function(_manifest_section, args=(release,), default_timeout=TIMEOUT_S)
    at.session_state[URL_STATE_KEY] = seeded.url
    at.session_state[TOKEN_STATE_KEY] = seeded.token
    at.query_params["bundle_id"] = "b" * 64
    at.run()
    assert_clean(at)
    assert at.selectbox(key="bundles.pushed").value == "b" * 64
    at.selectbox(key="bundles.pushed").select("a" * 64).run()  # picking another afterwards sticks
    assert at.selectbox(key="bundles.pushed").value == "a" * 64
    at.query_params["bundle_id"] = "c" * 64
    at.run()
    assert_clean(at)
    assert any(f"Bundle `{'c' * 64}` was not pushed" in str(w.value) for w in at.warning), at.warning


def test_the_pushed_bundle_picker_names_each_bundle(tmp_path: Path) -> None:
    """The picker of pushed bundles listed bare 16-character ids. Through a real service, each now reads the
    bundle's name and model as a host registered it (else the model its push recorded) and when it was pushed,
    beside the start of its id; the picked value is still the id, so ``?bundle_id=`` links open on it."""
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    registered, unregistered = "e" * 64, "f" * 64
    service = new_service(tmp_path).start()
    try:
        with ServiceClient(service.url, token=INGEST) as ingest:
            blob = ingest.put_blob(_pushed_bundle(), "bundle", media_type="application/x-tar")
        pushed_at = now - timedelta(minutes=20)
        events = [
            BundleEvent(ts=now - timedelta(minutes=10), bundle_id=registered, bundle_name="llama-v2", model=LLAMA,
                        host="h1", hw_pool="p", signature_state="verified"),
            BundleStateEvent(ts=pushed_at, bundle_id=registered, state="pushed", attrs={"pack_blob": blob},
                             model="model:build"),
            BundleStateEvent(ts=pushed_at, bundle_id=unregistered, state="pushed", attrs={"pack_blob": blob},
                             model="model:build"),
        ]  # fmt: skip
        exporter = OtlpExporter(service.url, host="pusher", token=INGEST)
        exporter.export_records(events)
        exporter.flush()
        exporter.shutdown()
        client = service.client()
        pushed = "SELECT (SELECT count() FROM bundles) + (SELECT count() FROM bundle_states)"
        assert poll(lambda: client.sql(pushed).item(), lambda n: n == len(events), timeout=60) == len(events)

        at = open_page(SeededService(service, READ, SeedFacts(now=now)), "views/bundles.py")
        assert_clean(at)
        picker = at.selectbox(key="bundles.pushed")
        when = f"pushed {pushed_at:%Y-%m-%d %H:%M} UTC"
        assert sorted(picker.options) == [
            f"llama-v2 · {LLAMA} · {when} · {registered[:16]}",
            f"not registered by a host yet · model:build · {when} · {unregistered[:16]}",
        ]
        release = next(d.value for d in at.dataframe if "signature_state" in d.value.columns)
        names = dict(zip(release["bundle_id"], release["bundle_name"], strict=True))
        assert names == {registered: "llama-v2", unregistered: ""}

        at.query_params["bundle_id"] = unregistered  # a link still opens on the bundle it names
        at.run()
        assert_clean(at)
        assert at.selectbox(key="bundles.pushed").value == unregistered
    finally:
        service.stop()
