"""A script that serves a few requests and ends without ``tracker.shutdown()`` still delivers them: the
active tracker is flushed and shut down at interpreter exit (the README's snippet has no shutdown)."""

from __future__ import annotations

import os
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
