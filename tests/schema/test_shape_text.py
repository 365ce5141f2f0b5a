"""One shape notation wherever people read shapes (``schema/shape_text.py``): model input shapes ``2x48``, a graph's
sizes at one call ``[2,48]`` or, for several inputs with a symbol, ``([2,1], [2,2,4,64,16])``."""

from __future__ import annotations

import doctest

from inferensics.collector.host.records import REQUEST_UNQUALIFIED_SHAPES, UnqualifiedCalls
from inferensics.schema import shape_text
from inferensics.schema.request_attrs import BUNDLE_UNQUALIFIED_SHAPE
from inferensics.schema.shape_text import split_graph_sizes, stored_sizes_text


def test_docstring_examples() -> None:
    result = doctest.testmod(shape_text)
    assert (result.attempted, result.failed) == (6, 0)


def test_the_host_sdks_attribute_reads_back_one_calls_sizes_at_a_time() -> None:
    """What ``bundle_guard`` stores on a request splits into the calls' sizes it added, each whole, past the bound
    too, and reads with each call apart."""
    calls = UnqualifiedCalls()
    added = ["[8,128]", "[8,1];[2,8,4,128,16]", *(f"[8,1];[2,8,4,{64 * n},16]" for n in range(3, 10))]
    for sizes in added:
        calls.add(sizes)
    stored = calls.attrs()[BUNDLE_UNQUALIFIED_SHAPE]
    kept = added[:REQUEST_UNQUALIFIED_SHAPES]
    assert split_graph_sizes(stored) == kept
    more = len(added) - len(kept)
    assert more > 0, "the bound is to be passed"
    assert stored_sizes_text(stored).startswith("[8,128], ([8,1], [2,8,4,128,16]), ([8,1], [2,8,4,192,16])")
    assert stored_sizes_text(stored).endswith(f"]) (+{more} calls at other shapes)")
    assert split_graph_sizes("") == []
