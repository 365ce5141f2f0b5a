"""``--data-dir DIR`` on every command that opens a store by ``--dsn`` (``init``, ``status``, ``import-trace``,
``serve``, ``report weekly``, ``canary compare``, ``kernels qualify --store`` and the bundle state commands): the
embedded store in DIR (and the service's spool), as ``demo`` keeps them.

Before, these took only ``--dsn`` and a user who typed ``--data-dir`` (as for ``demo``) got click's "No such
option" with no word of ``--dsn``. One process can open only one chDB directory (the session's, see
tests/conftest.py), so the runs that open a store of their own directory run the command in a child process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.demo.processes import spool_dir, store_dsn
from inferensics.schema.migrations import LATEST_VERSION
from tests.collector.service.harness import free_port
from tests.polling import poll

runner = CliRunner()
TRACE = Path("/work/shared/corpus/torch-trace/simple.log")
HERE = str(Path(sys.executable).parent / "inferensics")
COMMANDS = {
    "init": ["init"],
    "status": ["status"],
    "import-trace": ["import-trace", str(TRACE)],
    "serve": ["serve", "--port", "1"],
    "report weekly": ["report", "weekly"],
    "canary compare": ["canary", "compare", "--baseline", "a1", "--candidate", "b2"],
    "kernels qualify": ["kernels", "qualify", "--store", "--dry-run"],
    "bundle promote": ["bundle", "promote", "a1", "--channel", "production"],
    "bundle revoke": ["bundle", "revoke", "a1"],
    "bundle quarantine": ["bundle", "quarantine", "a1"],
    "bundle release": ["bundle", "release", "a1"],
    "bundle states": ["bundle", "states", "--out", "states.json"],
}


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
    assert res.exit_code == 1, res.output  # status exits 1 for a store that is not there (the README's contract)
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
    # --redate: the corpus log is older than the tables' retention
    imported = _cli("import-trace", str(TRACE), "--data-dir", str(data_dir), "--redate").stdout
    assert "already imported" not in imported
    status = _cli("status", "--data-dir", str(data_dir)).stdout
    assert f"store        chdb://{store}" in status
    assert f"version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in status
    line = next(ln for ln in status.splitlines() if "│ compiles " in ln)
    assert int(line.split("│")[2].strip().replace(",", "")) > 0
    # The commands that read the store the demo left take the same flag.
    report = _cli("report", "weekly", "--week", "2024-W01", "--data-dir", str(data_dir), "--out", str(tmp_path / "r"))
    assert f"wrote {tmp_path / 'r' / 'weekly-2024-W01.md'}" in report.stdout
    states = _cli("bundle", "states", "--data-dir", str(data_dir), "--out", str(tmp_path / "states.json")).stdout
    assert f"wrote {tmp_path / 'states.json'}: 0 revoked, 0 quarantined" in states


def test_serve_on_a_data_dir_keeps_the_store_and_the_spool_where_the_demo_does(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")} | {"INFERENSICS_AUTH": "false"}
    args = [HERE, "serve", "--host", "127.0.0.1", "--port", str(port), "--data-dir", str(data_dir)]
    proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        status = poll(lambda: _status(port), lambda s: s is not None, timeout=120, interval=0.5)
        assert status is not None
        assert str((data_dir / "store").resolve()) in status["store"]["dsn"]
        assert status["spool"]["dir"] == str(spool_dir(data_dir))
    finally:
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    assert (data_dir / "store").is_dir(), out
    assert (data_dir / "spool").is_dir(), out


def _status(port: int) -> dict[str, Any] | None:
    try:
        answer = httpx.get(f"http://127.0.0.1:{port}/api/v1/status", timeout=2)
    except httpx.HTTPError:
        return None
    return answer.json() if answer.status_code == 200 else None


def _run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``inferensics ARGS`` in a child process (it opens a chDB folder of its own), environment cleared of ours."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")} | {"COLUMNS": "400"}
    return subprocess.run(
        [HERE, *args], capture_output=True, text=True, timeout=300, check=False, env=clean | (env or {})
    )


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def test_the_data_dir_variable_names_the_folder_that_holds_the_store_as_the_flag_does(tmp_path: Path) -> None:
    """`INFERENSICS_DATA_DIR=X` put the store at X while `--data-dir X` opened X/store, which in a chDB folder is
    the engine's own table-parts folder: `status --data-dir X` wrote metadata/ and tmp/ into it and said the store
    was not initialised. Both name the folder that holds the store in store/, as `demo --data-dir` does."""
    data_dir = tmp_path / "d"
    made = _run("init", env={"INFERENSICS_DATA_DIR": str(data_dir)})
    assert made.returncode == 0, made.stderr
    assert f"store chdb://{data_dir / 'store'}: created, schema version {LATEST_VERSION}" in made.stdout
    status = _run("status", "--data-dir", str(data_dir))
    assert status.returncode == 0, status.stderr
    assert f"store        chdb://{data_dir / 'store'}" in status.stdout
    assert f"version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in status.stdout
    assert store_dsn(data_dir) == f"chdb://{data_dir / 'store'}"  # where the demo keeps its store


@pytest.mark.parametrize("command", COMMANDS.values(), ids=list(COMMANDS))
def test_a_store_passed_as_data_dir_is_refused_and_left_untouched(
    command: list[str], made_store: Path, tmp_path: Path
) -> None:
    """A store's own folder as --data-dir: refused in one line naming the flag that reaches it, before anything is
    opened (`init` would have made a second store inside the engine's store/ folder)."""
    before = _files(made_store)
    res = runner.invoke(app, [*command, "--data-dir", str(made_store)], env={"COLUMNS": "400", "INFERENSICS_DSN": None})
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        f"error: --data-dir {made_store} is a store itself, not the folder that holds one in store/: pass --dsn "
        f"chdb://{made_store}, or --data-dir {made_store.parent}"
    ]
    assert _files(made_store) == before


def test_a_store_named_by_the_data_dir_variable_is_refused_and_left_untouched(made_store: Path) -> None:
    before = _files(made_store)
    for command in (["status"], ["report", "weekly", "--week", "2024-W01"], ["init"]):
        res = runner.invoke(app, command, env={"COLUMNS": "400", "INFERENSICS_DSN": None,
                                               "INFERENSICS_DATA_DIR": str(made_store)})  # fmt: skip
        assert res.exit_code == 2, res.output
        assert res.output.strip().splitlines() == [
            f"error: $INFERENSICS_DATA_DIR={made_store} is a store itself, not the folder that holds one in store/: "
            f"set INFERENSICS_DSN=chdb://{made_store}, or INFERENSICS_DATA_DIR={made_store.parent}"
        ], command
    assert _files(made_store) == before
    # Named as the store it is, it is read.
    status = _run("status", env={"INFERENSICS_DSN": f"chdb://{made_store}"})
    assert status.returncode == 0, status.stderr
    assert f"version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in status.stdout


@pytest.fixture(scope="module")
def made_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store made by `inferensics init --dsn chdb://<tmp>/store` in a child process."""
    store = tmp_path_factory.mktemp("made") / "store"
    made = _run("init", "--dsn", f"chdb://{store}")
    assert made.returncode == 0, made.stderr
    return store
