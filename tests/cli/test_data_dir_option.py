"""``--data-dir DIR`` on ``init``, ``status`` and ``import-trace``: the embedded store in DIR, as ``demo`` keeps it.

Before, these three took only ``--dsn`` and a user who typed ``--data-dir`` (as for ``demo``) got click's
"No such option" with no word of ``--dsn``. One process can open only one chDB directory (the session's, see
tests/conftest.py), so the runs that open a store of their own directory run the command in a child process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.demo.processes import store_dsn
from inferensics.schema.migrations import LATEST_VERSION

runner = CliRunner()
TRACE = Path("/work/shared/corpus/torch-trace/simple.log")
HERE = str(Path(sys.executable).parent / "inferensics")
COMMANDS = {"init": ["init"], "status": ["status"], "import-trace": ["import-trace", str(TRACE)]}


@pytest.mark.parametrize("command", COMMANDS.values(), ids=list(COMMANDS))
def test_data_dir_beside_dsn_is_refused_in_one_line(command: list[str], tmp_path: Path) -> None:
    args = [*command, "--data-dir", str(tmp_path / "d"), "--dsn", f"chdb://{tmp_path / 'other'}"]
    res = runner.invoke(app, args, env={"COLUMNS": "300"})
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        "error: --dsn and --data-dir both name the store: give one (--data-dir DIR is --dsn chdb://DIR/store)"
    ]
    assert not (tmp_path / "d").exists()
    assert not (tmp_path / "other").exists()


def test_status_data_dir_names_the_store_the_demo_keeps_there(tmp_path: Path) -> None:
    # $INFERENSICS_DSN names another store: the argument wins, as it does over every environment variable
    env = {"COLUMNS": "300", "INFERENSICS_DSN": f"chdb://{tmp_path / 'elsewhere'}"}
    res = runner.invoke(app, ["status", "--data-dir", str(tmp_path / "demo")], env=env)
    assert res.exit_code == 2, res.output
    store = tmp_path / "demo" / "store"
    assert store_dsn(tmp_path / "demo") == f"chdb://{store}"
    assert (
        f"no store at {store}: the directory does not exist; create it with `inferensics init` (same --data-dir)"
        in (res.output)
    )
    assert not (tmp_path / "demo").exists()


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")} | {"COLUMNS": "300"}
    done = subprocess.run([HERE, *args], capture_output=True, text=True, timeout=300, check=False, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_init_import_trace_and_status_on_a_data_dir(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    store = data_dir / "store"
    assert (
        f"store chdb://{store}: created, schema version {LATEST_VERSION}"
        in _cli("init", "--data-dir", str(data_dir)).stdout
    )
    imported = _cli("import-trace", str(TRACE), "--data-dir", str(data_dir)).stdout
    assert "already imported" not in imported
    status = _cli("status", "--data-dir", str(data_dir)).stdout
    assert f"store        chdb://{store}" in status
    assert f"version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in status
    line = next(ln for ln in status.splitlines() if "│ compiles " in ln)
    assert int(line.split("│")[2].strip().replace(",", "")) > 0
