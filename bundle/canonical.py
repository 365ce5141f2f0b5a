"""Canonical JSON and digests: the same data always gives the same bytes, so an unchanged rebuild gives the
same bundle id (``json.dumps(sort_keys=True, separators=(",", ":"))``, UTF-8, no NaN)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any


def canonical_json(value: Any) -> bytes:
    """``value`` as canonical JSON bytes (sorted keys, compact separators, UTF-8, NaN refused)."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def sha256_hex(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def digest_json(value: Any) -> str:
    """Hex sha256 of ``value``'s canonical JSON."""
    return sha256_hex(canonical_json(value))


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    """Hex sha256 of a file's bytes, read in chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while block := f.read(chunk):
            h.update(block)
    return h.hexdigest()
