"""The compiler settings a bundle records: what is computed, not where this machine keeps things."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SETTINGS = (
    "import json; from inferensics.bundle import torch_adapter; print(json.dumps(torch_adapter.compiler_settings()[1]))"
)


def _settings_from(cwd: Path) -> dict[str, object]:
    proc = subprocess.run(
        [sys.executable, "-P", "-c", SETTINGS], cwd=cwd, capture_output=True, text=True, timeout=300, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    settings: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return settings


def test_every_setting_is_the_same_from_any_working_directory(tmp_path: Path) -> None:
    """``inferensics demo`` run from another directory rebuilt both release bundles (1 to 2 minutes): the
    bundle cache's key holds the digest of every setting, and ``inductor.xpu.cutlass_dir`` is the working
    directory torch was imported in."""
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    here, there = _settings_from(tmp_path / "a"), _settings_from(tmp_path / "b")
    assert {k: (v, there.get(k)) for k, v in here.items() if there.get(k) != v} == {}
    assert len(here) > 100
    assert not [k for k in here if k.endswith("cutlass_dir")]
