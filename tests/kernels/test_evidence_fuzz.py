"""The evidence file and the shapes file are boundaries: whatever a damaged or edited file holds, the command
says what is wrong in one line and raises nothing (property-based: the ``suite`` profile draws the same
examples every run; ``make fuzz`` draws fresh ones)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.kernels.samples import MAX_SIZE, SHAPE_FIELDS, shape_problem
from tests.json_edits import JSON, edit
from tests.kernels.evidence_edits import kept_registry, redigest

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

runner = CliRunner()


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A real evidence file, written by `kernels qualify` here (the Triton provider in the interpreter)."""
    folder = tmp_path_factory.mktemp("evidence")
    (folder / "shapes.json").write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    args = ["kernels", "qualify", "--shapes", str(folder / "shapes.json"), "--out", str(folder / "e.json")]
    with kept_registry():
        result = runner.invoke(app, [*args, "--trials", "2", "--iters", "1", "--warmup", "0"])
    assert result.exit_code == 0, result.output
    doc: dict[str, Any] = json.loads((folder / "e.json").read_text())
    return doc


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_damaged_or_edited_evidence_file_is_one_line_never_a_traceback(
    evidence: dict[str, Any], tmp_path: Path, data: st.DataObject
) -> None:
    doc: Any = edit(json.loads(json.dumps(evidence)), data)
    if data.draw(st.booleans(), label="redigest"):
        doc = redigest(doc)
    file = tmp_path / "evidence.json"
    file.write_text(json.dumps(doc))
    with kept_registry():
        result = runner.invoke(app, ["kernels", "list", "--evidence", str(file)], env={"COLUMNS": "400"})
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exc_info
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert result.output.startswith(f"error: --evidence {file}: "), result.output
        assert result.output.count("\n") == 1, result.output


@given(
    op=st.sampled_from(sorted(SHAPE_FIELDS)),
    shape=JSON
    | st.dictionaries(
        st.sampled_from(["tokens", "hidden", "heads", "head_dim", "batch", "x"]), JSON | st.integers(-2, 9), max_size=7
    ),
)
def test_every_shape_is_accepted_or_named_never_raised(op: str, shape: Any) -> None:
    problem = shape_problem(op, shape)
    valid = (
        isinstance(shape, dict)
        and set(shape) == set(SHAPE_FIELDS[op])
        and all(type(v) is int and 0 < v <= MAX_SIZE for v in shape.values())
    )
    assert (problem is None) == valid, (shape, problem)
    if problem is not None:
        assert f"({op} takes " in problem or problem.startswith("expected an object")
