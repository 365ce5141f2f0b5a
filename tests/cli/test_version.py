"""``inferensics --version`` prints the installed release: after an upgrade only the virtualenv's directory name
told which release ran (`Error: No such option: --version`)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

from typer.testing import CliRunner

from inferensics.cli.app import app


def test_version_prints_the_package_version_and_exits() -> None:
    result = CliRunner().invoke(app, ["--version"])
    assert result.exit_code == 0, result.output
    assert result.output == f"inferensics {importlib.metadata.version('inferensics')}\n"


def test_version_needs_no_command_and_the_commands_still_run() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "inferensics.cli", "--version"], capture_output=True, text=True, timeout=120, check=False
    )
    assert (done.returncode, done.stdout.split()[0]) == (0, "inferensics"), done.stderr
    assert CliRunner().invoke(app, ["init", "--help"]).exit_code == 0
