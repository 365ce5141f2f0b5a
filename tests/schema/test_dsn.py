"""DSN parsing, and the one-line errors for a store that cannot be opened."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from inferensics.schema.dsn import (
    DATA_DIR_ENV,
    DSN_ENV,
    REPORT_DIR_ENV,
    DsnError,
    check_data_dir,
    default_data_dir,
    default_report_dir,
    parse_dsn,
    resolve_dsn,
)
from inferensics.schema.store import Store, StoreError

CLI = [sys.executable, "-m", "inferensics.cli"]


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("", "empty store DSN"),
        ("chdb://", "names no data directory"),
        ("postgres://x@y/z", "unknown scheme 'postgres'"),
        ("http://", "names no host"),
        ("http://h:notaport/db", "bad port"),
        ("http://h:8123/bad-name!", "database name"),
        ("chdb:///tmp/x?foo=1", "unknown option 'foo'"),
        ("http://[::1/db", "not a valid URL"),
    ],
)
def test_bad_dsns_say_what_is_wrong(text: str, needle: str) -> None:
    with pytest.raises(DsnError, match=r"expected|must be|only|unknown|valid") as exc:
        parse_dsn(text)
    assert needle in str(exc.value)
    assert "\n" not in str(exc.value)


def test_password_never_printed() -> None:
    dsn = parse_dsn("https://u:hunter2@example.org:8443/obs")
    assert "hunter2" not in str(dsn)
    assert (dsn.host, dsn.port, dsn.user, dsn.password, dsn.database) == ("example.org", 8443, "u", "hunter2", "obs")


def test_precedence_flag_then_env_then_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DSN_ENV, f"chdb://{tmp_path}/env")
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "default"))
    assert resolve_dsn(f"chdb://{tmp_path}/flag").path == tmp_path / "flag"
    assert resolve_dsn(None).path == tmp_path / "env"
    monkeypatch.delenv(DSN_ENV)
    assert resolve_dsn(None).path == tmp_path / "default" / "store"  # the data directory holds the store in store/


def test_the_data_dir_variable_names_the_folder_of_the_store_and_its_reports(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`$INFERENSICS_DATA_DIR` means what `--data-dir` means: the folder that holds the store in store/ (it was the
    store itself, so the two disagreed), and the weekly reports sit beside that store, in the folder it names."""
    monkeypatch.delenv(DSN_ENV, raising=False)
    monkeypatch.delenv(REPORT_DIR_ENV, raising=False)
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "d"))
    assert default_data_dir() == tmp_path / "d" / "store"
    assert resolve_dsn(None).path == tmp_path / "d" / "store"
    assert default_report_dir() == tmp_path / "d" / "reports"
    assert not (tmp_path / "d").exists()


def test_the_data_dir_variable_naming_a_store_itself_is_refused(
    monkeypatch: pytest.MonkeyPatch, store: Store, chdb_dir: Path
) -> None:
    """A real store's folder (the session's, opened by ``store``) named by the variable: its store/ is the engine's
    table parts, so it is refused with the settings that do reach it."""
    assert store.dsn.path == chdb_dir
    monkeypatch.delenv(DSN_ENV, raising=False)
    monkeypatch.setenv(DATA_DIR_ENV, str(chdb_dir))
    with pytest.raises(DsnError) as caught:
        resolve_dsn(None)
    assert str(caught.value) == (
        f"${DATA_DIR_ENV}={chdb_dir} is a store itself, not the folder that holds one in store/: "
        f"set {DSN_ENV}=chdb://{chdb_dir}"
    )
    with pytest.raises(StoreError, match="is a store itself"):
        Store.open(None)
    assert resolve_dsn(f"chdb://{chdb_dir}").path == chdb_dir  # as the store it is, it is reached
    with pytest.raises(DsnError, match=rf"--data-dir {chdb_dir} is a store itself.*: pass --dsn chdb://{chdb_dir}$"):
        check_data_dir(chdb_dir, named_by="--data-dir")
    assert check_data_dir(chdb_dir.parent, named_by="--data-dir") == chdb_dir.parent


def test_home_of_an_unknown_user_is_a_dsn_error() -> None:
    with pytest.raises(DsnError, match=r"cannot expand '~no-such-user-here/data'.*absolute directory"):
        parse_dsn("chdb://~no-such-user-here/data")


@given(st.text(max_size=200) | st.from_regex(r"(chdb|https?)://[^\s]{0,60}", fullmatch=True))
def test_parser_fuzz_only_raises_dsn_error(text: str) -> None:
    message = ""
    try:
        parse_dsn(text)
    except DsnError as exc:
        message = str(exc)
        ok = bool(message)
    else:
        ok = True
    assert ok, message


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_server_is_one_line_naming_the_dsn_and_the_cause(caplog: pytest.LogCaptureFixture) -> None:
    port = _free_port()
    with pytest.raises(StoreError) as exc:
        Store.open(f"http://reader:pw@127.0.0.1:{port}/obs")
    msg = str(exc.value)
    # The socket's own reason, not the driver's retry-pool text around it, and no driver warning beside it.
    assert msg == (
        f"cannot open store http://reader:***@127.0.0.1:{port}/obs: Connection refused; "
        "check host, port and credentials, or pass --dsn"
    )
    assert not [r for r in caplog.records if r.name.startswith("clickhouse_connect")]


@pytest.mark.slow
def test_held_chdb_directory_is_named_as_held(tmp_path: Path) -> None:
    data = tmp_path / "held"
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys,time; from inferensics.schema.store import Store; s = Store.open(sys.argv[1]); s.migrate(); "
            "print('ready', flush=True); time.sleep(120)",
            f"chdb://{data}",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "ready"
        env = {**os.environ, "COLUMNS": "300"}
        t0 = time.monotonic()
        res = subprocess.run(
            [*CLI, "status", "--dsn", f"chdb://{data}"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )
        assert res.returncode == 1, res.stderr  # a store it cannot open: 1, as the README says (2: the service)
        lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
        assert len(lines) == 1, res.stderr
        assert f"cannot open store chdb://{data}: another process holds the data directory" in lines[0]
        assert time.monotonic() - t0 < 120
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
