"""Snapshot comparison for report text and chart specs (``INFERENSICS_UPDATE_SNAPSHOTS=1`` rewrites them)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

SNAPSHOTS = Path(__file__).parent / "snapshots"


def assert_snapshot(name: str, text: str) -> None:
    """``text`` equals the committed snapshot ``name`` (written when updating is asked for)."""
    path = SNAPSHOTS / name
    if os.environ.get("INFERENSICS_UPDATE_SNAPSHOTS") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    assert path.exists(), f"missing snapshot {path}: run with INFERENSICS_UPDATE_SNAPSHOTS=1 and review it"
    assert text == path.read_text(encoding="utf-8"), f"{name} differs from its snapshot"


def assert_json_snapshot(name: str, value: Any) -> None:
    """``value`` as canonical JSON equals the snapshot ``name``."""
    assert_snapshot(name, json.dumps(value, indent=1, sort_keys=True) + "\n")
