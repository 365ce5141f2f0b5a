"""``--export`` then ``--pack`` in a virtualenv holding only torch (CPU), pydantic and cryptography.

cryptography is the bundle part's one other dependency (signature verification); nothing else of the
project's stack (chDB, polars, pyarrow, Streamlit, OpenTelemetry, safetensors) is there. The venv is
made once with pip and kept in ``$INFERENSICS_REPLAY_MIN_VENV`` (default ``~/.cache/inferensics/replay-min-venv``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferensics.replay import write_pack
from tests.replay.test_pack import Built, _inputs, _request, built  # noqa: F401 - the module fixture

ROOT = Path(__file__).resolve().parents[2]
VENV = Path(os.environ.get("INFERENSICS_REPLAY_MIN_VENV", Path.home() / ".cache/inferensics/replay-min-venv"))
PARTS = ("replay", "bundle", "kernels", "schema")

pytestmark = pytest.mark.slow


def _venv_python() -> Path:
    python = VENV / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", "torch==2.13.0", "pydantic", "cryptography"],
                       check=True, timeout=1800)  # fmt: skip
    return python


def _tree(tmp: Path) -> Path:
    """The project's GPU-host parts as an ``inferensics`` package, plus the tests' model modules."""
    site = tmp / "site"
    (site / "inferensics").mkdir(parents=True)
    (site / "inferensics" / "__init__.py").write_text("")
    for part in PARTS:
        (site / "inferensics" / part).symlink_to(ROOT / part)
    (site / "tests").symlink_to(ROOT / "tests")
    return site


def test_pack_replays_in_a_venv_with_only_torch_and_pydantic(built: Built, tmp_path: Path) -> None:  # noqa: F811
    python = _venv_python()
    listed = subprocess.run([str(python), "-m", "pip", "list", "--format=json"], capture_output=True, text=True,
                            check=True).stdout  # fmt: skip
    names = {p["name"].lower() for p in json.loads(listed)}
    assert not names & {"chdb", "polars", "pyarrow", "streamlit", "opentelemetry-sdk", "safetensors", "numpy"}
    pack = write_pack(tmp_path / "pack", request=_request(built), inputs=_inputs(), bundle_dir=built.bundle)
    env = {"PATH": os.environ.get("PATH", ""), "HOME": os.environ.get("HOME", ""), "PYTHONPATH": str(_tree(tmp_path))}
    base = [str(python), "-m", "inferensics.replay", "--pack", str(pack), "--keyring", str(built.keyring)]
    # The bundle was built where triton is installed; this venv has none: an incompatible target, one line.
    refused = subprocess.run(base, capture_output=True, text=True, env=env, timeout=900, check=False)
    assert refused.returncode == 2, refused.stderr[-3000:]
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("error: bundle ")
    assert "built for another target" in last
    assert "--allow-incompatible" in last
    proc = subprocess.run(
        [*base, "--allow-incompatible", "--json", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    verdict = json.loads(proc.stdout.strip().splitlines()[-1])
    assert verdict["category"] == "decomposition"
    assert verdict["op"] == "aten.gelu"
    assert "recompiled from the recorded configuration (--allow-incompatible)" in verdict["summary"]
    assert verdict["evidence"]["recompiled"]
    assert (tmp_path / "out" / "repro.py").is_file()
