"""Fault injection on real filesystems: every acknowledged span is stored exactly once after recovery, with no
manual step.

Method: a small tmpfs is mounted (``mount -t tmpfs -o size=...``) under the test's directory for the spool or
the store and filled with a preallocated file (``os.posix_fallocate``) until the service's writes fail with
ENOSPC / the engine's NOT_ENOUGH_SPACE; "unwritable" is ``chattr +i`` on every directory of the store (which
stops root too). Mounting needs root (CI runs as root); where it is impossible the tests skip and say why.
Cancelled inserts are the engine's own ``KILL QUERY`` on the writer's queries (the test-only fault control
starts the killer, since the admin SQL endpoint refuses KILL). The store "down" switch of the fault control
(tests/collector/service/test_faults.py) keeps the writer from draining the spool while it fills.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.collector.service.harness import ADMIN, RunningService, new_service
from tests.collector.service.test_faults import batch, post, set_store_down, stored_ids, wait_drained
from tests.collector.service.test_otlp_answers import otlp_refusal

pytestmark = pytest.mark.slow

Mount = Callable[[Path, str], Path]


@pytest.fixture
def tmpfs() -> Iterator[Mount]:
    """Mount a tmpfs of a given size on a directory; unmounted (and made mutable) at the end."""
    mounted: list[Path] = []

    def mount(directory: Path, size: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        r = subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(directory)],
            capture_output=True,
            text=True,
            check=False,
        )
        if r.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs to fill (needs root or CAP_SYS_ADMIN): {r.stderr.strip()}")
        mounted.append(directory)
        return directory

    yield mount
    for directory in reversed(mounted):
        subprocess.run(["chattr", "-R", "-i", str(directory)], capture_output=True, check=False)
        subprocess.run(["umount", "-l", str(directory)], capture_output=True, check=False)


def fill(directory: Path, leave: int) -> Path:
    """Preallocate a file that leaves about ``leave`` bytes free on ``directory``'s filesystem."""
    stat = os.statvfs(directory)
    free = stat.f_bavail * stat.f_frsize
    filler = directory / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        os.posix_fallocate(fd, 0, max(1, free - leave))
    finally:
        os.close(fd)
    return filler


def metric(svc: RunningService, name: str) -> float:
    return svc.client().metrics().get(f"inferensics_collector_{name}", 0.0)


