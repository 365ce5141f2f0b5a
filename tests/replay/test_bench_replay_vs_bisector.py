"""``benchmarks/bench_replay_vs_bisector.py`` imports and runs: its cheapest fault, both tools, in a fresh process.

What it got wrong: ``fp64_model`` and ``to_fp64`` moved to ``inferensics.bundle.tolerance`` and the benchmark, which
nothing ran, still imported them from the ladder: ``--help`` died with ImportError, so the product's only evidence
against torch's CompilerBisector could not be reproduced.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "benchmarks" / "bench_replay_vs_bisector.py"
CHEAPEST = "model softmax overflows"
"""A source-op fault: replay needs no compile, the bisector one eager round."""


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PYTHONWARNINGS": "ignore"}
    return subprocess.run(
        [sys.executable, str(BENCH), *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=600, check=False
    )


def test_help_imports_everything_it_uses() -> None:
    proc = _bench("--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "--only" in proc.stdout


@pytest.mark.slow
def test_the_cheapest_fault_runs_through_both_tools() -> None:
    proc = _bench("--only", CHEAPEST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    row = next(line for line in proc.stdout.splitlines() if line.startswith(CHEAPEST))
    assert "| ok source_op aten.exp" in row, row
    assert "replay:   1/1 right on category+op+line" in proc.stdout, proc.stdout
    assert "bisector: " in proc.stdout
