"""The demo's summary links to the dashboard pages that show what it found: the canary comparison it gave a
verdict on, with the thresholds it lowered, and the NaN request (on main it printed only the dashboard's URL,
and the canary page opened at the defaults: INCONCLUSIVE)."""

from __future__ import annotations

import io
import re
import shlex
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast
from urllib.parse import parse_qs, urlsplit

import polars as pl
import pytest
from rich.console import Console

from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.dashboard._internal.links import parse_duration
from inferensics.dashboard._internal.replay_command import KEYRING_ENV
from inferensics.dashboard.launcher import DEFAULT_PORT
from inferensics.demo import processes, runner, summary
from inferensics.demo.workload import CANDIDATE, DECODER_MODEL, HF_MODEL, POOL_B

README = Path(__file__).resolve().parents[2] / "README.md"

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


def _printed_links(lines: list[str], after: int) -> dict[str, str]:
    """The ``  what: link`` lines from ``after`` on, by what each opens."""
    links = {}
    for line in lines[after:]:
        what, sep, link = line.partition(": ")
        if not (line.startswith("  ") and sep and link.startswith("http")):
            break
        links[what.strip()] = link
    return links


@pytest.mark.parametrize("store", [False, True], ids=["service stays up", "exit when done"])
def test_without_a_dashboard_its_links_follow_the_command_that_starts_it(tmp_path: Path, store: bool) -> None:
    """Walk 39 (``--no-dashboard --exit-when-done``): the demo built a link to the canary comparison its verdict
    came from but never printed it, and the sidebar's canary page opened at its defaults (every pool, 100
    requests a side: INCONCLUSIVE beside the printed FAIL). The links now follow the printed dashboard command,
    for the port it names, and the command gives the dashboard the run's builder key (the request page's replay
    command then runs as shown)."""
    out = io.StringIO()
    console = Console(file=out, width=60, highlight=False, soft_wrap=True)
    record = short_run()
    keyring = tmp_path / "demo builder" / "builder-key.pub"
    runner._report(
        cast(ServiceClient, _Unreachable()), "http://127.0.0.1:4318", "", record, keyring=keyring,
        console=console, store=tmp_path if store else None,
    )  # fmt: skip
    lines = out.getvalue().splitlines()
    (command_at,) = [i for i, line in enumerate(lines) if " inferensics dashboard " in line]
    command = lines[command_at].strip()
    assert shlex.split(command)[:3] == [f"{KEYRING_ENV}={keyring}", "inferensics", "dashboard"]
    assert f"--port {DEFAULT_PORT}" in command
    dashboard = summary.PRINTED_DASHBOARD_URL
    assert dashboard == f"http://127.0.0.1:{DEFAULT_PORT}"
    assert lines[command_at + 1] == f"that dashboard ({dashboard}) opens on what the run found at:"
    printed = _printed_links(lines, command_at + 2)
    assert printed == summary.dashboard_links(record, dashboard, _now_of(printed["kernel providers"]))
    canary = {k: v[0] for k, v in parse_qs(urlsplit(printed["canary comparison"]).query).items()}
    assert (canary["hw_pool"], canary["min_requests"], canary["min_pairs"]) == (POOL_B, "12", "12")
    assert printed["NaN request"] == f"{dashboard}/request?request_id=req-07"


def _now_of(kernels_link: str) -> datetime:
    """The ``now`` the summary pinned its links' ends to (the kernel page's ``end``: that minute)."""
    end = parse_qs(urlsplit(kernels_link).query)["end"][0]
    return datetime.fromisoformat(end.replace("Z", "+00:00"))


def test_the_readme_documents_what_the_demo_prints() -> None:
    """Walk 39: the README's command table lacked the canary flags the demo prints, and the ``serve`` command
    the demo prints sets ``INFERENSICS_AUTH=false``, which the README never named."""
    readme = README.read_text(encoding="utf-8")
    (row,) = [line for line in readme.splitlines() if line.startswith("| `inferensics canary compare ")]
    usage = re.split(r"(?<!\\)\|", row)[1]  # the first cell (an escaped \| separates alternatives in it)
    printed = summary.commands("http://127.0.0.1:4318", short_run(), "", Path("k.pub"), store_dsn="chdb:///d/store")
    (canary,) = [c for c in printed if c.startswith("inferensics canary compare ")]
    flags = [w for w in shlex.split(canary) if w.startswith("--")]
    assert {"--hw-pool", "--min-requests", "--min-pairs", "--dsn"} <= set(flags)
    assert [f for f in flags if not re.search(rf"[\s`\[]{re.escape(f)}[\s\]`]", usage)] == [], usage
    for name, value in processes.SERVICE_ENV.items():
        (said,) = [line for line in readme.splitlines() if f"`{name}={value}`" in line]
        assert "turns tokens off" in said, said


@pytest.mark.parametrize("store", [False, True], ids=["service stays up", "exit when done"])
def test_the_try_list_starts_where_on_call_starts(tmp_path: Path, store: bool) -> None:
    """Walk (oncall): the README sends on-call to ``inferensics requests --failing`` first, then ``requests --id``;
    the demo's "try:" list named neither. They come first now, through the target the other commands read (the
    running service, or the store when the demo's service stopped), each parsing as the CLI's ``requests``."""
    from typer.main import get_command

    from inferensics.cli.app import app

    out = io.StringIO()
    record = short_run()
    runner._report(
        cast(ServiceClient, _Unreachable()), "http://127.0.0.1:4318", "", record, keyring=tmp_path / "k.pub",
        console=Console(file=out, width=60, highlight=False, soft_wrap=True), store=tmp_path if store else None,
    )  # fmt: skip
    lines = out.getvalue().splitlines()
    (at,) = [i for i, line in enumerate(lines) if line.startswith("try")]
    target = ["--dsn", processes.store_dsn(tmp_path)] if store else ["--service", "http://127.0.0.1:4318"]
    printed = [shlex.split(line) for line in lines[at + 1 : at + 3]]
    assert printed == [
        ["inferensics", "requests", "--failing", *target],
        ["inferensics", "requests", "--id", "req-07", *target],  # the NaN request, as the replay command's
    ], lines
    requests = get_command(app).commands["requests"]  # type: ignore[attr-defined]
    assert requests.make_context("requests", printed[1][2:]).params["request_id"] == "req-07"
    assert requests.make_context("requests", printed[0][2:]).params["failing"] is True
