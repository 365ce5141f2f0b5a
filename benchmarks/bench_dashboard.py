"""Time the on-call overview page against a collector service over a store; print the figures.

Usage:
    python benchmarks/bench_dashboard.py [--data-dir DIR] [--rows 2000000] [--runs 5] [--browser]

``--data-dir`` names an existing embedded store (for example the analytics benchmark's, made by
``benchmarks/bench_queries.py``); without it a smaller store is generated into a temporary directory:
``--rows`` request events over 30 days across 20 models × 10 pools × 5 traffic classes, with recompiles,
fallbacks and errors, ending at the current hour. The service runs as its own process over the store
(chDB lets one process open a directory), and the range is pinned to the store's last hour of traffic
(the dashboard's default range is the last hour).

Figures:
* **AppTest render**: one script run of the overview page (every query through the service + page logic),
  with Streamlit's query cache cleared before each run (so each run asks the service), and warm (cache
  kept, what a person sees when moving between pages). Target: ≤ 2 s.
* with ``--browser``: headless Chromium, seconds from navigation to each phase (page loaded, title drawn,
  fleet table drawn, both chart elements in the page, both trend charts drawn by Vega), for (1) a first
  visit: a fresh browser profile per visit, Streamlit's static files fetched and compiled again; (2) a
  returning visitor: one profile, a new tab per visit, the same range (the dashboard's query cache
  warm); (3) a returning visitor asking for a range none of whose answers is cached (every query goes to
  the service and the store).

The load average is printed with the figures: the machine is shared, so judge them against it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

ADMIN = "bench-admin"
READ = "bench-read"


def generate(data_dir: Path, rows: int, end: datetime) -> None:
    """Write ``rows`` request events (and a few compiles) ending at ``end`` into a new store (child process)."""
    import numpy as np
    import pyarrow as pa

    from inferensics.schema import RequestEvent
    from inferensics.schema import columns as c
    from inferensics.schema.store import Store

    rng = np.random.default_rng(6)
    models = np.array([f"model-{i:02d}" for i in range(20)])
    pools = np.array([f"pool-{i}" for i in range(10)])
    classes = np.array(["interactive", "batch", "shadow", "eval", "bulk"])
    span_us = 30 * 86400 * 1_000_000
    t0 = int((end.timestamp()) * 1_000_000) - span_us
    with Store.open(f"chdb://{data_dir}") as store:
        store.migrate()
        batch = 500_000
        for start in range(0, rows, batch):
            n = min(batch, rows - start)
            outcome = rng.choice(np.array(["hit", "recompile", "fallback"]), n, p=[0.985, 0.01, 0.005])
            graph = rng.integers(0, 40, n)
            table = pa.table({
                c.REQUEST_ID: np.char.add("req-", np.arange(start, start + n).astype(str)),
                c.TS: pa.array(np.sort(t0 + rng.integers(0, span_us, n)), pa.timestamp("us", tz="UTC")),
                c.HOST: np.char.add("host-", rng.integers(0, 100, n).astype(str)),
                c.MODEL: models[rng.integers(0, 20, n)],
                c.HW_POOL: pools[rng.integers(0, 10, n)],
                c.TRAFFIC_CLASS: classes[rng.integers(0, 5, n)],
                c.BUNDLE_ID: np.where(rng.random(n) < 0.1, "bundle-candidate", "bundle-baseline"),
                c.LATENCY_MS: pa.array(rng.lognormal(3, 1, n).astype("float32")),
                c.STATUS: np.where(rng.random(n) < 0.01, "error", "ok"),
                c.OUTCOME: outcome,
                c.FALLBACK_REASON: np.where(outcome == "fallback", "graph_break:GB0170", ""),
                c.RECOMPILES: pa.array((outcome == "recompile").astype("uint8")),
                c.COMPILE_MS: pa.array(np.where(outcome == "recompile", 800.0, 0.0).astype("float32")),
                c.GRAPH_KEYS: [[f"g{g:03d}"] for g in graph],
                c.GRAPH_ARTIFACTS: [[f"{g:064x}"] for g in graph],
                c.GRAPH_CALLS: pa.array([[1]] * n, pa.list_(pa.uint32())),
                c.GRAPH_US: pa.array([[500]] * n, pa.list_(pa.uint32())),
            })  # fmt: skip
            store.insert_arrow(RequestEvent, table)


def start_service(data_dir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    """The collector service over ``data_dir``, with a read and an admin token."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}
    env["INFERENSICS_TOKENS"] = f"{READ}=read,{ADMIN}=admin"
    cmd = [sys.executable, "-m", "inferensics.collector.service", "--port", str(port), "--dsn", f"chdb://{data_dir}",
           "--spool-dir", str(log.parent / "spool")]  # fmt: skip
    with log.open("ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the service exited ({proc.returncode}); see {log}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    proc.kill()
    raise SystemExit(f"the service did not become ready; see {log}")


def last_minute(url: str) -> datetime:
    """The minute after the store's newest request (the end of the pinned range)."""
    from inferensics.collector.client import ServiceClient

    with ServiceClient(url, token=ADMIN) as client:
        newest = client.sql("SELECT max(ts) AS t FROM requests").item(0, 0)
    newest = newest.replace(tzinfo=UTC) if newest.tzinfo is None else newest
    return newest.replace(second=0, microsecond=0) + timedelta(minutes=1)


def time_apptest(url: str, end: datetime, runs: int) -> tuple[list[float], list[float]]:
    """Seconds per overview run with the query cache cleared before each, and warm."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    from inferensics.dashboard._internal.filters import NOW_KEY
    from inferensics.dashboard._internal.settings import TOKEN_STATE_KEY, URL_STATE_KEY
    from inferensics.dashboard.launcher import APP_FILE

    def app() -> AppTest:
        at = AppTest.from_file(str(APP_FILE), default_timeout=300)
        at.session_state[URL_STATE_KEY] = url
        at.session_state[TOKEN_STATE_KEY] = READ
        at.session_state[NOW_KEY] = end
        return at

    app().run()  # imports and first connection, not counted
    cold, warm = [], []
    for _ in range(runs):
        st.cache_data.clear()
        at = app()
        t = time.perf_counter()
        at.run()
        cold.append(time.perf_counter() - t)
        failures = [e.value for e in at.error if "Recompile storm" not in e.value]
        if at.exception or failures:  # an error panel is not a render: stop rather than time it
            raise SystemExit(f"the overview did not render: {failures or [e.value for e in at.exception]}")
        t = time.perf_counter()
        at.run()
        warm.append(time.perf_counter() - t)
    return cold, warm


CHARTS_DRAWN = (
    '() => document.querySelectorAll(\'[data-testid="stVegaLiteChart"] canvas, '
    '[data-testid="stVegaLiteChart"] svg.marks\').length >= 2'
)
CHART_ELEMENTS = "() => document.querySelectorAll('[data-testid=\"stVegaLiteChart\"]').length >= 2"
PHASES = ("page loaded", "title drawn", "fleet table", "chart elements", "charts drawn")


def _visit(page: Any, url: str, work: Path) -> list[float]:
    """Seconds from navigation to each of ``PHASES`` on one visit of the overview."""
    t = time.perf_counter()
    page.goto(url, wait_until="load")
    marks = [time.perf_counter() - t]
    page.get_by_text("On-call overview").first.wait_for(timeout=300_000)
    marks.append(time.perf_counter() - t)
    page.get_by_text("Fleet slices").wait_for(timeout=300_000)
    marks.append(time.perf_counter() - t)
    page.wait_for_function(CHART_ELEMENTS, timeout=120_000, polling=20)
    marks.append(time.perf_counter() - t)
    try:
        page.wait_for_function(CHARTS_DRAWN, timeout=120_000, polling=20)
    except Exception:
        page.screenshot(path=str(work.parent / "bench-dashboard-timeout.png"))
        raise
    marks.append(time.perf_counter() - t)
    return marks


def time_browser(url: str, end: datetime, runs: int, work: Path) -> dict[str, list[list[float]]]:
    """Per visit, seconds from navigation to each of ``PHASES`` in headless Chromium, in three settings.

    ``first visit``: a fresh browser profile per visit (Streamlit's static files downloaded and compiled
    again), query cache warm after the first visit; ``returning``: one profile, a new tab per visit (the
    static files cached, as for an on-call engineer who has opened the dashboard before); ``returning, range
    not cached``: the same with a range ending a few minutes earlier per visit, so that none of the page's
    queries is answered from the dashboard's cache (each goes to the service and the store).
    """
    from playwright.sync_api import sync_playwright

    from inferensics.dashboard.launcher import start_dashboard, wait_until_up

    port = free_port()
    proc = start_dashboard(port=port, service_url=url, token=READ, log=work / "dashboard.log")
    base = f"http://127.0.0.1:{port}"
    target = f"{base}/?end={end:%Y-%m-%dT%H:%MZ}"
    out: dict[str, list[list[float]]] = {"first visit": [], "returning": [], "returning, range not cached": []}
    try:
        wait_until_up(base, proc, timeout=120)
        args = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--no-first-run"]  # fmt: skip
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=args)
            viewport = {"width": 1440, "height": 900}
            _visit(browser.new_page(viewport=viewport), target, work)  # warms the service and the query cache
            for _ in range(runs):
                context = browser.new_context(viewport=viewport)
                out["first visit"].append(_visit(context.new_page(), target, work))
                context.close()
            context = browser.new_context(viewport=viewport)
            _visit(context.new_page(), target, work)  # fills this profile's HTTP cache
            for _ in range(runs):
                page = context.new_page()
                out["returning"].append(_visit(page, target, work))
                page.close()
            for i in range(runs):
                page = context.new_page()  # a range ending a few minutes earlier: none of its answers cached
                fresh = f"{base}/?end={end - timedelta(minutes=3 * (i + 1)):%Y-%m-%dT%H:%MZ}"
                out["returning, range not cached"].append(_visit(page, fresh, work))
                page.close()
            browser.close()
    finally:
        proc.terminate()
        proc.wait(30)
    return out


def free_port() -> int:
    """A free loopback port."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def summary(name: str, seconds: list[float]) -> str:
    """One line: p50, max and every run."""
    runs = ", ".join(f"{s:.2f}" for s in seconds)
    return f"{name:<58} p50 {statistics.median(seconds):6.2f} s   max {max(seconds):6.2f} s   ({runs})"


def main() -> None:
    """Parse the flags, prepare the store and the service, time the page, print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", type=Path, help="existing embedded store (e.g. bench_queries.py's)")
    parser.add_argument("--rows", type=int, default=2_000_000, help="request events to generate without --data-dir")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--browser", action="store_true", help="also time headless Chromium to rendered charts")
    parser.add_argument("--generate-into", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--end", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.generate_into:  # the child that writes the store
        generate(args.generate_into, args.rows, datetime.fromisoformat(args.end))
        return
    with tempfile.TemporaryDirectory(prefix="bench-dashboard-") as tmp:
        work = Path(tmp)
        data_dir = args.data_dir
        if data_dir is None:
            data_dir = work / "store"
            end = datetime.now(UTC).replace(minute=0, second=0, microsecond=0)
            t = time.perf_counter()
            subprocess.run([sys.executable, __file__, "--generate-into", str(data_dir), "--rows", str(args.rows),
                            "--end", end.isoformat()], check=True)  # fmt: skip
            print(f"generated {args.rows:,} request events over 30 days in {time.perf_counter() - t:.1f} s")
        port = free_port()
        service = start_service(data_dir, port, work / "service.log")
        url = f"http://127.0.0.1:{port}"
        try:
            end = last_minute(url)
            print(f"store {data_dir}; overview range {end - timedelta(hours=1):%Y-%m-%d %H:%M} – {end:%H:%M} UTC")
            print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} on {os.cpu_count()} cores")
            cold, warm = time_apptest(url, end, args.runs)
            print(summary("overview, AppTest run, query cache cleared", cold))
            print(summary("overview, AppTest run, warm cache", warm))
            if args.browser:
                for setting, visits in time_browser(url, end, args.runs, work).items():
                    for i, phase in enumerate(PHASES):
                        print(summary(f"Chromium, {setting}: {phase}", [v[i] for v in visits]))
                print(f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())} after the browser runs")
            verdict = "meets" if statistics.median(cold) <= 2.0 else "MISSES"
            print(f"target: overview render <= 2 s (AppTest script run, cache cleared, p50): {verdict}")
        finally:
            service.terminate()
            service.wait(60)


if __name__ == "__main__":
    main()
