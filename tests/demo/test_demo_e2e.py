"""A short ``inferensics demo`` end to end, checked through the service client and the analytics queries.

The session's demo run (tests/demo/conftest.py: a collector service, the real command against it with
``--service``, three worker processes compiling real models) is read back over HTTP: every request's
outcome against what the workers expected, each incident's count through the named queries, and the
canary verdict.

A 60-second run serves far fewer requests than the canary defaults ask for (100 per side, 30 pairs), so the
comparison here lowers ``min_requests`` and ``min_pairs`` to what the run served; every other threshold is
the analytics default.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from inferensics.collector.client import ServiceClient
from inferensics.demo.release import BUILDER_KEY
from inferensics.demo.workload import DECODER_MODEL, HF_MODEL, POOL_A, POOL_B

pytestmark = pytest.mark.slow

DEMO_TIMEOUT_S = 900


@pytest.fixture(scope="module")
def run(demo_run: dict[str, Any]) -> dict[str, Any]:
    """The session's short demo run (tests/demo/conftest.py)."""
    return demo_run


@pytest.fixture(scope="module")
def client(demo_service: str) -> Iterator[ServiceClient]:
    """A client of the session's demo service."""
    with ServiceClient(demo_service) as c:
        yield c


def _window(run: dict[str, Any]) -> dict[str, datetime]:
    started = datetime.fromisoformat(run["started"])
    return {"start": started - timedelta(minutes=5), "end": datetime.now(UTC) + timedelta(minutes=5)}


def _rows(client: ServiceClient) -> pl.DataFrame:
    return client.sql(
        "SELECT request_id, hw_pool, bundle_id, model, outcome, fallback_reason, recompiles, status, fp_nan, "
        "capture_blob != '' AS captured FROM requests ORDER BY request_id"
    )


def test_every_request_is_stored_and_classified_as_dispatch_predicts(
    run: dict[str, Any], client: ServiceClient
) -> None:
    """One row per served request; each outcome equals the dispatch model's; fallbacks name their reason."""
    rows = _rows(client)
    served = run["served"]
    assert sorted(rows.get_column("request_id").to_list()) == sorted(served)
    got = {r["request_id"]: r for r in rows.iter_rows(named=True)}
    mismatched = {
        rid: (s["expected"], got[rid]["outcome"]) for rid, s in served.items() if s["expected"] != got[rid]["outcome"]
    }
    assert not mismatched, f"expected vs stored outcome: {mismatched}"
    outcomes = Counter(r["outcome"] for r in got.values())
    assert {"hit", "compile", "recompile", "fallback", "eager", "error"} <= set(outcomes)
    assert all(r["fallback_reason"] == "recompile_limit" for r in got.values() if r["outcome"] == "fallback")


def test_incidents_are_visible_through_the_analytics_queries(run: dict[str, Any], client: ServiceClient) -> None:
    """Storm, fallbacks, failed and NaN requests: counts from named queries equal what the workers saw."""
    window = _window(run)
    incidents = run["incidents"]
    storms = client.query("recompile_storms", model=DECODER_MODEL, hw_pool=POOL_A, min_recompiles=3, **window)
    assert storms.height >= 1
    assert int(storms.get_column("recompiles").sum()) == incidents["storm recompiles"]
    reasons = client.query("fallback_reasons", **window)
    limit = reasons.filter(pl.col("fallback_reason") == "recompile_limit")
    assert int(limit.get_column("fallbacks").sum()) == incidents["fallbacks after the recompile limit"]
    rows = _rows(client)
    failed = rows.filter(pl.col("status") == "error")
    assert failed.height == incidents["failed requests (invalid token ids)"] == 2
    nan = rows.filter(pl.col("fp_nan") > 0)
    assert nan.height == incidents["requests with NaN logits"] == 1
    assert all(failed.get_column("captured"))
    assert all(nan.get_column("captured"))
    detail = client.query("request_detail", request_id=failed.get_column("request_id")[0])
    assert detail.height >= 1


