"""Run a small program under ``TORCH_TRACE`` in a fresh process (tests): the structured trace a real compile
writes, with Inductor's cache private to the run."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_traced(program: str, work: Path) -> Path:
    """Write ``program`` into ``work`` as program.py, run it there with ``TORCH_TRACE`` on, and return the
    trace folder (the program must exit 0: its stderr tail is the assertion message otherwise)."""
    (work / "program.py").write_text(program, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH", "PYTORCH", "INFERENSICS_KERNELS"))}
    env |= {
        "TORCH_TRACE": str(work / "trace"),
        "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor_cache"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",
    }
    run = subprocess.run(
        [sys.executable, "program.py"], cwd=work, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    assert run.returncode == 0, run.stderr[-4000:]
    return work / "trace"
