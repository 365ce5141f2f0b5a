"""Shape bucketing: turning a request's shape signature into a low-cardinality bucket label."""

from __future__ import annotations

import bisect
import operator
import re
from collections.abc import Sequence

_DIMS = re.compile(r"\d+")
_CACHE_SIZE = 4096


_SIGNATURE = re.compile(r"\d+(x\d+)*")


def shape_signature(shape: str | Sequence[int] | None) -> str:
    """``(2, 128)`` → ``2x128``; a signature string (``"2x128"``) passes through.

    Raises:
        ValueError: a string that is not a signature, or a sequence that is not of non-negative integers.
    """
    if shape is None:
        return ""
    if isinstance(shape, str):
        if shape and not _SIGNATURE.fullmatch(shape):
            raise ValueError(f"shape {shape[:40]!r} is not a signature like '2x128'")
        return shape
    try:
        dims = [operator.index(d) for d in shape]
    except TypeError:
        raise ValueError(f"shape {str(shape)[:60]} is not a sequence of integers") from None
    if any(d < 0 for d in dims):
        raise ValueError(f"shape {tuple(dims)} has a negative dimension")
    return "x".join(map(str, dims))


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