@pytest.mark.parametrize("model", [DECODER_MODEL, HF_MODEL])
def test_canary_verdict_for_the_faulty_candidate_is_fail(
    run: dict[str, Any], client: ServiceClient, model: str
) -> None:
    """On pool cpu-b, input-matched pairs disagree: the candidate with the faulty decomposition fails."""
    served = sum(1 for s in run["served"].values() if s["model"] == model and s["bundle"] == "candidate")
    frame = client.query(
        "canary_compare",
        model=model,
        hw_pool=POOL_B,
        baseline=run["bundle_ids"]["baseline"],
        candidate=run["bundle_ids"]["candidate"],
        min_requests=served,
        min_pairs=min(served, 30),
        **_window(run),
    )
    verdict = frame.filter(pl.col("check") == "verdict").row(0, named=True)
    agreement = frame.filter(pl.col("metric") == "argmax_agreement").row(0, named=True)
    assert verdict["outcome"] == "fail", frame
    assert agreement["outcome"] == "fail"
    assert agreement["baseline"] == served  # every mirrored request found its baseline twin


def test_summary_names_what_to_try(run: dict[str, Any]) -> None:
    """The printed summary carries the incident table, drill-down ids and the report and canary commands."""
    out = run["stdout"]
    for text in ("what happened", "drill into", "inferensics report weekly --service", "inferensics canary compare"):
        assert text in out
    assert run["drill_ids"]["fallbacks (recompile limit)"]


def test_workers_serve_from_the_release_bundles(run: dict[str, Any], client: ServiceClient) -> None:
    """Each worker loaded its real release bundle: every request carries that bundle's id; the decoder's
    one-token path (every prompt shape: its graphs are dynamic) is served from the bundle (hits); what the
    bundles were not built for is a counted miss naming the differing factor (the Hugging Face model: its
    code; speculative decode steps: their shapes)."""
    ids = run["bundle_ids"]
    rows = client.sql(
        "SELECT request_id, bundle_id, model, outcome, attrs['bundle_status'] AS bundle_status FROM requests"
    )
    by_id = {r["request_id"]: r for r in rows.iter_rows(named=True)}
    for rid, served in run["served"].items():
        assert by_id[rid]["bundle_id"] == ids[served["bundle"]], rid
    compiled = [r for r in by_id.values() if r["outcome"] not in ("eager", "error")]
    ordinary = [r for rid, r in by_id.items() if r in compiled and r["model"] == DECODER_MODEL
                and not run["served"][rid]["incident"]]  # fmt: skip
    assert ordinary
    assert all(r["bundle_status"] == "hit" for r in ordinary), Counter(r["bundle_status"] for r in ordinary)
    storms = [r for rid, r in by_id.items() if run["served"][rid]["expected"] == "recompile"]
    assert storms
    assert all(r["bundle_status"] == "miss" for r in storms)
    misses = client.sql("SELECT host, model, action, factors FROM bundle_misses")
    counted = sum(s.get("bundle_miss_graphs", 0) for s in run["worker_stats"].values())
    assert misses.height == counted  # every miss a host counted is stored
    factors = [f[0] for f in misses.get_column("factors").to_list()]
    assert any(f.startswith("code: a graph the bundle does not hold") for f in factors)  # the HF model
    assert any(f.startswith("accepted_shapes: inputs") and "int64[s0,1]" in f for f in factors)  # q>1 steps
    assert all(a == "compiled" for a in misses.get_column("action").to_list())  # within the compile budget


def test_unchanged_release_bundle_is_reused_verified(run: dict[str, Any], tmp_path: Path) -> None:
    """The run says of each release bundle whether it was built or reused from the bundle cache, and the cache
    holds it: the baseline built again from unchanged inputs, as the demo builds it, is the cached bundle
    (verified, same id), not a compile."""
    out = run["stdout"]
    for name, bundle_id in run["bundle_ids"].items():
        how = "reused bundle (verified)" if name in run["bundles_reused"] else "built"
        assert re.search(rf"release bundle {name}\s+{bundle_id} \(\w+\) {re.escape(how)} in ", out), name
    cache = Path(run["bundle_cache"])
    command = [sys.executable, "-m", "inferensics.demo.bundles", "--out", str(tmp_path), "--key",
               str(cache / BUILDER_KEY), "--only", "baseline", "--threads", "1", "--cache", str(cache)]  # fmt: skip
    result = subprocess.run(command, capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, check=False)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    assert f"baseline: reused bundle {run['bundle_ids']['baseline']} in " in result.stdout, result.stdout
    status = json.loads((tmp_path / "baseline.build.json").read_text())
    assert (status["reused"], status["bundle_id"]) == (True, run["bundle_ids"]["baseline"])
