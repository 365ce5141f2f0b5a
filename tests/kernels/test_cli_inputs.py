"""``kernels list`` and ``kernels qualify`` on inputs that are easy to get wrong: evidence this host can only
partly apply (stdout stays JSON, the JSON says what was left out), ops and shapes given twice (measured once),
shapes files that list nothing (refused), a shape the op's reference refuses (reported, not measured)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from inferensics.cli.app import app
from tests.kernels.evidence_edits import redigest

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

runner = CliRunner()


def _qualify(*args: str) -> Result:
    return runner.invoke(app, ["kernels", "qualify", "--trials", "2", "--warmup", "0", "--iters", "1", *args])


def _shapes(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "shapes.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.usefixtures("restored_registry")
def test_list_json_stays_json_and_says_what_it_could_not_apply(tmp_path: Path) -> None:
    shapes = _shapes(tmp_path, {"silu_mul": [{"tokens": 2, "hidden": 8}]})
    out = tmp_path / "evidence.json"
    result = _qualify("--shapes", str(shapes), "--dtype", "float32", "--out", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    policy = doc["registry"]["policy"]["silu_mul"]
    # A provider this host lacks in one bucket, between two buckets it can take.
    policy["bucket_priority"] = {"float32/n16/t1": ["reference"], "float32/n16/t2": ["cuda_only"]}
    policy["bucket_priority"]["float32/n16/t4"] = ["reference"]
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(redigest(doc)))

    before = runner.invoke(app, ["kernels", "list", "--json"])  # this host's own policy (a CUDA host has buckets)
    assert before.exit_code == 0, before.output
    own = json.loads(before.stdout)["policy"]["silu_mul"].get("bucket_priority", {})
    result = runner.invoke(app, ["kernels", "list", "--json", "--evidence", str(edited)])

    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)  # nothing but the JSON on stdout
    assert f"--evidence {edited}: not applied: silu_mul: bucket float32/n16/t2: unknown providers" in result.stderr
    assert shown["evidence"]["applied"] is False
    assert "float32/n16/t2: unknown providers ['cuda_only']" in shown["evidence"]["not_applied"]
    # the rest of the op's policy is applied
    applied = shown["policy"]["silu_mul"]["bucket_priority"]
    assert applied["float32/n16/t1"] == applied["float32/n16/t4"] == ["reference"]
    assert applied.get("float32/n16/t2") == own.get("float32/n16/t2")  # left as this host had it
    assert applied.get("float32/n16/t2") != ["cuda_only"]

    result = runner.invoke(app, ["kernels", "list", "--json", "--evidence", str(out)])  # all of it applies
    assert result.exit_code == 0, result.output
    assert not result.stderr
    evidence = json.loads(result.stdout)["evidence"]
    assert (evidence["applied"], evidence["not_applied"]) == (True, "")

    result = runner.invoke(app, ["kernels", "list", "--evidence", str(edited)])
    assert result.exit_code == 0, result.output
    assert "applied below, except 1 entry this host cannot take (said on stderr)" in result.stdout
    assert "not applied" not in result.stdout


@pytest.mark.usefixtures("restored_registry")
def test_an_op_or_shape_given_twice_is_measured_once(tmp_path: Path) -> None:
    shape = {"tokens": 2, "hidden": 8}
    shapes = _shapes(tmp_path, {"rms_norm": [shape, {"hidden": 8, "tokens": 2}, {"tokens": 3, "hidden": 8}]})
    out = tmp_path / "evidence.json"
    args = ("--op", "rms_norm", "--op", "rms_norm", "--shapes", str(shapes), "--dtype", "float32")

    result = _qualify(*args, "--dry-run")

    assert result.exit_code == 0, result.output
    assert "--op rms_norm given more than once; each op is qualified once" in result.output
    assert f"--shapes {shapes}: rms_norm tokens=2,hidden=8 listed 2 times; measured once" in result.output
    rows = [line.split()[:3] for line in result.output.splitlines() if line.startswith("rms_norm ")]
    rows = [r for r in rows if r[1].startswith("tokens=")]  # the measurement rows, not the priority changes
    assert rows, result.output
    assert max(Counter(map(tuple, rows)).values()) == 1, result.output
    assert {r[1] for r in rows} == {"tokens=2,hidden=8", "tokens=3,hidden=8"}

    result = _qualify(*args, "--out", str(out))

    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    keys = Counter((r["op"], r["shape"], r["provider"]) for r in doc["records"])
    assert max(keys.values()) == 1, keys
    assert doc["options"]["ops"] == ["rms_norm"]
    assert doc["options"]["shapes"] == {"rms_norm": [shape, {"tokens": 3, "hidden": 8}]}
    # The summary line follows from the records: two providers measured at some shape, or at none.
    measured = Counter((r["op"], r["shape"]) for r in doc["records"] if r["status"] == "measured")
    compared = any(n > 1 for n in measured.values())
    if not doc["changes"]:
        expected = "no provider's evidence cleared the margin" if compared else "at no shape could two providers run"
        assert expected in result.output


@pytest.mark.parametrize(
    ("data", "why"),
    [
        ({}, "names no op; list each op to qualify with its shapes"),
        ({"rms_norm": []}, "rms_norm lists no shapes; list at least one (rms_norm takes tokens, hidden)"),
        ({"rms_norm": [{"tokens": 2, "hidden": 8}], "silu_mul": []}, "silu_mul lists no shapes"),
    ],
)
def test_a_shapes_file_that_lists_nothing_is_refused(tmp_path: Path, data: object, why: str) -> None:
    shapes = _shapes(tmp_path, data)
    out = tmp_path / "evidence.json"

    result = _qualify("--shapes", str(shapes), "--out", str(out))

    assert result.exit_code == 2, result.output
    assert result.output.count("error:") == 1
    assert f"--shapes {shapes}: {why}" in result.output
    assert "qualification on" not in result.output  # nothing measured
    assert "Traceback" not in result.output
    assert not out.exists()


@pytest.mark.usefixtures("restored_registry")
def test_qualify_reports_a_rotary_shape_with_an_odd_head_dim_as_rejected(tmp_path: Path) -> None:
    shapes = _shapes(tmp_path, {"rotary_embedding": [{"tokens": 2, "heads": 2, "head_dim": 3}]})

    result = _qualify("--shapes", str(shapes), "--dry-run")

    assert result.exit_code == 1, result.output
    assert "1 of 1 shapes rejected: the op's reference cannot take them" in result.output
    assert "even head_dim" in result.output
    assert "max err" not in result.output  # nothing measured as if it were exact
    assert "Traceback" not in result.output


@pytest.mark.usefixtures("restored_registry")  # the old code measured and applied
@pytest.mark.parametrize(
    ("shape", "field"), [({"tokens": 4, "hidden": 0}, "hidden=0"), ({"tokens": 0, "hidden": 8}, "tokens=0")]
)
def test_a_zero_size_is_refused_naming_the_op_the_entry_and_the_field(
    tmp_path: Path, shape: dict[str, int], field: str
) -> None:
    # Before: measured empty tensors, exited 0 and wrote evidence for bucket t0 although tokens=4.
    shapes = _shapes(tmp_path, {"silu_mul": [{"tokens": 2, "hidden": 8}, shape]})
    out = tmp_path / "evidence.json"

    result = _qualify("--shapes", str(shapes), "--out", str(out))

    assert result.exit_code == 2, result.output
    label = ",".join(f"{k}={v}" for k, v in shape.items())
    assert result.output == (
        f"error: --shapes {shapes}: 1 of 2 shapes rejected, nothing measured: silu_mul[1] {label}: {field} is not a "
        "positive integer (silu_mul takes tokens, hidden)\n"
    )
    assert not out.exists()


@pytest.mark.usefixtures("restored_registry")  # the old code measured and applied
def test_a_dry_run_is_refused_as_the_run_it_previews_would_be(tmp_path: Path) -> None:
    # Before: the dry run said "would write evidence ... to kev.json"; the run then refused, kev.json existing.
    shapes = _shapes(tmp_path, {"silu_mul": [{"tokens": 2, "hidden": 8}]})
    out = tmp_path / "kev.json"
    out.write_text("evidence an earlier run wrote")

    result = _qualify("--shapes", str(shapes), "--out", str(out), "--dry-run")

    assert result.exit_code == 2, result.output
    assert result.output == (
        f"error: --out {out} exists: pass --force to overwrite it, or name another file (the run this --dry-run "
        "previews would be refused)\n"
    )
    assert out.read_text() == "evidence an earlier run wrote"
    missing = tmp_path / "no-such-folder" / "kev.json"
    result = _qualify("--shapes", str(shapes), "--out", str(missing), "--dry-run")
    assert result.exit_code == 2, result.output
    assert result.output.startswith(f"error: --out {missing}: its folder does not exist; name the evidence file")
    assert result.output.count("\n") == 1


@pytest.mark.usefixtures("restored_registry")  # the old code measured and applied
def test_an_op_the_shapes_file_does_not_list_is_refused_not_measured_at_default_shapes(tmp_path: Path) -> None:
    # Before: rotary_embedding was measured at its default shapes (tokens=5, heads=4, head_dim=32) beside the file's.
    shapes = _shapes(tmp_path, {"rms_norm": [{"tokens": 4, "hidden": 64}], "silu_mul": [{"tokens": 4, "hidden": 64}]})
    out = tmp_path / "evidence.json"

    result = _qualify("--shapes", str(shapes), "--op", "rotary_embedding", "--out", str(out))

    assert result.exit_code == 2, result.output
    assert result.output.splitlines()[-1] == (
        f"error: --op rotary_embedding: the --shapes file {shapes} lists no shapes for it; add them, or leave "
        "--shapes out to measure the defaults"
    )
    assert result.output.count("error:") == 1
    assert "qualification on" not in result.output  # nothing measured
    assert not out.exists()
