"""Shape distributions: the input shapes a bundle is built and qualified on, with their traffic weights.

A shapes file is JSON: ``{"shapes": [{"shape": [1, 8], "weight": 40}, ...]}`` (or a bare list of shapes,
equally weighted). ``inferensics bundle build --shapes-from-service`` writes the same form from real traffic.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferensics.bundle.errors import BundleError
from inferensics.schema.shape_text import graph_sizes_text, input_shape_text

__all__ = ["ShapeDistribution", "WeightedShape", "input_shape_text", "qualified_text"]


@dataclass(frozen=True)
class WeightedShape:
    """One shape and its share of traffic."""

    shape: tuple[int, ...]
    weight: float = 1.0

    @property
    def label(self) -> str:
        """``2x16``."""
        return input_shape_text(self.shape)


@dataclass(frozen=True)
class ShapeDistribution:
    """Shapes with traffic weights (normalised on read by :attr:`shares`)."""

    shapes: tuple[WeightedShape, ...]

    @classmethod
    def of(cls, shapes: Iterable[Sequence[int]], weights: Iterable[float] | None = None) -> ShapeDistribution:
        """From shapes and optional weights (equal when omitted)."""
        s = [tuple(int(d) for d in shape) for shape in shapes]
        w = list(weights) if weights is not None else [1.0] * len(s)
        return cls.parse([{"shape": list(a), "weight": b} for a, b in zip(s, w, strict=True)], "shapes")

    @classmethod
    def parse(cls, data: Any, source: str) -> ShapeDistribution:
        """From the JSON form.

        Raises:
            BundleError: ``bad_input`` naming what is wrong.
        """
        items = data.get("shapes") if isinstance(data, dict) else data
        if not isinstance(items, list) or not items:
            raise BundleError("bad_input", f"{source}: expected {{'shapes': [{{'shape': [1, 8], 'weight': 1}}, ...]}}")
        merged: dict[tuple[int, ...], float] = {}
        for i, item in enumerate(items):
            shape, weight = (item.get("shape"), item.get("weight", 1.0)) if isinstance(item, dict) else (item, 1.0)
            dims = shape if isinstance(shape, list) else []
            ok = bool(dims) and all(isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in dims)
            good_weight = isinstance(weight, int | float) and not isinstance(weight, bool) and math.isfinite(weight)
            if not ok or not good_weight or weight <= 0:
                raise BundleError(
                    "bad_input",
                    f"{source}: entry {i} needs a list of positive ints and a positive finite weight, got {item!r}",
                )
            key = tuple(int(d) for d in dims)
            merged[key] = merged.get(key, 0.0) + float(weight)
        return cls(tuple(WeightedShape(s, w) for s, w in merged.items()))

    @classmethod
    def load(cls, path: Path) -> ShapeDistribution:
        """Read a shapes file.

        Raises:
            BundleError: missing file or bad content.
        """
        try:
            data = json.loads(path.read_text())
        except OSError as exc:
            raise BundleError("missing", f"cannot read shapes file {path}: {exc.strerror}") from None
        except ValueError:
            raise BundleError("bad_input", f"{path} is not JSON: expected {{'shapes': [...]}}") from None
        return cls.parse(data, str(path))

    def to_json(self) -> dict[str, Any]:
        """The JSON form."""
        return {"shapes": [{"shape": list(s.shape), "weight": s.weight} for s in self.shapes]}

    @property
    def shares(self) -> dict[tuple[int, ...], float]:
        """Shape → share of traffic (sums to 1)."""
        total = sum(s.weight for s in self.shapes)
        return {s.shape: s.weight / total for s in self.shapes}


def qualified_text(input_shapes: Iterable[Sequence[int]], graph_sizes: Iterable[str] = ()) -> str:
    """The shapes a bundle qualified, in one notation wherever the bundle's words show them
    (:mod:`inferensics.schema.shape_text`): the model's input shapes (``2x48``), then a dynamic graph's own sizes
    (``[2,48]``: its symbolic sizes as the calls bound them, one list per input with a symbol, after any padding the
    model does; what a host's unqualified-shape count and ``attrs['bundle_unqualified_shape']`` compare), a call's
    lists in a tuple where the graph has several such inputs (``([2,1], [2,2,4,64,16])``).

    >>> qualified_text([[1, 20], [2, 48]], ["[2,32]", "[2,48]", "[2,1];[2,2,4,64,16]"])
    'input shapes 1x20, 2x48; graph sizes [2,32], [2,48], ([2,1], [2,2,4,64,16])'
    """
    text = "input shapes " + (", ".join(input_shape_text(s) for s in input_shapes) or "(none)")
    sizes = list(graph_sizes)
    return f"{text}; graph sizes {graph_sizes_text(sizes)}" if sizes else text
