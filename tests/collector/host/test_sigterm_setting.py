"""``SdkConfig.sigterm_handler`` / ``$INFERENSICS_SIGTERM_HANDLER`` turn the SDK's SIGTERM handler off: a process
that wants SIGTERM to end it at once (or sets its own handler later) is left with SIGTERM's default action."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from inferensics.collector.host import ConfigError, SdkConfig
from inferensics.collector.host.config import SIGTERM_HANDLER_ENV

SCRIPT = textwrap.dedent(
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

    def handler():
        current = signal.getsignal(signal.SIGTERM)
        return "default" if current == signal.SIG_DFL else getattr(current, "__name__", repr(current))

    quiet = dict(flush_interval_s=3600.0, health_interval_s=0, journal_dir="off")
    instrument(exporter=ToFile(), host="h", model="m", config=SdkConfig(**quiet))
    print("first", handler(), flush=True)
    # The process's environment says off (SdkConfig.from_env, as instrument() reads it without a config).
    tracker = instrument(exporter=ToFile(), host="h", model="m", config=SdkConfig.from_env(**quiet))
    print("second", handler(), flush=True)
    for i in range(3):
        with tracker.request(f"r{i}"):
            pass
    os.kill(os.getpid(), signal.SIGTERM)  # the default action: the process ends here, nothing flushed
    time.sleep(60)
    sys.exit(3)
    """
)


@pytest.mark.slow
def test_the_sigterm_handler_can_be_turned_off(tmp_path: Path) -> None:
    out = tmp_path / "exported.txt"
    env = {**os.environ, "PYTHONWARNINGS": "ignore", SIGTERM_HANDLER_ENV: "off"}
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(out)], env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == -signal.SIGTERM, proc.stderr[-3000:]
    # The first tracker (setting on, given in code) set the SDK's handler; the second (off) put the default back.
    assert proc.stdout.split("\n")[:2] == ["first _on_sigterm", "second default"]
    assert not out.exists()  # ended by SIGTERM's default action: the SDK did not flush


@pytest.mark.parametrize(("text", "value"), [("0", False), ("off", False), ("False", False), ("1", True), ("on", True)])
def test_the_sigterm_setting_reads_its_environment_variable(text: str, value: bool) -> None:
    assert SdkConfig.from_env({SIGTERM_HANDLER_ENV: text}).sigterm_handler is value
    assert SdkConfig.from_env({}).sigterm_handler is True


def test_a_bad_sigterm_setting_names_the_variable() -> None:
    with pytest.raises(ConfigError) as info:
        SdkConfig.from_env({SIGTERM_HANDLER_ENV: "sometimes"})
    assert str(info.value) == (
        "$INFERENSICS_SIGTERM_HANDLER: 'sometimes' is not on or off (1/0, true/false, on/off, yes/no)"
    )
    with pytest.raises(ConfigError) as info:
        SdkConfig(sigterm_handler="no")  # type: ignore[arg-type]
    assert str(info.value) == "sigterm_handler must be True or False, got 'no'"
