"""``kernels list`` and ``kernels qualify`` with a user's own module: a module that is found but raises is told apart
from one not found, an op of one's own not imported is named with ``--import``, and its ``Samples.make`` raising is a
rejected shape (exit 1), not a traceback. Each test names what the code did before."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from inferensics.cli.app import app
from inferensics.schema.vocabularies import QUALIFICATION_DECISIONS, QUALIFICATION_STATUSES, QUALIFICATION_TIMINGS

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

runner = CliRunner()


def _one_line_error(result: Result) -> str:
    text = result.output.strip()
    assert result.exit_code == 2, result.output
    assert "Traceback" not in text
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error: "), text
    return text


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The user's project folder, current while the test runs; the modules it imports are forgotten after."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield tmp_path
    for name in set(sys.modules) - before:
        if name.startswith("own_code_"):
            del sys.modules[name]


@pytest.mark.parametrize(
    ("body", "raised"),
    [("raise RuntimeError('my registration failed')\n", "RuntimeError"), ("import no_such_dep_of_mine\n", "Module")],
)
def test_import_of_a_module_that_raises_says_to_fix_it_not_where_to_run(folder: Path, body: str, raised: str) -> None:
    (folder / "own_code_broken.py").write_text(body)
    text = _one_line_error(runner.invoke(app, ["kernels", "list", "--import", "own_code_broken"]))
    assert text.startswith(f"error: --import own_code_broken: cannot import it ({raised}"), text
    # Before: "run from the folder that holds it, or put that folder on PYTHONPATH", though it was found and ran.
    assert "PYTHONPATH" not in text, text
    assert "own_code_broken was found, and importing it raised: fix the module" in text, text


def test_import_of_a_module_not_found_still_says_where_to_run(folder: Path) -> None:
    text = _one_line_error(runner.invoke(app, ["kernels", "list", "--import", "own_code_absent.sub"]))
    assert "(ModuleNotFoundError: No module named 'own_code_absent'); run from the folder that holds it" in text


def test_an_op_of_your_own_not_imported_is_named_with_import(folder: Path) -> None:
    shapes = folder / "s.json"
    shapes.write_text(json.dumps({"own_gelu": [{"tokens": 2, "hidden": 8}]}))
    # Before: "unknown op; known: ..." and nothing on how an op of one's own becomes known.
    for args in (["--op", "own_gelu"], ["--shapes", str(shapes)]):
        text = _one_line_error(runner.invoke(app, ["kernels", "qualify", "--dry-run", *args]))
        assert "known: fused_add_rms_norm, paged_decode_attention, rms_norm" in text, text
        assert text.endswith("imported: --import MODULE"), text


def test_op_narrows_a_shapes_file_that_also_lists_an_op_not_imported_in_this_run(folder: Path) -> None:
    shapes = folder / "s.json"
    shapes.write_text(json.dumps({"rms_norm": [{"tokens": 2, "hidden": 8}], "own_gelu": [{"tokens": 2, "hidden": 8}]}))
    quick = ["--trials", "2", "--warmup", "0", "--iters", "1", "--dtype", "float32"]
    result = runner.invoke(
        app, ["kernels", "qualify", "--op", "rms_norm", "--shapes", str(shapes), "--dry-run", *quick]
    )
    # Before: "unknown op 'own_gelu'" refused the run, though --op had left own_gelu out of it.
    assert result.exit_code == 0, result.output
    assert f"--shapes {shapes}: own_gelu left out (not among --op)" in result.output
    assert "tokens=2,hidden=8" in result.output


def test_samples_that_raise_are_a_rejected_shape_exit_1_not_a_traceback(folder: Path) -> None:
    (folder / "own_code_samples.py").write_text(
        "import torch\n"
        "from inferensics import kernels\n"
        "from inferensics.kernels.ops.common import rows_bucket\n"
        "def make(shape, dtype, device, seed):\n"
        "    return (torch.ones(shape['tokens']['x']),)\n"
        "kernels.registry().add(kernels.SemanticOp('own_code_triple', '(Tensor x) -> Tensor', lambda x: x * 3,\n"
        "    tolerance=kernels.ToleranceSpec(), bucket=rows_bucket, doc='x * 3', log=kernels.registry().log,\n"
        "    samples=kernels.Samples(('tokens',), make, ({'tokens': 2},))))\n"
    )
    try:
        quick = ["--trials", "2", "--warmup", "0", "--iters", "1", "--dtype", "float32"]
        own = ["--import", "own_code_samples", "--op", "own_code_triple"]
        result = runner.invoke(app, ["kernels", "qualify", *own, "--dry-run", *quick])
    finally:
        from inferensics import kernels

        kernels.registry().ops.pop("own_code_triple", None)
    # Before: TypeError out of samples.make, a traceback and exit 1 from the exception.
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "own code raised making its arguments or naming their bucket (TypeError: " in result.output, result.output
    assert "1 of 1 shapes rejected" in result.output, result.output


def _spelled_words(module: object) -> set[str]:
    """String constants of ``module``'s code (docstrings left out)."""
    tree = ast.parse(inspect.getsource(module))  # type: ignore[arg-type]
    docstrings = {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }
    return {
        node.value
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
    }


def test_the_qualifier_imports_the_words_of_its_records_closed_columns() -> None:
    words = {w for w in (*QUALIFICATION_STATUSES, *QUALIFICATION_DECISIONS, *QUALIFICATION_TIMINGS) if w}
    # Before: it spelled "measured", "refused", "incumbent", "cuda_graph" ... again, beside the schema's words.
    module = importlib.import_module("inferensics.kernels.qualify")  # the package's `qualify` is the function
    assert _spelled_words(module) & words == set()
