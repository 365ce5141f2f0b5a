"""``inferensics demo``: the whole pipeline on one machine, with real compiled models and real incidents.

1. starts the collector service (``inferensics serve``, embedded store in the data directory), unless
   ``--service`` names a running one, and the dashboard unless ``--no-dashboard``;
2. builds and signs the two release bundles (:mod:`inferensics.demo.release`, one process each), pushes
   them to the service and promotes them (baseline on ``production``, candidate on ``canary``);
3. starts three serving workers (pool ``cpu-a`` baseline, pool ``cpu-b`` baseline, pool ``cpu-b``
   candidate) that verify and load their bundle and serve the seeded workload through the host SDK,
   exporting OTLP to the service; the first starts alone, the other two once it has served a request;
4. shows progress per worker, waits until the service has stored every request, prints what happened,
   request ids to drill into, commands to try, and the dashboard (its URL, or the command that starts one)
   with links to its pages on the findings;
5. stays up for browsing until Ctrl-C (or exits at once with ``--exit-when-done``).
"""

from __future__ import annotations

import json
import queue
import signal
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn
from rich.table import Table

from inferensics.bundle.errors import BundleError
from inferensics.collector.client import ServiceClient, ServiceError
from inferensics.demo import processes, release, summary
from inferensics.demo.worker import host_name, worker_requests
from inferensics.demo.workload import (
    BASELINE,
    CANDIDATE,
    POLICY_TEXT,
    POOL_A,
    POOL_B,
    STORM_RECOMPILES,
    Workload,
    build_workload,
)

WORKERS: tuple[tuple[str, str], ...] = ((POOL_A, BASELINE), (POOL_B, BASELINE), (POOL_B, CANDIDATE))
"""(pool, bundle) of each serving worker."""
INGEST_TIMEOUT_S = 120.0
"""How long to wait for the service to store every request after the workers finish."""
LONG_REQUEST_S = 3.0
"""A request running longer than this shows its elapsed time in its worker's progress line (compiles)."""
HEARTBEAT_S = 30.0
"""Without a terminal (a log, CI) the progress bars are not drawn: a line per this many seconds of a
request still running says what is being waited for instead."""


@dataclass(frozen=True)
class DemoOptions:
    """The options of ``inferensics demo`` (see the command's help)."""

    duration_s: float = 120.0
    rate: float = 3.0
    seed: int = 0
    dashboard: bool = True
    port: int = 4318
    dashboard_port: int = 8501
    data_dir: Path | None = None
    service_url: str | None = None
    token: str | None = None
    exit_when_done: bool = False
    summary_json: Path | None = None
    sample_rate: float = 0.05
    bundle_cache: Path | None = None
    """Where unchanged release bundles are reused from (default :func:`inferensics.bundle.cache.default_cache_dir`)."""
    rebuild: bool = False
    """Build the release bundles anew even when the bundle cache holds them."""


class DemoError(RuntimeError):
    """The demo could not run; the message says why and what to do."""


