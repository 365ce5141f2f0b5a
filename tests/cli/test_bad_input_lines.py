"""Bad input at the command line is one ``error:`` line that says what to do, a non-zero exit and no traceback:
usage errors (click printed four lines: usage, hint, blank, error), a --service that is no URL (``http://[::1``
was httpx's InvalidURL traceback), a --since too long ago and bundle build's --traffic-model not UTF-8 (an
OverflowError and a UnicodeEncodeError traceback), a token the bundle commands' SQL API refuses (it read
``POST /api/v1/sql: 403 token lacks the 'admin' role``) and a refusal (400) of the service, in its own words as
``requests`` says them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from tests.collector.service.harness import READ, new_service
from tests.loopback import refusing as refusing_service
from tests.loopback import serving

ENV = {"COLUMNS": "300", "INFERENSICS_SERVICE_URL": "", "INFERENSICS_TOKEN": ""}
UNREACHABLE = "http://127.0.0.1:9"
ENGINE_SAID = "query failed: Code: 47. DB::Exception: Unknown expression identifier `channel`"
"""A refusal (400) of the SQL API in the service's words: what a store the service has not migrated answers."""
BUILD = ["bundle", "build", "--model", "m:f", "--key", "k", "--out", "o", "--shapes-from-service", UNREACHABLE]


def one_line(args: list[str]) -> str:
    res = CliRunner().invoke(app, args, env=ENV)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    text = res.output.strip()
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error: "), text
    return text


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["bundle", "states"], "error: Missing option '--out'; see `inferensics bundle states --help`"),
        (["bundle", "diff", "a"], "error: Missing argument 'B'; see `inferensics bundle diff --help`"),
        (["bundle", "nope"], "error: No such command 'nope'; see `inferensics bundle --help`"),
        (["nope"], "error: No such command 'nope'; see `inferensics --help`"),
        (
            ["status", "--since", "1d"],
            "error: No such option: --since (Possible options: --dsn, --service); see `inferensics status --help`",
        ),
        (
            ["replay", "r-1", "extra"],
            "error: Got unexpected extra argument(s) (extra); see `inferensics replay --help`",
        ),
        (
            ["status", "--service", "http://[::1"],
            "error: 'http://[::1' is not a service URL (Invalid port: ':1'): pass http(s)://HOST:PORT with --service "
            "or $INFERENSICS_SERVICE_URL, e.g. http://127.0.0.1:4318",
        ),
        (
            ["requests", "--service", "not a url"],
            "error: 'not a url' is not a service URL (no http:// or https://): pass http(s)://HOST:PORT with "
            "--service or $INFERENSICS_SERVICE_URL, e.g. http://127.0.0.1:4318",
        ),
        (
            ["bundle", "pull", "abc", "--out", "o", "--service", "ftp://x"],
            "error: 'ftp://x' is not a service URL (the scheme is ftp://, not http:// or https://): pass "
            "http(s)://HOST:PORT with --service or $INFERENSICS_SERVICE_URL, e.g. http://127.0.0.1:4318",
        ),
        (
            ["replay", "r-1", "--service", "127.0.0.1:4318"],
            "error: '127.0.0.1:4318' is not a service URL (no http:// or https://): pass http(s)://HOST:PORT with "
            "--service or $INFERENSICS_SERVICE_URL, e.g. http://127.0.0.1:4318",
        ),
        (
            ["requests", "--since", "99999999999d", "--data-dir", "nostore"],
            "error: --since '99999999999d' reaches back past year 1: give a time ago such as 7d or 30d",
        ),
        (
            [*BUILD, "--traffic-model", "m", "--since", "99999999999d"],
            "error: --since '99999999999d' reaches back past year 1: give a window such as 7d or 30d",
        ),
        (
            [*BUILD, "--traffic-model", "m\udcff"],
            "error: 'm\\xff' is not UTF-8 text: the store's names are UTF-8; check the shell's quoting or the "
            "terminal's encoding",
        ),
    ],
)
def test_bad_input_is_one_line_that_says_what_to_do(args: list[str], line: str, tmp_path: Path) -> None:
    made = CliRunner().invoke(app, ["bundle", "keygen", "--out", str(tmp_path / "k")], env=ENV)
    assert made.exit_code == 0, made.output
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        assert one_line(args) == line


def test_a_request_for_help_still_prints_the_help() -> None:
    res = CliRunner().invoke(app, ["bundle"], env=ENV)
    assert "Commands:" in res.output, res.output
    assert "error" not in res.output, res.output


@pytest.fixture
def refusing() -> Iterator[str]:
    with serving(refusing_service(ENGINE_SAID)) as url:
        yield url


@pytest.mark.parametrize(
    "args",
    [
        ["bundle", "states", "--out", "states.json"],
        ["bundle", "pull", "--channel", "production", "--out", "pulled"],
        ["bundle", "revoke", "abc"],
    ],
)
def test_a_refusal_of_the_service_reads_in_its_own_words(args: list[str], refusing: str, tmp_path: Path) -> None:
    """It read ``error: POST /api/v1/sql: 400 query failed: ...``: the plumbing before the service's words."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        assert one_line([*args, "--service", refusing, "--token", "t"]) == f"error: {ENGINE_SAID}"


@pytest.mark.slow
def test_a_token_the_sql_api_refuses_names_the_role(tmp_path: Path) -> None:
    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service") as svc:
        for args in (["bundle", "states", "--out", str(tmp_path / "s.json")], ["bundle", "revoke", "abc"]):
            line = one_line([*args, "--service", svc.url, "--token", READ])
            assert line == (
                f"error: the service at {svc.url} refused this token its SQL API (token lacks the 'admin' role): the "
                "bundle commands read and confirm releases there, so they need a token with the admin role (--token "
                "or $INFERENSICS_TOKEN)"
            )
