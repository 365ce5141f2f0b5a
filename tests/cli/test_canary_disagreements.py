"""``canary compare`` names the requests behind a failing argmax-agreement check: the worst disagreeing pairs and
the commands that open and replay the worst (a FAIL on argmax agreement named no request id, and ``requests
--failing`` cannot list a finite output: on-call found the request by guessing).

The store holds :mod:`tests.dashboard.canary_disagreements`: agreement fails on cpu-c and passes on cpu-b.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.dashboard._internal.replay_command import KEYRING_ENV
from inferensics.schema.store import Store
from tests.dashboard.canary_disagreements import (
    AGREEING_POOL,
    BASELINE,
    CANDIDATE,
    DISAGREEING_POOL,
    build,
)
from tests.seeding import seed

NOW = datetime.now(UTC).replace(second=0, microsecond=0)


def _compare(store: Store, chdb_dir: Path, tmp_path: Path) -> tuple[int, str]:
    dsn = f"chdb://{chdb_dir}?database={store.database}"
    window = ["--start", f"{NOW - timedelta(hours=2):%Y-%m-%dT%H:%M}", "--end", f"{NOW:%Y-%m-%dT%H:%M}"]
    args = ["canary", "compare", "--baseline", BASELINE[:12], "--candidate", CANDIDATE[:12], *window, "--dsn", dsn]
    result = CliRunner().invoke(app, [*args, "--out", str(tmp_path)], env={"COLUMNS": "300", KEYRING_ENV: ""})
    return result.exit_code, result.output


@pytest.fixture
def compared(store: Store, chdb_dir: Path, tmp_path: Path) -> tuple[int, str]:
    facts = build(NOW)
    seed(store, events=[*facts.requests, *facts.others])
    return _compare(store, chdb_dir, tmp_path)


def test_a_failing_agreement_names_the_worst_pairs_and_how_to_open_one(compared: tuple[int, str]) -> None:
    code, output = compared
    assert code == 1, output
    lines = output.splitlines()
    failing = lines[lines.index(f"hardware pool {DISAGREEING_POOL}:") :]
    failing = failing[: failing.index("verdict per hardware pool:")]
    assert "verdict: FAIL (failed: argmax_agreement; p Holm–Bonferroni-adjusted for the 2 hardware pools judged)" in (
        failing
    )
    at = failing.index(
        "argmax agreement FAIL: 10 of 100 input-matched pairs disagree; the 5 worst (most of their first argmax ids "
        "differing, then the earliest):"
    )
    worst = build(NOW).worst(5)
    assert failing[at + 1 : at + 6] == [
        f"  candidate {c} · baseline {b} · input {d[:16]} · {k} of its first argmax ids differ" for c, b, d, k in worst
    ]
    first = worst[0][0]
    assert failing[at + 6] == (
        f"open the worst: inferensics requests --id {first}, or the dashboard's request page "
        f"/request?request_id={first}"
    )
    # No candidate request's inputs were captured: no replay command that replay refuses (walk "failing").
    assert failing[at + 7] == (
        "none of the 10 worst candidate requests can be replayed: replay needs a request served from a bundle with "
        "its inputs captured (serve the candidate with SdkConfig(capture=CaptureRules(enabled=True)), or capture a "
        "sample of its requests)"
    )
    assert "inferensics replay" not in "\n".join(failing)
    # The pool whose agreement passed lists none.
    passing = lines[lines.index(f"hardware pool {AGREEING_POOL}:") : lines.index(f"hardware pool {DISAGREEING_POOL}:")]
    assert not [line for line in passing if "disagree" in line or "inferensics requests" in line], passing


def test_the_report_lists_the_disagreeing_pairs(compared: tuple[int, str], tmp_path: Path) -> None:
    (md,) = tmp_path.glob(f"*-{DISAGREEING_POOL}-*.md")
    (page,) = tmp_path.glob(f"*-{DISAGREEING_POOL}-*.html")
    text = md.read_text()
    worst = build(NOW).worst(10)
    section = text[text.index("## Disagreeing input-matched pairs") :]
    assert "argmax agreement FAIL: 10 of 100 input-matched pairs disagree; the 10 worst" in section
    assert [f"| {c} | {b} | {d} | {k} |" for c, b, d, k in worst] == [
        line for line in section.splitlines() if line.startswith("| req-")
    ]
    html = page.read_text()
    assert "Disagreeing input-matched pairs" in html
    assert all(f"<td>{c}</td><td>{b}</td>" in html for c, b, _, _ in worst)
    (agreeing,) = tmp_path.glob(f"*-{AGREEING_POOL}-*.md")
    assert "Disagreeing" not in agreeing.read_text()
    # No candidate request's inputs were captured: the report offers no replay that replay refuses (session 45).
    assert (
        "None of their candidate requests can be replayed: each was served without a bundle or without its inputs "
        "captured, which replay needs."
    ) in section
    assert "inferensics replay" not in section


def test_the_replay_hint_names_the_worst_candidate_request_replay_can_take(
    store: Store, chdb_dir: Path, tmp_path: Path
) -> None:
    """Walk (failing): the hint named the worst disagreeing candidate request whatever its capture, and replay refuses
    one whose inputs were not captured. It names the worst one replay can take, and says why it is not the worst."""
    facts = build(NOW)
    worst = facts.worst(5)
    third = worst[2][0]
    captured = [
        e.model_copy(update={"capture_blob": "ab" * 32}) if e.request_id == third else e for e in facts.requests
    ]
    seed(store, events=[*captured, *facts.others])
    code, output = _compare(store, chdb_dir, tmp_path)
    assert code == 1, output
    lines = output.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("open the worst: "))
    assert lines[at] == (
        f"open the worst: inferensics requests --id {worst[0][0]}, or the dashboard's request page "
        f"/request?request_id={worst[0][0]}"
    )
    # The candidate bundle was never pushed: replay cannot pull it, so the command takes its folder (session 45).
    assert lines[at + 1] == (
        f"replay a failing one: inferensics replay {third} --service SERVICE_URL --keyring BUILDER.pub --bundle DIR"
    )
    assert f"  DIR: the folder of bundle candidate {CANDIDATE[:16]} (the one inferensics bundle build wrote)" in (
        "\n".join(lines)
    )
    (md,) = tmp_path.glob(f"*-{DISAGREEING_POOL}-*.md")
    assert (
        f"Name a fault with `inferensics replay REQUEST_ID` for the candidate requests `{third}`; the other 9 were "
        "served without a bundle or without its inputs captured, which replay needs."
    ) in md.read_text()
    hint = [line for line in lines[at + 2 :] if line.startswith(f"  {third} ")]
    assert hint == [
        f"  {third} is the worst disagreeing candidate request replay can take (served from a bundle, its inputs "
        "captured); the 2 worse ones were not"
    ]
