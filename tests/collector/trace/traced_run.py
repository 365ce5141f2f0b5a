"""Run a program in a fresh Python process with ``TORCH_TRACE`` on and its own, empty Inductor cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_traced(work: Path, program: str, *args: str) -> Path:
    """Write ``program`` into ``work`` and run it there with ``args``; return the TORCH_TRACE folder it wrote."""
    script = work / "program.py"
    script.write_text(program, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TORCH", "PYTORCH"))}
    env |= {
        "TORCH_TRACE": str(work / "trace"),
        "TORCHINDUCTOR_CACHE_DIR": str(work / "inductor_cache"),
        "TORCHINDUCTOR_COMPILE_THREADS": "1",  # no worker pool to start on a small machine
    }
    command = [sys.executable, str(script), *args]
    run = subprocess.run(command, cwd=work, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert run.returncode == 0, run.stderr[-4000:]
    return work / "trace"
