"""Recording events to Arrow imports no pandas: ``pa.array`` over Python lists imported it on its first call, about
0.3 s on a serving host's first recorded verdict (``events_to_arrow`` now builds its columns from buffers)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def test_recording_events_does_not_import_pandas() -> None:
    """A verdict and a request record to Arrow, in a fresh interpreter: pandas stays unimported."""
    script = textwrap.dedent(
        """
        import sys
        from datetime import UTC, datetime
        from inferensics.schema.arrow import events_to_arrow
        from inferensics.schema.events import ReplayResultEvent, RequestEvent
        now = datetime.now(UTC)
        events_to_arrow(ReplayResultEvent, [ReplayResultEvent(ts=now, replay_id="r", request_id="q", op="aten.log")])
        events_to_arrow(RequestEvent, [RequestEvent(request_id="q", ts=now, host="h", model="m", hw_pool="p",
                                                    traffic_class="t", attrs={"k": "v"})])
        print("pandas" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-P", "-c", script], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"