def run_demo(opts: DemoOptions, console: Console | None = None) -> summary.RunRecord:
    """Run the demo (see the module docstring); returns what the workers reported."""
    console = console or Console(highlight=False, soft_wrap=True)  # printed ids and commands stay whole
    data_dir = opts.data_dir or Path(tempfile.mkdtemp(prefix="inferensics-demo-"))
    data_dir.mkdir(parents=True, exist_ok=True)
    workload = build_workload(opts.seed, opts.duration_s, opts.rate)
    console.print(f"[bold]inferensics demo[/] seed {opts.seed}, {opts.duration_s:g} s at {opts.rate:g} requests/s")
    console.print(POLICY_TEXT)
    children: list[processes.Child] = []  # the service and the dashboard
    workers: list[processes.Child] = []
    record = summary.RunRecord()
    previous = _sigterm_as_interrupt()
    try:
        if opts.service_url:
            url = opts.service_url.rstrip("/")
            _check_token(url, opts.token)
        else:
            port = processes.free_port(opts.port)
            console.print(f"starting the collector service (store in {data_dir / 'store'}) ...")
            service, url = processes.start_service(data_dir, port)
            children.append(service)
        console.print(f"collector service  {url}")
        dashboard_url = ""
        if opts.dashboard:
            why_not = processes.dashboard_available()
            if why_not:
                console.print(f"[yellow]skipping the dashboard:[/] {why_not}")
            else:
                dport = processes.free_port(opts.dashboard_port)
                keyring = release.keyring_path(data_dir, _bundle_cache(opts))  # the request page's replay needs it
                children.append(
                    processes.start_dashboard(
                        data_dir, url, dport, opts.token, min_recompiles=STORM_RECOMPILES, keyring=keyring
                    )
                )
                dashboard_url = f"http://127.0.0.1:{dport}"
                console.print(f"dashboard          {dashboard_url}")
        with ServiceClient(url, token=opts.token, timeout=60) as client:
            bundles = _release(client, data_dir, opts, console)
            record.bundle_ids = {name: b.bundle_id for name, b in bundles.bundles.items()}
            before = _stored_requests(client)
            record.started = datetime.now(UTC)
            _serve(opts, url, workload=workload, data_dir=data_dir, record=record, workers=workers, console=console,
                   bundles=bundles)  # fmt: skip
            _wait_for_ingest(client, before + len(record.served), console)
            # The service this run started stops when it exits: the commands it prints must not need it.
            stopping = opts.exit_when_done and not opts.service_url
            _report(client, url, dashboard_url, record, keyring=bundles.keyring, console=console,
                    store=data_dir if stopping else None)  # fmt: skip
        if opts.summary_json:
            opts.summary_json.write_text(json.dumps(_summary_json(url, record, bundles), indent=2))
        console.print(f"logs in {data_dir}")
        if not opts.exit_when_done and children:
            console.print(f"[bold]{_browsing_line([c.name for c in children])}[/]")
            while all(c.alive() for c in children):
                time.sleep(1)
            for child in children:
                if not child.alive():
                    console.print(
                        f"[yellow]{child.name} exited (code {child.proc.returncode}); see {child.log_path}[/]"
                    )
    except KeyboardInterrupt:
        console.print("stopping ... (Ctrl-C again to kill at once)")
    finally:
        try:
            processes.stop_all(workers)  # first, so their last exports reach the service
        finally:
            try:
                processes.stop_all(list(reversed(children)))
            finally:
                _restore_sigterm(previous)
    return record


def _bundle_cache(opts: DemoOptions) -> Path:
    """The bundle cache the run builds into and reuses from (``--bundle-cache``, else the default)."""
    from inferensics.bundle.cache import default_cache_dir

    return opts.bundle_cache or default_cache_dir()


def _release(client: ServiceClient, data_dir: Path, opts: DemoOptions, console: Console) -> release.Release:
    """Build (or reuse from the bundle cache), sign, push and promote the two release bundles; print which."""
    told = [0.0]
    cache = _bundle_cache(opts)

    def progress(running: list[str], elapsed: float) -> None:
        line = f"building the release bundles ({', '.join(running)}) {elapsed:.0f} s"
        status.update(line)
        if not console.is_terminal and elapsed - told[0] >= HEARTBEAT_S:  # a log, CI: a line every 30 s
            told[0] = elapsed
            console.print(line)

    how = "--rebuild: building anew" if opts.rebuild else f"unchanged builds reused from {cache}"
    console.print(f"building the release bundles (baseline, candidate; compile, qualify, sign; {how}) ...")
    with console.status("building the release bundles ...") as status:
        try:
            built = release.build(data_dir, progress=progress, cache=cache, rebuild=opts.rebuild)
        except (RuntimeError, BundleError) as exc:  # a build that failed, or a bundle it wrote that does not read
            raise DemoError(str(exc)) from None
        status.update("pushing the release bundles to the service ...")
        try:
            release.publish(client, built, opts.token)
        except ServiceError as exc:
            raise DemoError(f"could not push the release bundles: {exc.line}") from None
    for name, b in built.bundles.items():
        if b.rejected:
            console.print(f"[yellow]not reusing the cached {name} bundle:[/] {b.rejected}; built anew")
        made = "reused bundle (verified)" if b.reused else "built"
        console.print(f"release bundle {name:<9} {b.bundle_id} ({release.CHANNELS[name]}) {made} in {b.directory}")
    reused = built.reused
    if reused:
        console.print(f"reused {len(reused)} of {len(built.bundles)} release bundles from {cache} (inputs unchanged; "
                      "--rebuild builds anew)")  # fmt: skip
    console.print(f"ready in {built.build_s:.0f} s; workers trust {built.keyring}; pushed to the service")
    return built


