"""SiLU·mul over every 16-bit gate value: the IEEE-division kernel and its cheaper variants.

The launch tables may switch a variant on (the fast division, the guarded approximate division, the multiply in
the 16-bit dtype, the flat grid) for a dtype only where it rounds exactly like the IEEE division; this checks that
property over all 65,536 bit patterns (NaNs compared as NaNs). On a GPU every variant is compared bit for bit with
eager PyTorch (the op's reference); in Triton's interpreter, whose ``exp`` and conversions are NumPy's, the variants
are compared with the IEEE kernel (there the guarded division's inline PTX is replaced by the IEEE division, so only
the GPU run tests it).
"""

from __future__ import annotations

import pytest
import torch

from inferensics import kernels

HAS_CUDA = torch.cuda.is_available()
DEVICE = torch.device("cuda" if HAS_CUDA else "cpu")

pytestmark = [pytest.mark.filterwarnings("ignore::RuntimeWarning")]  # NumPy's exp overflows in the interpreter


def _every_gate(dtype: torch.dtype) -> torch.Tensor:
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    return bits.view(dtype).reshape(256, 256).to(DEVICE)


def _mismatches(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    same = (a.view(torch.int16) == b.view(torch.int16)) | (a.isnan() & b.isnan())
    return ~same


def _variants() -> dict[str, tuple[int, ...]]:
    from inferensics.kernels._triton import activation

    fixed: dict[str, tuple[int, ...]] = {
        "fast-division": (256, 4, 1),
        "guarded-division": (256, 4, 2),
        "guarded-native-mul-flat": (1024, 4, 2, True, True),
        "ieee-native-mul-flat": (512, 4, 0, True, True),
    }
    # Every configuration the shipped H200 tables pick, as it is launched there.
    table = {f"table-{d}-{dt}-t{t}": tuple(c) for (dt, d, t), c in activation.H200_CONFIGS.items()}
    return fixed | table


VARIANTS = _variants()
# The fixed variants in both 16-bit dtypes; a table entry in its own dtype only (the tables are keyed by dtype).
CASES = [
    pytest.param(dtype, name, id=f"{name}-{dtype}")
    for name in VARIANTS
    for dtype in (torch.bfloat16, torch.float16)
    if not name.startswith("table-") or f"-{str(dtype).removeprefix('torch.')}-" in name
]


@pytest.mark.parametrize(("dtype", "variant"), CASES)
def test_variants_round_like_ieee_division_for_every_16_bit_input(dtype: torch.dtype, variant: str) -> None:
    from inferensics.kernels._triton import activation

    gate = _every_gate(dtype)
    g = torch.Generator(device="cpu").manual_seed(0)
    for up in (torch.ones_like(gate), torch.randn(gate.shape, generator=g).to(dtype).to(DEVICE)):
        x = torch.cat([gate, up], dim=-1)
        fast = activation.silu_mul_with(x, VARIANTS[variant])
        ieee = activation.silu_mul_with(x, (256, 4, activation.DIV_IEEE))
        bad = _mismatches(fast, ieee)
        assert not bad.any(), f"{variant} differs at gates {gate[bad][:8].tolist()}"
        if HAS_CUDA:
            ref = kernels.registry().op("silu_mul").reference(x)
            bad = _mismatches(ieee, ref)
            assert not bad.any(), f"kernel differs from eager at gates {gate[bad][:8].tolist()}"


def test_measured_tables_enable_cheaper_division_only_for_16_bit_dtypes() -> None:
    from inferensics.kernels._triton import activation

    for (dtype, _, _), config in activation.H200_CONFIGS.items():
        assert config.div == activation.DIV_IEEE or dtype in ("bfloat16", "float16"), dtype
        # Triton's division and the hardware exp round like the IEEE kernel for every bfloat16 gate but not every
        # float16 one (the H200's exhaustive check, session 13: 2 and 4 float16 gates differ): bfloat16 entries only.
        if config.div == activation.DIV_FULL or config.fast_exp:
            assert dtype == "bfloat16", (dtype, config)
