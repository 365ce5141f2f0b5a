"""The systemd units pass ``systemd-analyze verify`` (systemd's own checker) with no warning: unknown keys,
bad values and missing binaries are reported (the binary path is pointed at this checkout's command)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.deploy.layout import SYSTEMD

UNITS = sorted(SYSTEMD.glob("*.service"))
INSTALLED = "/opt/inferensics/venv/bin/inferensics"


def _verify(directory: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("systemd-analyze")
    assert tool, "systemd-analyze is missing: `make setup` installs it (Debian's systemd package)"
    units = sorted(str(p) for p in directory.glob("*.service"))
    return subprocess.run(
        [tool, "verify", "--man=no", *units], capture_output=True, text=True, timeout=60, check=False, cwd=directory
    )


def _copy(tmp_path: Path) -> Path:
    here = Path(sys.executable).parent / "inferensics"
    assert here.exists(), here
    for unit in UNITS:
        (tmp_path / unit.name).write_text(unit.read_text(encoding="utf-8").replace(INSTALLED, str(here)))
    return tmp_path


def test_units_verify_cleanly(tmp_path: Path) -> None:
    # the collector migrates the store itself before each start (ExecStartPre): no separate migrator unit
    assert {u.name for u in UNITS} == {"inferensics-collector.service", "inferensics-dashboard.service"}
    done = _verify(_copy(tmp_path))
    assert done.returncode == 0, done.stderr
    assert not done.stderr.strip(), done.stderr


def test_a_broken_unit_is_reported(tmp_path: Path) -> None:
    _copy(tmp_path)
    unit = tmp_path / "inferensics-collector.service"
    unit.write_text(unit.read_text(encoding="utf-8").replace("Restart=always", "Restart=sometimes"))
    done = _verify(tmp_path)
    assert "inferensics-collector.service:" in done.stderr
    assert "sometimes" in done.stderr


def test_units_read_the_environment_file_the_example_documents() -> None:
    example = (SYSTEMD / "inferensics.env.example").read_text(encoding="utf-8")
    defined = {line.split("=", 1)[0] for line in example.splitlines() if line and not line.startswith("#")}
    for unit in UNITS:
        text = unit.read_text(encoding="utf-8")
        assert "EnvironmentFile=/etc/inferensics/inferensics.env" in text
        used = {w[2:-1] for w in text.split() if w.startswith("${") and w.endswith("}")}
        assert used <= defined, f"{unit.name} uses {sorted(used - defined)} that the example does not define"