def _browsing_line(names: list[str]) -> str:
    """``service stays up ...`` or ``service and dashboard stay up ...``: what the run leaves running."""
    verb = "stays" if len(names) == 1 else "stay"
    return f"{' and '.join(names)} {verb} up for browsing until Ctrl-C"


def _check_token(url: str, token: str | None) -> None:
    """Before a minute of bundle builds: the run reads its requests back through the admin SQL API, so a
    running service (``--service``) must take the token as ``admin``."""
    try:
        with ServiceClient(url, token=token, timeout=30) as client:
            client.sql("SELECT 1")
    except ServiceError as exc:
        raise DemoError(
            f"{exc.line}; the demo sends, pushes and reads its run back through the admin SQL API: "
            "pass --token (or $INFERENSICS_TOKEN) with the admin role"
        ) from None


def _sigterm_as_interrupt() -> Any:
    """Make SIGTERM stop the demo like Ctrl-C (children stopped, not orphaned); returns the old handler."""
    if threading.current_thread() is not threading.main_thread():
        return None

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    return signal.signal(signal.SIGTERM, handler)


def _restore_sigterm(previous: Any) -> None:
    if previous is not None:
        signal.signal(signal.SIGTERM, previous)


def _serve(
    opts: DemoOptions,
    url: str,
    *,
    workload: Workload,
    data_dir: Path,
    record: summary.RunRecord,
    workers: list[processes.Child],
    console: Console,
    bundles: release.Release,
) -> None:
    """Start the workers and follow them with one progress bar each until all are done."""
    messages: queue.Queue[processes.WorkerMessage] = queue.Queue()
    start_at = time.time() + 2.0
    tasks: dict[str, TaskID] = {}
    outcomes: dict[str, Counter[str]] = {}
    done: set[str] = set()
    running: dict[str, tuple[dict[str, Any], float]] = {}  # worker → (its "begin" line, when it came)
    told: dict[str, float] = {}  # worker → seconds of its running request already reported (no terminal)
    with Progress(
        TextColumn("{task.fields[worker]:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[status]}"),
        console=console,
    ) as progress:
        pending: list[tuple[str, list[str]]] = []
        for pool, bundle in WORKERS:
            name = host_name(pool, bundle)
            total = len(worker_requests(workload, pool, bundle))
            args = ["--pool", pool, "--bundle", bundle, "--service", url]
            args += ["--bundle-dir", str(bundles.bundles[bundle].directory), "--keyring", str(bundles.keyring)]
            args += ["--seed", str(opts.seed), "--duration", str(opts.duration_s), "--rate", str(opts.rate)]
            args += ["--start-at", str(start_at), "--sample-rate", str(opts.sample_rate)]
            if opts.token:
                args += ["--token", opts.token]
            pending.append((name, args))
            tasks[name] = progress.add_task(name, total=total, worker=name, status="waits for a warm compile cache")
            outcomes[name] = Counter()

        def launch(count: int) -> None:
            for name, args in pending[:count]:
                workers.append(processes.start_worker(name, data_dir, args, messages))
                progress.update(tasks[name], status="starting (loading torch)")
            del pending[:count]

        # The first worker compiles alone; the others start once it served a request, so they find the decoder's
        # graphs in the FX-graph cache (a cache hit, as a scaled-out pool would) and its kernels built.
        launch(1)
        while len(done) < len(tasks):
            try:
                name, msg = messages.get(timeout=0.5)
            except queue.Empty:
                _show_running(progress, tasks, running, told, console.is_terminal)
                continue
            event = msg.get("event")
            if event == "start":
                progress.update(tasks[name], status="compiling and serving")
            elif event == "begin":
                running[name] = (msg, time.monotonic())
                told.pop(name, None)
            elif event == "served":
                running.pop(name, None)
                if pending:
                    launch(len(pending))
                record.served[msg["request_id"]] = {**msg, "worker": name}
                outcomes[name][msg["expected"]] += 1
                status = " ".join(f"{k} {v}" for k, v in sorted(outcomes[name].items()))
                progress.update(tasks[name], advance=1, status=status)
                if note := _notable(msg):
                    progress.console.print(f"{name:<20} {msg['request_id']}  {note}", soft_wrap=True)
            elif event == "done":
                record.worker_stats[name] = msg.get("stats", {})
                status = " ".join(f"{k} {v}" for k, v in sorted(outcomes[name].items()))
                progress.update(tasks[name], status=f"done: {status}")
            elif event == "exit":
                done.add(name)
                launch(len(pending))
                if msg.get("code"):
                    child = next(c for c in workers if c.name == name)
                    raise DemoError(f"worker {name} failed (exit {msg['code']}):\n{child.log_tail()}")


