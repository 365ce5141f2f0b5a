"""The crash journal: a process that dies in a request leaves its in-flight requests to the next tracker.

The dying and recovering processes are real (``dying_server.py``): a compiled CPU kernel that aborts on an
out-of-range index, and a SIGKILL. Both export over OTLP to a real collector service (its own process), as a
production host does, and the rows are read back through the service's SQL API.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferensics.collector.host.delivery import DELIVERED
from inferensics.collector.host.journal import (
    DELIVERIES,
    HEADER_BYTES,
    ID_BYTES,
    JOURNAL_DIR_ENV,
    SLOT_BYTES,
    SLOTS,
    Journal,
    journal_dir,
)
from inferensics.collector.host.journal_recovery import parse_fatal_report, recover_dead
from inferensics.schema.events import SdkHealthEvent
from inferensics.schema.store import Store
from tests import conftest
from tests.collector.service.harness import INGEST, RunningService, new_service

PROGRAM = Path(__file__).with_name("dying_server.py")


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningService]:
    with new_service(tmp_path_factory.mktemp("svc")) as svc:
        yield svc


def _run(
    service: RunningService | str, journal: Path, mode: str, cache: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run ``dying_server.py`` exporting to ``service``, or into the store of a ``chdb://`` DSN."""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(cache), "INFERENSICS_TOKEN": INGEST}
    env.pop("PYTHONFAULTHANDLER", None)
    destination = service if isinstance(service, str) else service.url
    return subprocess.run(
        [sys.executable, "-P", str(PROGRAM), destination, str(journal), mode],
        capture_output=True, text=True, timeout=timeout, env=env, check=False,
    )  # fmt: skip


def _die(service: RunningService, tmp_path: Path, mode: str, cache: Path, sig: int) -> tuple[Path, str, str]:
    """Run ``mode`` until its process dies by ``sig``; its journal folder, stdout and stderr."""
    journal = tmp_path / "journal"
    died = _run(service, journal, mode, cache)
    assert died.returncode == -sig, died.stderr[-3000:]
    return journal, died.stdout, died.stderr


def _recover(service: RunningService, journal: Path, cache: Path) -> dict[str, Any]:
    done = _run(service, journal, "recover", cache)
    assert done.returncode == 0, done.stderr[-3000:]
    out: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


def _rows(service: RunningService, sql: str, expected: int) -> pl.DataFrame:
    client = service.client()
    deadline = time.monotonic() + 30
    frame = client.sql(sql)
    while frame.height < expected and time.monotonic() < deadline:  # the service writes what it acknowledged
        time.sleep(0.2)
        frame = client.sql(sql)
    return frame


def _requests(service: RunningService, rids: list[str]) -> dict[str, dict[str, Any]]:
    ids = ", ".join(f"'{r}'" for r in rids)
    sql = (
        "SELECT request_id, host, model, hw_pool, traffic_class, tenant, shape, status, outcome, error, graph_keys, "
        f"graph_artifacts, attrs, latency_ms FROM inferensics.requests WHERE request_id IN ({ids}) ORDER BY request_id"
    )
    return {r["request_id"]: r for r in _rows(service, sql, len(rids)).iter_rows(named=True)}


def test_a_request_whose_kernel_aborts_the_process_is_recovered_naming_the_kernel(
    service: RunningService, tmp_path: Path, inductor_cache: Path
) -> None:
    journal, _, stderr = _die(service, tmp_path, "kernel", inductor_cache, signal.SIGABRT)  # std::terminate
    assert "index out of bounds" in stderr
    out = _recover(service, journal, inductor_cache)
    assert out["stats"]["requests_recovered"] == 1
    assert out["stats"]["dead_processes"] == 1
    assert out["left"] == []  # the dead journal is removed, and the recovering tracker's own at its shutdown

    rows = _requests(service, ["ok-0", "ok-1", "bad-1"])
    assert sorted(rows) == ["bad-1", "ok-0", "ok-1"]  # the two served before it were exported by the dead process
    bad = rows["bad-1"]
    # The dead process's labels, not the recovering tracker's (the journal holds the request's id only).
    assert (bad["host"], bad["model"], bad["hw_pool"], bad["traffic_class"]) == ("h1", "emb", "cpu-a", "interactive")
    assert (bad["tenant"], bad["shape"], bad["latency_ms"]) == ("", "", 0.0)
    assert (bad["status"], bad["outcome"]) == ("error", "error")
    first = bad["error"].splitlines()[0]
    assert first.startswith("process died in this request: Fatal Python error: Aborted, in kernel cpp_fused_")
    assert "of the generated module " in first
    assert "dying_server.py" in bad["error"]  # the crashed thread's stack, down to the serving code
    attrs = dict(bad["attrs"])
    assert attrs["died"] == "Aborted"
    assert attrs["crash_kernel"] in first
    assert attrs["process"].startswith("h1 pid ")
    # The generated module is the artifact the graph's compile record names, and the graph is that compile's.
    assert list(bad["graph_artifacts"]) == list(rows["ok-0"]["graph_artifacts"])
    assert list(bad["graph_keys"]) == list(rows["ok-0"]["graph_keys"])
    compiles = _rows(
        service,
        f"SELECT graph_key FROM inferensics.compiles WHERE artifact_id = '{bad['graph_artifacts'][0]}'",
        1,
    )
    assert compiles.get_column("graph_key").to_list() == list(bad["graph_keys"])
    assert attrs["ts"] == "time of death"


