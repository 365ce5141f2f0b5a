"""The request page's replay command runs as shown whether or not the service holds a push of the request's bundle,
and the page words a request served without a bundle, or whose inputs were not captured, as what happened.

Session 45 (newuser D1 and "smaller things"): the page gave ``inferensics replay nu-s-3 --service URL --keyring
BUILDER.pub --token TOKEN`` for a request served from a bundle never pushed, and said replay "pulls its pushed
bundle"; replay stopped with "bundle ... is not available here (not pushed to the service)". A request served without
a bundle read "bundle unregistered –", and one served with capture off "Inputs not captured for this request (capture
is on for failing or sampled requests)"."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from inferensics.dashboard._internal.replay_command import KEYRING_ENV
from tests.collector.service.harness import READ
from tests.dashboard.apptest import assert_clean, open_page, texts
from tests.dashboard.conftest import SeededService, seeded_service
from tests.dashboard.replay_pushes import (
    PUSHED,
    R_NO_BUNDLE,
    R_NO_INPUTS,
    R_NOT_CHOSEN,
    R_PUSHED,
    R_UNPUSHED,
    UNPUSHED,
    UNPUSHED_NAME,
    UNREGISTERED,
    events,
)
from tests.dashboard.seed import SeedFacts
from tests.dashboard.test_request_replay_command import replay_params

PAGE = "views/request.py"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def pushes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    root = tmp_path_factory.mktemp("replay-pushes-service")
    with seeded_service(root, "tests.dashboard.replay_pushes", lambda now: now) as (service, now):
        assert events(now)
        yield SeededService(service=service, token=READ, facts=SeedFacts(now=now, requests=[], others=[]))


def _command(pushes: SeededService, request_id: str) -> tuple[str, str]:
    at = open_page(pushes, PAGE, **{"drill.request_id": request_id})
    assert_clean(at)
    (code,) = [c.value for c in at.code if "inferensics replay" in c.value]
    fill_in = [str(c.value) for c in at.caption if str(c.value).startswith("Fill in ")]
    return code, " ".join(fill_in)


def test_a_bundle_never_pushed_is_passed_with_bundle_dir(
    pushes: SeededService, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(KEYRING_ENV, "/k.pub")
    monkeypatch.delenv("INFERENSICS_TOKEN", raising=False)
    code, fill_in = _command(pushes, R_UNPUSHED)
    assert code == f"inferensics replay {R_UNPUSHED} --service {pushes.url} --keyring /k.pub --token TOKEN --bundle DIR"
    assert replay_params(code)["bundle"] is not None  # replay's own --bundle flag
    assert (
        f"`DIR`: the folder of bundle {UNPUSHED_NAME} {UNPUSHED[:16]} (the one `inferensics bundle "
        f"build` wrote), which this service holds no push of; or push it first with `inferensics bundle push DIR "
        f"--service {pushes.url}` and leave `--bundle DIR` out."
    ) in fill_in
    assert "pulls its pushed bundle" not in fill_in


def test_a_pushed_bundle_is_pulled_as_before(pushes: SeededService, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEYRING_ENV, "/k.pub")
    code, fill_in = _command(pushes, R_PUSHED)
    assert code == f"inferensics replay {R_PUSHED} --service {pushes.url} --keyring /k.pub --token TOKEN"
    assert PUSHED[:16] not in fill_in
    assert "--bundle" not in fill_in


def test_a_request_served_without_a_bundle_reads_no_bundle_and_why_its_inputs_were_not_captured(
    pushes: SeededService,
) -> None:
    nan = open_page(pushes, PAGE, **{"drill.request_id": R_NO_BUNDLE})
    assert_clean(nan)
    shown = texts(nan)
    assert "· **no bundle** ·" in shown
    assert "unregistered" not in shown
    assert "capture is on for failing or sampled requests" not in shown
    (said,) = [str(i.value) for i in nan.info if "Inputs not captured" in str(i.value)]
    assert said.startswith(
        r"**Inputs not captured** for this request: its host did not capture them: capture is off on that host \(the "
        r"default; SdkConfig\(capture=CaptureRules\(enabled=True\)\) turns it on\)"
    ), said

    none = open_page(pushes, PAGE, **{"drill.request_id": R_NO_INPUTS})
    assert_clean(none)
    (said,) = [str(i.value) for i in none.info if "Inputs not captured" in str(i.value)]
    assert r"it passed no inputs to the tracker \(tracker.request\(inputs=...\)\)" in said, said

    unchosen = open_page(pushes, PAGE, **{"drill.request_id": R_NOT_CHOSEN})
    assert_clean(unchosen)
    (said,) = [str(i.value) for i in unchosen.info if "Inputs not captured" in str(i.value)]
    assert "not chosen: it completed without a fault" in said, said
    # A bundle id no host registered: named as such, not as a bundle called "unregistered".
    assert f"`{UNREGISTERED}`" in texts(unchosen)
    assert "(not registered by any host)" in texts(unchosen)