def _show_running(
    progress: Progress,
    tasks: dict[str, TaskID],
    running: dict[str, tuple[dict[str, Any], float]],
    told: dict[str, float],
    terminal: bool,
) -> None:
    """Show each worker's request that has run longer than :data:`LONG_REQUEST_S` (a compile, mostly): in
    its progress line, and without a terminal as a line every :data:`HEARTBEAT_S` seconds."""
    for name, (msg, since) in running.items():
        elapsed = time.monotonic() - since
        if elapsed < LONG_REQUEST_S:
            continue
        what = msg["expected"] if msg["expected"] in ("compile", "recompile") else "request"
        doing = f"{what} of {msg['model']} ({msg['request_id']}) running {elapsed:.0f} s"
        progress.update(tasks[name], status=doing)
        if not terminal and elapsed - told.get(name, 0.0) >= HEARTBEAT_S:
            told[name] = elapsed
            progress.console.print(f"{name:<20} {doing}", soft_wrap=True)


def _notable(msg: dict[str, Any]) -> str:
    """A one-line account of a request worth a line above the bars (compiles and incidents), else ``""``."""
    seconds = f"{msg['ms'] / 1000:.1f} s"
    if msg["error"]:
        return f"[red]failed[/] ({msg['error']}); inputs captured"
    if msg["nan"]:
        return f"[red]{msg['nan']} NaN logits[/] ({msg['traffic_class']}); inputs captured"
    if msg["expected"] == "fallback":
        return f"[yellow]eager fallback[/] after the recompile limit ({msg['incident'] or 'organic'}, {seconds})"
    if msg["expected"] in ("compile", "recompile"):
        return f"{msg['expected']} of {msg['model']} ({msg['incident'] or msg['traffic_class']}, {seconds})"
    return ""


def _stored_requests(client: ServiceClient) -> int:
    counts = client.status().get("store", {}).get("row_counts") or {}
    return int(counts.get("requests", 0))


def _wait_for_ingest(client: ServiceClient, expected: int, console: Console) -> None:
    deadline = time.monotonic() + INGEST_TIMEOUT_S
    with console.status("waiting for the service to store every request ..."):
        while time.monotonic() < deadline:
            if _stored_requests(client) >= expected:
                return
            time.sleep(1.0)
    console.print(f"[yellow]the service holds {_stored_requests(client)} of {expected} requests so far[/]")


