"""The demo's summary links to the dashboard pages that show what it found: the canary comparison it gave a
verdict on, with the thresholds it lowered, and the NaN request (on main it printed only the dashboard's URL,
and the canary page opened at the defaults: INCONCLUSIVE)."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import polars as pl
from rich.console import Console

from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.dashboard._internal.links import parse_duration
from inferensics.demo import runner, summary
from inferensics.demo.workload import CANDIDATE, DECODER_MODEL, HF_MODEL, POOL_B

DASHBOARD = "http://127.0.0.1:8502"
STARTED = datetime(2026, 11, 30, 18, 52, 30, tzinfo=UTC)
NOW = datetime(2026, 11, 30, 18, 56, 10, tzinfo=UTC)
IDS = {"baseline": "b" * 64, CANDIDATE: "c" * 64}


def _served(rid: str, bundle: str, model: str = DECODER_MODEL, **kw: Any) -> dict[str, Any]:
    line = {"bundle": bundle, "model": model, "expected": "hit", "incident": "", "error": "", "nan": 0}
    return {**line, **kw, "request_id": rid}


def short_run() -> summary.RunRecord:
    """A short run: 12 candidate requests of the decoder (under both analytics defaults), one NaN request."""
    served = {f"req-{i:02d}-c": _served(f"req-{i:02d}-c", CANDIDATE) for i in range(12)}
    served |= {f"req-{i:02d}": _served(f"req-{i:02d}", "baseline") for i in range(30)}
    served["req-07"] = _served("req-07", "baseline", nan=3)
    served["req-hf-1"] = _served("req-hf-1", CANDIDATE, model=HF_MODEL)
    return summary.RunRecord(served=served, bundle_ids=dict(IDS), started=STARTED)


def test_the_links_open_the_runs_canary_comparison_and_nan_request() -> None:
    links = summary.dashboard_links(short_run(), DASHBOARD, NOW)
    assert links == {
        "canary comparison": (
            f"{DASHBOARD}/canary?model={DECODER_MODEL}&candidate={'c' * 64}&baseline={'b' * 64}&hw_pool={POOL_B}"
            "&window=7m&min_requests=12&min_pairs=12&end=2026-11-30T18:58Z"
        ),
        "NaN request": f"{DASHBOARD}/request?request_id=req-07",
        "kernel providers": f"{DASHBOARD}/kernels?end=2026-11-30T18:57Z",  # NOW to the minute, rounded up
    }


class _Recording:
    """A service client that answers ``canary_compare`` with a FAIL and keeps what it was asked."""

    def __init__(self) -> None:
        self.asked: dict[str, Any] = {}

    def query(self, name: str, **params: Any) -> pl.DataFrame:
        assert name == "canary_compare"
        self.asked = params
        return pl.DataFrame({"check": ["verdict"], "outcome": ["fail"], "rule": ["failed: argmax_agreement"]})


def test_the_canary_link_is_the_slice_of_the_printed_verdict() -> None:
    record = short_run()
    client = _Recording()
    summary.canary_verdict(cast(ServiceClient, client), record, now=NOW)
    link = summary.dashboard_links(record, DASHBOARD, NOW)["canary comparison"]
    params = {k: v[0] for k, v in parse_qs(urlsplit(link).query).items()}
    asked = client.asked
    for name in ("model", "hw_pool", "baseline", "candidate", "min_requests", "min_pairs"):
        assert params[name] == str(asked[name]), name
    end = datetime.fromisoformat(params["end"].replace("Z", "+00:00"))
    span = parse_duration(params["window"])
    assert span is not None
    assert end - span <= asked["start"] < asked["end"] <= end  # the page's window holds the verdict's


def test_a_full_run_links_at_the_defaults() -> None:
    record = short_run()
    record.served |= {f"req-{i:03d}-c": _served(f"req-{i:03d}-c", CANDIDATE) for i in range(100, 200)}
    link = summary.dashboard_links(record, DASHBOARD, NOW)["canary comparison"]
    assert "min_requests" not in link
    assert "min_pairs" not in link


class _Unreachable:
    def sql(self, query: str) -> pl.DataFrame:
        raise ServiceError("the service is gone")


def test_the_summary_prints_each_link_on_its_own_line_after_the_dashboard(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=60, highlight=False, soft_wrap=True)  # narrower than any link
    record = short_run()
    runner._report(
        cast(ServiceClient, _Unreachable()), "http://127.0.0.1:4318", DASHBOARD, record, keyring=tmp_path,
        console=console,
    )  # fmt: skip
    lines = out.getvalue().splitlines()
    at = lines.index(f"dashboard: {DASHBOARD}")
    links = lines[at + 1 : at + 4]
    assert [line.split(": ", 1)[0] for line in links] == ["  canary comparison", "  NaN request", "  kernel providers"]
    canary = links[0].split(": ", 1)[1]
    assert canary.startswith(f"{DASHBOARD}/canary?model={DECODER_MODEL}&")
    assert "&min_requests=12&min_pairs=12&" in canary
    assert links[1] == f"  NaN request: {DASHBOARD}/request?request_id=req-07"
    assert links[2].startswith(f"  kernel providers: {DASHBOARD}/kernels?end=")
    assert lines[at + 4] == "try:"


def test_without_a_dashboard_no_links_are_printed(tmp_path: Path) -> None:
    out = io.StringIO()
    console = Console(file=out, width=200, highlight=False, soft_wrap=True)
    runner._report(
        cast(ServiceClient, _Unreachable()), "http://127.0.0.1:4318", "", short_run(), keyring=tmp_path,
        console=console,
    )  # fmt: skip
    assert "/canary?" not in out.getvalue()
    assert "/request?" not in out.getvalue()
