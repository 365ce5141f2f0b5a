"""A bundle load replaces the customisations an earlier load installed: the compiler holds exactly the last
loaded bundle's (what its graphs were compiled with).

Loading bundle B after bundle A used to keep A's FX pass and decomposition wherever B had none, so B's misses
compiled with A's compiler while B's identity said otherwise.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from tests.bundle import fx_passes
from tests.bundle.conftest import Keys, spec
from tests.bundle.models import fast_gelu

pytestmark = pytest.mark.slow

ONE_SHAPE = b.ShapeDistribution.of([(2, 8)])
A_SLOT = "post_grad_custom_post_pass"
B_SLOT = "post_grad_custom_pre_pass"
GELU = "aten.gelu.default"


@pytest.fixture(scope="module")
def bundles(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Bundle A (a pass in one slot and a GELU decomposition) and bundle B (a pass in another slot only)."""
    out = tmp_path_factory.mktemp("loads")
    a = b.build(
        spec(shapes=ONE_SHAPE, name="a", allow_inaccurate=True, customisations=(  # tanh GELU: not eager's
            b.describe_customisation("fx_pass", A_SLOT, fx_passes.counting_pass),
            b.describe_customisation("decomposition", GELU, fast_gelu),
        )),
        keys.key, out / "a",
    )  # fmt: skip
    bb = b.build(
        spec(shapes=ONE_SHAPE, name="b",
             customisations=(b.describe_customisation("fx_pass", B_SLOT, fx_passes.no_op_pass),)),
        keys.key, out / "b",
    )  # fmt: skip
    return a.directory, bb.directory


def _state() -> tuple[object, object, object, str]:
    slots = torch_adapter.fx_pass_slots()
    return (
        slots[A_SLOT],
        slots[B_SLOT],
        torch_adapter.inductor_decompositions().get(GELU),
        str(torch.compiler.config.cache_key_tag),
    )


def test_a_second_load_leaves_exactly_its_own_customisations(bundles: tuple[Path, Path], keys: Keys) -> None:
    a, bb = bundles
    clean = _state()
    with torch_adapter.compiler_state_restored():
        b.load(bb, keys.keyring)
        b_alone = _state()
        b.load(a, keys.keyring)
        a_alone = _state()
    assert b_alone[:3] == (None, fx_passes.no_op_pass, clean[2])
    assert a_alone[:3] == (fx_passes.counting_pass, None, fast_gelu)
    assert _state() == clean

    with torch_adapter.compiler_state_restored():
        b.load(a, keys.keyring)
        b.load(bb, keys.keyring)
        assert _state() == b_alone  # A's pass and decomposition gone, B's salt only
        b.load(a, keys.keyring)
        assert _state() == a_alone  # and back: B's pass gone
        b.load(a, keys.keyring)
        assert _state() == a_alone  # the same bundle again changes nothing
    assert _state() == clean
