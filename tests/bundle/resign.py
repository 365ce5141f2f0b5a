"""Re-sign an altered manifest (tests): the way an attacker with a builder key, or a test of one factor,
makes a bundle whose identity differs in exactly one place."""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

from inferensics import bundle as b
from inferensics.bundle.manifest import MANIFEST_FILE, Manifest, group_digests


def mutated(manifest: Manifest, change: Callable[[dict[str, Any]], None]) -> Manifest:
    """A copy of ``manifest`` whose identity ``change`` altered in place (digests recomputed)."""
    identity = copy.deepcopy(manifest.identity)
    change(identity)
    digests = {**manifest.factor_digests, **group_digests(identity)}
    return manifest.model_copy(update={"identity": identity, "factor_digests": digests})


def resign(directory: Path, key: b.SigningKey, change: Callable[[dict[str, Any]], None]) -> Manifest:
    """Alter a bundle directory's identity and sign it again with ``key``."""
    m = mutated(b.read_manifest(directory), change)
    (directory / MANIFEST_FILE).write_bytes(m.sign(key))
    return m
