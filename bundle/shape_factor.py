"""The ``accepted_shapes`` miss factor: which of a graph's inputs differ from those the bundle qualified.

A graph's input metadata (:func:`~inferensics.bundle.capture.graph_inputs`) lists every input of the Dynamo graph:
the model's own inputs, and its parameters and buffers (Dynamo lifts them to inputs, ``L['self']...`` sources) and
dynamic sizes among them. A decoder's runs to dozens of entries, where a miss usually differs in one. The factor names
only the inputs that differ, against the bundle's closest input set, and counts the equal ones. Where the graph's
sources are known (:attr:`~inferensics.bundle.capture.GraphCapture.sources`), the model's inputs are numbered among
themselves (a model of one input reads ``input 1 of 1``) and its parameters and buffers are counted apart; else the
factor says ``graph input``. A static bundle that missed on sizes alone says the two ways to cover them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

SHOWN: Final = 4
"""Differing inputs named in one factor; the rest are counted."""

STATIC_ADVICE: Final = (
    "the bundle is static: rebuild it with this shape, or with `inferensics bundle build --dynamic` for sizes that vary"
)
"""Ends the factor of a static bundle's miss in which only the sizes of the model's inputs differ."""

_SIZES = re.compile(r"^[^/@]*")
_TENSOR = re.compile(r"^(\w+)\[([^\]]*)\]/[^@]*@(\w+)$")
_MODULE_PATH = re.compile(r"\._(?:modules|parameters|buffers)\['([^']*)'\]")

# What each graph input is, from its Dynamo source.
_INPUT, _PARAMETER, _BUFFER, _ATTRIBUTE, _SIZE, _UNKNOWN = (
    "input", "parameter", "buffer", "module tensor", "size", "graph input"
)  # fmt: skip


def _differing(here: list[str], there: list[str]) -> list[int]:
    return [i for i in range(max(len(here), len(there))) if _at(here, i) != _at(there, i)]


def _at(inputs: list[str], i: int) -> str:
    return inputs[i] if i < len(inputs) else "(none)"


def _text(a: str, b: str) -> tuple[str, str]:
    """Two differing inputs as short as still tells them apart: ``dtype[sizes]`` when those differ, else whole."""
    sa, sb = _SIZES.match(a), _SIZES.match(b)
    short_a, short_b = (sa.group(0) if sa else a), (sb.group(0) if sb else b)
    return (short_a, short_b) if short_a != short_b else (a, b)


def _kinds(here: list[str], sources: Sequence[str]) -> list[str] | None:
    """What each of ``here``'s inputs is (model input, parameter, buffer, module tensor, size), or ``None`` when the
    sources do not cover them."""
    if len(sources) != len(here) or not all(sources):
        return None
    out = []
    for entry, source in zip(here, sources, strict=True):
        if entry.startswith("sym:"):
            out.append(_SIZE)
        elif "._parameters[" in source:
            out.append(_PARAMETER)
        elif "._buffers[" in source:
            out.append(_BUFFER)
        elif source.startswith("L['self']"):
            out.append(_ATTRIBUTE)
        else:
            out.append(_INPUT)
    return out


def _sizes_only(a: str, b: str) -> bool:
    """Whether two inputs are tensors of one dtype, rank and device (what ``--dynamic`` makes one graph of)."""
    ma, mb = _TENSOR.match(a), _TENSOR.match(b)
    if ma is None or mb is None:
        return False
    rank_a, rank_b = (m.group(2).count(",") + 1 if m.group(2) else 0 for m in (ma, mb))
    return (ma.group(1), ma.group(3), rank_a) == (mb.group(1), mb.group(3), rank_b)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'s' if n != 1 else ''}"


def accepted_shapes_factor(
    inputs: str, qualified: Sequence[str], *, sources: Sequence[str] = (), static: bool = False
) -> str:
    """The factor for a graph with ``inputs`` whose kind the bundle qualified only with ``qualified`` input sets
    (each :func:`~inferensics.bundle.capture.graph_inputs`), against the closest of them. ``sources``: where Dynamo
    took each of ``inputs`` from (the model's inputs are then told from its parameters and buffers); ``static``: the
    bundle was built without ``--dynamic``.

    >>> here, bundle = "sym:s0;int64[s0,3]/3,1@cpu;float32[64]/1@cpu", "sym:s0;int64[s0,1]/1,1@cpu;float32[64]/1@cpu"
    >>> accepted_shapes_factor(here, [bundle]).removeprefix("accepted_shapes: inputs not qualified: ")
    'graph input 2 of 3 is int64[s0,3], the bundle qualified int64[s0,1] (2 other graph inputs equal)'
    >>> sources = ["L['ids'].size()[0]", "L['ids']", "L['self']._modules['norm']._parameters['weight']"]
    >>> accepted_shapes_factor(here, [bundle], sources=sources).removeprefix("accepted_shapes: inputs not qualified: ")
    'input 1 of 1 is int64[s0,3], the bundle qualified int64[s0,1] (1 parameter, 1 size equal)'
    """
    here = inputs.split(";")
    sets = sorted(set(qualified)) or [""]
    closest = min(sets, key=lambda q: (len(_differing(here, q.split(";"))), q))
    there = closest.split(";")
    diff = _differing(here, there)
    if not diff:
        return f"accepted_shapes: inputs qualified, for another graph (the bundle holds these {len(here)} inputs)"
    kinds = _kinds(here, sources)

    def kind(i: int) -> str:
        return kinds[i] if kinds is not None and i < len(kinds) else _UNKNOWN

    shown = diff[:SHOWN]
    more = f" and {len(diff) - SHOWN} more" if len(diff) > SHOWN else ""
    if kinds is None:
        numbers = ", ".join(str(i + 1) for i in shown)
        order, where = shown, f"graph input{'s' if len(shown) > 1 else ''} {numbers}{more} of {len(here)}"
    else:
        users = [i for i, k in enumerate(kinds) if k == _INPUT]
        mine = [i for i in shown if kind(i) == _INPUT]
        others = [i for i in shown if kind(i) != _INPUT]
        parts = [f"input{'s' if len(mine) > 1 else ''} {', '.join(str(users.index(i) + 1) for i in mine)} of "
                 f"{len(users)}"] if mine else []  # fmt: skip
        parts += [_label(i, kind(i), sources) for i in others]
        order, where = [*mine, *others], ", ".join(parts) + more
    pairs = [_text(_at(here, i), _at(there, i)) for i in order]
    verb = "is" if len(diff) == 1 else "are"
    of = f"{where} {verb} {', '.join(a for a, _ in pairs)}"
    bundle = f"the bundle qualified {', '.join(b for _, b in pairs)}"
    others_ = f"closest of {len(sets)} input sets it qualified" if len(sets) > 1 else ""
    equal = [i for i in range(max(len(here), len(there))) if i not in diff]
    if kinds is None:
        counted = f"{_plural(len(equal), 'other graph input')} equal" if len(here) > 1 else ""
    else:
        by_kind = [(k, sum(kind(i) == k for i in equal)) for k in (_INPUT, _PARAMETER, _BUFFER, _ATTRIBUTE, _SIZE)]
        counted = ", ".join(_plural(n, k) for k, n in by_kind if n)
        counted = f"{counted} equal" if counted else ""
    said = "; ".join(p for p in (counted, others_) if p)
    advice = ""
    if static and all(kind(i) in (_INPUT, _UNKNOWN) and _sizes_only(_at(here, i), _at(there, i)) for i in diff):
        advice = f"; {STATIC_ADVICE}"
    return f"accepted_shapes: inputs not qualified: {of}, {bundle}{f' ({said})' if said else ''}{advice}"


def _label(i: int, kind: str, sources: Sequence[str]) -> str:
    """A graph input that is not the model's own, by what it is: ``parameter lin.weight``, ``size 3``."""
    source = sources[i] if i < len(sources) else ""
    path = ".".join(_MODULE_PATH.findall(source))
    if kind in (_PARAMETER, _BUFFER, _ATTRIBUTE):
        return f"{kind} {path or source}"
    return f"graph input {i + 1}"
