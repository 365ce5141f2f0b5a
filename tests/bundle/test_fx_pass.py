"""An FX-pass customisation: a bundle signs a shape only with its compiled graph inside (replay walk D1).

Inductor keys its FX-graph cache by a pass's ``uuid()``; with a pass that has none (a plain function) it compiles
every graph past the cache, leaving nothing for the bundle to carry: such a build signed an empty artifact list
with the shape accepted, and every host then compiled the shape itself.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle import customisations as custom
from inferensics.bundle import torch_adapter
from inferensics.cli.app import app
from tests.bundle import fx_passes
from tests.bundle.conftest import Keys, one_line_error, spec

pytestmark = pytest.mark.slow

build_module = importlib.import_module("inferensics.bundle.build")  # the package exports ``build``, the function
SLOT = "post_grad_custom_post_pass"
ONE_SHAPE = b.ShapeDistribution.of([(2, 8)])
FIX = "give it a uuid() by subclassing torch._inductor.custom_graph_pass.CustomGraphPass"


def _recorded(import_path: str, obj: object) -> b.Customisation:
    """A record of ``obj`` as an older describe (or a hand-written spec) made it, bypassing today's check."""
    return b.Customisation(kind="fx_pass", target=SLOT, import_path=import_path, code_digest=custom.code_digest(obj))


@pytest.mark.parametrize(
    ("obj", "path", "why"),
    [
        (fx_passes.plain_pass, "tests.bundle.fx_passes:plain_pass", "has no uuid()"),
        (fx_passes.none_uuid_pass, "tests.bundle.fx_passes:none_uuid_pass", "has a uuid() that returns None"),
    ],
)
def test_describing_a_pass_without_a_uuid_is_refused(obj: object, path: str, why: str) -> None:
    with pytest.raises(b.BundleError) as info:
        b.describe_customisation("fx_pass", SLOT, obj)
    assert info.value.cause == "bad_input"
    assert str(info.value) == (
        f"the FX pass {path} {why}: Inductor bypasses its cache for it, so the bundle cannot carry the graph; "
        f"{FIX} (and pass a module-level instance of it)"
    )


