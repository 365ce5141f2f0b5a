"""A real AOTInductor ``.pt2`` as a bundle artifact: exported and compiled on CPU, carried with each member
hashed in the identity, and, in a fresh process, verified, loaded and run to the eager model's output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from inferensics import bundle as b
from inferensics.bundle.canonical import sha256_hex
from tests.bundle.conftest import Keys, spec

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]

EXPORT = """
import sys, warnings
warnings.simplefilter("ignore")
import torch
from inferensics.bundle import torch_adapter
from tests.bundle.models import inputs, tiny_mlp
exported = torch.export.export(tiny_mlp().eval(), inputs((2, 8)))
print(torch_adapter.aoti_compile_and_package(exported, sys.argv[1]))
"""

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
    # Exported and AOT-compiled in a process of its own: torch.export and AOTInductor leave compiler state
    # behind that changed the FX-graph keys of every later compile in this process (the bundle tests after
    # this one then missed their own bundles' keys).
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "export-cache")}
    made = subprocess.run(
        [sys.executable, "-c", EXPORT, str(tmp_path / "tiny.pt2")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr[-2000:]
    package = Path(made.stdout.split()[-1])
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
