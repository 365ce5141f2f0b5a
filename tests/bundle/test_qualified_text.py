"""``bundle show``/``verify``'s ``qualified:`` line and the host's log name a graph's sizes at one call apart from the
next call's, however many inputs with a symbol the graph has."""

from __future__ import annotations

import doctest

from inferensics.bundle import shapes
from inferensics.bundle.shapes import qualified_text


def test_a_decode_steps_sizes_read_as_one_tuple_per_call() -> None:
    """It read ``graph sizes [2,1];[2,2,4,64,16], [8,1];[2,8,4,192,16], [2,32]``: which list went with which call
    took counting semicolons."""
    said = qualified_text([[2, 48], [6, 160]], ["[2,1];[2,2,4,64,16]", "[8,1];[2,8,4,192,16]", "[2,32]"])
    assert said == "input shapes 2x48, 6x160; graph sizes ([2,1], [2,2,4,64,16]), ([8,1], [2,8,4,192,16]), [2,32]"
    assert qualified_text([]) == "input shapes (none)"


def test_docstring_examples() -> None:
    result = doctest.testmod(shapes)
    assert (result.attempted, result.failed) == (1, 0)
