"""Bundle test fixtures: a builder key and one real bundle of a tiny MLP, built once per session.

The build compiles for real (torch.compile with Inductor on CPU), so it is session-scoped; tests that
alter a bundle work on a copy (:func:`copy_bundle`).
"""

from __future__ import annotations

import re
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle import torch_adapter

SHAPES = b.ShapeDistribution.of([(2, 8), (3, 8)], [3, 1])
MODEL = "tests.bundle.models:tiny_mlp"
INPUTS = "tests.bundle.models:inputs"


@dataclass(frozen=True)
class Keys:
    """A builder's key pair and a keyring trusting it."""

    private: Path
    public: Path
    key: b.SigningKey
    keyring: b.Keyring


@pytest.fixture(scope="session")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    """A builder key pair."""
    d = tmp_path_factory.mktemp("keys")
    priv, pub, _ = b.generate_key(d / "builder")
    return Keys(priv, pub, b.load_signing_key(priv), b.Keyring.load(pub))


def spec(**overrides: object) -> b.BuildSpec:
    """The tiny MLP's build spec (no policy advice unless asked: it compiles three more times)."""
    args: dict[str, object] = {"model": MODEL, "inputs": INPUTS, "shapes": SHAPES, "advise": False, "name": "tiny",
                               "repeats": 1}  # fmt: skip
    args.update(overrides)
    return b.BuildSpec(**args)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> b.BuildResult:
    """The tiny MLP's bundle, built once, with the shape-policy advice."""
    out = tmp_path_factory.mktemp("built") / "tiny"
    return b.build(spec(advise=True), keys.key, out)


def tar_folder(directory: Path, out: Path) -> Path:
    """``directory`` as a tar file, its files unchecked: a packed bundle that was altered, or an archive that
    is no bundle, as it reaches ``show``, ``diff`` or ``unpack`` (``bundle pack`` refuses to make one)."""
    import tarfile

    with tarfile.open(out, "w") as tar:
        for p in sorted(directory.rglob("*")):
            if p.is_file():
                tar.add(p, p.relative_to(directory).as_posix())
    return out


def copy_bundle(built: b.BuildResult, tmp_path: Path) -> Path:
    """A copy of the built bundle the test may alter."""
    dst = tmp_path / "bundle"
    shutil.copytree(built.directory, dst)
    return dst


@pytest.fixture
def load_spy(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Records every artifact load and customisation install (a refusal must leave it empty)."""
    calls: list[str] = []
    real_load = torch_adapter.load_cache_artifacts
    real_install = torch_adapter.install_decomposition
    real_aoti = torch_adapter.aoti_load_package

    def load(blob: bytes) -> dict[str, list[str]]:
        calls.append("megacache")
        return real_load(blob)

    def install(op: str, fn: object) -> None:
        calls.append(f"decomposition:{op}")
        real_install(op, fn)  # type: ignore[arg-type]

    def aoti(path: str) -> object:
        calls.append("aoti")
        return real_aoti(path)

    monkeypatch.setattr(torch_adapter, "load_cache_artifacts", load)
    monkeypatch.setattr(torch_adapter, "install_decomposition", install)
    real_files = torch_adapter.install_cache_files

    def files(source: Path) -> int:
        calls.append("cpu_kernels")
        return real_files(source)

    monkeypatch.setattr(torch_adapter, "aoti_load_package", aoti)
    monkeypatch.setattr(torch_adapter, "install_cache_files", files)
    return calls


TORCH_INTERNAL_WARNINGS = (
    # Raised inside Inductor's own imports on torch 2.13; not ours to fix, and fatal under filterwarnings=error.
    "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Let torch's own deprecation warnings through for the tests that run real compiles."""
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            for warning in TORCH_INTERNAL_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(warning))


PROGRESS_LINE = re.compile(r"^\[ *\d+\.\d s\] ")
"""A progress line of ``bundle build`` on stderr (``[  12.3 s] importing the model ...``)."""


def without_progress(output: str) -> str:
    """A command's output without ``bundle build``'s progress lines."""
    return "\n".join(line for line in output.splitlines() if not PROGRESS_LINE.match(line))


def one_line_error(args: list[str], needle: str) -> str:
    """Run ``inferensics ARGS`` and check it failed with one ``error:`` line containing ``needle`` (no traceback;
    a build's progress lines before it aside)."""
    from inferensics.cli.app import app

    res = CliRunner().invoke(app, args)
    assert res.exit_code != 0, res.output
    text = without_progress(res.output).strip()
    assert "Traceback" not in text, text
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error:"), text
    assert needle in text, text
    return text
