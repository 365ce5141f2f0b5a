"""Well-formed edits of a kernel evidence file (tests): its digests recomputed, as an editor who knows the
format, or a host that measured elsewhere, would leave it."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from inferensics.kernels.qualify import EVIDENCE_BODY
from inferensics.kernels.registry import STATE_BODY, canonical_digest

OTHER_DEVICE: Final = "NVIDIA H100 80GB HBM3 (sm_90)"
"""A device no CI host has."""


def redigest(doc: Any) -> Any:
    """``doc`` with both digests (the registry state's and the file's) recomputed over what it now holds;
    anything not shaped like evidence is left as it is."""
    if not isinstance(doc, dict):
        return doc
    reg = doc.get("registry")
    if isinstance(reg, dict):
        reg["digest"] = canonical_digest({k: reg.get(k) for k in STATE_BODY})
    doc["digest"] = canonical_digest({k: doc.get(k) for k in EVIDENCE_BODY})
    return doc


def measured_elsewhere(path: Path) -> dict[str, Any]:
    """The evidence file at ``path`` as if measured on :data:`OTHER_DEVICE` (well formed)."""
    doc: dict[str, Any] = json.loads(path.read_text())
    doc["environment"]["device"], doc["options"]["device"] = OTHER_DEVICE, "cuda"
    return dict(redigest(doc))


@contextlib.contextmanager
def kept_registry() -> Iterator[None]:
    """Puts the process registry's policy and evidence back after what qualifies or applies evidence through
    the command line (it runs in this process)."""
    from inferensics import kernels

    reg = kernels.registry()
    saved, evidence = reg.policy(), list(reg.evidence)
    try:
        yield
    finally:
        for op in reg.ops.values():
            op.bucket_priority.clear()
            op.refused.clear()
        reg.apply_policy(saved)
        reg.evidence[:] = evidence