def test_a_build_with_a_pass_without_a_uuid_is_refused_before_compiling(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_compile(*args: object, **kwargs: object) -> None:
        raise AssertionError("compiled before refusing")

    monkeypatch.setattr(build_module, "run_policy", no_compile)
    c = _recorded("tests.bundle.fx_passes:plain_pass", fx_passes.plain_pass)
    with pytest.raises(b.BundleError) as info:
        b.build(spec(customisations=(c,), shapes=ONE_SHAPE), keys.key, tmp_path / "out")
    assert info.value.cause == "bad_input"
    assert "tests.bundle.fx_passes:plain_pass has no uuid()" in str(info.value)
    assert str(info.value).endswith("nothing was compiled or signed")
    assert not (tmp_path / "out").exists()


def test_a_shape_whose_graph_was_not_cached_is_not_signed(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the up-front check (a cause it does not know), the build sees the graph it cannot carry and refuses."""
    monkeypatch.setattr(custom, "refuse_uncarried_fx_passes", lambda _: None, raising=False)
    c = _recorded("tests.bundle.fx_passes:plain_pass", fx_passes.plain_pass)
    with pytest.raises(b.BundleError) as info:
        b.build(spec(customisations=(c,), shapes=ONE_SHAPE), keys.key, tmp_path / "out")
    message = str(info.value)
    assert info.value.cause == "bad_input", message
    assert message.startswith("cannot sign: shape [2, 8]'s compiled graph is not in Inductor's FX-graph cache"), message
    assert "the FX pass tests.bundle.fx_passes:plain_pass has no uuid()" in message
    assert FIX in message
    assert message.endswith("nothing was signed")
    assert "\n" not in message
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir()] == []  # no half-made bundle beside it


def test_a_pass_with_a_uuid_is_carried_and_loads(keys: Keys, tmp_path: Path) -> None:
    c = b.describe_customisation("fx_pass", SLOT, fx_passes.no_op_pass)
    assert c.import_path == "tests.bundle.fx_passes:no_op_pass"
    result = b.build(spec(customisations=(c,), shapes=ONE_SHAPE), keys.key, tmp_path / "out")
    graphs = result.manifest.graphs
    assert graphs
    assert all(g.fx_key for g in graphs)
    assert result.manifest.accepted_shapes == [[2, 8]]
    # A load installs the pass in this process for good (a later build sets it aside: test_build_compiler_state.py):
    # restored after, or this session's later compiles outside a build run with it.
    with torch_adapter.compiler_state_restored([SLOT]):
        loaded = b.load(result.directory, keys.keyring)  # the pass imports by its name with the same code digest
    assert {g.fx_key for g in graphs} <= set(loaded.cache_keys["inductor"])


def _cli_build(keys: Keys, tmp_path: Path, *fx_pass: str) -> list[str]:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(ONE_SHAPE.to_json()))
    args = ["bundle", "build", "--model", spec().model, "--inputs", str(spec().inputs), "--shapes", str(shapes),
            "--key", str(keys.private), "--out", str(tmp_path / "out"), "--no-advise", "--quiet"]  # fmt: skip
    for f in fx_pass:
        args += ["--fx-pass", f]
    return args


def test_cli_build_carries_a_pass_given_by_fx_pass(keys: Keys, tmp_path: Path) -> None:
    """``--fx-pass module:name`` goes into the default slot, ``SLOT=module:name`` into that one; both recorded."""
    pre = "post_grad_custom_pre_pass=tests.bundle.fx_passes:counting_pass"
    res = CliRunner().invoke(app, _cli_build(keys, tmp_path, "tests.bundle.fx_passes:no_op_pass", pre))
    assert res.exit_code == 0, res.output
    recorded = b.read_manifest(tmp_path / "out").identity["customisations"]
    assert [(c["kind"], c["target"], c["import_path"]) for c in recorded] == [
        ("fx_pass", SLOT, "tests.bundle.fx_passes:no_op_pass"),
        ("fx_pass", "post_grad_custom_pre_pass", "tests.bundle.fx_passes:counting_pass"),
    ]
    assert all(g.fx_key for g in b.read_manifest(tmp_path / "out").graphs)
    assert torch_adapter.fx_pass_slots()[SLOT] is None  # the build's passes stayed in the build


@pytest.mark.parametrize(
    ("given", "needle"),
    [
        ("tests.bundle.fx_passes:plain_pass", "the FX pass tests.bundle.fx_passes:plain_pass has no uuid(): "),
        ("no_such_slot=tests.bundle.fx_passes:no_op_pass", "FX pass slot 'no_such_slot': Inductor (torch "),
        ("tests.bundle.fx_passes", "--fx-pass 'tests.bundle.fx_passes': expected [SLOT=]module:name"),
        ("tests.bundle.no_such_module:p", "--fx-pass 'tests.bundle.no_such_module:p': cannot import"),
        ("tests.bundle.fx_passes:missing", "--fx-pass 'tests.bundle.fx_passes:missing': tests.bundle.fx_passes has no"),
        ("=tests.bundle.fx_passes:no_op_pass", "expected [SLOT=]module:name"),
    ],
)
def test_a_bad_fx_pass_is_one_line_before_anything_compiles(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str, needle: str
) -> None:
    monkeypatch.setattr(build_module, "run_policy", _no_compile)
    one_line_error(_cli_build(keys, tmp_path, given), needle)
    assert not (tmp_path / "out").exists()


def test_two_passes_for_one_slot_are_refused(keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build_module, "run_policy", _no_compile)
    one_line_error(
        _cli_build(keys, tmp_path, "tests.bundle.fx_passes:no_op_pass", "tests.bundle.fx_passes:counting_pass"),
        f"two customisations for Inductor's FX pass slot {SLOT} (tests.bundle.fx_passes:no_op_pass and "
        "tests.bundle.fx_passes:counting_pass): it holds one",
    )


def test_describing_a_pass_for_a_slot_inductor_lacks_is_refused() -> None:
    with pytest.raises(b.BundleError) as info:
        b.describe_customisation("fx_pass", "post_grad_custom_pass", fx_passes.no_op_pass)
    assert info.value.cause == "bad_input"
    assert str(info.value).startswith("FX pass slot 'post_grad_custom_pass': Inductor (torch ")
    assert f"name one of {', '.join(torch_adapter.fx_pass_slots())} (default {SLOT})" in str(info.value)


def _no_compile(*args: object, **kwargs: object) -> None:
    raise AssertionError("compiled before refusing")
