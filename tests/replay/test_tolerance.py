"""The fp64-anchored comparison catches faults a flat tolerance misses and passes benign noise."""

from __future__ import annotations

import math

import torch

from inferensics.replay import RATIO_LIMIT, compare
from inferensics.replay._internal.tolerance import check_eager


def _setup() -> tuple[torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    ref = torch.randn(64, 64, dtype=torch.float64)
    return ref, ref.float()


def test_benign_rounding_passes() -> None:
    ref, eager = _setup()
    other = (ref * (1 + 1e-7)).float()
    c = compare("x", other, ref, eager)
    assert c.passed
    assert c.ratio < RATIO_LIMIT


def test_one_wrong_element_below_a_flat_tolerance_fails() -> None:
    ref, eager = _setup()
    bad = eager.clone()
    bad[3, 7] += 5e-3  # inside rtol=atol=1e-2 of allclose
    assert torch.allclose(bad.double(), ref, rtol=1e-2, atol=1e-2)
    c = compare("x", bad, ref, eager)
    assert not c.passed
    assert c.worst[0]["index"] == [3, 7]


def test_new_nonfinite_values_fail() -> None:
    ref, eager = _setup()
    bad = eager.clone()
    bad[0, 0] = float("nan")
    c = compare("x", bad, ref, eager)
    assert c.nonfinite_new == 1
    assert math.isinf(c.ratio)
    assert not c.passed


def test_logit_figures_for_wide_outputs() -> None:
    ref, eager = _setup()
    c = compare("x", eager, ref, eager)
    assert c.mean_kl is not None
    assert c.mean_kl < 1e-10
    assert c.top1_agree == 1.0
    assert c.top5_contains == 1.0


def test_eager_check_flags_overflow_not_rounding() -> None:
    ref, eager = _setup()
    assert not check_eager(eager, ref).wrong
    over = eager.clone()
    over[1, 1] = float("inf")
    assert check_eager(over, ref).wrong
