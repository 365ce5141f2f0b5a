"""What a bundle miss names as differing, on a real build and a real load and compile of a model that calls a kernel
registry op.

The registry salts ``torch.compiler.config.cache_key_tag`` while a compile traces its ops (a digest of that graph's
provider decisions): it used to show in every miss as ``settings.compiler.cache_key_tag: None → 'inferensics-
providers:…'``, a setting no build records. The registry's state is what decides the salt and what the bundle
records; a host whose state differs is told so in words. The ``accepted_shapes`` factor names only the inputs that
differ.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from inferensics import bundle as b
from inferensics import kernels
from inferensics.bundle import torch_adapter
from inferensics.bundle.shape_factor import STATIC_ADVICE, accepted_shapes_factor
from tests.bundle.conftest import Keys, spec
from tests.bundle.kernel_models import inputs, silu_mlp

pytestmark = pytest.mark.slow

MODEL, INPUTS = "tests.bundle.kernel_models:silu_mlp", "tests.bundle.kernel_models:inputs"
SHAPES = b.ShapeDistribution.of([(2, 8)], [1])
NOT_QUALIFIED = (
    "accepted_shapes: inputs not qualified: input 1 of 1 is float32[5,8], the bundle qualified float32[2,8] "
    f"(2 parameters equal); {STATIC_ADVICE}"
)
"""The model has one input and one Linear layer, whose weight and bias Dynamo lifts to graph inputs: they are counted
as parameters, not as inputs ("input 3 of 3 ... (2 inputs equal)" read as a model of three inputs). The bundle is
static (the build's default) and only the batch size differs, so the factor names ``--dynamic`` too."""


@pytest.fixture(scope="module")
def silu(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> b.BuildResult:
    """The SiLU·mul model's bundle at one shape, built in this process (this registry state)."""
    return b.build(spec(model=MODEL, inputs=INPUTS, shapes=SHAPES), keys.key, tmp_path_factory.mktemp("silu") / "b")


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[None]:
    """An empty compile cache and this test's compiler state kept in this test."""
    with torch_adapter.temporary_cache_dir(str(tmp_path / "cache")), torch_adapter.compiler_state_restored():
        torch_adapter.reset_compiler()
        yield


def _serve(built: b.BuildResult, keys: Keys) -> list[b.BundleMatch]:
    """Load the bundle, compile through its gate, serve the qualified shape then another: the matches."""
    session = b.load(built.directory, keys.keyring).session()
    compiled = torch.compile(silu_mlp(), backend=session.backend(), dynamic=False)
    with torch.inference_mode():
        compiled(*inputs((2, 8)))
        compiled(*inputs((5, 8)))
    return session.matches


@pytest.mark.usefixtures("fresh")
def test_a_host_with_the_builds_registry_state_misses_on_the_shape_alone(silu: b.BuildResult, keys: Keys) -> None:
    assert "compiler.cache_key_tag" not in silu.manifest.identity["settings"]["changed"]
    hit, miss = _serve(silu, keys)
    assert (hit.status, hit.factors) == ("hit", ())
    assert (miss.status, miss.action) == ("miss", "compiled")
    assert miss.factors == (NOT_QUALIFIED,)  # no registry salt taken for a setting, no registry difference


@pytest.mark.usefixtures("fresh")
def test_a_host_whose_registry_state_differs_is_told_so_in_words(silu: b.BuildResult, keys: Keys) -> None:
    op = kernels.registry().op("silu_mul")
    before = list(op.priority)
    assert before == ["triton", "reference"]
    op.set_priority(["reference"])  # a host that serves SiLU·mul with the reference only
    try:
        _, miss = _serve(silu, keys)
    finally:
        op.set_priority(before)
    assert kernels.registry_state()["digest"] == silu.manifest.identity["kernel_registry"]["digest"]
    assert miss.factors == (
        NOT_QUALIFIED,
        "kernel_registry: kernel registry state differs: "
        "silu_mul priority: triton > reference in the bundle, reference here",
    )


def test_the_registry_salt_is_no_setting_but_a_users_own_tag_is() -> None:
    """Read inside a compile that traced registry ops, the tag is the user's (or none)."""
    salt = "inferensics-providers:" + "ab" * 16
    config = torch.compiler.config
    saved = config.cache_key_tag  # set back by hand: the config module's delattr (a monkeypatch undo) drops the entry
    try:
        config.cache_key_tag = salt
        assert "compiler.cache_key_tag" not in torch_adapter.compiler_settings()[0]
        config.cache_key_tag = f"mine|{salt}"
        assert torch_adapter.compiler_settings()[0]["compiler.cache_key_tag"] == "mine"
    finally:
        config.cache_key_tag = saved


DECODER_STEP = ";".join(
    ["sym:s0", "int64[s0,{q}]/{q},1@cpu", "int64[]/@cpu", *["float32[2048,8]/8,1@cpu"] * 2, "float32[64]/1@cpu"]
    + ["float32[2,s0,4,s10,16]/64*s0*s10,64*s10,16*s10,16,1@cpu"] * 26
)
"""A decode graph's inputs, as the tiny decoder's look: the tokens of ``q`` steps among 32 inputs."""


def test_the_accepted_shapes_factor_names_only_the_inputs_that_differ() -> None:
    here, bundle = DECODER_STEP.format(q=3), DECODER_STEP.format(q=1)
    other = bundle.replace("float32[64]", "float32[65]").replace("int64[]/@cpu", "int64[7]/1@cpu")
    assert accepted_shapes_factor(here, [other, bundle]) == (
        "accepted_shapes: inputs not qualified: graph input 2 of 32 is int64[s0,3], the bundle qualified int64[s0,1] "
        "(31 other graph inputs equal; closest of 2 input sets it qualified)"
    )  # no sources: the model's inputs cannot be told from its parameters, so it says graph input
    strided = bundle.replace("int64[s0,1]/1,1@cpu", "int64[s0,1]/2,1@cpu")
    assert accepted_shapes_factor(bundle, [strided]) == (
        "accepted_shapes: inputs not qualified: graph input 2 of 32 is int64[s0,1]/1,1@cpu, the bundle qualified "
        "int64[s0,1]/2,1@cpu (31 other graph inputs equal)"
    )  # sizes alike: the whole input, strides and device with them
    many = ";".join(f"float32[{i}]/1@cpu" for i in range(7))
    assert accepted_shapes_factor(many, [many.replace("float32[", "float32[1")]) == (
        "accepted_shapes: inputs not qualified: graph inputs 1, 2, 3, 4 and 3 more of 7 are float32[0], float32[1], "
        "float32[2], float32[3], the bundle qualified float32[10], float32[11], float32[12], float32[13] "
        "(0 other graph inputs equal)"
    )


DECODER_SOURCES = [
    "L['input_ids'].size()[0]", "L['input_ids']", "L['pos']", "L['self']._modules['embed']._parameters['weight']",
    "L['self']._modules['head']._parameters['weight']", "L['self']._buffers['inv_freq']",
    *(f"L['past'][{i}]" for i in range(26)),
]  # fmt: skip
"""Where Dynamo took the decode graph's inputs from: a size, two inputs, two parameters, a buffer, 26 cache tensors."""


def test_the_accepted_shapes_factor_numbers_the_models_inputs_apart_from_its_parameters() -> None:
    here, bundle = DECODER_STEP.format(q=3), DECODER_STEP.format(q=1)
    assert accepted_shapes_factor(here, [bundle], sources=DECODER_SOURCES) == (
        "accepted_shapes: inputs not qualified: input 1 of 28 is int64[s0,3], the bundle qualified int64[s0,1] "
        "(27 inputs, 2 parameters, 1 buffer, 1 size equal)"
    )  # a dynamic bundle: no --dynamic advice
    weight = bundle.replace("float32[2048,8]/8,1@cpu;float32[64]", "float32[2048,8]/8,1@cpu;float32[32]")
    assert accepted_shapes_factor(here, [weight], sources=DECODER_SOURCES, static=True) == (
        "accepted_shapes: inputs not qualified: input 1 of 28, buffer inv_freq are int64[s0,3], float32[64], the "
        "bundle qualified int64[s0,1], float32[32] (27 inputs, 2 parameters, 1 size equal)"
    )  # a buffer differs: no model of this one, so --dynamic would not cover it
    assert accepted_shapes_factor(here, [bundle], sources=DECODER_SOURCES, static=True).endswith(
        f"(27 inputs, 2 parameters, 1 buffer, 1 size equal); {STATIC_ADVICE}"
    )
    other_dtype = bundle.replace("int64[s0,1]/1,1", "int32[s0,3]/3,1")
    assert STATIC_ADVICE not in accepted_shapes_factor(here, [other_dtype], sources=DECODER_SOURCES, static=True)
