"""``report weekly`` and ``canary compare`` refuse an ``--out`` they cannot write before any work (the
reports themselves are tested with the analytics, tests/analytics/test_report.py)."""

from __future__ import annotations

from datetime import UTC, datetime
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


@pytest.mark.parametrize(
    ("week", "message"),
    [
        ("2026-W49\n", "bad week '2026-W49\\n': write it as YYYY-Www"),
        ("2026-W4\uff19", "bad week '2026-W4\uff19': write it as YYYY-Www"),  # a full-width digit
        ("", "--week: empty; give an ISO week as YYYY-Www"),
    ],
)
def test_a_week_that_is_not_yyyy_www_is_refused(week: str, message: str, tmp_path: Path) -> None:
    """A trailing newline and a non-ASCII digit passed (\\d and $) and named the report's files; an empty --week
    (an unset `--week ${VAR}`) became the current week."""
    store, out = tmp_path / "store", tmp_path / "out"
    res = runner.invoke(app, ["report", "weekly", "--week", week, "--out", str(out)],
                        env={"INFERENSICS_DSN": f"chdb://{store}", "COLUMNS": "300"})  # fmt: skip
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert not store.exists()
    assert not out.exists()


def test_a_week_that_has_not_started_is_refused(tmp_path: Path) -> None:
    """A future week was reported as a week of zeros (every count 0, every ratio empty)."""
    now = datetime.now(UTC)
    week = f"{now.year + 1}-W10"
    store, out = tmp_path / "store", tmp_path / "out"
    res = runner.invoke(app, ["report", "weekly", "--week", week, "--out", str(out)],
                        env={"INFERENSICS_DSN": f"chdb://{store}", "COLUMNS": "300"})  # fmt: skip
    assert res.exit_code == 2, res.output
    text = res.output.strip()
    assert len(text.splitlines()) == 1, text
    assert text.startswith(f"error: week {week} has not started yet (it starts on {now.year + 1}-03-0"), text
    assert "give a week up to " in text
    assert not store.exists()
    assert not out.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--baseline", "a", "--candidate", "b", "--start", "2026-03-05", "--end", "2026-03-01"],
         "--start 2026-03-05 00:00:00 is not before --end 2026-03-01 00:00:00 (UTC)"),
        (["--baseline", "a", "--candidate", "b", "--start", "2026-03-01", "--end", "2026-03-01"],
         "--start 2026-03-01 00:00:00 is not before --end 2026-03-01 00:00:00 (UTC)"),
        (["--baseline", "any", "--candidate", "b", "--baseline-start", "2026-03-02", "--baseline-end", "2026-03-01"],
         "--baseline-start 2026-03-02 00:00:00 is not before --baseline-end 2026-03-01 00:00:00 (UTC)"),
        (["--baseline", "any", "--candidate", "b", "--baseline-start", "2026-03-02"],
         "give both --baseline-start and --baseline-end"),
        (["--baseline", "any", "--candidate", "any"],
         "--baseline any --candidate any: no bundle to take the model from; pass --model"),
        (["--baseline", "", "--candidate", "b"], "--baseline: empty; give a bundle id"),
        (["--baseline", "a", "--candidate", " "], "--candidate: empty; give a bundle id"),
    ],
)  # fmt: skip
def test_canary_compare_refuses_what_selects_no_requests(args: list[str], message: str, tmp_path: Path) -> None:
    """An inverted window ran over 0 requests and recorded an inconclusive verdict; 'any' on both sides and empty
    ids printed 'bundle None' / 'bundle  is not in the store's bundles table'."""
    store = tmp_path / "store"
    res = runner.invoke(app, ["canary", "compare", *args], env={"INFERENSICS_DSN": f"chdb://{store}", "COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "None" not in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert not store.exists()  # refused before the store was opened: nothing recorded


@pytest.mark.parametrize(
    "command",
    [["report", "weekly"], ["canary", "compare", "--model", "m", "--baseline", "a", "--candidate", "b"]],
)
@pytest.mark.parametrize("flag", ["--dsn", "--data-dir"])
def test_a_missing_store_is_refused_and_never_created(command: list[str], flag: str, tmp_path: Path) -> None:
    """Both commands only read the store: they created an empty chDB directory (metadata/, tmp/) at a mistyped
    path before saying it was not initialised."""
    where = tmp_path / "neverexisted"
    store = where / "store" if flag == "--data-dir" else where
    given = str(where) if flag == "--data-dir" else f"chdb://{where}"
    res = runner.invoke(app, [*command, flag, given, "--out", str(tmp_path / "out")], env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert f"no store at {store}: the directory does not exist; create it with `inferensics init` (same {flag}), " \
           "or pass the --dsn of an existing store" in res.output  # fmt: skip
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert not where.exists()
    assert not (tmp_path / "out").exists()
