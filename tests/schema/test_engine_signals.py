"""Opening an embedded store leaves the process's handling of fatal signals as it was.

Each check runs in a fresh interpreter: chDB installs its handlers on its first load in a process only, and
this test process has usually loaded it already.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from inferensics.schema import engine_signals

PROBE = textwrap.dedent(
    """
    import faulthandler, json, os, signal, sys
    from inferensics.schema import engine_signals
    from inferensics.schema.store import Store
    if sys.argv[2] == "faulthandler":
        faulthandler.enable()
    before = engine_signals.dispositions()
    with Store.open(sys.argv[1]) as store:
        store.query_rows("SELECT 1")
    after = engine_signals.dispositions()
    assert "chdb" in sys.modules
    handler = engine_signals.HANDLER_BYTES
    moved = [signal.Signals(s).name for s in before if before[s][:handler] != after[s][:handler]]
    tstp_default = after[signal.SIGTSTP][:handler] == bytes(handler)  # SIG_DFL is the null handler
    print(json.dumps({"moved": moved, "tstp_default": tstp_default}), flush=True)
    os.abort()
    """
)


def _probe(tmp_path: Path, mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROBE, f"chdb://{tmp_path / 'store'}", mode],
        capture_output=True, text=True, timeout=120, check=False,  # a hang guard: the old code hung minutes
    )  # fmt: skip


def test_a_process_that_opened_a_store_keeps_its_handlers_and_dies_at_once(tmp_path: Path) -> None:
    done = _probe(tmp_path, "plain")
    assert done.returncode == -signal.SIGABRT, done.stderr[-2000:]
    out = json.loads(done.stdout.splitlines()[-1])
    assert out["moved"] == []
    assert out["tstp_default"]  # Ctrl-Z still stops the process
    assert "Received signal" not in done.stderr  # ClickHouse's crash handler did not run


def test_faulthandler_enabled_before_the_store_opened_still_reports(tmp_path: Path) -> None:
    done = _probe(tmp_path, "faulthandler")
    assert done.returncode == -signal.SIGABRT, done.stderr[-2000:]
    assert json.loads(done.stdout.splitlines()[-1])["moved"] == []
    assert "Fatal Python error: Aborted" in done.stderr


def test_restore_puts_back_a_handler_changed_since_and_names_it() -> None:
    saved = engine_signals.dispositions()
    previous = signal.getsignal(signal.SIGTSTP)
    try:
        signal.signal(signal.SIGTSTP, lambda *_: None)
        assert engine_signals.restore(saved) == [signal.SIGTSTP]
        assert (
            engine_signals.dispositions()[signal.SIGTSTP][: engine_signals.HANDLER_BYTES]
            == (saved[signal.SIGTSTP][: engine_signals.HANDLER_BYTES])
        )
        assert engine_signals.restore(saved) == []
    finally:
        signal.signal(signal.SIGTSTP, previous)
