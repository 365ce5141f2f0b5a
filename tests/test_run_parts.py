"""``make test``'s runner (tests/run_parts.py): every part in its own process, lanes, whole logs, the exit status."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import run_parts


def _suite(root: Path) -> None:
    (root / "tests" / "good").mkdir(parents=True)
    (root / "tests" / "good" / "__init__.py").write_text("")
    (root / "tests" / "good" / "test_a.py").write_text("def test_ok():\n    print('good part ran')\n")
    (root / "tests" / "bad").mkdir()
    (root / "tests" / "bad" / "__init__.py").write_text("")
    (root / "tests" / "bad" / "test_b.py").write_text("def test_fails():\n    assert 1 == 2\n")
    (root / "tests" / "test_top.py").write_text("import os\n\ndef test_own_process():\n    assert os.getpid()\n")
    (root / "tests" / "notes").mkdir()  # a folder without __init__.py is not a part


def test_every_part_runs_in_lanes_and_a_failure_is_the_exit_status(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _suite(tmp_path)
    assert run_parts.discover(tmp_path) == ["bad", "good", "test_top.py"]
    code = run_parts.Runner(run_parts.discover(tmp_path), 2, ["-q", "-p", "no:cacheprovider"], tmp_path).run()
    out = capsys.readouterr().out
    assert code == 1  # pytest's status for failed tests
    for part in ("bad", "good", "test_top.py"):
        assert out.count(f"== tests/{part} (exit ") == 1
    bad = out.index("== tests/bad (exit 1")
    assert "assert 1 == 2" in out[bad : out.index("== tests/", bad + 1)]  # a part's log is printed whole, together
    assert "FAIL bad" in out
    assert "ok   good" in out
    assert "1 passed" in out


def test_the_longest_parts_start_first_and_unknown_parts_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parts = run_parts.discover()
    assert parts[:2] == ["collector", "demo"]
    assert {"kernels", "schema", "test_readme.py"} <= set(parts)
    assert run_parts.main(["nosuch"]) == 2
    assert "no such part: nosuch" in capsys.readouterr().err
