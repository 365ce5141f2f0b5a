"""The demo's story as a new user follows it (issue 20), after the session's short demo run.

Every command the demo printed under "try:" is run as printed and must agree with the demo's own figures;
the dashboard is started with the printed ``inferensics dashboard`` command and each page is opened in
headless Chromium, its figures read as a person sees them and compared with the run's, and a screenshot of
each page saved under ``out/demo-story/`` (git-ignored; also copied to /tmp/inferensics-screens/).
"""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from inferensics.analytics.weekly import current_week
from inferensics.collector.client import ServiceClient
from inferensics.dashboard.launcher import wait_until_up
from inferensics.demo import summary
from inferensics.demo.summary import PRINTED_DASHBOARD_URL
from inferensics.demo.workload import CANDIDATE, DECODER_MODEL, HF_MODEL, POOL_B
from inferensics.schema.dsn import REPORT_DIR_ENV
from tests.dashboard.browser import (
    PAGE_TIMEOUT_MS,
    canvas_text,
    headless_chromium,
    laptop_tab,
    metric,
    record_canvas_text,
    screenshot,
    settle,
    truncated_metrics,
    wait_for_canvas_text,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

REPO = Path(__file__).resolve().parents[2]
SHOTS = REPO / "out" / "demo-story"
"""Where the screenshots go (``/out/`` is git-ignored)."""
MAX_PAGE_PX = 8000
"""A page taller than this has stopped being read (the request page expanded 16,000 px of code; an empty
weekly report was 33,554,432 px tall)."""


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}


PRINTED_COMMAND = re.compile(r"^  (?:[A-Z_]+=\S+ )*inferensics ")
"""A printed command line: indented, ``inferensics ...`` after any ``NAME=value`` words the shell sets first."""


def printed_commands(run: dict[str, Any]) -> dict[str, str]:
    """The commands under the summary's "try:", by subcommand (``report``, ``canary``, ``status``, ...)."""
    lines = run["stdout"].splitlines()
    after = lines[lines.index("try:") + 1 :]
    commands = [line.strip() for line in after if PRINTED_COMMAND.match(line)]
    return {printed_argv(c)[1][1]: c for c in commands}


def printed_argv(command: str) -> tuple[dict[str, str], list[str]]:
    """A printed command as the shell runs it: the ``NAME=value`` words in front, then the words of
    ``inferensics ...``."""
    words = shlex.split(command)
    env: dict[str, str] = {}
    while "=" in words[0]:
        name, value = words.pop(0).split("=", 1)
        env[name] = value
    assert words[0] == "inferensics", command
    return env, words


def printed_links(run: dict[str, Any], dashboard: str) -> dict[str, str]:
    """The links printed after the ``inferensics dashboard`` command, by what each opens, moved to ``dashboard``
    (the printed command's port may be taken here: see :func:`dashboard`)."""
    lines = run["stdout"].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"that dashboard ({PRINTED_DASHBOARD_URL})"))
    links = {}
    for line in lines[start + 1 :]:
        what, sep, link = line.partition(": ")
        if not (line.startswith("  ") and sep and link.startswith(PRINTED_DASHBOARD_URL)):
            break
        links[what.strip()] = dashboard + link.removeprefix(PRINTED_DASHBOARD_URL)
    return links


