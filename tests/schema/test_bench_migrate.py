"""``benchmarks/bench_migrate.py`` runs: one round of both ways of creating a store, in a fresh process."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_one_round_prints_both_ways_and_their_ratio(tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "bench_migrate.py"), "--rounds", "1", "--dir", str(tmp_path)],
        capture_output=True, text=True, cwd=ROOT, timeout=300, check=False,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    counts = {
        m.group(1): int(m.group(2)) for m in re.finditer(r"^(one pass|in turn)\s+(\d+) statements", proc.stdout, re.M)
    }
    assert set(counts) == {"one pass", "in turn"}, proc.stdout
    assert counts["one pass"] < counts["in turn"]
    assert re.search(r"^in turn / one pass, per round: median [\d.]+x", proc.stdout, re.M), proc.stdout
