"""``kernels qualify`` refuses the store flags (``--dsn``, ``--data-dir``, ``--service``, ``--token``) typed
without ``--store``, in one line and before anything is measured: without ``--store`` they would write nothing.
Their environment variables, set for other commands, are not refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app

runner = CliRunner()


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (["--dsn", "chdb:///x"], "--dsn only says"),
        (["--service", "http://127.0.0.1:1"], "--service only says"),
        (["--data-dir", "d"], "--data-dir only says"),
        (["--service", "http://127.0.0.1:1", "--token", "t"], "--service, --token only say"),
    ],
)
def test_store_flags_without_store_are_refused(tmp_path: Path, flags: list[str], named: str) -> None:
    out = tmp_path / "evidence.json"
    result = runner.invoke(app, ["kernels", "qualify", "--out", str(out), *flags])
    assert result.exit_code != 0, result.output
    text = result.output.strip()
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error:"), text
    assert named in text, text
    assert "add --store" in text, text
    assert not out.exists()


def test_store_flags_from_the_environment_are_not_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INFERENSICS_DSN", "chdb:///x")
    monkeypatch.setenv("INFERENSICS_SERVICE_URL", "http://127.0.0.1:1")
    # --timing is checked right after; an invalid value stops the run before anything is measured.
    result = runner.invoke(app, ["kernels", "qualify", "--out", str(tmp_path / "e.json"), "--timing", "nope"])
    assert result.exit_code != 0
    assert "--timing nope" in result.output, result.output
    assert "only says" not in result.output
