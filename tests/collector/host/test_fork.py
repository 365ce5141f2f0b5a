"""A serving process that forks its workers after ``instrument()`` (``multiprocessing`` with ``fork``, gunicorn's
pre-fork model): the child neither exports the parent's records again nor hangs, a worker that makes its own tracker
records what it serves through the parent's tracker object too, and one that does not counts what it drops.

Each case runs in a child interpreter of its own (a fork inside the pytest process would copy pytest's state): the
exporter appends every request id it is handed to a file, one file per process, and is synchronous, so a record
handed to it in the child is in the child's file (no export thread to lose it)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

PRELUDE = textwrap.dedent(
    """
    import os
    import sys
    import threading

    from inferensics.collector.host import NullExporter, SdkConfig, instrument

    class ToFile(NullExporter):
        def __init__(self, path):
            self.path = path

        def export_request(self, request, children):
            with open(self.path, "a") as fh:
                fh.write(request.request_id + "\\n")

    out = sys.argv[1]
    # The background thread drains only at flush: what the parent served stays queued while it forks.
    config = SdkConfig(flush_interval_s=3600.0, health_interval_s=0, journal_dir="off")
    tracker = instrument(exporter=ToFile(f"{out}/parent.txt"), host="h", model="m", config=config)
    for i in range(3):
        with tracker.request(f"parent-{i}"):
            pass
    """
)


WAIT = textwrap.dedent(
    """
    import signal
    import time

    def wait_child(pid):  # a hung child is ended here, not left behind by the test's timeout
        for _ in range(600):
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                return status
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        raise SystemExit("the forked child hung")
    """
)


def _run(tmp_path: Path, body: str) -> None:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    script = PRELUDE + WAIT + textwrap.dedent(body)
    proc = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]


def _ids(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []


@pytest.mark.slow
def test_a_worker_with_its_own_tracker_exports_only_its_own_requests(tmp_path: Path) -> None:
    _run(
        tmp_path,
        """
        pid = os.fork()
        if pid == 0:
            worker = instrument(exporter=ToFile(f"{out}/child.txt"), host="h", model="m", config=config)
            with worker.request("child-0"):
                pass
            with tracker.request("child-1"):  # the parent's tracker object, as a module global is used in a worker
                pass
            worker.flush()
            os._exit(0)
        assert wait_child(pid) == 0
        tracker.shutdown()
        """,
    )
    assert _ids(tmp_path / "parent.txt") == ["parent-0", "parent-1", "parent-2"]
    assert _ids(tmp_path / "child.txt") == ["child-0", "child-1"]


@pytest.mark.slow
def test_a_worker_forked_while_the_sdk_thread_worked_does_not_hang(tmp_path: Path) -> None:
    # The SDK's thread holds the pipeline's lock while it drains; a fork at that moment copies it held, with no
    # thread left in the child to release it.
    _run(
        tmp_path,
        """
        held, release = threading.Event(), threading.Event()

        def drain():  # as the SDK's thread holds it
            with tracker.pipeline._lock:
                held.set()
                release.wait()

        threading.Thread(target=drain).start()
        held.wait()
        pid = os.fork()
        release.set()
        if pid == 0:
            worker = instrument(exporter=ToFile(f"{out}/child.txt"), host="h", model="m", config=config)
            with worker.request("child-0"):
                pass
            worker.flush()
            os._exit(0)
        assert wait_child(pid) == 0
        tracker.shutdown()
        """,
    )
    assert _ids(tmp_path / "child.txt") == ["child-0"]
    assert _ids(tmp_path / "parent.txt") == ["parent-0", "parent-1", "parent-2"]


@pytest.mark.slow
def test_a_worker_that_keeps_the_parents_tracker_counts_what_it_drops(tmp_path: Path) -> None:
    _run(
        tmp_path,
        """
        import json
        pid = os.fork()
        if pid == 0:
            for i in range(4):
                with tracker.request(f"child-{i}"):
                    pass
            tracker.flush()
            with open(f"{out}/child-stats.json", "w") as fh:
                json.dump(tracker.stats(), fh)
            os._exit(0)
        assert wait_child(pid) == 0
        tracker.shutdown()
        """,
    )
    import json

    stats = json.loads((tmp_path / "child-stats.json").read_text())
    assert (stats["dropped"], stats["dropped_request"], stats["requests"]) == (4, 4, 0)
    assert _ids(tmp_path / "parent.txt") == ["parent-0", "parent-1", "parent-2"]
