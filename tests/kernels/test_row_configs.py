"""Every launch configuration the row kernels can be given by the tables, on the differential suite's samples.

The differential suite runs each op's serving path, which on a GPU takes the measured table only at the table's
shapes (hidden 4096 / 14336, whole buckets of tokens), and in the interpreter always the fixed default: the other
kernels and options (the two-pass and persistent add+RMSNorm, SiLU·mul's arithmetic variants, the shipped table's
picks) are run here on the odd, unaligned, strided and extremal samples and held to the op's tolerance for our
provider.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from inferensics import kernels
from inferensics.kernels._triton import activation, norm
from inferensics.kernels.requirements import CallContext
from inferensics.kernels.tolerance import compare

from .samples import SAMPLERS, Sample

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning")]  # NumPy's inf/NaN arithmetic in the interpreter

DEVICE = torch.device("cuda" if torch.cuda.is_available() else "cpu")

TWO_PASS: dict[str, tuple[Any, ...]] = {
    # (rows, warps, early weight, hints, late residual, chunk): the residual stored in the first or second pass,
    # a chunk smaller than, equal to and wider than some samples' rows.
    "chunk256-early-residual": (1, 4, False, 0, False, 256),
    "chunk128-late-residual": (1, 4, False, 0, True, 128),
    "chunk1024-late-residual": (1, 8, False, 0, True, 1024),
    "chunk4096-streaming-stores": (1, 16, False, 1, True, 4096),
}
PERSISTENT: dict[str, tuple[Any, ...]] = {
    # (rows, warps, early weight, hints, late residual, chunk 0, programs a multiprocessor): fewer programs than
    # rows (each loops, with the next row's loads in flight) and more (some get none); either residual order.
    "persistent-1": (1, 4, False, 0, False, 0, 1),
    "persistent-3-late-residual-streaming": (1, 8, False, 1, True, 0, 3),
    "persistent-64": (1, 4, False, 0, True, 0, 64),
}
TABLE_RMS = {f"table-t{k[2]}": tuple(c) for k, c in norm.H200_CONFIGS.items() if not k[0]}
TABLE_ADD = {f"table-t{k[2]}": tuple(c) for k, c in norm.H200_CONFIGS.items() if k[0]}
SILU_TABLE = {f"table-t{k[2]}": tuple(c) for k, c in activation.H200_CONFIGS.items()}
SILU_CANDIDATES = {
    # Options the sweep may pick only where the exhaustive check on the GPU finds them exact; in the interpreter
    # (NumPy's division and exp) they must give the IEEE kernel's bits, which exercises their code paths.
    "full-division": (256, 4, activation.DIV_FULL, False, True),
    "fast-exp": (256, 4, activation.DIV_FAST, True, True, 0, True),
}

# The samples of the differential suite the kernels accept (0-dim and too-wide rows are declined before a launch).
SKIP = ("zero_dim", "too_wide")


def _verdicts(name: str, outs: Any, args: tuple[Any, ...]) -> list[str]:
    op = kernels.registry().op(name)
    rule = op.tolerance.rule(args[0].dtype, op.providers["triton"].requirements.accuracy)
    refs = op.reference(*args)
    refs64 = None
    if rule.kind == "rmse":
        wide = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
        refs64 = op.reference(*wide)
    outs, refs = (outs if isinstance(outs, tuple) else (outs,)), (refs if isinstance(refs, tuple) else (refs,))
    r64s = refs64 if isinstance(refs64, tuple) else (refs64,) * len(refs)
    return [v.detail for o, r, r64 in zip(outs, refs, r64s, strict=True) if not (v := compare(o, r, rule, r64)).passed]


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(((a.view(torch.int16) == b.view(torch.int16)) | (a.isnan() & b.isnan())).all())


def _samples(name: str) -> list[Any]:
    op = kernels.registry().op(name)
    triton = op.providers["triton"]
    return [
        s
        for s in SAMPLERS[name](torch.bfloat16, DEVICE)
        if s.name not in SKIP and triton.supports(s.args, CallContext.of(s.args))[0]
    ]


@pytest.mark.parametrize("config", list(TWO_PASS | PERSISTENT | TABLE_ADD))
def test_fused_add_rms_norm_configurations_match_the_reference(config: str) -> None:
    cfg = (TWO_PASS | PERSISTENT | TABLE_ADD)[config]
    for sample in _samples("fused_add_rms_norm"):
        x, residual, weight, eps = sample.args
        outs = norm.fused_add_rms_norm_with(x, residual, weight, eps, cfg)
        assert not _verdicts("fused_add_rms_norm", outs, sample.args), (sample.name, cfg)
        assert _same_bits(outs[1], (x.float() + residual.float()).to(x.dtype)), sample.name  # the sum: exact


def test_two_pass_gives_the_one_pass_bits() -> None:
    # Both kernels compute the same float32 sum and the same rounding steps; only the order of the sum of squares
    # differs, so the outputs agree to a unit of the last place at most, and the residual exactly.
    sample = next(s for s in _samples("fused_add_rms_norm") if s.name == "unaligned_wide")
    x, residual, weight, eps = sample.args
    one = norm.fused_add_rms_norm_with(x, residual, weight, eps, (1, 4))
    two = norm.fused_add_rms_norm_with(x, residual, weight, eps, TWO_PASS["chunk128-late-residual"])
    assert torch.equal(one[1], two[1])
    ulps = (one[0].view(torch.int16).int() - two[0].view(torch.int16).int()).abs()
    assert int(ulps.max()) <= 1


@pytest.mark.parametrize("config", list(TABLE_RMS))
def test_rms_norm_table_configurations_match_the_reference(config: str) -> None:
    cfg = TABLE_RMS[config]
    for sample in _samples("rms_norm"):
        x, weight, eps = sample.args
        outs = norm.rms_norm_with(x, weight, eps, cfg)
        assert not _verdicts("rms_norm", outs, sample.args), (sample.name, cfg)


@pytest.mark.parametrize("config", list(SILU_TABLE))
def test_silu_mul_table_configurations_are_exact_on_every_sample(config: str) -> None:
    for sample in _samples("silu_mul"):
        (x,) = sample.args
        out = activation.silu_mul_with(x, SILU_TABLE[config])
        assert _same_bits(out, kernels.registry().op("silu_mul").reference(x)), (sample.name, config)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU their exactness is the exhaustive check's question")
@pytest.mark.parametrize("config", list(SILU_CANDIDATES))
def test_silu_mul_candidate_paths_give_the_ieee_bits_in_the_interpreter(config: str) -> None:
    for sample in _samples("silu_mul"):
        (x,) = sample.args
        out = activation.silu_mul_with(x, SILU_CANDIDATES[config])
        assert _same_bits(out, activation.silu_mul_with(x, (256, 4, activation.DIV_IEEE))), sample.name


def _many_rows() -> tuple[Any, ...]:
    # More rows than the persistent grid has programs on any GPU (1 program a multiprocessor: 132 on an H200), with
    # a row width that is not a multiple of 16 bytes, so programs loop and mask.
    g = torch.Generator().manual_seed(21)
    x, residual = (torch.randn(300, 1030, generator=g).to(DEVICE, torch.bfloat16) for _ in range(2))
    weight = (1.0 + 0.1 * torch.randn(1030, generator=g)).to(DEVICE, torch.bfloat16)
    return x, residual, weight, 1e-6


def test_persistent_gives_the_one_pass_bits() -> None:
    # The persistent kernel does the one-pass kernel's arithmetic step for step (same layout at the same warps, so
    # the same order of the sum of squares): the same bits, with programs looping over several rows each.
    for sample in [*_samples("fused_add_rms_norm"), Sample("many_rows", _many_rows())]:
        x, residual, weight, eps = sample.args
        one = norm.fused_add_rms_norm_with(x, residual, weight, eps, (1, 4))
        looped = norm.fused_add_rms_norm_with(x, residual, weight, eps, PERSISTENT["persistent-1"])
        assert all(_same_bits(a, b) for a, b in zip(one, looped, strict=True)), sample.name