def wait_for(check: Callable[[], bool], what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def set_immutable(directory: Path, on: bool) -> None:
    dirs = [directory, *(p for p in directory.rglob("*") if p.is_dir())]
    for d in dirs:
        subprocess.run(["chattr", "+i" if on else "-i", str(d)], capture_output=True, check=False)


def test_spool_disk_full_answers_503_and_loses_nothing_acknowledged(tmp_path: Path, tmpfs: Mount) -> None:
    tmpfs(tmp_path / "spool", "4m")
    svc = new_service(tmp_path, fault_control="1", retry_after_s="2").start()
    try:
        set_store_down(svc.url, True)
        filler = fill(svc.spool_dir, 300_000)
        acked: list[str] = []
        refused: list[str] = []
        with httpx.Client(timeout=30) as http:
            for k in range(60):
                ids, body = batch("full", k * 50, 50)
                r = post(http, svc.url, body)
                if r.status_code == 200:
                    acked += ids
                    continue
                assert r.status_code == 503, r.text
                assert r.headers["Retry-After"] == "2"
                assert "filesystem is full" in otlp_refusal(r)
                refused += ids
                if len(refused) >= 150:
                    break
            assert refused, "the spool filesystem never filled"
            filler.unlink()  # space comes back; the store is still down
            for k in range(100, 105):  # these went behind the partial record before the fix, and were lost
                ids, body = batch("after", k * 50, 50)
                r = post(http, svc.url, body)
                assert r.status_code == 200, r.text
                acked += ids
        set_store_down(svc.url, False)
        client = svc.client()
        wait_drained(client)
        stored = stored_ids(client)
        assert stored == Counter(acked)
        assert not set(refused) & set(stored)
        metrics = client.metrics()
        assert metrics['inferensics_collector_rejected_total{reason="spool_full",unit="request"}'] == len(refused) // 50
        assert metrics["inferensics_collector_spool_damaged_bytes_total"] == 0  # the partial records were cut
    finally:
        svc.stop()


@pytest.mark.parametrize("fault", ["full", "immutable"])
def test_store_disk_full_or_unwritable_is_an_outage_not_poison(tmp_path: Path, tmpfs: Mount, fault: str) -> None:
    db = tmpfs(tmp_path / "db", "256m")
    svc = new_service(tmp_path).start()
    try:
        client = svc.client()
        acked: list[str] = []
        with httpx.Client(timeout=30) as http:
            ids, body = batch("warm", 0, 20)
            assert post(http, svc.url, body).status_code == 200
            acked += ids
            wait_drained(client)
            filler = fill(db, 32_000) if fault == "full" else None
            if fault == "immutable":
                set_immutable(db, True)
            for k in range(1, 11):
                ids, body = batch(fault, k * 50, 50)
                assert post(http, svc.url, body).status_code == 200
                acked += ids
            # more refusals than the quarantine limit (5), all while the store answers SELECT 1
            wait_for(lambda: metric(svc, "store_errors_total") >= 7, "the writer's failed inserts")
            assert httpx.get(f"{svc.url}/readyz").status_code == 503
            status = client.status()
            assert status["store"]["ok"] is False
            assert status["spool"]["files"] >= 1
            assert not list((svc.spool_dir / "quarantine").glob("*.seg"))
            assert metric(svc, "quarantined_segments_total") == 0
            if filler is not None:
                filler.unlink()
            else:
                set_immutable(db, False)
        wait_drained(client)
        assert stored_ids(client) == Counter(acked)
        assert httpx.get(f"{svc.url}/readyz").status_code == 200
    finally:
        set_immutable(tmp_path / "db", False)
        svc.stop()


def test_cancelled_inserts_are_retried_not_quarantined(tmp_path: Path) -> None:
    svc = new_service(tmp_path, fault_control="1").start()
    try:
        client = svc.client()
        r = httpx.post(
            f"{svc.url}/api/v1/_faults", json={"kill_inserts": 3}, headers={"Authorization": f"Bearer {ADMIN}"}
        )
        assert r.status_code == 200, r.text
        acked: list[str] = []
        with httpx.Client(timeout=30) as http:
            for k in range(400):
                ids, body = batch("kill", k * 50, 50)
                assert post(http, svc.url, body).status_code == 200
                acked += ids
                if metric(svc, "store_errors_total") >= 3:
                    break
                time.sleep(0.02)
        assert metric(svc, "store_errors_total") >= 1, "no insert was cancelled"
        wait_drained(client)
        assert stored_ids(client) == Counter(acked)
        assert metric(svc, "quarantined_segments_total") == 0
        assert "QUERY_WAS_CANCELLED" in svc.log.read_text()
    finally:
        svc.stop()


def test_sigkill_with_retries_stores_every_span_once(tmp_path: Path) -> None:
    """Senders re-send the same body until it is answered 200 (what OTLP exporters do), across a SIGKILL and a
    restart; then the last bodies are re-sent once more as if their answers had been lost."""
    svc = new_service(tmp_path).start()
    acked: list[str] = []
    answered: list[bytes] = []
    stop = threading.Event()
    restarted = threading.Event()

    def sender(run: str) -> None:
        k = 0
        with httpx.Client(timeout=10) as http:
            while not stop.is_set():
                ids, body = batch(run, k * 100, 100)
                k += 1
                while True:  # retry this body until it is acknowledged
                    try:
                        r = post(http, svc.url, body)
                    except httpx.HTTPError:
                        restarted.wait(60)
                        continue
                    if r.status_code == 200:
                        acked.extend(ids)
                        answered.append(body)
                        break
                    time.sleep(0.2)

    threads = [threading.Thread(target=sender, args=(f"kill{n}",)) for n in range(2)]
    try:
        for t in threads:
            t.start()
        wait_for(lambda: len(acked) >= 3000, "3000 acknowledged spans", 120)
        svc.kill()
        shutil.copy(svc.log, tmp_path / "before-kill.log")
        svc.start()
        restarted.set()
        wait_for(lambda: len(acked) >= 6000, "senders to go on after the restart", 120)
        stop.set()
        for t in threads:
            t.join(60)
        with httpx.Client(timeout=30) as http:
            for body in answered[-4:]:  # answers lost: sent again
                assert post(http, svc.url, body).status_code == 200
        client = svc.client()
        wait_drained(client)
        stored = stored_ids(client)
        assert set(stored) == set(acked)
        assert set(stored.values()) == {1}, [i for i, n in stored.items() if n > 1][:5]
        assert metric(svc, "duplicate_spans_total") >= 400
    finally:
        stop.set()
        restarted.set()
        svc.stop()
