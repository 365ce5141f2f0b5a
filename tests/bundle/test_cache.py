"""The bundle cache: an unchanged build is reused (verified, same bundle id), a changed input or signer is
another key, a damaged cached bundle is dropped and said why, and ``rebuild`` builds anew.

The model here is a standalone module written to the test's folder: a model in the ``tests`` package would key
every file under ``tests/`` (a build keys its model's whole package), so an edit anywhere in the suite changed the
key, and the key would cover far more than the build reads.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle.cache import (
    BUNDLE_DIR,
    KEY_FILE,
    BuildKey,
    BundleCache,
    build_key,
    module_closure,
    source_digests,
)
from inferensics.cli.app import app
from tests.bundle.conftest import SHAPES, Keys
from tests.bundle.conftest import spec as tiny_spec

MODULE = "bundle_cache_model"
MODEL, INPUTS = f"{MODULE}:tiny_mlp", f"{MODULE}:inputs"
SOURCE = textwrap.dedent('''
    """The tiny MLP, as a user's model module outside any package."""

    import torch
    from torch import nn


    class TinyMLP(nn.Module):
        def __init__(self, seed: int = 0) -> None:
            super().__init__()
            torch.manual_seed(seed)
            self.fc1 = nn.Linear(8, 16)
            self.fc2 = nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(torch.nn.functional.gelu(self.fc1(x)))


    def tiny_mlp(seed: int = 0) -> TinyMLP:
        return TinyMLP(seed)


    def inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
        return (torch.randn(shape, generator=torch.Generator().manual_seed(1)),)
