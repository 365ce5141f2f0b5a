"""``inferensics init`` and ``status`` on a real embedded store (through typer's runner, in-process)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.cli.store_commands import _human  # pyright: ignore[reportPrivateUsage]
from inferensics.schema import RequestEvent
from inferensics.schema.migrations import LATEST_VERSION
from inferensics.schema.store import Store
from tests.schema.samples import sample
from tests.seeding import scratch_dsn

runner = CliRunner()


def test_init_creates_then_reports_up_to_date(store_dsn: str) -> None:
    first = runner.invoke(app, ["init", "--dsn", store_dsn])
    assert first.exit_code == 0, first.output
    assert f"created, schema version {LATEST_VERSION}" in first.output
    again = runner.invoke(app, ["init", "--dsn", store_dsn])
    assert again.exit_code == 0
    assert f"up to date, schema version {LATEST_VERSION}" in again.output


def test_init_leaves_a_folder_of_other_files_untouched(tmp_path: Path) -> None:
    """`init --dsn chdb:///<a folder of the user's>` made the engine's metadata/, store/ and tmp/ among its files;
    a new or empty folder is where a store is made."""
    folder = tmp_path / "mine"
    folder.mkdir()
    (folder / "notes.txt").write_text("not a store\n")
    res = runner.invoke(app, ["init", "--dsn", f"chdb://{folder}"], env={"COLUMNS": "400"})
    assert res.exit_code == 2, res.output
    assert res.output.strip().splitlines() == [
        f"error: {folder} is a folder of other files, not a store: `inferensics init` makes a store in a new or "
        "empty folder (the engine writes its metadata/, store/ and tmp/ there); name one with --dsn or --data-dir"
    ]
    assert sorted(p.name for p in folder.iterdir()) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    made = runner.invoke(app, ["init", "--dsn", f"chdb://{empty}"])
    assert made.exit_code == 0, made.output
    assert "created" in made.output


def test_status_counts_rows(store: Store) -> None:
    store.insert_events([sample(RequestEvent, "typical")])
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    res = runner.invoke(app, ["status", "--dsn", dsn], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    # The same words as `status --service` (issue 20: "(current)" here, "(latest 8)" there).
    assert f"schema       version {LATEST_VERSION} (latest {LATEST_VERSION}: current)" in res.output
    line = next(ln for ln in res.output.splitlines() if "│ requests " in ln)
    assert line.split("│")[2].strip() == "1"
    # The folder is the store's (not the data directory), measured as what it is: its files' bytes now, and the
    # tables' active parts among them. It read "data dir <store folder> (14.1 MiB)", then 1.3 MiB with no write.
    files, parts = store.data_dir_bytes(), sum(store.disk_bytes().values())
    assert files is not None
    assert parts > 0
    assert (
        f"folder       {store.dsn.path}: {_human(files)} in files now, of which the tables' active parts "
        f"{_human(parts)} (the rows per table below); the other {_human(files - parts)} is the engine's own"
        in res.output
    )
    assert "data dir" not in res.output


def test_status_of_uninitialised_store_says_what_to_run(store: Store, chdb_dir: Path) -> None:
    """A database of the session's store folder that has no schema (``store`` opened the folder, so chDB's files
    are in it: an empty folder is refused as no store, below)."""
    assert store.dsn.path == chdb_dir
    res = runner.invoke(app, ["status", "--dsn", scratch_dsn(chdb_dir)], env={"COLUMNS": "300"})
    assert res.exit_code == 1  # a monitoring script reads the code: this store cannot take rows
    assert "not initialised: run `inferensics init`" in res.output
    assert f"schema is version 0, this inferensics needs {LATEST_VERSION}: run `inferensics init`" in res.output


def test_status_of_a_missing_directory_says_so_and_creates_nothing(tmp_path: Path) -> None:
    """A store not initialised: exit 1, as the README says (it was 2, a monitoring check's 'cannot ask')."""
    missing = tmp_path / "typo" / "store"
    res = runner.invoke(app, ["status", "--dsn", f"chdb://{missing}"])
    assert res.exit_code == 1
    assert f"no store at {missing}: the directory does not exist" in res.output
    assert not (tmp_path / "typo").exists()


def test_bad_dsn_is_one_line_and_exit_2() -> None:
    res = runner.invoke(app, ["status", "--dsn", "mysql://nope"])
    assert res.exit_code == 2
    assert "unknown scheme 'mysql'" in res.output


def test_status_of_a_store_it_cannot_reach_exits_1() -> None:
    """A store that is unavailable (nothing listens at the server's port) exits 1 with one line, as the README
    says; 2 is for usage errors and a service that cannot be reached or refuses the token."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed when the block ends: nothing listens there
    res = runner.invoke(app, ["status", "--dsn", f"http://u:p@127.0.0.1:{port}/db"], env={"COLUMNS": "300"})
    assert res.exit_code == 1, res.output
    assert f"cannot open store http://u:***@127.0.0.1:{port}/db" in res.output
    assert "Traceback" not in res.output


@pytest.mark.slow
def test_status_of_a_store_a_service_holds_exits_1(tmp_path: Path) -> None:
    """The store is unavailable to this process while `serve` owns it: 1, and the line says to ask the service."""
    from tests.collector.service.harness import new_service

    with new_service(tmp_path) as svc:
        done = subprocess.run(
            [sys.executable, "-m", "inferensics.cli", "status", "--dsn", svc.dsn],
            env={**svc.env, "COLUMNS": "300"},
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 1, done.stderr
    assert "another process holds the data directory" in done.stderr
    assert "--service URL" in done.stderr


READ_COMMANDS = {
    "status": (["status"], 1),
    "report weekly": (["report", "weekly", "--week", "2024-W01"], 2),
    "canary compare": (["canary", "compare", "--model", "m", "--baseline", "a1", "--candidate", "b2"], 2),
}


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


@pytest.mark.parametrize(("command", "code"), READ_COMMANDS.values(), ids=list(READ_COMMANDS))
@pytest.mark.parametrize("flag", ["--dsn", "--data-dir"])
def test_a_folder_of_other_files_is_refused_and_left_untouched(
    command: list[str], code: int, flag: str, tmp_path: Path
) -> None:
    """`status --dsn chdb:///DIR` on a folder holding only notes.txt wrote chDB's metadata/ and tmp/ into it, then
    said to run `inferensics init`; report weekly and canary compare did the same. A read command never writes."""
    folder = tmp_path / "mine" / "store" if flag == "--data-dir" else tmp_path / "mine"
    folder.mkdir(parents=True)
    (folder / "notes.txt").write_text("not a store\n")
    given = f"chdb://{folder}" if flag == "--dsn" else str(folder.parent)
    out = [] if command == ["status"] else ["--out", str(tmp_path / "out")]
    env = {"COLUMNS": "400", "INFERENSICS_DSN": None, "INFERENSICS_SERVICE_URL": None}
    res = runner.invoke(app, [*command, flag, given, *out], env=env)
    assert res.exit_code == code, res.output
    assert res.output.strip().splitlines() == [
        f"error: no store at {folder}: it is a folder of other files, not a store (a store's folder holds the "
        "engine's metadata/ and store/, which `inferensics init` makes in a new or empty folder); pass the --dsn of "
        "an existing store"
    ]
    assert _files(tmp_path / "mine") == (["store", "store/notes.txt"] if flag == "--data-dir" else ["notes.txt"])
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("command", "code"), READ_COMMANDS.values(), ids=list(READ_COMMANDS))
def test_an_empty_folder_is_refused_and_left_empty(command: list[str], code: int, tmp_path: Path) -> None:
    folder = tmp_path / "fresh"
    folder.mkdir()
    env = {"COLUMNS": "400", "INFERENSICS_SERVICE_URL": None}
    res = runner.invoke(app, [*command, "--dsn", f"chdb://{folder}"], env=env)
    assert res.exit_code == code, res.output
    assert res.output.strip().splitlines() == [
        f"error: no store at {folder}: the folder is empty (a store's folder holds the engine's metadata/ and store/, "
        "which `inferensics init` makes); create it with `inferensics init` (same --dsn), or pass the --dsn of an "
        "existing store"
    ]
    assert _files(folder) == []


def test_a_file_is_refused_as_no_store(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a store\n")
    res = runner.invoke(app, ["status", "--dsn", f"chdb://{tmp_path / 'notes.txt'}"], env={"COLUMNS": "400"})
    assert res.exit_code == 1, res.output
    assert f"error: no store at {tmp_path / 'notes.txt'}: it is a file, not a store" in res.output
    assert _files(tmp_path) == ["notes.txt"]


def test_a_data_directory_given_as_a_store_is_refused_everywhere(tmp_path: Path) -> None:
    """`serve --dsn chdb:///DIR` on a data directory (DIR/store, DIR/spool) made a second, empty store beside
    DIR/store, and the dashboard showed an empty fleet. The reverse mistake was refused; this one is now too."""
    data = tmp_path / "data"
    made = runner.invoke(app, ["init", "--data-dir", str(data)])
    assert made.exit_code == 0, made.output
    before = _files(data)
    expected = f"error: {data} is a data directory, not a store: its store is {data / 'store'}; pass --data-dir {data} "
    expected += f"(or --dsn chdb://{data / 'store'})"
    env = {"COLUMNS": "400", "INFERENSICS_TOKENS": "t=admin"}
    for args in (["status"], ["init"], ["report", "weekly"], ["serve", "--port", "1"]):
        res = runner.invoke(app, [*args, "--dsn", f"chdb://{data}"], env=env)
        assert res.exit_code in (1, 2), (args, res.output)
        assert res.output.strip().splitlines()[-1] == expected, (args, res.output)
    assert _files(data) == before


def test_no_store_named_at_all_points_at_the_service_too(tmp_path: Path) -> None:
    """Forgetting --service sent a tired on-call to `inferensics init`, which makes an empty default store."""
    env = {"XDG_DATA_HOME": str(tmp_path), "INFERENSICS_DSN": None, "INFERENSICS_DATA_DIR": None, "COLUMNS": "400"}
    res = runner.invoke(app, ["report", "weekly"], env=env)
    assert res.exit_code == 2, res.output
    assert "(the default place: no --dsn, --data-dir or $INFERENSICS_DSN given)" in res.output
    assert "pass --service URL" in res.output
    assert not (tmp_path / "inferensics").exists()
