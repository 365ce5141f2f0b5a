"""The evidence file and the shapes file are boundaries: whatever a damaged or edited file holds, the command
says what is wrong in one line and raises nothing (property-based: the ``suite`` profile draws the same
examples every run; ``make fuzz`` draws fresh ones)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.kernels.qualify import EVIDENCE_BODY
from inferensics.kernels.registry import STATE_BODY, canonical_digest
from inferensics.kernels.samples import SHAPE_FIELDS, shape_problem
from tests.kernels.conftest import kept_registry

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

runner = CliRunner()
JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 10**6) | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


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


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    children = node.items() if isinstance(node, dict) else enumerate(node) if isinstance(node, list) else ()
    for key, child in children:
        yield from _paths(child, (*prefix, key))


def _redigest(doc: Any) -> None:
    """Recompute both digests, as an editor who knows the format would: what lies behind them is checked too."""
    if not isinstance(doc, dict):
        return
    reg = doc.get("registry")
    if isinstance(reg, dict):
        reg["digest"] = canonical_digest({k: reg.get(k) for k in STATE_BODY})
    doc["digest"] = canonical_digest({k: doc.get(k) for k in EVIDENCE_BODY})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_damaged_or_edited_evidence_file_is_one_line_never_a_traceback(
    evidence: dict[str, Any], tmp_path: Path, data: st.DataObject
) -> None:
    doc: Any = json.loads(json.dumps(evidence))
    path = data.draw(st.sampled_from(list(_paths(doc))))
    if path and data.draw(st.booleans()):
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        del parent[path[-1]]
    elif path:
        parent = doc
        for key in path[:-1]:
            parent = parent[key]
        parent[path[-1]] = data.draw(JSON)
    else:
        doc = data.draw(JSON)
    if data.draw(st.booleans()):
        _redigest(doc)
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
        and all(type(v) is int and v >= 0 for v in shape.values())
    )
    assert (problem is None) == valid, (shape, problem)
    if problem is not None:
        assert f"({op} takes " in problem or problem.startswith("expected an object")
