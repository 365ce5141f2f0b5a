"""Every Triton kernel of ours survives the way Inductor embeds a user kernel in the module it generates under
``torch.compile`` (its source and globals inside a ``'''``-quoted string). On the H100, a ``\\n`` in the repr of
a PTX constant became a line break inside a string literal there, and every compile of a model served by the
SiLU·mul kernel failed with a SyntaxError. Checked in a fresh process without the interpreter (see
:mod:`tests.kernels.inductor_embedding`); no GPU needed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_kernel_survives_inductors_embedding() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    done = subprocess.run(
        [sys.executable, "-m", "tests.kernels.inductor_embedding"],
        check=False, capture_output=True, text=True, env=env, timeout=300, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["kernels"] >= 10  # the modules' kernels and helpers were found
    assert report["unembeddable"] == {}
