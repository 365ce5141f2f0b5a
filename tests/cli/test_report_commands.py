"""``report weekly`` and ``canary compare`` refuse an ``--out`` they cannot write before any work (the
reports themselves are tested with the analytics, tests/analytics/test_report.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize(
    "command", [["report", "weekly"], ["canary", "compare", "--model", "m", "--baseline", "a", "--candidate", "b"]]
)
def test_an_out_that_cannot_be_a_directory_is_a_usage_error(command: list[str], tmp_path: Path) -> None:
    """Both ended in a FileExistsError / NotADirectoryError traceback after building the whole report."""
    a_file = tmp_path / "a-file"
    a_file.write_text("")
    store = tmp_path / "store"
    env = {"INFERENSICS_DSN": f"chdb://{store}", "COLUMNS": "300"}
    for out, message in ((a_file, "that is a file, not a directory"), (a_file / "sub", "cannot make that directory")):
        res = runner.invoke(app, [*command, "--out", str(out)], env=env)
        assert res.exit_code == 2, res.output
        assert f"--out {out}: {message}" in res.output
    assert not store.exists()  # refused before the store was opened
