"""How shapes read wherever people read them (CLI lines, the weekly report, the request page, replay verdicts).

Two kinds of shape, each in its own notation so that neither passes for the other:

- a **model input shape**, as a shape distribution holds it and a request records it: ``2x48``;
- a dynamic graph's **sizes** at one call: one list per graph input with a symbol (``[2,48]``), as the call bound
  them after any padding the model does. A host stores them with ``;`` between inputs (``[2,1];[2,2,4,64,16]``:
  bundle manifests, ``stats()`` keys, ``attrs['bundle_unqualified_shape']``); they read as a tuple,
  ``([2,1], [2,2,4,64,16])``, so that a list of several calls' sizes (``", "`` between them) keeps each call apart.

Defined here, below every part that shows shapes (the bundle part, replay, analytics and the dashboard), so that each
says them the same way; ``tests/schema/test_shape_text.py`` pins the notation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

INPUT_SEPARATOR: Final = ";"
"""Between the inputs' lists in one call's stored sizes (``[2,1];[2,2,4,64,16]``)."""
SIZES_SEPARATOR: Final = ", "
"""Between calls' sizes in a list of them (``attrs['bundle_unqualified_shape']``: ``[9,8], [7,8]``)."""
MORE_SIZES: Final = re.compile(r" \(\+\d+ calls? at other shapes\)$")
"""What follows the sizes in ``attrs['bundle_unqualified_shape']`` past the host's bound on the sizes it names."""


def input_shape_text(shape: Sequence[int]) -> str:
    """A model input shape as people read it.

    >>> input_shape_text([2, 48])
    '2x48'
    """
    return "x".join(str(int(d)) for d in shape)


def graph_size_text(sizes: str) -> str:
    """One call's sizes of a dynamic graph (stored form, :data:`INPUT_SEPARATOR` between inputs) as people read them:
    the one input's list, or a tuple of one list per input.

    >>> graph_size_text("[2,48]")
    '[2,48]'
    >>> graph_size_text("[2,1];[2,2,4,64,16]")
    '([2,1], [2,2,4,64,16])'
    """
    inputs = sizes.split(INPUT_SEPARATOR)
    return inputs[0] if len(inputs) == 1 else f"({SIZES_SEPARATOR.join(inputs)})"


def graph_sizes_text(sizes: Iterable[str]) -> str:
    """Several calls' sizes (each in stored form), :data:`SIZES_SEPARATOR` between them.

    >>> graph_sizes_text(["[4,128]", "[4,1];[2,4,4,128,16]"])
    '[4,128], ([4,1], [2,4,4,128,16])'
    """
    return SIZES_SEPARATOR.join(graph_size_text(s) for s in sizes)


def split_graph_sizes(stored: str) -> list[str]:
    """The calls' sizes of a stored list of them (``attrs['bundle_unqualified_shape']``), each in stored form, without
    what follows past the host's bound.

    >>> split_graph_sizes("[9,8];[9,1], [7,8];[7,1] (+2 calls at other shapes)")
    ['[9,8];[9,1]', '[7,8];[7,1]']
    """
    # A list's own commas have no space after them (``[9,8]``): only the separator between calls does.
    kept = MORE_SIZES.sub("", stored).strip()
    return kept.split(SIZES_SEPARATOR) if kept else []


def stored_sizes_text(stored: str) -> str:
    """A stored list of calls' sizes (``attrs['bundle_unqualified_shape']``) as people read it, with what follows
    past the host's bound.

    >>> stored_sizes_text("[4,128], [4,1];[2,4,4,128,16] (+3 calls at other shapes)")
    '[4,128], ([4,1], [2,4,4,128,16]) (+3 calls at other shapes)'
    """
    more = MORE_SIZES.search(stored)
    return graph_sizes_text(split_graph_sizes(stored)) + (more.group(0) if more else "")
