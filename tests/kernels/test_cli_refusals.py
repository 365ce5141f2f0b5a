"""``kernels list`` and ``kernels qualify`` say in one line what they cannot do, before measuring where they can:
a shapes file that is not UTF-8, names an op twice or a size no device holds; a store or service that cannot be
reached. ``--import MODULE`` loads providers of your own. Each test names what the code did before."""

from __future__ import annotations

import importlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from inferensics import kernels
from inferensics.cli.app import app
from inferensics.kernels.decisions import EvidenceApplication

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

runner = CliRunner()
UNREACHABLE = "http://127.0.0.1:1"
"""Nothing listens there: a connection is refused at once."""
commands = importlib.import_module("inferensics.cli.kernels_commands")


def _qualify(*args: str) -> Result:
    return runner.invoke(app, ["kernels", "qualify", "--trials", "2", "--warmup", "0", "--iters", "1", *args])


def _one_line_error(result: Result) -> str:
    text = result.output.strip()
    assert result.exit_code == 2, result.output
    assert "Traceback" not in text
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error: "), text
    return text


def _no_measuring(*_: object, **__: object) -> None:
    raise AssertionError("measured although the run was refused")


def test_a_shapes_file_that_is_not_utf8_is_one_line(tmp_path: Path) -> None:
    # Before: UnicodeDecodeError with a traceback.
    shapes = tmp_path / "binary.json"
    shapes.write_bytes(b"\xff\xfe")
    text = _one_line_error(_qualify("--shapes", str(shapes), "--out", str(tmp_path / "e.json")))
    assert text.startswith(f"error: --shapes {shapes}: not UTF-8 text (invalid start byte at byte 0)"), text


def test_an_op_given_twice_in_a_shapes_file_is_refused(tmp_path: Path) -> None:
    # Before: JSON kept the second list and the first was dropped unmeasured, without a word.
    shapes = tmp_path / "twice.json"
    shapes.write_text('{"rms_norm": [{"tokens": 4, "hidden": 64}], "rms_norm": [{"tokens": 8, "hidden": 64}]}')
    text = _one_line_error(_qualify("--shapes", str(shapes), "--out", str(tmp_path / "e.json")))
    assert f"--shapes {shapes}: rms_norm given twice in one object" in text, text


def test_a_size_no_device_holds_is_refused_before_measuring(tmp_path: Path) -> None:
    # Before: the allocation's RuntimeError with a traceback.
    shapes = tmp_path / "huge.json"
    shapes.write_text(json.dumps({"rms_norm": [{"tokens": 4, "hidden": 99999999999}]}))
    text = _one_line_error(_qualify("--shapes", str(shapes), "--out", str(tmp_path / "e.json")))
    assert "nothing measured: rms_norm[0] tokens=4,hidden=99999999999: hidden=99999999999 is above 2147483647" in text


@pytest.mark.usefixtures("restored_registry")
def test_arguments_that_cannot_be_allocated_are_a_rejected_shape_not_a_traceback(tmp_path: Path) -> None:
    shapes = tmp_path / "big.json"
    shapes.write_text(json.dumps({"rms_norm": [{"tokens": 2**20, "hidden": 2**20}]}))  # 4 TiB in float32
    result = _qualify("--shapes", str(shapes), "--dtype", "float32", "--out", str(tmp_path / "e.json"))
    assert result.exit_code == 1, result.output
    assert "Traceback" not in result.output
    assert "cannot allocate the arguments here (RuntimeError" in result.output
    assert "1 of 1 shapes rejected: the op's reference cannot take them, or their arguments could not be" in (
        result.output.replace("\n", " ")
    )


def test_an_unreachable_service_is_refused_before_measuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: it measured, wrote the evidence, then said "the service did not answer in time; run the command
    # again", which --out (now existing) refused.
    monkeypatch.setattr(kernels, "qualify", _no_measuring)
    out = tmp_path / "e.json"
    text = _one_line_error(_qualify("--store", "--service", UNREACHABLE, "--out", str(out)))
    assert text.startswith(f"error: --service {UNREACHABLE}: connection refused at 127.0.0.1:1"), text
    assert "checked before measuring: nothing measured, no evidence written" in text
    assert not out.exists()


def test_an_unreachable_store_is_refused_before_measuring(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kernels, "qualify", _no_measuring)
    out = tmp_path / "e.json"
    text = _one_line_error(_qualify("--store", "--dsn", UNREACHABLE, "--out", str(out)))
    assert text.startswith("error: cannot open store"), text
    assert "checked before measuring: nothing measured, no evidence written" in text
    assert not out.exists()


