"""The ``accepted_shapes`` miss factor: which of a graph's inputs differ from those the bundle qualified.

A graph's input metadata (:func:`~inferensics.bundle.capture.graph_inputs`) lists every input, parameters included:
a decoder's runs to dozens of entries, where a miss usually differs in one. The factor names only the inputs that
differ, against the bundle's closest input set, and counts the equal ones.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

SHOWN: Final = 4
"""Differing inputs named in one factor; the rest are counted."""

_SIZES = re.compile(r"^[^/@]*")


def _differing(here: list[str], there: list[str]) -> list[int]:
    return [i for i in range(max(len(here), len(there))) if _at(here, i) != _at(there, i)]


def _at(inputs: list[str], i: int) -> str:
    return inputs[i] if i < len(inputs) else "(none)"


def _text(a: str, b: str) -> tuple[str, str]:
    """Two differing inputs as short as still tells them apart: ``dtype[sizes]`` when those differ, else whole."""
    sa, sb = _SIZES.match(a), _SIZES.match(b)
    short_a, short_b = (sa.group(0) if sa else a), (sb.group(0) if sb else b)
    return (short_a, short_b) if short_a != short_b else (a, b)


def accepted_shapes_factor(inputs: str, qualified: Sequence[str]) -> str:
    """The factor for a graph with ``inputs`` whose kind the bundle qualified only with ``qualified`` input sets
    (each :func:`~inferensics.bundle.capture.graph_inputs`), against the closest of them.

    >>> here, bundle = "sym:s0;int64[s0,3]/3,1@cpu;float32[64]/1@cpu", "sym:s0;int64[s0,1]/1,1@cpu;float32[64]/1@cpu"
    >>> accepted_shapes_factor(here, [bundle]).removeprefix("accepted_shapes: inputs not qualified: ")
    'input 2 of 3 is int64[s0,3], the bundle qualified int64[s0,1] (2 inputs equal)'
    """
    here = inputs.split(";")
    sets = sorted(set(qualified)) or [""]
    closest = min(sets, key=lambda q: (len(_differing(here, q.split(";"))), q))
    there = closest.split(";")
    diff = _differing(here, there)
    if not diff:
        return f"accepted_shapes: inputs qualified, for another graph (the bundle holds these {len(here)} inputs)"
    pairs = [_text(_at(here, i), _at(there, i)) for i in diff[:SHOWN]]
    more = f" and {len(diff) - SHOWN} more" if len(diff) > SHOWN else ""
    equal = max(len(here), len(there)) - len(diff)
    where = f"input {diff[0] + 1}" if len(diff) == 1 else f"inputs {', '.join(str(i + 1) for i in diff[:SHOWN])}"
    verb = "is" if len(diff) == 1 else "are"
    of = f"{where}{more} of {len(here)} {verb} {', '.join(a for a, _ in pairs)}"
    bundle = f"the bundle qualified {', '.join(b for _, b in pairs)}"
    others = f"; closest of {len(sets)} input sets it qualified" if len(sets) > 1 else ""
    plural = "s" if equal != 1 else ""
    return f"accepted_shapes: inputs not qualified: {of}, {bundle} ({equal} input{plural} equal{others})"
