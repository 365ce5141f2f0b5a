"""fp64-anchored comparison, as replay's ladder uses it: the rule is defined once, in
:mod:`inferensics.bundle.tolerance`, because a bundle's qualification judges each shape's compiled output by
the same rule (replay imports the bundle part; the bundle part may not import replay)."""

from __future__ import annotations

from inferensics.bundle.tolerance import (
    EAGER_LIMIT,
    LOGITS_MIN_VOCAB,
    RATIO_LIMIT,
    WORST_KEPT,
    Comparison,
    EagerCheck,
    check_eager,
    compare,
    float_leaves,
)

__all__ = [
    "EAGER_LIMIT",
    "LOGITS_MIN_VOCAB",
    "RATIO_LIMIT",
    "WORST_KEPT",
    "Comparison",
    "EagerCheck",
    "check_eager",
    "compare",
    "float_leaves",
]
