"""``bundle build`` says what it is doing as it goes, on stderr: one line per stage (importing the model, each
shape compiled and qualified with its time, signing), so a build that compiles for minutes is not silent;
stdout keeps the result alone, and ``--quiet`` drops the progress.

It used to print nothing until the end (370 s on a loaded box).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from tests.bundle.break_models import break_line
from tests.bundle.conftest import PROGRESS_LINE, Keys

pytestmark = pytest.mark.slow


def _build(keys: Keys, tmp_path: Path, model: str, *extra: str) -> tuple[Path, list[str], list[str]]:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"shapes": [{"shape": [2, 8], "weight": 3}, {"shape": [3, 8], "weight": 1}]}))
    out = tmp_path / "bundle"
    res = CliRunner().invoke(app, [
        "bundle", "build", "--model", model, "--inputs", "tests.bundle.models:inputs", "--shapes", str(shapes),
        "--key", str(keys.private), "--out", str(out), "--name", "progress", "--no-advise", *extra,
    ])  # fmt: skip
    assert res.exit_code == 0, res.output
    return out, res.stdout.splitlines(), res.stderr.splitlines()


def _stdout_is_the_result(out: Path, stdout: list[str], keys: Keys) -> None:
    stdout = [line for line in stdout if not line.startswith("warning: value guard: ")]  # test_value_guards.py's
    assert len(stdout) == 4, stdout
    assert re.fullmatch(r"bundle id [0-9a-f]{64}", stdout[1]), stdout
    assert [stdout[0], *stdout[2:]] == [
        f"built {out}",
        f"signed by {keys.key.keyid}",
        f"report {out / 'report' / 'qualification.html'}",
    ]


def test_build_prints_each_stage_on_stderr_and_the_report_names_the_break(keys: Keys, tmp_path: Path) -> None:
    out, stdout, stderr = _build(keys, tmp_path, "tests.bundle.break_models:item_branch")
    _stdout_is_the_result(out, stdout, keys)
    # the branch's .item() result is compared after the break, in a frame pinned to its value
    (pinned,) = [line for line in stdout if line.startswith("warning: value guard: ")]
    assert f"break_models.py:{break_line()}" in pinned, pinned
    progress = [PROGRESS_LINE.sub("", line) for line in stderr if PROGRESS_LINE.match(line)]
    assert progress[0] == "importing the model tests.bundle.break_models:item_branch"
    assert progress[1] == "compiling 2 shapes from an empty cache and checking each against eager and fp64 (as built)"
    for i, shape in ((2, "2x8"), (3, "3x8")):
        assert re.fullmatch(
            rf"as built: shape {shape} compiled in \d+\.\d s \(\d new graphs?\), first request \d+\.\d s, steady "
            r"[0-9.e+-]+ ms; accuracy within tolerance",
            progress[i],
        ), progress[i]
    assert progress[4] == "serving 2 shapes from the bundle's cache (warm start)"
    assert progress[5].startswith("with bundle: shape 2x8 compiled in ")
    assert progress[6].startswith("with bundle: shape 3x8 compiled in ")
    assert progress[7] == f"signing the manifest with key {keys.key.keyid[:16]}"
    assert len(progress) == 8, progress

    md = (out / "report" / "qualification.md").read_text()
    row = (
        f"| break_models.py:{break_line()} | Unsupported Tensor.item() call with capture_scalar_outputs=False "
        "| GB0124 | Dynamo does not support tracing `Tensor.item()` with config.capture_scalar_outputs=False. |"
    )
    assert row in md, md


def test_quiet_prints_no_progress(keys: Keys, tmp_path: Path) -> None:
    out, stdout, stderr = _build(keys, tmp_path, "tests.bundle.models:tiny_mlp", "--quiet")
    _stdout_is_the_result(out, stdout, keys)
    assert not [line for line in stderr if PROGRESS_LINE.match(line)], stderr
