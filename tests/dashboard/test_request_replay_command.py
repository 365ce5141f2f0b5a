"""The replay command the request page gives runs as shown: replay's own flags, the service the dashboard reads,
and the builders' keys when the dashboard knows them (walk 39: the page said a bare ``inferensics replay ID``,
which stops with "no keyring of trusted builders").

The page in a real browser is in ``tests/dashboard/test_canary_pools.py`` (a dashboard started with the keyring);
here the command itself, and the page without a keyring in Streamlit's AppTest."""

from __future__ import annotations

import doctest
import shlex

import pytest
import typer

from inferensics.bundle.keys import KEYRING_ENV as BUNDLE_KEYRING_ENV
from inferensics.cli.app import app
from inferensics.dashboard._internal import replay_command as module
from inferensics.dashboard._internal.replay_command import (
    KEYRING_ENV,
    KEYRING_PLACEHOLDER,
    TOKEN_PLACEHOLDER,
    replay_command,
)
from inferensics.dashboard.views.request import ID_KEY
from tests.dashboard.apptest import assert_clean, open_page
from tests.dashboard.conftest import SeededService
from tests.dashboard.seed import DRILL_ID

URL = "http://127.0.0.1:4318"


def replay_params(command: str) -> dict[str, object]:
    """``command`` parsed by ``inferensics replay``'s own parser (an unknown flag raises)."""
    words = shlex.split(command)
    assert words[:2] == ["inferensics", "replay"], command
    replay = typer.main.get_command(app).commands["replay"]  # type: ignore[attr-defined]
    params: dict[str, object] = replay.make_context("replay", words[2:]).params
    return params


def test_the_dashboard_reads_the_keyring_from_the_bundle_parts_variable() -> None:
    """The dashboard may not import the bundle part, so it names the variable again: the two must agree."""
    assert KEYRING_ENV == BUNDLE_KEYRING_ENV


def test_the_command_names_the_service_and_the_keyring_with_replays_own_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INFERENSICS_TOKEN", raising=False)  # the parser would read --token from it
    known = replay_command("req-01-00072", service_url=URL, keyring="/keys/builder key.pub", token=False)
    assert known.command == f"inferensics replay req-01-00072 --service {URL} --keyring '/keys/builder key.pub'"
    assert known.fill_in == ()
    params = replay_params(known.command)
    assert (params["request_id"], params["service"], params["keyring"]) == (
        "req-01-00072",
        URL,
        "/keys/builder key.pub",
    )
    assert params["token"] is None


def test_what_the_dashboard_cannot_know_is_a_placeholder_it_explains(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("INFERENSICS_TOKEN", raising=False)
    unknown = replay_command("req-7", service_url=URL, keyring=None, token=True)
    assert unknown.command == f"inferensics replay req-7 --service {URL} --keyring BUILDER.pub --token TOKEN"
    params = replay_params(unknown.command)
    assert (params["keyring"], params["token"]) == (KEYRING_PLACEHOLDER, TOKEN_PLACEHOLDER)
    (keys, token) = unknown.fill_in
    assert keys.startswith(f"`{KEYRING_PLACEHOLDER}`: the trusted builders' public keys")
    assert "$INFERENSICS_BUNDLE_KEYRING" in keys
    assert token.startswith(f"`{TOKEN_PLACEHOLDER}`: a token of this service with the `admin` role")


def test_a_shared_id_is_replayed_with_the_occurrence_the_page_shows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replay refuses an id several requests share unless ``--occurrence`` picks one; the page said the command
    "replays the earliest request", and gave none."""
    monkeypatch.delenv("INFERENSICS_TOKEN", raising=False)
    shared = replay_command("b-002", service_url=URL, keyring="/k.pub", token=False, occurrence=2)
    assert shared.command == f"inferensics replay b-002 --service {URL} --occurrence 2 --keyring /k.pub"
    assert replay_params(shared.command)["occurrence"] == 2


def test_the_modules_example_runs() -> None:
    result = doctest.testmod(module)
    assert result.attempted > 0
    assert result.failed == 0


@pytest.mark.slow
def test_without_a_keyring_the_page_shows_the_flag_to_fill_in(
    seeded: SeededService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(KEYRING_ENV, raising=False)
    at = open_page(seeded, "views/request.py", **{ID_KEY: DRILL_ID})  # inputs captured, never replayed
    assert_clean(at)
    (code,) = [c.value for c in at.code if "inferensics replay" in c.value]
    # The seed's bundles were never pushed: replay cannot pull the request's, so the command takes its folder.
    assert code == (
        f"inferensics replay {DRILL_ID} --service {seeded.url} --keyring BUILDER.pub --token TOKEN --bundle DIR"
    )
    (caption,) = [str(c.value) for c in at.caption if str(c.value).startswith("Fill in ")]
    assert f"`{KEYRING_PLACEHOLDER}`: the trusted builders' public keys" in caption
    assert "`DIR`: the folder of bundle baseline " in caption
    assert seeded.token not in code + caption  # the dashboard's own token is never shown
