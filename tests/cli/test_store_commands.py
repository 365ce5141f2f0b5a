"""``inferensics init`` and ``status`` on a real embedded store (through typer's runner, in-process)."""

from __future__ import annotations

import os
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


def test_init_migrates_a_store_an_older_release_made(chdb_dir: Path) -> None:
    """A store release 56894e5 made (schema 4): `init` died with a traceback ("Unknown identifier
    `fingerprinted`") after dropping the views that feed the rollups; it migrates, and `status` says current."""
    from tests.schema.test_old_store_upgrades import load_old_store

    dsn = scratch_dsn(chdb_dir)
    s = Store.open(dsn)
    try:
        load_old_store(s, 4)
        res = runner.invoke(app, ["init", "--dsn", dsn], env={"COLUMNS": "400"})
        assert res.exit_code == 0, res.output
        assert res.output.strip().splitlines() == [f"store {s.dsn}: migrated, schema version {LATEST_VERSION}"]
        res = runner.invoke(app, ["status", "--dsn", dsn], env={"COLUMNS": "400"})
        assert res.exit_code == 0, res.output
        assert f"(latest {LATEST_VERSION}: current)" in res.output
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


def test_init_whose_migration_fails_says_what_to_do_in_one_line(
    chdb_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A migration that fails (here the engine refuses its first statement) is one line naming the migration, the
    engine's reason and what to do, exit 2: no traceback in the journal of a unit that retries every 2 s."""
    from inferensics.schema import migrator
    from inferensics.schema.migrations import MIGRATIONS, Migration
    from tests.schema.test_old_store_upgrades import load_old_store

    dsn = scratch_dsn(chdb_dir)
    s = Store.open(dsn)
    try:
        load_old_store(s, 6)
        seventh = MIGRATIONS[6]
        failing = Migration(7, seventh.name, lambda t: ["SELECT throwIf(1, 'disk full (injected)')"])
        monkeypatch.setattr(migrator, "MIGRATIONS", (*MIGRATIONS[:6], failing, *MIGRATIONS[7:]))
        res = runner.invoke(app, ["init", "--dsn", dsn], env={"COLUMNS": "600"})
        assert res.exit_code == 2, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1, res.output
        assert lines[0].startswith(f"error: cannot migrate store {s.dsn} from schema version 6 to {LATEST_VERSION}: ")
        assert f"migration 7 ({seventh.name}) failed: " in lines[0]
        assert "disk full (injected)" in lines[0]
        assert "run `inferensics init` again" in lines[0]
        assert s.schema_version() == 6
    finally:
        s.client.command(f"DROP DATABASE IF EXISTS {s.database} SYNC")
        s.close()


def _newer(store: Store) -> int:
    """Record a migration past this release's last, as a later release's `init` would; return its version."""
    from datetime import UTC, datetime

    newer = LATEST_VERSION + 1
    store.client.insert(
        f"{store.database}.schema_migrations",
        [[newer, "from a newer release", "x", datetime.now(UTC)]],
        column_names=["version", "name", "checksum", "applied_at"],
    )
    return newer


def test_a_store_newer_than_this_release_is_refused_by_init_and_status_alike(store: Store) -> None:
    """The rollback case (the previous release's code on a store the new one migrated): `init` said "up to date"
    and exited 0 while `status` said "behind, run `inferensics init`" and exited 1 forever. Both now say the same
    line: the store is newer, this release must not write to it, what to do; both exit 1."""
    newer = _newer(store)
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    said = (
        f"error: store {store.dsn} is at schema version {newer}, newer than {LATEST_VERSION}, the newest this "
        "release knows: a later inferensics migrated it and this release must not write to it; run the release "
        "that migrated it (upgrade inferensics again), or restore the backup taken before that upgrade"
    )
    init = runner.invoke(app, ["init", "--dsn", dsn], env={"COLUMNS": "600"})
    assert init.exit_code == 1, init.output
    assert init.output.strip().splitlines() == [said]
    status = runner.invoke(app, ["status", "--dsn", dsn], env={"COLUMNS": "600"})
    assert status.exit_code == 1, status.output
    assert (
        f"schema       version {newer} (latest {LATEST_VERSION}: newer than this release, which must not write to it)"
        in status.output
    )
    assert "behind" not in status.output
    assert status.output.strip().splitlines()[-1] == said
    assert store.schema_version() == newer  # nothing was run


def test_status_service_on_a_store_newer_than_the_service_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A service whose store a later release migrated while it ran: `status --service` said "behind"."""
    import inferensics.collector.client as client_module

    class FakeClient:
        def __init__(self, *args: object, **kwargs: object) -> None: ...

        def __enter__(self) -> FakeClient:
            return self

        def __exit__(self, *exc: object) -> None: ...

        def status(self) -> dict[str, object]:
            return {
                "uptime_s": 5,
                "store": {"ok": False, "dsn": "chdb:///srv/store", "schema_version": 30, "latest_version": 29},
                "spool": {"dir": "/srv/spool", "files": 0, "bytes": 0, "max_bytes": 1 << 30},
                "counters": {},
            }

    monkeypatch.setattr(client_module, "ServiceClient", FakeClient)
    res = runner.invoke(app, ["status", "--service", "http://127.0.0.1:4318", "--token", "t"], env={"COLUMNS": "600"})
    assert res.exit_code == 1, res.output
    assert "schema       version 30 (latest 29: newer than the service's release, which must not write to it)" in (
        res.output
    )
    assert "behind" not in res.output
    assert (
        "store chdb:///srv/store is at schema version 30, newer than 29, the newest the service's release knows: a "
        "later inferensics migrated it and the service's release must not write to it; run the release that "
        "migrated it (upgrade inferensics again), or restore the backup taken before that upgrade"
    ) in res.output


@pytest.mark.slow
def test_serve_refuses_to_start_on_a_store_newer_than_this_release(tmp_path: Path) -> None:
    """`serve` on such a store answered /readyz ready and wrote into a schema it was not written for; it now stops
    before listening for spans, with the same line as `init`, exit 2."""
    store = tmp_path / "data" / "store"
    make = (
        "import sys; from datetime import UTC, datetime; from inferensics.schema.store import Store; "
        "from inferensics.schema.migrations import LATEST_VERSION as L; s = Store.open(sys.argv[1]); s.migrate(); "
        "s.client.insert(f'{s.database}.schema_migrations', [[L + 1, 'newer', 'x', datetime.now(UTC)]], "
        "column_names=['version', 'name', 'checksum', 'applied_at'])"
    )
    subprocess.run([sys.executable, "-c", make, f"chdb://{store}"], check=True, timeout=120, capture_output=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    args = ["--port", str(port), "--dsn", f"chdb://{store}", "--spool-dir", str(tmp_path / "spool")]
    env = {**os.environ, "INFERENSICS_TOKENS": "t=admin", "COLUMNS": "600"}
    done = subprocess.run(
        [sys.executable, "-m", "inferensics.cli", "serve", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"error: store chdb://{store} is at schema version {LATEST_VERSION + 1}, newer than "), last
    assert "must not write to it" in last
    assert "Traceback" not in done.stderr


def test_the_service_state_refuses_a_newer_store_and_releases_its_spool(store: Store, tmp_path: Path) -> None:
    """`build_state` itself refuses such a store (it started the writer's spool for it and left `serve` to notice
    afterwards, so any other caller of it spooled for a store it must not write to); its spool is let go."""
    from inferensics.collector.service.config import ServiceConfig
    from inferensics.collector.service.state import StartError, build_state

    newer = _newer(store)
    config = ServiceConfig(
        dsn=f"chdb://{store.dsn.path}?database={store.database}", spool_dir=str(tmp_path / "spool"), auth=False
    )
    for _ in range(2):  # the second is refused on the store again, not on a spool the first left held
        with pytest.raises(StartError, match=f"is at schema version {newer}, newer than {LATEST_VERSION}"):
            build_state(config)