def _report(
    client: ServiceClient,
    url: str,
    dashboard_url: str,
    record: summary.RunRecord,
    *,
    keyring: Path,
    console: Console,
    store: Path | None = None,
) -> None:
    """Print the incidents (expected vs stored), the canary verdict, ids to drill into and commands.

    ``store`` is the data directory of a service that stops when the demo exits: the commands then read its
    store directly, or start a service on it first.
    """
    now = datetime.now(UTC)  # the end of the canary verdict's window, and of the dashboard's link to it
    table = Table("incident", "count", title="what happened")
    for name, n in record.incident_counts().items():
        table.add_row(name, str(n))
    console.print(table)
    try:
        rows = summary.observed_requests(client, record.started)
        observed = Counter(rows.get_column("outcome").to_list())
        console.print("request outcomes (stored) " + ", ".join(f"{k} {v}" for k, v in sorted(observed.items())))
        stored = dict(zip(rows.get_column("request_id").to_list(), rows.get_column("outcome").to_list(), strict=True))
        differ = sorted(rid for rid, r in record.served.items() if stored.get(rid, r["expected"]) != r["expected"])
        if differ:
            console.print(
                f"[yellow]{len(differ)} stored outcomes differ from the dispatch the policy predicts:[/] "
                + " ".join(f"{rid} ({record.served[rid]['expected']}→{stored[rid]})" for rid in differ[:8])
            )
        evidence, note = summary.canary_verdict(client, record, now=now)
        verdict = evidence.filter(evidence.get_column("check") == "verdict").row(0, named=True)
        console.print(f"canary verdict for {record.bundle_ids[CANDIDATE]}: [bold]{verdict['outcome']}[/] "
                      f"({verdict['rule']}){'; ' + note if note else ''}")  # fmt: skip
    except ServiceError as exc:
        console.print(f"[yellow]could not read the results back:[/] {escape(exc.line)}")
    console.print(
        "expected outcomes        " + ", ".join(f"{k} {v}" for k, v in sorted(record.expected_outcomes().items()))
    )
    for why, ids in summary.drill_ids(record).items():
        console.print(f"drill into ({why}): " + " ".join(ids))
    if store is None:
        if dashboard_url:
            console.print(f"dashboard: {dashboard_url}")
            _print_links(console, record, dashboard_url, now)
        console.print("try:")
        for command in summary.commands(url, record, dashboard_url, keyring):
            console.print(f"  {command}", soft_wrap=True)  # one line each, so a copy runs as printed
        if not dashboard_url:
            _printed_dashboard_links(console, record, now)
        return
    dsn = processes.store_dsn(store)
    console.print("try (the demo's service and dashboard stop when it exits; these read its store directly):")
    for command in summary.commands(url, record, "", keyring, store_dsn=dsn):
        console.print(f"  {command}", soft_wrap=True)
    console.print(
        "replay and the dashboard read through a service: start one on the store (it holds the store until "
        "Ctrl-C; the commands above need it stopped), then, in another terminal:"
    )
    console.print(f"  {processes.serve_command(store, int(url.rsplit(':', 1)[1]))}", soft_wrap=True)
    for command in summary.service_commands(url, record, "", keyring):
        console.print(f"  {command}", soft_wrap=True)
    _printed_dashboard_links(console, record, now)


def _print_links(console: Console, record: summary.RunRecord, dashboard_url: str, now: datetime) -> None:
    """The dashboard's pages that open on the run's findings (:func:`summary.dashboard_links`), one a line."""
    for what, link in summary.dashboard_links(record, dashboard_url, now).items():
        console.print(f"  {what}: {link}", soft_wrap=True)  # one line each, to copy whole


def _printed_dashboard_links(console: Console, record: summary.RunRecord, now: datetime) -> None:
    """After the printed ``inferensics dashboard`` command: its pages that open on the run's findings (the
    canary comparison the verdict above was made on, on its pool and with its thresholds, the NaN request).
    Without them the canary page opened at its defaults, not on the verdict the run printed."""
    url = summary.PRINTED_DASHBOARD_URL
    console.print(f"that dashboard ({url}) opens on what the run found at:")
    _print_links(console, record, url, now)


def _summary_json(url: str, record: summary.RunRecord, bundles: release.Release) -> dict[str, object]:
    return {
        "service_url": url,
        "started": record.started.isoformat(),
        "bundle_ids": record.bundle_ids,
        "bundle_dirs": {name: str(b.directory) for name, b in bundles.bundles.items()},
        "keyring": str(bundles.keyring),
        "bundle_build_s": round(bundles.build_s, 1),
        "bundles_reused": bundles.reused,
        "bundle_cache": str(bundles.cache or ""),
        "incidents": record.incident_counts(),
        "expected_outcomes": dict(record.expected_outcomes()),
        "served": record.served,
        "worker_stats": record.worker_stats,
        "drill_ids": summary.drill_ids(record),
    }
