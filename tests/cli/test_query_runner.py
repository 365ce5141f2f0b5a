"""The named-query runner of ``report weekly``, ``canary compare`` and ``requests``: one, defined in
``inferensics.cli.query_runner``, and each command refuses a store that is not there in one line."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli import query_runner, report_commands, requests_commands
from inferensics.cli.app import app

runner = CliRunner()


def test_the_commands_share_the_one_runner() -> None:
    assert query_runner.query_runner.__module__ == query_runner.__name__
    assert vars(report_commands)["query_runner"] is query_runner.query_runner
    assert vars(requests_commands)["query_runner"] is query_runner.query_runner


@pytest.mark.parametrize(
    "command",
    [
        ["report", "weekly"],
        ["canary", "compare", "--model", "m", "--baseline", "a", "--candidate", "b"],
        ["requests", "--failing"],
    ],
)
def test_a_missing_store_is_one_line_and_never_created(command: list[str], tmp_path: Path) -> None:
    where = tmp_path / "neverexisted"
    res = runner.invoke(app, [*command, "--dsn", f"chdb://{where}"], env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert f"no store at {where}: the directory does not exist" in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert not where.exists()
