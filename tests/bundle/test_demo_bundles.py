"""The demo's two release bundles, built with the bundle builder: the candidate records its faulty SiLU
decomposition by import path and code digest, and a fresh process reinstalls exactly that compiler."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from inferensics import bundle as b
from inferensics.bundle.customisations import code_digest
from inferensics.demo import incidents
from inferensics.demo.bundles import build_release_bundles
from tests.bundle.conftest import Keys

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(autouse=True)
def _restore_the_compiler() -> Iterator[None]:
    """The demo's builds set its Dynamo policy (automatic dynamic shapes, recompile limit) and its bundles' CPU
    thread count in this process: put them back afterwards, so later builds in the session record the compiler
    they had (the candidate's decomposition and cache salt the build itself takes back)."""
    dynamo = torch._dynamo.config
    policy, threads = (dynamo.automatic_dynamic_shapes, dynamo.recompile_limit), torch.get_num_threads()
    yield
    dynamo.automatic_dynamic_shapes, dynamo.recompile_limit = policy
    torch.set_num_threads(threads)
    torch._dynamo.reset()


REINSTALL = """
import sys, warnings
warnings.simplefilter("ignore", DeprecationWarning)
import torch
from inferensics import bundle as b
loaded = b.load(sys.argv[1], b.Keyring.load(sys.argv[2]))
from torch._inductor import decomposition
fn = decomposition.decompositions[torch.ops.aten.silu.default]
print(f"{fn.__module__}:{fn.__qualname__}", torch.compiler.config.cache_key_tag)
"""


def test_demo_bundles_record_and_reinstall_the_customisation(keys: Keys, tmp_path: Path) -> None:
    built = build_release_bundles(tmp_path, keys.key)
    base, cand = built["baseline"].manifest, built["candidate"].manifest
    assert base.identity["customisations"] == []
    (custom,) = cand.identity["customisations"]
    assert custom == {
        "kind": "decomposition",
        "target": "aten.silu.default",
        "import_path": "inferensics.demo.incidents:fast_silu",
        "code_digest": code_digest(incidents.fast_silu),
    }
    groups = {c.group for c in b.diff(base, cand)}
    assert {"customisations", "settings"} <= groups  # the decomposition and the cache salt it brings
    assert groups <= {"customisations", "settings", "artifacts"}
    assert (built["candidate"].directory / "report" / "qualification.html").is_file()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "fresh")}
    proc = subprocess.run(
        [sys.executable, "-c", REINSTALL, str(built["candidate"].directory), str(keys.public)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    path, tag = proc.stdout.split()
    assert path == "inferensics.demo.incidents:fast_silu"
    assert tag.startswith("|inferensics:customisations-")