def run_printed(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run a printed ``inferensics ...`` command as printed (this checkout's ``inferensics``), with the report
    folder (``$INFERENSICS_REPORT_DIR``) in ``cwd/reports`` rather than the user's."""
    set_first, argv = printed_argv(command)
    env = {**_env(), **set_first, "COLUMNS": "250", REPORT_DIR_ENV: str(cwd / "reports")}
    return subprocess.run(
        [sys.executable, "-m", "inferensics.cli", *argv[1:]],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip


@pytest.fixture(scope="module")
def commands(demo_run: dict[str, Any]) -> dict[str, str]:
    """The printed commands; the demo ran without a dashboard, so it printed the one that starts it."""
    found = printed_commands(demo_run)
    assert set(found) == {"requests", "report", "canary", "status", "dashboard", "replay"}, demo_run["stdout"][-2000:]
    return found


@pytest.fixture(scope="module")
def dashboard(commands: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The dashboard started with the printed command; its URL.

    When the printed (default) port is taken on this machine (others share it), the same command gets a
    free ``--port`` instead; everything else runs as printed.
    """
    root = tmp_path_factory.mktemp("story-dashboard")
    set_first, argv = printed_argv(commands["dashboard"])
    port = 8501
    with socket.socket() as probe:
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            probe.close()
            with socket.socket() as free:
                free.bind(("127.0.0.1", 0))
                port = free.getsockname()[1]
            argv += ["--port", str(port)]
    env = {**_env(), **set_first, REPORT_DIR_ENV: str(root / "reports")}
    with (root / "dashboard.log").open("wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "inferensics.cli", *argv[1:]], cwd=root, env=env, stdout=log, stderr=log
        )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_up(url, None, timeout=120)
        yield url
    finally:
        proc.send_signal(signal.SIGINT)  # the command stops its Streamlit child on Ctrl-C
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    """Headless Chromium (Debian's package; Playwright never downloads a browser here)."""
    with headless_chromium() as chromium:
        yield chromium


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    """A fresh laptop-sized tab."""
    with laptop_tab(browser) as tab:
        yield tab


def shoot(page: Page, name: str) -> None:
    """Save the page's screenshot under :data:`SHOTS`."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    screenshot(page, SHOTS, name)


def main_height(page: Page) -> int:
    """The height of the page's main area in pixels."""
    height: int = page.evaluate("() => document.querySelector('[data-testid=\"stMain\"]').scrollHeight")
    return height


def alerts(page: Page) -> list[str]:
    """The texts of the page's alert boxes."""
    return [a.inner_text() for a in page.locator('[data-testid="stAlert"]').all()]


# ---- the printed commands -------------------------------------------------------------------------------


def test_the_printed_status_counts_every_request(
    commands: dict[str, str], demo_run: dict[str, Any], tmp_path: Path
) -> None:
    res = run_printed(commands["status"], tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    row = next(line for line in res.stdout.splitlines() if "│ requests " in line)
    assert row.split("│")[2].strip() == f"{len(demo_run['served']):,}"
    assert "(latest " in res.stdout
    assert ": current)" in res.stdout


def test_the_printed_canary_command_gives_the_demos_verdict(
    commands: dict[str, str], demo_run: dict[str, Any], tmp_path: Path
) -> None:
    """On main it answered INCONCLUSIVE with 0 requests a side (its window ended at the start of the hour)."""
    said = re.search(r"canary verdict for \S+: (\w+)", demo_run["stdout"])
    assert said is not None
    assert said.group(1) == "fail"
    res = run_printed(commands["canary"], tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr  # 1: fail (the command's documented exit status)
    assert "verdict: FAIL" in res.stdout
    agreement = next(line for line in res.stdout.splitlines() if "argmax_agreement" in line)
    assert agreement.split()[-1] == "fail"
    verdict = next(line for line in res.stdout.splitlines() if line.startswith("verdict  requests"))
    assert verdict.split()[2] == str(_served(demo_run, "baseline"))
    assert verdict.split()[4] == str(_served(demo_run, CANDIDATE))
    assert res.stdout.rstrip().endswith("verdict recorded in canary_verdicts")  # through the service's OTLP endpoint


def _served(run: dict[str, Any], bundle: str) -> int:
    """Requests of the decoder on pool cpu-b served with ``bundle`` (the printed canary command's slice)."""
    return sum(
        1
        for r in run["served"].values()
        if r["bundle"] == bundle and r["model"] == DECODER_MODEL and r["pool"] == POOL_B
    )


def _rendered(page: Page) -> None:
    """Wait until every chart of a report page has drawn; no chart failed."""
    page.wait_for_function(
        "() => window.__chartsRendered === Number(document.querySelector('script[data-charts]').dataset.charts)",
        timeout=PAGE_TIMEOUT_MS,
    )
    assert page.evaluate("() => window.__chartErrors") == []


def _axis_labels(page: Page) -> list[list[str]]:
    """The labels of every axis of every chart on a report page (Vega's SVG)."""
    labels: list[list[str]] = page.evaluate(
        """() => [...document.querySelectorAll('.chart svg g.role-axis')].map(
            axis => [...axis.querySelectorAll('g.role-axis-label text')].map(t => t.textContent))"""
    )
    return labels


def test_the_printed_weekly_report_is_this_week_and_reads_right(
    commands: dict[str, str], demo_run: dict[str, Any], tmp_path: Path, page: Page
) -> None:
    """On main: last week's (empty) report; raw ratios (0.01818); the reasons chart with 2 bars whose cut
    labels were equal for a 4-row table; repeated axis labels; "Recompile storms: 0" after a run whose summary
    reported a storm (the fleet rule's floor of 10 recompiles an hour: the printed command lowers it)."""
    floor = re.search(r"--min-recompiles (\d+)", commands["report"])
    assert floor is not None, commands["report"]
    res = run_printed(commands["report"], tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    assert f"Requests: {len(demo_run['served']):,} " in res.stdout
    storms = re.search(r"Recompile storms: (\d+);", res.stdout)
    assert storms is not None, res.stdout
    assert int(storms.group(1)) >= 1, res.stdout
    # Into the store's own folder of the report folder (the one the dashboard's Weekly report page lists).
    written = list((tmp_path / "reports").glob(f"store-*/weekly-{current_week(datetime.now(UTC))}.html"))
    assert len(written) == 1, res.stdout
    html = written[0]
    page.goto(html.as_uri())
    _rendered(page)
    assert page.evaluate("() => document.body.scrollHeight") < MAX_PAGE_PX * 2
    text = page.inner_text("body")
    assert "the week so far" in text
    assert f"An hour is a storm when its recompiles reach max({floor.group(1)}, 3 × the median" in text
    assert not re.search(r"\b0\.\d{4,}\b", text), "a ratio is shown raw"
    for labels in _axis_labels(page):
        assert len(labels) == len(set(labels)), f"an axis repeats its labels: {labels}"
    reasons = page.evaluate(
        """() => [...document.querySelectorAll('.chart')].filter(c => c.innerText.includes('Recompiles by reason'))
            .map(c => [...c.querySelectorAll('g.role-axis-label text')].map(t => t.textContent)
            .filter(t => t.includes(': ')))"""
    )
    rows = page.evaluate(
        """() => { const h = [...document.querySelectorAll('h2')].find(e => e.textContent === 'Top recompile reasons');
            let e = h.nextElementSibling; while (e && e.tagName !== 'TABLE') e = e.nextElementSibling;
            return e ? e.querySelectorAll('tbody tr').length : 0; }"""
    )
    assert rows >= 1
    assert len(reasons) == 1
    assert len(set(reasons[0])) == rows
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "weekly-report-file.png"), full_page=True)


def test_an_empty_weekly_report_stays_a_page(commands: dict[str, str], tmp_path: Path, page: Page) -> None:
    """On main a week without data rendered 33,554,432 px tall (an SVG viewBox of 1.797e308)."""
    command = commands["report"] + f" --week 2020-W02 --out {tmp_path}"
    res = run_printed(command, tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    page.goto((tmp_path / "weekly-2020-W02.html").as_uri())
    _rendered(page)
    assert page.evaluate("() => document.body.scrollHeight") < 4000
    assert "no data in this period" in page.inner_text("body")
    expect(page.locator("h1")).to_contain_text(
        "Weekly recompilation and cache report 2020-W02", timeout=PAGE_TIMEOUT_MS
    )
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / "weekly-report-empty.png"), full_page=True)


# ---- the dashboard's pages ------------------------------------------------------------------------------


def test_the_overview_tells_the_runs_story(
    dashboard: str, demo_run: dict[str, Any], commands: dict[str, str], page: Page
) -> None:
    """On main: no sign of the NaN request; a "Recompile storm" for a model with 0 recompiles; then no storm
    at all, where the summary and the weekly report had one (the fleet rule's floor of 10 recompiles an hour:
    the printed dashboard command lowers it, as the report's does)."""
    page.goto(f"{dashboard}/")
    settle(page, charts=2)
    served = demo_run["served"]
    expected = demo_run["expected_outcomes"]
    assert metric(page, "Requests") == f"{len(served):,}"
    assert metric(page, "Request recompiles") == f"{expected.get('recompile', 0):,}"
    nan_ids = demo_run["drill_ids"]["NaN logits, inputs captured"]
    assert metric(page, "Non-finite") == f"{len(nan_ids):,}"
    assert truncated_metrics(page) == []
    texts = alerts(page)
    nonfinite = [t for t in texts if "Non-finite outputs" in t]
    assert len(nonfinite) == 1
    assert all(rid in nonfinite[0] for rid in nan_ids)
    floor = re.search(r"--min-recompiles (\d+)", commands["dashboard"])
    assert floor is not None, commands["dashboard"]
    storms = [t for t in texts if "Recompile storm" in t]
    assert storms, texts
    for storm in storms:
        got = re.search(r"(\d+) recompiles \(records, failed compiles too\),", storm)
        assert got is not None, storm
        assert int(got.group(1)) >= int(floor.group(1)), storm
        assert f"recompiles ≥ max({floor.group(1)}, " in storm
    assert any(DECODER_MODEL in storm for storm in storms), storms
    shoot(page, "overview")


def _request(page: Page, dashboard: str, request_id: str) -> None:
    page.goto(f"{dashboard}/request?request_id={request_id}")
    settle(page)
    expect(page.locator('[data-testid="stMetricLabel"]', has_text="Outcome")).to_be_visible(timeout=PAGE_TIMEOUT_MS)


def test_the_request_pages(dashboard: str, demo_run: dict[str, Any], demo_service: str, page: Page) -> None:
    """On main: the kernel → source-line map was empty (provenance off), a NaN request read "ok", 798 lines
    of code made a 16,000-px page, and the page advertised an ``inferensics replay`` that did not exist (it
    does now, and the page gives it for a request whose inputs were captured)."""
    drill = demo_run["drill_ids"]
    first = drill["first compile"][0]
    _request(page, dashboard, first)
    mapped = page.get_by_text(re.compile(r"\d+ of \d+ kernels map to user source lines"))
    expect(mapped).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    got = re.search(r"(\d+) of (\d+) kernels", mapped.inner_text())
    assert got is not None
    assert int(got.group(1)) > 0
    assert main_height(page) < MAX_PAGE_PX
    shoot(page, "request-first-compile")

    nan = drill["NaN logits, inputs captured"][0]
    _request(page, dashboard, nan)
    assert metric(page, "Status") == "non-finite"
    assert truncated_metrics(page) == []
    assert any("Non-finite output:" in t for t in alerts(page))
    # Its inputs are captured: replay it, with the command as printed (the dashboard's printed command gave it the
    # run's builder key; on main the page said a bare `inferensics replay ID`, which stops without a keyring). The
    # command block is the page's last part: waited for (one CI run read the page before it was drawn), and the
    # page kept as it was seen either way.
    command = f"inferensics replay {nan} --service {demo_service} --keyring {demo_run['keyring']}"
    try:
        expect(page.locator('[data-testid="stCode"]').filter(has_text=command)).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    finally:
        shoot(page, "request-nan")
    assert printed_links(demo_run, dashboard)["NaN request"] == f"{dashboard}/request?request_id={nan}"

    failed = drill["failed, inputs captured"][0]
    _request(page, dashboard, failed)
    assert metric(page, "Status") == "error"
    shoot(page, "request-failed")


def test_a_wrong_request_id_says_so_in_plain_words(dashboard: str, page: Page) -> None:
    """On main: "400 request_detail: no request ..."."""
    page.goto(f"{dashboard}/request?request_id=req-nope")
    settle(page)
    box = page.locator('[data-testid="stAlert"]').filter(has_text="req-nope")
    expect(box).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    said = [box.inner_text()]
    assert "no request 'req-nope' in the store" in said[0], said
    assert "400" not in said[0]
    assert "request_detail" not in said[0]


def test_the_drill_down_offers_recent_requests_worth_opening(
    dashboard: str, demo_run: dict[str, Any], page: Page
) -> None:
    """On main the only way in was pasting an id."""
    page.goto(f"{dashboard}/request")
    settle(page)
    picker = page.locator('[data-testid="stSelectbox"]').filter(has_text="Or pick a recent request")
    picker.click()
    options = page.locator('[role="option"]')
    expect(options.first).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    texts = options.all_inner_texts()
    nan = demo_run["drill_ids"]["NaN logits, inputs captured"][0]
    assert any(t.startswith(f"{nan} · non-finite output") for t in texts), texts
    options.filter(has_text=nan).first.click()
    expect(page.locator('[data-testid="stMetricLabel"]', has_text="Outcome")).to_be_visible(timeout=PAGE_TIMEOUT_MS)
    assert metric(page, "Status") == "non-finite"
    shoot(page, "request-picker")


def test_the_compile_page_counts_agree(dashboard: str, demo_run: dict[str, Any], demo_service: str, page: Page) -> None:
    """On main: Recompiles 3 beside a 4-row reason table, and "No guard failures" beside guard-mismatch
    recompile reasons."""
    page.goto(f"{dashboard}/compile")
    settle(page, charts=2)
    recompiles = demo_run["expected_outcomes"].get("recompile", 0)
    end = datetime.now(UTC) + timedelta(minutes=1)
    with ServiceClient(demo_service) as client:
        health = client.query("cache_health", start=end - timedelta(hours=1), end=end)
        reasons = client.query("recompile_reasons", start=end - timedelta(hours=1), end=end)
    # The page counts recompile records (failed compiles too, not the limit's hits), as the reasons table does; the
    # demo's requests that recompiled each left one.
    assert metric(page, "Recompile records") == f"{int(reasons.get_column('recompiles').sum()):,}"
    assert int(reasons.get_column("recompiles").sum()) == recompiles
    ratio = int(health.get_column("hits").sum()) / int(health.get_column("lookups").sum())
    assert metric(page, "Cache hit ratio") == f"{100 * ratio:.2f} %"
    assert truncated_metrics(page) == []
    shoot(page, "compile-health")
    page.get_by_role("tab", name="Graph breaks & guards").click()
    failed = int(reasons.get_column("recompiles").sum()) + int(reasons.get_column("limit_hits").sum())
    expect(page.get_by_text(f"No guard failures recorded besides the {failed:,}")).to_be_visible(
        timeout=PAGE_TIMEOUT_MS
    )


def test_the_canary_page_gives_the_demos_verdict(dashboard: str, demo_run: dict[str, Any], page: Page) -> None:
    """On main: "0 registered bundle(s)" and no way to compare what the demo ran; then a page that opened at the
    analytics' defaults (INCONCLUSIVE on a short run) until five fields were picked and typed; then a run without
    a dashboard printed no link to the comparison it gave a verdict on. It prints one after the dashboard
    command: it carries what the summary printed and opens on that verdict."""
    link = printed_links(demo_run, dashboard)["canary comparison"]
    said = re.search(
        r"canary verdict for (\S+): \w+ \(.*short run: min_requests=(\d+), min_pairs=(\d+)", demo_run["stdout"]
    )
    assert said is not None, demo_run["stdout"][-2000:]
    assert f"&candidate={said.group(1)}&" in link
    assert f"&min_requests={said.group(2)}&min_pairs={said.group(3)}" in link
    page.goto(link)
    settle(page)
    verdict = page.locator('[data-testid="stAlert"]').filter(has_text="Verdict:")
    expect(verdict).to_contain_text("Verdict: FAIL", timeout=PAGE_TIMEOUT_MS)
    assert [t for t in alerts(page) if "The link's" in t] == []  # every parameter of the link was used
    # The same slice as the printed command: the same sizes as the command printed.
    expect(page.locator('[data-testid="stMetric"]').filter(has_text="Baseline requests")).to_contain_text(
        f"{_served(demo_run, 'baseline'):,}", timeout=PAGE_TIMEOUT_MS
    )
    expect(page.locator('[data-testid="stMetric"]').filter(has_text="Candidate requests")).to_contain_text(
        f"{_served(demo_run, CANDIDATE):,}", timeout=PAGE_TIMEOUT_MS
    )
    settle(page, charts=2)
    shoot(page, "canary")


def test_the_bundles_page_shows_the_release(dashboard: str, demo_run: dict[str, Any], page: Page) -> None:
    """The demo's two real bundles: registered by the hosts serving them, their traffic per bundle under
    their names (on main the legend read "unnamed (candidat)"), pushed, signed, promoted, with their
    qualification reports."""
    ids = demo_run["bundle_ids"]
    record_canvas_text(page)  # the chart's legend and the bundles table's cells are drawn on canvases
    page.goto(f"{dashboard}/bundles")
    settle(page, charts=1)
    assert metric(page, "Bundles seen") == "2"
    assert metric(page, "Hosts registered") == "3"  # cpu-a and cpu-b baseline, cpu-b candidate
    assert metric(page, "Requests served") == f"{len(demo_run['served']):,}"
    page.get_by_role("heading", name="Manifest and qualification report").wait_for()
    # The legend, whole, and the hosts on each bundle in the bundles table's cells: a canvas draws them once
    # the page has laid out, after the heading below them (waits fail after the page timeout).
    legend = [f"{name} ({ids[name][:8]})" for name in ("baseline", CANDIDATE)]
    workers = sorted({r["worker"] for r in demo_run["served"].values()})
    for text in legend + workers:
        wait_for_canvas_text(page, text)
    drawn = canvas_text(page)
    assert not [t for t in drawn if t.startswith(("unnamed", "baseline", "candidate")) and "…" in t], drawn
    body = page.locator("body").inner_text()
    assert "signature state on hosts: verified" in body
    assert "state: promoted on production" in body  # the baseline, shown first
    assert f"Qualification report: {'baseline'}" in body
    assert "Revoked bundle still serving" not in body
    shoot(page, "bundles")


def test_the_kernels_page_says_what_served_the_demos_ops(
    dashboard: str, demo_run: dict[str, Any], demo_service: str, page: Page
) -> None:
    """The demo's decoder calls RMSNorm, rotary and SiLU·mul through the kernel registry: on these CPU hosts
    Inductor's code serves them inside the compiled graphs, the Triton kernels skipped for the platform. The
    link is the one a run with a dashboard prints."""
    record = summary.RunRecord(
        served=demo_run["served"],
        bundle_ids=demo_run["bundle_ids"],
        started=datetime.fromisoformat(demo_run["started"]),
    )
    link = summary.dashboard_links(record, dashboard, datetime.now(UTC))["kernel providers"]
    end = datetime.now(UTC) + timedelta(minutes=1)
    with ServiceClient(demo_service) as client:
        providers = client.query("kernel_providers", start=end - timedelta(hours=1), end=end)
        skips = client.query("kernel_skips", start=end - timedelta(hours=1), end=end)
    assert {"rms_norm", "rotary_embedding", "silu_mul"} <= set(providers.get_column("op"))
    assert set(skips.get_column("skipped_provider")) == {"triton"}
    assert all(r.startswith("platform cpu not in") for r in skips.get_column("reason"))
    page.goto(link)
    settle(page, charts=1)
    assert metric(page, "Ops served") == str(providers.get_column("op").n_unique())
    assert metric(page, "Fallback decisions") == f"{int(providers.get_column('fallbacks').sum()):,}"
    assert metric(page, "Provider failures") == "0"
    assert truncated_metrics(page) == []
    shoot(page, "kernels")


def test_the_weekly_report_page_defaults_to_this_week(dashboard: str, demo_run: dict[str, Any], page: Page) -> None:
    """On main the week picker defaulted to last week though its label says the current week comes first."""
    page.goto(f"{dashboard}/report")
    settle(page)
    week = current_week(datetime.now(UTC))
    expect(page.get_by_role("combobox", name=re.compile(r"^Week \(ISO"))).to_have_value(week, timeout=PAGE_TIMEOUT_MS)
    page.get_by_role("button", name="Produce report").click()
    frame = page.frame_locator("iframe").first
    expect(frame.locator("h1")).to_contain_text(week, timeout=PAGE_TIMEOUT_MS)
    expect(frame.locator("body")).to_contain_text(f"Requests: {len(demo_run['served']):,}", timeout=PAGE_TIMEOUT_MS)
    settle(page)
    shoot(page, "weekly-report")


def test_hf_model_is_served(demo_run: dict[str, Any]) -> None:
    """The run served both models (the pages above show both)."""
    assert {r["model"] for r in demo_run["served"].values()} == {DECODER_MODEL, HF_MODEL}


def test_each_compile_is_labelled_with_the_model_it_compiled(demo_run: dict[str, Any], demo_service: str) -> None:
    """A pool-b worker serves both models from one tracker: the HF scorer's compiles are its own rows
    (``tracker.compile(name=...)``), never the decoder's, so the request page finds them under its model."""
    by_artifact = (
        "SELECT r.model AS served, c.model AS compiled, c.compile_id AS compile_id, c.host AS host "
        "FROM (SELECT DISTINCT host, model, arrayJoin(graph_artifacts) AS artifact_id FROM inferensics.requests) AS r "
        "INNER JOIN inferensics.compiles AS c ON c.host = r.host AND c.artifact_id = r.artifact_id "
        "WHERE r.artifact_id != ''"
    )
    with ServiceClient(demo_service) as client:
        pairs = client.sql(by_artifact)
    assert pairs.height > 0
    assert set(pairs.get_column("served")) == {DECODER_MODEL, HF_MODEL}
    wrong = pairs.filter(pairs.get_column("served") != pairs.get_column("compiled"))
    assert wrong.height == 0, wrong.to_dicts()


# ---- replay of the run's failing requests, through the service, in fresh processes (issue 22) -------------


def _replay(demo_run: dict[str, Any], service: str, request_id: str, out: Path) -> dict[str, Any]:
    """``inferensics replay REQUEST_ID --service URL`` as a user runs it (trusting the demo's builder key)."""
    env = {**_env(), "INFERENSICS_BUNDLE_KEYRING": demo_run["keyring"], "COLUMNS": "250"}
    res = subprocess.run(
        [sys.executable, "-m", "inferensics.cli", "replay", request_id, "--service", service, "--out", str(out)],
        cwd=out.parent, env=env, capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    verdict: dict[str, Any] = json.loads((out / "verdict.json").read_text())
    verdict["stdout"] = res.stdout
    return verdict


def test_replay_names_the_candidates_faulty_decomposition(
    demo_run: dict[str, Any], demo_service: str, tmp_path: Path
) -> None:
    """A request the canary served differently: replay pulls the candidate bundle from the service,
    reinstalls the fast-SiLU decomposition its manifest records, and names it down to the source line."""
    request_id = next(
        rid
        for rid, r in demo_run["served"].items()
        if r["bundle"] == CANDIDATE and r["model"] == DECODER_MODEL and r["expected"] == "hit" and not r["incident"]
    )
    verdict = _replay(demo_run, demo_service, request_id, tmp_path / "canary")
    assert verdict["category"] == "decomposition", verdict["stdout"]
    assert verdict["op"] == "aten.silu", verdict["stdout"]
    # The user's line whose op diverged (the decoder's gated MLP) ...
    assert verdict["source_file"].endswith("demo/models/decoder.py"), verdict["stdout"]
    assert "silu_mul" in verdict["source_text"], verdict["stdout"]
    assert "silu" in verdict["kernel"], verdict["stdout"]
    # ... and the faulty decomposition, as the candidate's manifest recorded it and replay reinstalled it.
    custom = verdict["evidence"]["customisation"]
    assert custom["import_path"] == "inferensics.demo.incidents:fast_silu"
    assert custom["source_file"].endswith("demo/incidents.py")
    assert custom["source_text"] == "return x * torch.sigmoid(1.702 * x)"
    assert "fast_silu" in verdict["stdout"]
    assert verdict["evidence"]["bundle_id"] == demo_run["bundle_ids"][CANDIDATE]
    assert verdict["evidence"]["served_keys_all_hit"], verdict["evidence"]["served_matches"]  # the served code


def test_the_printed_replay_names_the_poisoned_input_of_the_nan_request(
    commands: dict[str, str], demo_run: dict[str, Any], tmp_path: Path
) -> None:
    """The NaN request resumed from a corrupt key-cache page, captured with it: category ``inputs``. The
    summary's printed command, run as printed (it names the run's keyring; ``--out`` added to read the
    verdict), records its result through the service."""
    request_id = demo_run["drill_ids"]["NaN logits, inputs captured"][0]
    assert shlex.split(commands["replay"])[2] == request_id
    out = tmp_path / "nan"
    res = run_printed(f"{commands['replay']} --out {out}", tmp_path)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert re.search(r"^replay [0-9a-f]{32} recorded in replay_results$", res.stdout, re.M), res.stdout + res.stderr
    verdict: dict[str, Any] = {**json.loads((out / "verdict.json").read_text()), "stdout": res.stdout}
    assert verdict["category"] == "inputs", verdict["stdout"]
    assert "k_cache" in verdict["culprit"], verdict["stdout"]
    assert verdict["evidence"]["bad_inputs"][0]["tensor"] == "k_cache"


STALE_HOST = """
import sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import torch
from inferensics.collector.host import instrument
from inferensics.demo.bundles import decoder_inputs, serving_decoder
from inferensics.demo.serving import apply_dynamo_policy

service, bundle, keyring = sys.argv[1:4]
apply_dynamo_policy()
tracker = instrument(service_url=service, host="cpu-b-candidate-stale", hw_pool="cpu-b", model="tiny-decoder")
model = tracker.compile(serving_decoder(), bundle=bundle, keyring=keyring)
with torch.inference_mode():
    for i in range(2):
        with tracker.request(f"stale-{i}", model="tiny-decoder", traffic_class="interactive", shape=(2, 48)) as req:
            req.set_output(model(*decoder_inputs((2, 48))))
tracker.flush()
tracker.shutdown()
"""
"""A host that never refreshed its states file: it loads the (revoked) candidate and serves two requests."""


def test_the_bundles_page_lights_up_the_revoked_candidate_still_serving(
    dashboard: str, demo_run: dict[str, Any], demo_service: str, page: Page, tmp_path: Path
) -> None:
    """Revoke the candidate with the command; a host that never refreshed its states file keeps serving it:
    the page lights it up. Last in the module: it changes the run's release state."""
    candidate = demo_run["bundle_ids"][CANDIDATE]
    res = run_printed(f"inferensics bundle revoke {candidate[:16]} --reason canary-fail --service {demo_service}",
                      tmp_path)  # fmt: skip
    assert res.returncode == 0, res.stdout + res.stderr
    with ServiceClient(demo_service) as client:  # the state travels over OTLP: wait until it is stored
        revoked = f"SELECT count() FROM bundle_states WHERE bundle_id = '{candidate}' AND state = 'revoked'"
        deadline = time.monotonic() + 60
        while client.sql(revoked).item(0, 0) == 0 and time.monotonic() < deadline:
            time.sleep(0.5)
        stale = subprocess.run(
            [sys.executable, "-c", STALE_HOST, demo_service, demo_run["bundle_dirs"][CANDIDATE], demo_run["keyring"]],
            cwd=REPO, env=_env(), capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert stale.returncode == 0, stale.stderr[-3000:]
        served = "SELECT count() FROM requests WHERE startsWith(request_id, 'stale-')"
        deadline = time.monotonic() + 60
        while client.sql(served).item(0, 0) < 2 and time.monotonic() < deadline:
            time.sleep(0.5)
    # A range ending after the revocation (the page caches a query's answer per range for a while).
    end = (datetime.now(UTC) + timedelta(minutes=2)).strftime("%Y-%m-%dT%H:%MZ")
    page.goto(f"{dashboard}/bundles?end={end}")
    settle(page)
    alert = page.locator('[data-testid="stAlert"]').filter(has_text="Revoked bundle still serving")
    expect(alert).to_have_count(1, timeout=PAGE_TIMEOUT_MS)
    text = alert.inner_text()
    assert candidate[:12] in text
    since = re.search(r"served ([\d,]+) requests since it was revoked", text)
    assert since is not None, text
    # Counted from the hour of the revocation on (the hourly rollup): the stale host's two at least.
    assert int(since.group(1).replace(",", "")) >= 2
    shoot(page, "bundles-revoked")
