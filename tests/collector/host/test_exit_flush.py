"""A script that serves a few requests and ends without ``tracker.shutdown()`` still delivers them: the
active tracker is flushed and shut down at interpreter exit (the README's snippet has no shutdown)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

SCRIPT = textwrap.dedent(
    """
    import sys
    from inferensics.collector.host import NullExporter, instrument

    class ToFile(NullExporter):
        def export_request(self, request, children):
            with open(sys.argv[1], "a") as fh:
                fh.write(request.request_id + "\\n")

    tracker = instrument(exporter=ToFile(), host="h", model="m")
    for i in range(3):
        with tracker.request(f"r{i}"):
            pass
    """
)


@pytest.mark.slow
def test_requests_are_delivered_at_exit(tmp_path: Path) -> None:
    out = tmp_path / "exported.txt"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(out)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.read_text().split() == ["r0", "r1", "r2"]


SIGTERM_SCRIPT = textwrap.dedent(
    """
    import os
    import signal
    import sys
    import time
    from inferensics.collector.host import NullExporter, SdkConfig, instrument

    class ToFile(NullExporter):
        def export_request(self, request, children):
            with open(sys.argv[1], "a") as fh:
                fh.write(request.request_id + "\\n")

    # the background thread would drain only in an hour: every record is still in the SDK at the signal
    config = SdkConfig(flush_interval_s=3600.0, health_interval_s=0, journal_dir=sys.argv[2])
    tracker = instrument(exporter=ToFile(), host="h", model="m", config=config)
    for i in range(3):
        with tracker.request(f"r{i}"):
            pass
    tracker.request("in-flight").__enter__()  # a request the server is still in when it is stopped
    os.kill(os.getpid(), signal.SIGTERM)  # as a supervisor stops the server
    time.sleep(60)
    sys.exit(3)  # not reached: the process ends by the signal
    """
)


@pytest.mark.slow
def test_a_server_stopped_by_sigterm_delivers_what_it_served(tmp_path: Path) -> None:
    """What it finished is exported before it ends; the request it was still in is left in its crash journal, for
    the next tracker to report as one the process died in."""
    from inferensics.collector.host.journal_recovery import recover_dead

    out, journals = tmp_path / "exported.txt", tmp_path / "journal"
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-c", SIGTERM_SCRIPT, str(out), str(journals)], env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGTERM, proc.stderr[-3000:]  # it still ends as SIGTERM ends a process
    assert (out.read_text().split() if out.exists() else []) == ["r0", "r1", "r2"]
    assert [row.request_id for dead in recover_dead(journals, "") for row in dead.rows] == ["in-flight"]
