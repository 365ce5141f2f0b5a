"""A ``--dynamic`` bundle's graph is compiled by its build at its qualified shapes; replay's fresh compiles run that
history before the request, so a fault specialised to the build's size hints reproduces and is named.

What it got wrong: the ladder's "fresh compile, same history" rung compiled at the request's shape alone (another
size hint), came out right, and the verdict blamed "a stale or poisoned cache entry" (``artifact_mismatch``) of an
artifact the evidence itself showed to be the verified, signed bundle hit; nothing said the request's shape was
never qualified. The build and the replay run in fresh processes (the factory plants the fault in the compiler).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch

from inferensics.replay import write_pack
from inferensics.replay._internal.pack import write_safetensors

ROOT = Path(__file__).resolve().parents[2]
PLANT = Path(__file__).resolve().parent / "shape_plant.py"
SUM_LINE = next(i for i, t in enumerate(PLANT.read_text().splitlines(), 1) if t.rstrip().endswith("# FAULT: sum"))
BUILD = """
import sys
from pathlib import Path
from inferensics import bundle as b
out = Path(sys.argv[1])
priv, pub, _ = b.generate_key(out / "builder")
spec = b.BuildSpec(model="tests.replay.shape_plant:centre", inputs="tests.replay.shape_plant:inputs",
                   shapes=b.ShapeDistribution.of([(4, 8)]), dynamic=True, advise=False, name="hint", repeats=1)
print(b.build(spec, b.load_signing_key(priv), out / "bundle").bundle_id)
"""
pytestmark = pytest.mark.slow


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONWARNINGS": "ignore"}


@pytest.fixture(scope="module")
def verdict(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    d = tmp_path_factory.mktemp("hint")
    built = subprocess.run([sys.executable, "-c", BUILD, str(d)], capture_output=True, text=True, env=_env(),
                           cwd=ROOT, timeout=600, check=False)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    bundle_id = built.stdout.strip().splitlines()[-1]
    x = torch.randn(4, 13, generator=torch.Generator().manual_seed(3))  # width 13: never qualified (8 was)
    request = {"request_id": "hint-1", "bundle_id": bundle_id, "model": "centre", "graph_keys": []}
    pack = write_pack(d / "pack", request=request, inputs=write_safetensors({"x": x}), bundle_dir=d / "bundle")
    proc = subprocess.run(
        [sys.executable, "-m", "inferensics.replay", "--pack", str(pack), "--keyring", str(d / "builder.pub"),
         "--json"], capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=600, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    found: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return found


def test_a_fault_specialised_to_the_build_shapes_is_a_shape_specialisation(verdict: dict[str, Any]) -> None:
    assert verdict["evidence"]["served_keys_all_hit"], verdict["evidence"]["served_matches"]
    assert verdict["category"] == "shape_specialization", verdict["summary"]
    assert verdict["op"] == "aten.sum", verdict["summary"]
    assert (verdict["source_file"], verdict["source_line"]) == (str(PLANT), SUM_LINE)
    assert "stale or poisoned" not in verdict["summary"]
    assert verdict["evidence"]["bundle_build_history"] == [[4, 8]]


def test_the_verdict_says_the_request_shape_was_never_qualified(verdict: dict[str, Any]) -> None:
    said = "request shape [4,13] was never qualified by this bundle (qualified: [4,8])"
    assert said in verdict["summary"], verdict["summary"]
    assert verdict["evidence"]["next_steps"][0].startswith(said)
    assert verdict["evidence"]["unqualified_shape"] == {"request": [4, 13], "qualified": [[4, 8]]}
