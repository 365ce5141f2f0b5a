"""The two release bundles of the demo: what each compiles with, and its content-addressed id.

A bundle here is the compiler configuration a serving worker compiles with. Its id is
``<name>-<first 12 hex of sha256(manifest)>`` (ARCHITECTURE.md decision 3: a digest of the manifest), with
the name in front so people can read it in the dashboard and type it into ``inferensics canary compare``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import torch

from inferensics.demo import incidents
from inferensics.demo.workload import BASELINE, CANDIDATE, RECOMPILE_LIMIT


@dataclass(frozen=True)
class Bundle:
    """A compiler configuration under a name."""

    name: str
    """``baseline`` or ``candidate``."""
    mode: str | None = None
    """``torch.compile`` mode."""
    options: dict[str, Any] = field(default_factory=dict)
    """Inductor options passed to ``torch.compile``."""
    decompositions: dict[str, str] = field(default_factory=dict)
    """Decomposition overrides registered in Inductor: operator → replacement."""
    cache_key_tag: str = ""
    """Salt of the compile-cache keys (``torch.compiler.config.cache_key_tag``)."""
    description: str = ""
    """What changed, in words."""

    def manifest(self) -> dict[str, Any]:
        """Everything that determines the compiled programs, as JSON-ready data."""
        return {
            "name": self.name,
            "torch": torch.__version__.split("+")[0],
            "mode": self.mode,
            "options": self.options,
            "decompositions": self.decompositions,
            "cache_key_tag": self.cache_key_tag,
            "dynamo": {"automatic_dynamic_shapes": False, "recompile_limit": RECOMPILE_LIMIT},
        }

    @property
    def bundle_id(self) -> str:
        """``<name>-<12 hex digits of the manifest's sha256>``."""
        digest = hashlib.sha256(json.dumps(self.manifest(), sort_keys=True).encode()).hexdigest()
        return f"{self.name}-{digest[:12]}"

    def activate(self) -> None:
        """Apply the process-wide parts of the bundle (Dynamo settings, decomposition overrides, salt).

        Call once, at the start of a serving worker, before anything compiles.
        """
        torch._dynamo.config.automatic_dynamic_shapes = False
        torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT
        if self.decompositions:
            incidents.install_decomposition_fault()


BASELINE_BUNDLE = Bundle(name=BASELINE, description="production compiler configuration")
"""The bundle in production."""

CANDIDATE_BUNDLE = Bundle(
    name=CANDIDATE,
    decompositions={incidents.FAULT_OP: "inferensics.demo.incidents.fast_silu"},
    cache_key_tag=incidents.CANARY_CACHE_SALT,
    description="compiler upgrade with a 'fast SiLU' decomposition (faulty: sigmoid(1.702 x))",
)
"""The canary: the baseline plus a faulty decomposition, with its compile caches salted."""

BUNDLES: dict[str, Bundle] = {b.name: b for b in (BASELINE_BUNDLE, CANDIDATE_BUNDLE)}
"""Bundles by name."""
