"""A build compiles with its own customisations only, whatever this process loaded or set before.

A serving host that loaded a bundle with an FX pass keeps that pass in Inductor's slot (its graphs compile with
it); a build in the same process (a CI box that loads a baseline, a host that builds from its traffic) used to
compile with it too, signing an identity that carried the pass as a setting but not as a customisation, so hosts
never installed it. Now the loads' customisations are set aside for the build and come back after, and a pass or
decomposition that other code set and the build does not declare refuses the build in one line.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from inferensics.bundle.cache import build_key
from inferensics.cli.app import app
from tests.bundle import fx_passes
from tests.bundle.conftest import Keys, one_line_error, spec
from tests.bundle.models import fast_gelu

pytestmark = pytest.mark.slow

build_module = importlib.import_module("inferensics.bundle.build")
SLOT = "post_grad_custom_post_pass"
ONE_SHAPE = b.ShapeDistribution.of([(2, 8)])
SALT = "|inferensics:"


@pytest.fixture
def with_pass(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> b.BuildResult:
    """A bundle built with the counting FX pass."""
    c = b.describe_customisation("fx_pass", SLOT, fx_passes.counting_pass)
    return b.build(spec(customisations=(c,), shapes=ONE_SHAPE), keys.key, tmp_path_factory.mktemp("pass") / "a")


def test_a_build_after_loading_a_bundle_with_a_pass_compiles_and_signs_without_it(
    with_pass: b.BuildResult, keys: Keys, tmp_path: Path
) -> None:
    clean_key = build_key(spec(shapes=ONE_SHAPE), keys.key.keyid)
    with torch_adapter.compiler_state_restored():  # this test's load stays in this test
        b.load(with_pass.directory, keys.keyring)  # a serving host: the pass is installed for the process
        assert torch_adapter.fx_pass_slots()[SLOT] is fx_passes.counting_pass
        loaded_tag = torch.compiler.config.cache_key_tag
        assert SALT in loaded_tag

        # The build cache keys the build the process would make: the same as in a process that loaded nothing.
        assert build_key(spec(shapes=ONE_SHAPE), keys.key.keyid).digest == clean_key.digest
        runs = fx_passes.CountingPass.runs
        other = b.build(spec(shapes=ONE_SHAPE, name="other"), keys.key, tmp_path / "b")
        assert fx_passes.CountingPass.runs == runs  # compiled without the loaded bundle's pass
        identity = other.manifest.identity
        assert identity["customisations"] == []
        changed = identity["settings"]["changed"]
        assert f"inductor.{SLOT}" not in changed, changed
        assert SALT not in str(changed.get("compiler.cache_key_tag", "")), changed
        assert other.manifest.graphs
        assert all(g.fx_key for g in other.manifest.graphs)

        # The host still serves its loaded bundle's compiler.
        assert torch_adapter.fx_pass_slots()[SLOT] is fx_passes.counting_pass
        assert torch.compiler.config.cache_key_tag == loaded_tag
    assert torch_adapter.fx_pass_slots()[SLOT] is None


def test_a_build_that_declares_the_loaded_pass_compiles_with_it(
    with_pass: b.BuildResult, keys: Keys, tmp_path: Path
) -> None:
    c = b.describe_customisation("fx_pass", SLOT, fx_passes.counting_pass)
    with torch_adapter.compiler_state_restored():
        b.load(with_pass.directory, keys.keyring)
        runs = fx_passes.CountingPass.runs
        again = b.build(spec(customisations=(c,), shapes=ONE_SHAPE), keys.key, tmp_path / "again")
        assert fx_passes.CountingPass.runs > runs
        assert again.manifest.identity["customisations"] == [c.model_dump()]
        assert again.bundle_id == with_pass.bundle_id  # the same build as in a fresh process


def _no_compile(*args: object, **kwargs: object) -> None:
    raise AssertionError("compiled before refusing")


_SET_BY_OTHER_CODE: dict[str, tuple[Callable[[], None], str, str]] = {
    "fx_pass": (
        lambda: torch_adapter.install_fx_pass(SLOT, fx_passes.counting_pass),
        f"Inductor's FX pass slot {SLOT} holds tests.bundle.fx_passes:counting_pass in this process",
        f"--fx-pass {SLOT}=module:name",
    ),
    "decomposition": (
        lambda: torch_adapter.install_decomposition("aten.gelu.default", fast_gelu),
        "Inductor's decomposition of aten.gelu.default is tests.bundle.models:fast_gelu in this process",
        "--decomposition aten.gelu.default=module:function",
    ),
}


@pytest.mark.parametrize("kind", sorted(_SET_BY_OTHER_CODE))
def test_a_pass_or_decomposition_set_by_other_code_and_not_declared_refuses_the_build(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    install, head, declare = _SET_BY_OTHER_CODE[kind]
    monkeypatch.setattr(build_module, "run_policy", _no_compile)
    line = (
        f"{head}, which this build does not record among its customisations: declare it ({declare}) or unset it "
        "before building, so that the signed identity says what compiled: nothing was compiled or signed"
    )
    with torch_adapter.compiler_state_restored():
        install()
        with pytest.raises(b.BundleError) as info:
            b.build(spec(shapes=ONE_SHAPE), keys.key, tmp_path / "out")
        assert (info.value.cause, str(info.value)) == ("bad_input", line)
        with pytest.raises(b.BundleError) as keyed:
            build_key(spec(shapes=ONE_SHAPE), keys.key.keyid)
        assert str(keyed.value) == line
        shapes = tmp_path / "shapes.json"
        shapes.write_text(json.dumps(ONE_SHAPE.to_json()))
        one_line_error(
            ["bundle", "build", "--model", spec().model, "--inputs", str(spec().inputs), "--shapes", str(shapes),
             "--key", str(keys.private), "--out", str(tmp_path / "cli"), "--no-advise"],
            line,
        )  # fmt: skip
        assert not (tmp_path / "out").exists()
        assert not (tmp_path / "cli").exists()


def test_the_refusal_of_an_undeclared_pass_names_the_option_that_declares_it(keys: Keys, tmp_path: Path) -> None:
    """What the refusal tells the user to pass is a `bundle build` option, and passing it builds with the pass."""
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(ONE_SHAPE.to_json()))
    args = ["bundle", "build", "--model", spec().model, "--inputs", str(spec().inputs), "--shapes", str(shapes),
            "--key", str(keys.private), "--no-advise", "--quiet"]  # fmt: skip
    with torch_adapter.compiler_state_restored():
        torch_adapter.install_fx_pass(SLOT, fx_passes.counting_pass)  # set by other code in this process
        one_line_error([*args, "--out", str(tmp_path / "refused")], f"declare it (--fx-pass {SLOT}=module:name)")
        declared = [
            *args,
            "--out",
            str(tmp_path / "declared"),
            "--fx-pass",
            f"{SLOT}=tests.bundle.fx_passes:counting_pass",
        ]
        res = CliRunner().invoke(app, declared)
        assert res.exit_code == 0, res.output
    recorded = b.read_manifest(tmp_path / "declared").identity["customisations"]
    assert [(c["kind"], c["target"], c["import_path"]) for c in recorded] == [
        ("fx_pass", SLOT, "tests.bundle.fx_passes:counting_pass")
    ]
