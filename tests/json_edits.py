"""Edits of a JSON document for the boundary fuzz tests: one drawn place deleted, renamed or replaced by drawn
JSON (hypothesis), as a damaged file or a hand edit would leave it."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from hypothesis import strategies as st

JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-3, 10**6)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)
"""Any JSON value (finite numbers: canonical JSON refuses the others)."""


def paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Every place in ``node``, the root first, as the keys and indices that lead to it."""
    yield prefix
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        yield from paths(child, (*prefix, key))


def edit(doc: Any, data: st.DataObject, values: Sequence[Any] = ()) -> Any:
    """``doc`` with one drawn place deleted, renamed (a key) or replaced by drawn JSON or one of ``values``;
    the root replaced is returned."""
    path = data.draw(st.sampled_from(list(paths(doc))), label="path")
    value = data.draw(JSON | st.sampled_from(values) if values else JSON, label="value")
    if not path:
        return value
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    how = data.draw(st.sampled_from(["delete", "rename", "replace"]), label="how")
    if how == "delete":
        del parent[path[-1]]
    elif how == "rename" and isinstance(parent, dict):
        parent[value if isinstance(value, str) else str(value)] = parent.pop(path[-1])
    else:
        parent[path[-1]] = value
    return doc
