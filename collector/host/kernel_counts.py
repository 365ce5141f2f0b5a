"""The kernel registry's trouble counters, for the tracker's ``stats()`` and its ``sdk_health`` records.

A serving process that calls the registry (``inferensics.kernels``) has built it; one that never did has
nothing to count, and reading the counters must not build it (that defines the operators and imports Triton),
so the registry is looked up among the modules already imported.
"""

from __future__ import annotations

import sys
from typing import Final

from inferensics.schema import columns as col

KERNEL_COUNTERS: Final = (col.KERNEL_FAILURES, col.KERNEL_FALLBACKS, col.KERNEL_UNPROVEN, col.KERNEL_UNTRACEABLE)
"""The ``stats()`` keys (and ``sdk_health`` columns) this module fills."""


def kernel_registry_counts() -> dict[str, int]:
    """Provider exceptions, fallbacks to the reference, unproven compile-time choices and providers that raised while
    a compiler traced them, summed over the process's kernel registry (all zero when the process has not built
    one)."""
    out = dict.fromkeys(KERNEL_COUNTERS, 0)
    module = sys.modules.get("inferensics.kernels.registry")
    registry = module.built_registry() if module is not None else None
    if registry is None:
        return out
    stats = registry.log.stats()
    out[col.KERNEL_FAILURES] = sum(stats["failures"].values())
    out[col.KERNEL_FALLBACKS] = sum(stats["fallbacks"].values())
    out[col.KERNEL_UNPROVEN] = sum(stats["unproven"].values())
    out[col.KERNEL_UNTRACEABLE] = sum(stats["untraceable"].values())
    return out
