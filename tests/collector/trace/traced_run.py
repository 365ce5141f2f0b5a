"""Run a program in a fresh Python process with ``TORCH_TRACE`` on and its own, empty Inductor cache."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
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


RECOMPILING = """\
import sys

import torch

torch._dynamo.config.automatic_dynamic_shapes = False
torch._dynamo.config.recompile_limit = 64


@torch.compile
def f(x):
    return torch.mm(x, x)


for n in sys.argv[1:]:
    f(torch.ones(int(n), int(n)))
"""
"""One frame, static shapes, a matrix product (Inductor's extern kernel: no C++ build)."""

RECOMPILE_REASON = "tensor 'x' size mismatch at index 0. expected N, actual N"
"""The pattern (``inferensics.analytics.reasons``) of every recompile reason :data:`RECOMPILING` logs."""


def run_recompiling(work: Path, sizes: Sequence[int]) -> Path:
    """Run :data:`RECOMPILING` for ``sizes`` (a compile, then a recompile per further size), all in one hour:
    it first waits out an hour's last minute. Return the TORCH_TRACE folder it wrote."""
    now = datetime.now(UTC)
    if now.minute == 59:
        time.sleep(61 - now.second)
    return run_traced(work, RECOMPILING, *map(str, sizes))
