"""``compute-sanitizer --tool memcheck`` over each Triton kernel, where the GPU host supports it.

Probed first: some hosts have no sanitizer, and on some it answers "device not supported" (error 999);
then the test is skipped with what the probe said.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = [pytest.mark.gpu, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]


def _probe() -> str | None:
    tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    if not Path(tool).exists():
        return "compute-sanitizer not found"
    run = subprocess.run(
        [tool, "--tool", "memcheck", sys.executable, "-c", "import torch; torch.ones(1, device='cuda').sum().item()"],
        capture_output=True, text=True, timeout=180, check=False,
    )  # fmt: skip
    out = run.stdout + run.stderr
    if run.returncode != 0 or "ERROR SUMMARY: 0 errors" not in out:
        return f"probe failed (exit {run.returncode}): {out.strip().splitlines()[-1] if out.strip() else ''}"
    return None


@pytest.mark.skipif(not torch.cuda.is_available(), reason="memcheck needs a GPU")
def test_memcheck_finds_no_error_in_any_triton_kernel() -> None:
    why = _probe()
    if why is not None:
        pytest.skip(f"compute-sanitizer unusable here: {why}")
    tool = shutil.which("compute-sanitizer") or "/usr/local/cuda/bin/compute-sanitizer"
    env = {**os.environ, "INFERENSICS_KERNELS_FIXED_CONFIG": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    run = subprocess.run(
        [tool, "--tool", "memcheck", "--leak-check", "no", sys.executable, "-m", "tests.kernels.memcheck_driver"],
        capture_output=True, text=True, timeout=900, check=False, cwd=ROOT, env=env,
    )  # fmt: skip
    out = run.stdout + run.stderr
    print(out[-3000:])
    assert run.returncode == 0, out[-3000:]
    assert "ERROR SUMMARY: 0 errors" in out
    assert out.count(" samples") == 5