def test_a_process_with_the_embedded_store_loaded_dies_at_once_and_is_recovered(
    tmp_path: Path, inductor_cache: Path
) -> None:
    """Single-process mode (``instrument(store=...)``): chDB is loaded in the serving process, and loading it
    installs ClickHouse's own fatal-signal handlers, which kept an aborting process alive for minutes while
    they symbolised its stack, and took the place of the journal's fatal-error report. The store keeps the
    process's handlers (``schema.engine_signals``): the process dies at once, with the report the recovered
    row is built from. (The timeout is a hang guard: on the old code the process was still alive at it.)"""
    dsn = f"chdb://{tmp_path / 'store'}"
    journal = tmp_path / "journal"
    died = _run(dsn, journal, "kernel", inductor_cache, timeout=120)
    assert died.returncode == -signal.SIGABRT, died.stderr[-3000:]
    assert "index out of bounds" in died.stderr
    assert "Received signal" not in died.stderr  # ClickHouse's handler did not run
    done = _run(dsn, journal, "recover", inductor_cache, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads(done.stdout.strip().splitlines()[-1])["stats"]
    assert (stats["requests_recovered"], stats["dead_processes"]) == (1, 1)
    with Store.open(dsn) as store:
        rows = store.query_rows(
            "SELECT request_id, error, attrs['died'], attrs['crash_kernel'], guard_outcome "
            "FROM requests ORDER BY request_id"
        )
    assert [r[0] for r in rows] == ["bad-1", "ok-0", "ok-1"]
    _, error, died_of, kernel, guards = rows[0]
    assert error.startswith("process died in this request: Fatal Python error: Aborted, in kernel cpp_fused_")
    assert (died_of, guards) == ("Aborted", "unknown")
    assert kernel
    assert kernel in error.splitlines()[0]


def test_a_killed_process_leaves_every_request_in_flight_and_none_it_finished(
    service: RunningService, tmp_path: Path, inductor_cache: Path
) -> None:
    journal, _, _ = _die(service, tmp_path, "killed", inductor_cache, signal.SIGKILL)
    out = _recover(service, journal, inductor_cache)
    assert out["stats"]["requests_recovered"] == 2

    rows = _requests(service, ["big-1", "side-1"])
    for rid in ("big-1", "side-1"):
        row = rows[rid]
        assert (row["status"], row["outcome"], row["traffic_class"]) == ("error", "error", "interactive")
        assert row["error"].startswith(
            "process died while this request was in flight (one of 2 in flight when it died), with no fatal-error "
            "report: killed by a signal"
        )
        attrs = dict(row["attrs"])
        assert attrs["died"] == "no report"
        assert attrs["in_flight"] == "2"
        assert attrs["ts"] == "last sign of life"
        assert list(row["graph_keys"]) == []
    # Finished requests are not in flight: ok-0 and ok-1 are the dead process's own rows, not recovered errors.
    finished = "SELECT 1 FROM inferensics.requests WHERE request_id IN ('ok-0', 'ok-1') AND status = 'error'"
    assert service.client().sql(finished).height == 0


def test_a_killed_process_says_how_many_finished_requests_it_had_not_exported(
    service: RunningService, tmp_path: Path, inductor_cache: Path
) -> None:
    """SIGKILL (the out-of-memory killer) takes the rows the process finished but had not exported yet with it; the
    next tracker counts them from the dead process's journal (requests begun, less in flight, less delivered)."""
    journal, _, _ = _die(service, tmp_path, "unexported", inductor_cache, signal.SIGKILL)
    done = _run(service, journal, "recover", inductor_cache)
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads(done.stdout.strip().splitlines()[-1])["stats"]
    assert (stats["requests_lost"], stats["requests_recovered"], stats["dead_processes"]) == (5, 1, 1)
    (line,) = [x for x in done.stderr.splitlines() if "requests_lost" in x]
    assert "died (no report) with 1 request(s) in flight: big-1; exported as error rows; and 5 finished" in line
    rows = _requests(service, ["ok-0", "ok-1", "big-1"])
    assert sorted(rows) == ["big-1", "ok-0", "ok-1"]
    lost = "SELECT 1 FROM inferensics.requests WHERE request_id LIKE 'lost-%'"
    assert service.client().sql(lost).height == 0  # they are lost indeed
    # The recovering process says so in its health records (its last, at its shutdown), and the Hosts page's
    # query reads them: the host's loss is not only a log line.
    process = f"{json.loads(done.stdout.strip().splitlines()[-1])['pid']}@"
    health = _rows(
        service,
        f"SELECT requests_lost, stopped FROM inferensics.{SdkHealthEvent.TABLE.name} "
        f"WHERE host = 'restarted' AND startsWith(process, '{process}') ORDER BY ts DESC LIMIT 1",
        1,
    )
    assert health.rows() == [(5, True)]
    end = datetime.now(UTC) + timedelta(minutes=1)
    frame = service.client().query(
        "host_health", start=(end - timedelta(hours=1)).isoformat(), end=end.isoformat(), host="restarted"
    )
    (row,) = frame.filter(pl.col("process").str.starts_with(process)).iter_rows(named=True)
    assert (row["requests_lost"], row["requests_lost_in_range"], row["quiet"]) == (5, 5, False)


def test_rows_a_killed_process_held_in_its_store_buffer_are_counted_lost(tmp_path: Path, inductor_cache: Path) -> None:
    """Single-process mode: the store exporter buffers request rows for a batch insert (``batch_rows``); the ones a
    SIGKILL took from its buffer are counted by the next tracker, and the rows it recovered and delivered itself are
    not counted again when it is killed in turn."""
    dsn = f"chdb://{tmp_path / 'store'}"
    journal = tmp_path / "journal"
    died = _run(dsn, journal, "unexported", inductor_cache, timeout=300)
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    died = _run(dsn, journal, "unexported", inductor_cache, timeout=300)  # recovers the first, then is killed too
    assert died.returncode == -signal.SIGKILL, died.stderr[-3000:]
    assert "big-1; exported as error rows; and 5 finished request(s)" in died.stderr
    done = _run(dsn, journal, "recover", inductor_cache, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    stats = json.loads(done.stdout.strip().splitlines()[-1])["stats"]
    # The second process's five: the first's big-1, which the second recovered, went out with its ok-0 and ok-1.
    assert (stats["requests_lost"], stats["requests_recovered"], stats["dead_processes"]) == (5, 1, 1)
    with Store.open(dsn) as store:
        rows = store.query_rows("SELECT request_id, status FROM requests ORDER BY request_id, status")
    assert [tuple(r) for r in rows] == [("big-1", "error")] * 2 + [("ok-0", "ok")] * 2 + [("ok-1", "ok")] * 2


def test_a_forked_child_leaves_the_parents_journal_alone(
    service: RunningService, tmp_path: Path, inductor_cache: Path
) -> None:
    journal, stdout, _ = _die(service, tmp_path, "forked", inductor_cache, signal.SIGKILL)
    child = json.loads(stdout.strip().splitlines()[-1])["child"]
    try:
        os.kill(child, 0)  # the child outlives its parent, in a request of its own
        # Its copy of the parent's journal file would hold the lock (then 0 recovered), and its request would
        # have taken the parent's slot.
        out = _recover(service, journal, inductor_cache)
        assert out["stats"]["requests_recovered"] == 1
        rows = _requests(service, ["parent-1"])
        assert rows["parent-1"]["status"] == "error"
        # Exported in the same batch as parent-1 had it been journaled: read once, no wait.
        assert service.client().sql("SELECT 1 FROM inferensics.requests WHERE request_id = 'child-1'").height == 0
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(child, signal.SIGKILL)


def test_a_live_process_journal_is_left_alone(tmp_path: Path) -> None:
    live = Journal(tmp_path, {"process": "p", "destination": "store a"})
    try:
        live.end(live.begin(b"r1"))
        live.begin(b"r2")
        # Held by a living process (this one): not recovered.
        assert recover_dead(tmp_path, "store a") == []
        assert live.path.exists()
    finally:
        live.close()
    assert not live.path.exists()
    assert not live.stacks_path.exists()


def test_a_journal_reads_back_exactly_the_ids_in_flight(tmp_path: Path) -> None:
    """A slot reused by a shorter id keeps nothing of the longer one before it; an id longer than a slot's id
    bytes is cut to them; a non-ASCII id comes back whole. The file copied while its process lives is what a death
    leaves (a copy holds no lock), and each recovered row says its guards are unknown."""
    live = Journal(tmp_path / "live", {"process": "p", "destination": "store a"})
    try:
        for i in range(SLOTS):  # every slot once, each with a long id, each ended
            live.end(live.begin(f"long-request-id-{i:04d}-".encode() * 8))
        short = live.begin(b"r1")  # slot 0 again
        assert short == HEADER_BYTES
        live.begin("req-é-2".encode())
        live.end(live.begin(b"done"))
        live.begin(b"x" * (SLOT_BYTES + 40))
        dead = tmp_path / "dead"
        dead.mkdir()
        (dead / "1-dead.journal").write_bytes(live.path.read_bytes())
    finally:
        live.close()
    (recovered,) = recover_dead(dead, "store a")
    assert [r.request_id for r in recovered.rows] == ["r1", "req-é-2", "x" * ID_BYTES]
    assert {r.guard_outcome for r in recovered.rows} == {"unknown"}
    assert {r.outcome for r in recovered.rows} == {"error"}
    assert recovered.rows[0].attrs["in_flight"] == "3"
    # Held until its rows are delivered (test_recovered_delivery.py), then removed.
    assert recovered.journal is not None
    assert (dead / "1-dead.journal").exists()
    for slot in recovered.slots:
        recovered.journal.settled(slot, DELIVERED)
    assert not (dead / "1-dead.journal").exists()


def test_a_journal_counts_the_finished_requests_its_exporter_had_not_delivered(tmp_path: Path) -> None:
    """Requests begun (over more than one lap of the ring), less those in flight, plus the dead process's own
    recovered rows, less the request rows delivered; unknown where its exporter reported no deliveries."""
    live = Journal(tmp_path / "live", {"process": "p", "destination": "store a", DELIVERIES: True})
    blind = Journal(tmp_path / "blind", {"process": "q", "destination": "store a"})
    try:
        for i in range(SLOTS + 44):
            slot = live.begin(f"r{i}".encode())
            if i not in (7, SLOTS + 40):  # two left in flight: r7's slot was taken again since, r296 was not
                live.end(slot)
            blind.end(blind.begin(f"r{i}".encode()))
        live.note_recovered(3)
        live.delivered(200)
        live.delivered(50)
        assert live.begun == SLOTS + 44
        dead = tmp_path / "dead"
        dead.mkdir()
        (dead / "1-dead.journal").write_bytes(live.path.read_bytes())
        (dead / "2-dead.journal").write_bytes(blind.path.read_bytes())
    finally:
        live.close()
        blind.close()
    first, second = recover_dead(dead, "store a")
    assert [r.request_id for r in first.rows] == [f"r{SLOTS + 40}"]
    assert first.lost == SLOTS + 44 - 1 + 3 - 250
    assert (second.rows, second.lost) == ([], None)
    assert first.journal is not None
    first.journal.release()


def test_a_damaged_journal_is_removed_and_recovery_goes_on(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    bad = tmp_path / "1-dead.journal"
    bad.write_bytes(b"\xff" * (HEADER_BYTES + 3 * SLOT_BYTES))
    assert recover_dead(tmp_path, "") == []
    assert not bad.exists()
    assert "crash journal" in caplog.text
    assert "unreadable" in caplog.text


def test_the_journal_folder_setting() -> None:
    assert JOURNAL_DIR_ENV == conftest.JOURNAL_DIR_ENV  # the suite's sessions keep their journals to themselves
    assert journal_dir("off") is None
    assert journal_dir("") is None
    assert journal_dir("/x/j") == Path("/x/j")


def test_a_fatal_report_names_the_crashed_thread_and_its_frames() -> None:
    text = (
        "Fatal Python error: Segmentation fault\n\n"
        "Thread 0x00007f0000000001 (most recent call first):\n"
        '  File "/usr/lib/python3.11/threading.py", line 331 in wait\n\n'
        "Current thread 0x00007f00000000ff (most recent call first):\n"
        '  File "/tmp/torchinductor_u/ab/cabcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop.py", line 90 in call\n'
        '  File "/srv/app.py", line 12 in handle\n\n'
        "Extension modules: torch._C (total: 1)\n"
    )
    report = parse_fatal_report(text)
    assert report.error == "Segmentation fault"
    assert report.current_thread == 0x7F00000000FF
    assert [f[1] for f in report.stacks[0x7F00000000FF]] == [90, 12]
    assert report.text[0x7F00000000FF].endswith("line 12 in handle")


@given(st.text())
def test_a_fatal_report_parser_takes_any_text(text: str) -> None:
    report = parse_fatal_report(text)
    assert report.current_thread is None or report.current_thread in report.stacks