''')


@pytest.fixture(autouse=True)
def standalone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The model module, importable as :data:`MODULE` for this test (and forgotten after it)."""
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / f"{MODULE}.py").write_text(SOURCE, encoding="utf-8")
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.delitem(sys.modules, MODULE, raising=False)
    yield folder / f"{MODULE}.py"
    sys.modules.pop(MODULE, None)


def spec(**overrides: object) -> b.BuildSpec:
    """The conftest's tiny-MLP build spec, of the standalone module."""
    return tiny_spec(**{"model": MODEL, "inputs": INPUTS, **overrides})


def test_build_key_covers_inputs_and_signer(keys: Keys, tmp_path: Path) -> None:
    base = build_key(spec(), keys.key.keyid)
    assert build_key(spec(), keys.key.keyid) == base
    other_key = b.load_signing_key(b.generate_key(tmp_path / "other")[0])
    changed = {
        "signer": build_key(spec(), other_key.keyid),
        "shapes": build_key(spec(shapes=b.ShapeDistribution.of([(2, 8)], [1])), keys.key.keyid),
        "weights": build_key(spec(model_args={"seed": 1}), keys.key.keyid),
        "options": build_key(spec(options={"max_autotune": False}), keys.key.keyid),
        "name": build_key(spec(name="other"), keys.key.keyid),
    }
    assert all(k.digest != base.digest for k in changed.values()), changed
    # The model's module and the builder's own source are keyed, file by file, and nothing else.
    source = base.inputs["source"]
    assert MODULE in source
    assert "inferensics.bundle/build.py" in source
    assert sorted(k for k in source if not k.startswith("inferensics.")) == [MODULE], source


def test_the_key_follows_the_model_module_alone(keys: Keys, standalone: Path) -> None:
    """An edit of the model's module is another key; an edit of a test file is not (it is not read)."""
    base = build_key(spec(), keys.key.keyid)
    standalone.write_text(SOURCE + "\n# edited\n", encoding="utf-8")
    assert build_key(spec(), keys.key.keyid).inputs["source"][MODULE] != base.inputs["source"][MODULE]
    assert not any(k.startswith("tests/") for k in base.inputs["source"])


def test_source_follows_what_the_model_module_uses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A model module's helper (serving glue, a kernel library of the user's) is keyed with it: changing the
    helper changes the key's source."""
    (tmp_path / "closure_helper.py").write_text("def pad(x):\n    return x\n", encoding="utf-8")
    (tmp_path / "closure_model.py").write_text("from closure_helper import pad\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module("closure_model")
    assert module_closure(["closure_model"]) == ["closure_helper", "closure_model"]
    first = source_digests(module_closure(["closure_model"]))
    assert list(first) == ["closure_helper", "closure_model"]
    (tmp_path / "closure_helper.py").write_text("def pad(x):\n    return x + 1\n", encoding="utf-8")
    assert source_digests(["closure_model", "closure_helper"]) != first


@pytest.mark.slow
def test_reuse_verified_and_rebuild(keys: Keys, tmp_path: Path) -> None:
    cache = BundleCache(tmp_path / "cache")
    first = cache.build(spec(), keys.key, tmp_path / "one")
    assert not first.reused
    assert (cache.root / first.key.digest / KEY_FILE).is_file()
    t0 = time.perf_counter()
    second = cache.build(spec(), keys.key, tmp_path / "two", keyring=keys.keyring)
    reuse_s = time.perf_counter() - t0
    assert second.reused, second
    assert second.bundle_id == first.bundle_id
    b.verify(second.directory, keys.keyring)  # what a host loads checks out
    rebuilt = cache.build(spec(), keys.key, tmp_path / "three", rebuild=True)
    assert not rebuilt.reused
    assert rebuilt.key == first.key
    assert not rebuilt.not_stored
    # A cache that cannot store: the bundle is still built, and the result says why it was not cached.
    (tmp_path / "not-a-folder").write_text("")
    unstored = BundleCache(tmp_path / "not-a-folder").build(spec(), keys.key, tmp_path / "four")
    assert not unstored.reused
    assert unstored.not_stored.startswith(f"cannot store it in the bundle cache {tmp_path / 'not-a-folder'}: ")
    b.verify(unstored.directory, keys.keyring)
    print(f"reuse {reuse_s:.2f} s")


def test_damaged_cached_bundle_is_dropped(keys: Keys, built: b.BuildResult, tmp_path: Path) -> None:
    cache = BundleCache(tmp_path / "cache")
    key = build_key(tiny_spec(advise=True), keys.key.keyid)  # the session's bundle, of the tests package's model
    entry = cache.store(key, built.directory)
    assert cache.lookup(key, keys.keyring) == (entry, "")
    blob = entry / "artifacts" / "megacache.bin"
    blob.write_bytes(blob.read_bytes() + b"x")
    found, why = cache.lookup(key, keys.keyring)
    assert found is None
    assert "tampered" in why
    assert not (cache.root / key.digest).exists()
    # A bundle signed by a key this keyring does not trust is not reused either.
    cache.store(key, built.directory)
    stranger = b.Keyring.load(b.generate_key(tmp_path / "stranger")[1])
    found, why = cache.lookup(key, stranger)
    assert found is None
    assert "untrusted_builder" in why
    assert cache.entry(key).name == BUNDLE_DIR


def test_least_recently_used_bundles_are_pruned(built: b.BuildResult, tmp_path: Path) -> None:
    cache = BundleCache(tmp_path / "cache", max_entries=2)
    keys = [BuildKey(c * 64, {"n": i}) for i, c in enumerate("abc")]
    cache.store(keys[0], built.directory)
    os.utime(cache.root / keys[0].digest / KEY_FILE, (1000, 1000))
    cache.store(keys[1], built.directory)
    os.utime(cache.root / keys[1].digest / KEY_FILE, (2000, 2000))
    cache.store(keys[2], built.directory)
    assert [p.name for p in cache.entries()] == [keys[2].digest, keys[1].digest]


def test_cli_build_reuses_from_cache(keys: Keys, tmp_path: Path) -> None:
    """``inferensics bundle build --cache DIR`` of an unchanged build copies the verified cached bundle (no
    compile) and says so; ``--rebuild`` without ``--cache`` is one line."""
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(SHAPES.to_json()))
    cli_spec = b.BuildSpec(  # what the command builds: provenance tracking on unless an --option says otherwise
        model=MODEL, shapes=b.ShapeDistribution.load(shapes), inputs=INPUTS, name="tiny",
        options=dict(b.PROVENANCE_OPTIONS),
    )  # fmt: skip
    built = b.build(cli_spec, keys.key, tmp_path / "built")  # the bundle the command would build
    cache = BundleCache(tmp_path / "cache")
    cache.store(build_key(cli_spec, keys.key.keyid), built.directory)
    args = ["bundle", "build", "--model", MODEL, "--inputs", INPUTS, "--shapes", str(shapes), "--name", "tiny",
            "--key", str(keys.private), "--out", str(tmp_path / "out"), "--cache", str(cache.root)]  # fmt: skip
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    assert f"reused bundle {built.bundle_id} from {cache.root} (verified;" in res.output
    b.verify(tmp_path / "out", keys.keyring)
    res = CliRunner().invoke(app, [*args[:-2], "--rebuild"])
    assert res.exit_code != 0
    assert res.output.strip() == "error: --rebuild replaces a cached bundle: pass --cache DIR with it"