@pytest.mark.usefixtures("restored_registry")
def test_a_service_lost_after_measuring_is_named_and_the_advice_can_be_followed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    answers = iter(["", "connection refused at 127.0.0.1:1: nothing listens there"])  # up before, gone after
    monkeypatch.setattr(commands, "_service_unreachable", lambda _url: next(answers))
    service_records = importlib.import_module("inferensics.cli.service_records")
    silent = (False, "not recorded in kernel_qualifications: the service did not answer in time; run the command again")
    monkeypatch.setattr(service_records, "record_through_service", lambda *_a, **_k: silent)
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    out = tmp_path / "e.json"
    result = _qualify("--shapes", str(shapes), "--store", "--service", UNREACHABLE, "--out", str(out))
    assert result.exit_code == 2, result.output
    last = result.output.strip().splitlines()[-1]
    assert "not recorded in kernel_qualifications: connection refused at 127.0.0.1:1" in last, last
    assert "run the command again" not in last  # its --out exists now: it would be refused
    assert f"`inferensics kernels qualify --store --from-evidence {out}`" in last
    assert out.exists()


@pytest.fixture
def own_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    name = "walk_own_providers"
    (tmp_path / f"{name}.py").write_text(
        "from inferensics import kernels\n"
        "from inferensics.kernels.ops.activation import silu_mul_reference\n"
        "kernels.registry().op('silu_mul').register(kernels.Provider('planted_mine', 'vendor', silu_mul_reference,\n"
        "    kernels.Requirements(platforms=frozenset({'cpu'}), accuracy='exact'), 'a provider of my own'))\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield name
    sys.modules.pop(name, None)
    op = kernels.registry().op("silu_mul")
    if "planted_mine" in op.providers:
        op.unregister("planted_mine")


@pytest.mark.usefixtures("restored_registry")
def test_import_loads_providers_of_your_own_to_list_and_qualify(own_module: str, tmp_path: Path) -> None:
    # Before: no way to load them; list and qualify saw the built-ins only.
    listed = runner.invoke(app, ["kernels", "list", "--import", own_module])
    assert listed.exit_code == 0, listed.output
    assert "planted_mine" in listed.output
    shapes = tmp_path / "s.json"
    shapes.write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    result = _qualify("--import", own_module, "--shapes", str(shapes), "--dtype", "float32", "--dry-run")
    assert result.exit_code == 0, result.output
    assert any(line.split()[2:3] == ["planted_mine"] for line in result.output.splitlines()), result.output


def test_import_of_a_module_that_fails_is_one_line() -> None:
    text = _one_line_error(runner.invoke(app, ["kernels", "list", "--import", "no_such_module_of_mine"]))
    assert text.startswith("error: --import no_such_module_of_mine: cannot import it (ModuleNotFoundError"), text


@pytest.mark.usefixtures("restored_registry")
def test_list_says_which_buckets_a_provider_no_longer_serves() -> None:
    # Before: its status read `default` and only the bucket's own line showed it out of that bucket.
    kernels.registry().op("silu_mul").set_priority(["reference"], "bfloat16/n64/t4")
    result = runner.invoke(app, ["kernels", "list"])
    assert result.exit_code == 0, result.output
    lines = result.output[result.output.index("silu_mul —") :].splitlines()
    rows = {line.split()[0]: i for i, line in enumerate(lines) if line.startswith("  ") and not line.startswith("   ")}

    def under(name: str) -> list[str]:  # the lines under a provider's row
        return lines[rows[name] + 1 : rows[name] + 3]

    assert any(line.strip() == "not serving bucket bfloat16/n64/t4" for line in under("triton")), lines
    assert not any("not serving" in line for line in under("inductor"))  # in no list: its status says so


def test_an_application_of_interpreter_evidence_names_the_interpreter_in_its_head() -> None:
    # Before: "measured on cpu: ... not applied, measured in Triton's interpreter ..." (the head said cpu only).
    reason = "measured in Triton's interpreter, which this host does not run"
    app_ = EvidenceApplication("ab" * 32, "ev.json", "cpu", "cpu", refused=("x",), reason=reason, interpreter=True)
    assert app_.summary().startswith("evidence abababababab (ev.json) measured on cpu (Triton interpreter): 0 applied")
