"""``events_to_arrow`` builds its columns from buffers, as ``pa.array`` over the Python values would (without the
pandas import ``pa.array`` pays: tests/schema/test_arrow_no_pandas.py)."""

from __future__ import annotations

from datetime import UTC, timedelta, timezone
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from inferensics.schema.arrow import _ARROW_TYPES, values_array

_UINT = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}
_TZ = st.sampled_from([UTC, timezone(timedelta(hours=5, minutes=30)), None])


def _values(kind: str) -> st.SearchStrategy[Any]:
    """Values of one column of Arrow type ``kind`` (the model validated them: in range, text without surrogates)."""
    if kind in ("string", "dictionary<values=string, indices=int32>"):
        return st.text(max_size=12)
    if kind == "binary":
        return st.binary(max_size=12)
    if kind in _UINT:
        return st.integers(0, 2 ** _UINT[kind] - 1)
    if kind == "bool":
        return st.booleans()
    if kind == "float32":
        return st.floats(width=32)
    if kind == "float64":
        return st.floats()
    if kind.startswith("timestamp"):
        return st.datetimes(timezones=_TZ)
    if kind == "list<string>":
        return st.lists(st.text(max_size=5), max_size=4)
    if kind == "list<uint32>":
        return st.lists(st.integers(0, 2**32 - 1), max_size=4)
    if kind == "list<float32>":
        return st.lists(st.floats(width=32), max_size=4)
    assert kind == "map<string, string>", kind
    return st.lists(st.tuples(st.text(max_size=5), st.text(max_size=5)), max_size=3)


def _bits(array: pa.Array) -> pa.Array:
    """``array`` with its floats as their bit patterns (a NaN equals no NaN), at any depth."""
    type_ = array.type
    if pa.types.is_floating(type_):
        return array.view(pa.uint32() if type_.bit_width == 32 else pa.uint64())
    if pa.types.is_list(type_):
        return pa.ListArray.from_arrays(array.offsets, _bits(array.flatten()))
    return array


@pytest.mark.parametrize("kind", sorted(_ARROW_TYPES))
@settings(deadline=None)  # the first pa.array call imports pandas (what values_array avoids): no time limit
@given(data=st.data())
def test_each_column_type_is_built_as_pa_array_builds_it(kind: str, data: st.DataObject) -> None:
    type_ = _ARROW_TYPES[kind]
    values = data.draw(st.lists(_values(kind), max_size=6))
    got = values_array(values, type_)
    got.validate(full=True)
    want = pa.array(values, type=type_)
    assert got.type == want.type
    assert _bits(got).equals(_bits(want)), (got, want)


def test_a_value_out_of_range_is_refused_as_pa_array_refuses_it() -> None:
    with pytest.raises(pa.ArrowInvalid):
        pa.array([300], pa.uint8())
    with pytest.raises(pa.ArrowInvalid):
        values_array([300], pa.uint8())
