"""Launch configurations measured on an H200, read from ``h200_tables.json`` beside this module.

``benchmarks/bench_kernels.py --sweep --write-tables PATH`` times every candidate configuration of each kernel
against its peer (CUDA-graph replays, shuffled rounds) and writes the fastest per shape bucket, with the
environment it was measured in. The kernels consult these entries only on compute capability 9.0 and never in
Triton's interpreter; any other shape or GPU falls back to Triton's autotuner. A missing or unreadable file
means no measured entries (said once on stderr), never a failed launch.
"""

from __future__ import annotations

import functools
import json
import sys
from pathlib import Path
from typing import Any

TABLES_FILE = Path(__file__).with_name("h200_tables.json")
"""Where the measured tables live (written by the benchmark's sweep)."""


@functools.cache
def h200_tables() -> dict[str, Any]:
    """The measured tables (``{}`` when the file is missing or unreadable)."""
    try:
        data = json.loads(TABLES_FILE.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        print(f"inferensics.kernels: ignoring {TABLES_FILE.name} ({exc}); using the autotuner", file=sys.stderr)
        return {}
    return data if isinstance(data, dict) else {}


def entries(op: str) -> list[list[Any]]:
    """Rows of ``op``'s table (each a list: the key fields, then the configuration)."""
    rows = h200_tables().get(op, [])
    return [r for r in rows if isinstance(r, list)] if isinstance(rows, list) else []
