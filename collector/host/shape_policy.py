"""Shape bucketing: turning a request's shape signature into a low-cardinality bucket label."""

from __future__ import annotations

import bisect
import re
from collections.abc import Sequence

_DIMS = re.compile(r"\d+")
_CACHE_SIZE = 4096


def shape_signature(shape: str | Sequence[int] | None) -> str:
    """``(2, 128)`` → ``2x128``; strings pass through."""
    if shape is None:
        return ""
    if isinstance(shape, str):
        return shape
    return "x".join(str(int(d)) for d in shape)


class ShapePolicy:
    """Rounds every number in a shape signature up to the next edge: ``2x100`` → ``b<=2,s<=128``.

    Args:
        edges: Sorted upper bucket edges; values above the last edge land in ``>last``.
        names: Labels for the leading dimensions (``b`` batch, ``s`` sequence); extra dims get ``d2``...
    """

    def __init__(self, edges: Sequence[int], names: Sequence[str] = ("b", "s")) -> None:
        self.edges = sorted(edges)
        self.names = tuple(names)
        self._seen: dict[str, str] = {}

    def bucket(self, shape: str) -> str:
        """The bucket label of a shape signature (``""`` for an empty signature)."""
        label = self._seen.get(shape)
        if label is None:
            label = self._label(shape)
            if len(self._seen) < _CACHE_SIZE:  # serving shapes repeat; a flood of new ones is not cached
                self._seen[shape] = label
        return label

    def _label(self, shape: str) -> str:
        if not shape:
            return ""
        parts: list[str] = []
        for i, m in enumerate(_DIMS.finditer(shape)):
            value = int(m.group(0))
            name = self.names[i] if i < len(self.names) else f"d{i}"
            k = bisect.bisect_left(self.edges, value)
            parts.append(f"{name}<={self.edges[k]}" if k < len(self.edges) else f"{name}>{self.edges[-1]}")
        return ",".join(parts)
