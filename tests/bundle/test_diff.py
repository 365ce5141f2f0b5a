"""``bundle diff`` names exactly the changed factor: single-factor mutations of the identity, and real
rebuilds (unchanged, other weights, dynamic on)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from inferensics import bundle as b
from tests.bundle.conftest import Keys, spec
from tests.bundle.resign import mutated


def _set(path: str, *values: Any) -> Callable[[dict[str, Any]], None]:
    """Set the factor at ``path`` to the first of ``values`` that differs from the identity's own: a host's factors
    (its CPU's instruction set, its torch or driver) may already be the first value."""

    def change(identity: dict[str, Any]) -> None:
        *parents, leaf = path.split("/")
        node = identity
        for p in parents:
            node = node.setdefault(p, {})
        other = [v for v in values if v != node.get(leaf)]
        assert other, f"every mutation of {path} equals this host's own {node.get(leaf)!r}"
        node[leaf] = other[0]

    return change


def _first_graph(field: str, value: str) -> Callable[[dict[str, Any]], None]:
    def change(identity: dict[str, Any]) -> None:
        identity["artifacts"]["graphs"][0][field] = value

    return change


def _add_customisation(identity: dict[str, Any]) -> None:
    from tests.bundle.models import fast_gelu

    identity["customisations"] = [
        b.describe_customisation("decomposition", "aten.gelu.default", fast_gelu).model_dump()
    ]


MUTATIONS: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    ("torch version", _set("compiler_versions/torch", "2.11.0+cu130", "2.13.0+cpu"), "compiler_versions",
     "compiler_versions.torch"),
    ("torch source key", _set("compiler_versions/torch_key", "0" * 64), "compiler_versions",
     "compiler_versions.torch_key"),
    ("triton version", _set("compiler_versions/triton", "3.6.0", "3.9.0"), "compiler_versions",
     "compiler_versions.triton"),
    ("triton key", _set("compiler_versions/triton_key", "1" * 64), "compiler_versions", "compiler_versions.triton_key"),
    ("python", _set("compiler_versions/python", "3.12.3", "3.11.7"), "compiler_versions", "compiler_versions.python"),
    ("cuda runtime", _set("compiler_versions/cuda_runtime", "13.0", "12.8"), "compiler_versions",
     "compiler_versions.cuda_runtime"),
    ("cudnn", _set("compiler_versions/cudnn", "91900", "90100"), "compiler_versions", "compiler_versions.cudnn"),
    ("an inductor setting", _set("settings/changed/inductor.max_fusion_size", 1), "settings",
     "settings.changed.inductor.max_fusion_size"),
    ("a dynamo setting", _set("settings/changed/dynamo.automatic_dynamic_shapes", False), "settings",
     "settings.changed.dynamo.automatic_dynamic_shapes"),
    ("compile mode", _set("settings/compile/mode", "max-autotune"), "settings", "settings.compile.mode"),
    ("dynamic on", _set("settings/compile/dynamic", True), "settings", "settings.compile.dynamic"),
    ("fullgraph", _set("settings/compile/fullgraph", True), "settings", "settings.compile.fullgraph"),
    ("cpu threads", _set("settings/cpu_threads", 7, 5), "settings", "settings.cpu_threads"),
    ("compute capability", _set("compatibility/compute_capability", "9.0", "8.0"), "compatibility",
     "compatibility.compute_capability"),
    ("device name", _set("compatibility/device_name", "NVIDIA H200", "NVIDIA H100 80GB HBM3"), "compatibility",
     "compatibility.device_name"),
    ("driver", _set("compatibility/driver", "580.95.05", "570.86.15"), "compatibility", "compatibility.driver"),
    ("cpu isa", _set("compatibility/cpu_isa", "AVX2", "AVX512"), "compatibility", "compatibility.cpu_isa"),
    ("runtime abi", _set("compatibility/runtime_abi", "cpython-312-cxx11abi1", "cpython-311-cxx11abi1"),
     "compatibility", "compatibility.runtime_abi"),
    ("a line of model code", _set("code/tests.bundle.models", "a" * 64), "code", "code.tests.bundle.models"),
    ("the weights", _set("weights/digest", "b" * 64), "weights", "weights.digest"),
    ("factory argument", _set("model/args/seed", 1), "model", "model.args.seed"),
    ("a custom decomposition", _add_customisation, "customisations", "customisations[aten.gelu.default]"),
    ("registry state", _set("kernel_registry/state", "rms_norm:triton_v2>native"), "kernel_registry",
     "kernel_registry.state"),
    ("generated code", _first_graph("output_code_sha256", "c" * 64), "artifacts", "artifacts.graphs[{fx}]"),
    ("accepted shapes", _set("accepted_shapes/shapes", [[2, 8]]), "accepted_shapes", "accepted_shapes.shapes"),
]  # fmt: skip


@pytest.mark.slow
@pytest.mark.parametrize(("what", "change", "group", "path"), MUTATIONS, ids=[m[0] for m in MUTATIONS])
def test_single_factor_mutation_names_exactly_that_factor(
    built: b.BuildResult, what: str, change: Callable[[dict[str, Any]], None], group: str, path: str
) -> None:
    base = built.manifest
    other = mutated(base, change)
    changes = b.diff(base, other)
    expected = path.format(fx=base.identity["artifacts"]["graphs"][0]["fx_key"])
    assert [(c.group, c.path) for c in changes] == [(group, expected)], what
    assert other.bundle_id != base.bundle_id
    text = b.render_diff(base, other, changes)
    assert f"[{group}]" in text
    assert expected in text


def test_at_least_twenty_mutations() -> None:
    assert len(MUTATIONS) >= 20
    assert len({m[2] for m in MUTATIONS}) == 10  # every group is exercised


@pytest.mark.slow
def test_changed_default_shows_as_the_settings_digest(built: b.BuildResult) -> None:
    other = built.manifest.model_copy(
        update={"factor_digests": {**built.manifest.factor_digests, "settings_all": "d" * 64}}
    )
    assert [c.path for c in b.diff(built.manifest, other)] == ["settings.all_settings_digest"]


@pytest.mark.slow
def test_unchanged_rebuild_has_the_same_id_and_no_diff(built: b.BuildResult, keys: Keys, tmp_path: Any) -> None:
    again = b.build(spec(), keys.key, tmp_path / "again")
    assert b.diff(built.manifest, again.manifest) == []
    assert again.bundle_id == built.bundle_id
    assert "same identity" in b.render_diff(built.manifest, again.manifest, [])


@pytest.mark.slow
def test_rebuild_with_other_weights(built: b.BuildResult, keys: Keys, tmp_path: Any) -> None:
    other = b.build(spec(model_args={"seed": 1}), keys.key, tmp_path / "seed1")
    changes = b.diff(built.manifest, other.manifest)
    # parameters are graph inputs: the generated code is the same, only the factory argument and weights differ
    assert [c.path for c in changes] == ["model.args.seed", "weights.digest"]


@pytest.mark.slow
def test_rebuild_with_dynamic_shapes(built: b.BuildResult, keys: Keys, tmp_path: Any) -> None:
    other = b.build(spec(dynamic=True), keys.key, tmp_path / "dynamic")
    changes = b.diff(built.manifest, other.manifest)
    causes = {c.path for c in changes if c.group not in {"artifacts"}}
    assert causes == {"settings.compile.dynamic", "accepted_shapes.dynamic"}
    assert any(c.group == "artifacts" for c in changes)  # one dynamic graph replaces two static ones
