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
    assert parts[: len(run_parts.LONGEST_FIRST)] == list(run_parts.LONGEST_FIRST)
    assert {"kernels", "schema", "test_readme.py"} <= set(parts)
    assert run_parts.main(["nosuch"]) == 2
    assert "no such part: nosuch" in capsys.readouterr().err


def test_a_split_folder_runs_each_subfolder_and_its_own_files_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tests = tmp_path / "tests"
    coll = tests / "collector"
    for sub in ("host", "service", "empty"):
        (coll / sub).mkdir(parents=True)
    (coll / "__init__.py").write_text("")
    (coll / "service" / "__init__.py").write_text("")  # subfolders with and without a package marker
    (coll / "conftest.py").write_text("import pytest\n\n@pytest.fixture\ndef shared():\n    return 'from conftest'\n")
    (coll / "test_top.py").write_text("def test_top(shared):\n    assert shared == 'from conftest'\n")
    (coll / "host" / "test_h.py").write_text("def test_h(shared):\n    assert shared == 'from conftest'\n")
    (coll / "service" / "test_s.py").write_text("def test_s(shared):\n    assert shared\n\ndef test_t():\n    pass\n")
    (coll / "empty" / "notes.txt").write_text("no tests here")
    parts = run_parts.discover(tmp_path)
    assert sorted(parts) == ["collector", "collector/host", "collector/service"]
    code = run_parts.Runner(parts, 2, ["-q", "-p", "no:cacheprovider"], tmp_path).run()
    out = capsys.readouterr().out
    assert code == 0, out
    # each test ran once, in its own part: the folder's own part does not run the subfolders' tests again
    summary = {ln.split()[1]: ln.split()[4:6] for ln in out.splitlines() if ln.startswith("  ok   ")}
    assert summary == {"collector": ["1", "passed"], "collector/host": ["1", "passed"],
                       "collector/service": ["2", "passed"]}  # fmt: skip


def test_a_split_folders_name_selects_all_of_its_parts() -> None:
    known = ["collector/service", "collector/host", "bundle", "collector", "test_readme.py"]
    assert run_parts.select(known, ["collector"]) == ["collector/service", "collector/host", "collector"]
    assert run_parts.select(known, ["collector/host/", "bundle"]) == ["collector/host", "bundle"]
    assert run_parts.select(known, []) == known
    with pytest.raises(LookupError, match=r"^coll$"):
        run_parts.select(known, ["coll"])  # a prefix of a name is not a name
