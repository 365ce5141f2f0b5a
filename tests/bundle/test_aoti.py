"""A real AOTInductor ``.pt2`` as a bundle artifact: exported and compiled on CPU, carried with each member
hashed in the identity, and, in a fresh process, verified, loaded and run to the eager model's output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from inferensics.bundle.canonical import sha256_hex
from tests.bundle.conftest import Keys, spec
from tests.bundle.models import inputs, tiny_mlp

pytestmark = [
    pytest.mark.slow,
    # Raised inside torch.export's own pytree copying on torch 2.13; not ours to fix.
    pytest.mark.filterwarnings(r"ignore:`isinstance\(treespec, LeafSpec\)` is deprecated:FutureWarning"),
]
ROOT = Path(__file__).resolve().parents[2]

RUN = """
import sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import torch
from inferensics import bundle as b
from tests.bundle.models import inputs, tiny_mlp
loaded = b.load(sys.argv[1], b.Keyring.load(sys.argv[2]))
x = inputs((2, 8))[0]
got = loaded.aoti(x)
got = got[0] if isinstance(got, (list, tuple)) else got
with torch.no_grad():
    want = tiny_mlp()(x)
print(float((got - want).abs().max()))
"""


def test_a_real_aoti_package_is_carried_hashed_and_loaded(keys: Keys, tmp_path: Path) -> None:
    model = tiny_mlp().eval()
    exported = torch.export.export(model, inputs((2, 8)))
    package = Path(torch_adapter.aoti_compile_and_package(exported, str(tmp_path / "tiny.pt2")))
    result = b.build(spec(aoti_package=package), keys.key, tmp_path / "bundle")

    aoti = result.manifest.identity["artifacts"]["aoti"]
    assert aoti["package"] == "artifacts/aoti/tiny.pt2"
    assert aoti["members"]
    assert any(name.endswith(".so") or name.endswith(".cpp") for name in aoti["members"])
    copy = result.directory / aoti["package"]
    assert {r.name: r.digest for r in result.manifest.resources}[aoti["package"]] == sha256_hex(copy.read_bytes())
    b.verify(result.directory, keys.keyring)

    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "fresh")}
    proc = subprocess.run(
        [sys.executable, "-c", RUN, str(result.directory), str(keys.public)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert float(proc.stdout.split()[-1]) < 1e-5
