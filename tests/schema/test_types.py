"""Float32 rounding matches numpy's, including the overflow boundary."""

from __future__ import annotations

import math
import warnings

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from inferensics.schema.types import to_float32


def _numpy_f32(x: float) -> float:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(np.float32(x))


@given(st.floats(allow_nan=False) | st.sampled_from([3.4028234663852886e38, 3.4028235677973366e38, -3.4028235e38]))
def test_to_float32_matches_numpy(x: float) -> None:
    assert to_float32(x) == _numpy_f32(x)


def test_boundary_and_specials() -> None:
    top = (2 - 2**-24) * 2.0**127
    assert to_float32(math.nextafter(top, 0)) == _numpy_f32(math.nextafter(top, 0)) < math.inf
    assert to_float32(top) == math.inf == _numpy_f32(top)
    assert math.isnan(to_float32(math.nan))
    assert to_float32(-math.inf) == -math.inf
