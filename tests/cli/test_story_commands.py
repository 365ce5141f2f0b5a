"""The commands a new user types after the demo (issue 20): windows that end now, the current week by
default, one clear line for a URL that is not the collector service, and help texts that read right."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from inferensics.analytics.weekly import current_week
from inferensics.cli.app import app
from inferensics.schema.events import BundleEvent, RequestEvent
from inferensics.schema.store import Store
from tests.loopback import serving

runner = CliRunner()
ENV = {"COLUMNS": "300"}


@pytest.fixture
def served_now(store: Store) -> str:
    """A store with 3 baseline and 3 candidate requests of model ``m`` served a minute ago; its DSN."""
    at = datetime.now(UTC) - timedelta(minutes=1)
    store.insert_events(
        [
            RequestEvent(
                request_id=f"r-{bundle}-{i}", ts=at, host="h", model="m", hw_pool="p", traffic_class="c",
                bundle_id=bundle, latency_ms=10.0,
            )
            for bundle in ("base", "cand")
            for i in range(3)
        ]
    )  # fmt: skip
    return f"chdb://{store.dsn.path}?database={store.database}"


def test_canary_compare_counts_requests_up_to_now(served_now: str) -> None:
    """On main the window ended at the start of the hour: 0 requests a side, INCONCLUSIVE."""
    args = ["canary", "compare", "--baseline", "base", "--candidate", "cand", "--model", "m"]
    res = runner.invoke(app, [*args, "--min-requests", "3", "--min-pairs", "1", "--dsn", served_now], env=ENV)
    verdict = next(line for line in res.output.splitlines() if line.startswith("verdict  requests"))
    assert verdict.split()[2:6] == ["3", "requests", "3", "requests"], res.output
    assert "fewer than" not in res.output
    assert "no requests of" not in res.output


def test_report_weekly_writes_the_current_week_so_far(served_now: str, tmp_path: Path) -> None:
    """On main the default was last week (an empty report)."""
    res = runner.invoke(app, ["report", "weekly", "--out", str(tmp_path), "--dsn", served_now], env=ENV)
    assert res.exit_code == 0, res.output
    week = current_week(datetime.now(UTC))
    assert (tmp_path / f"weekly-{week}.html").exists()
    assert "Requests: 6 " in res.output
    assert "the week so far" in (tmp_path / f"weekly-{week}.md").read_text()


def test_report_weekly_without_out_writes_into_its_stores_own_folder(served_now: str, tmp_path: Path) -> None:
    """Every store's report went into one folder as ``weekly-<week>.html``, so a second store's report replaced
    the first's, and the dashboard's Weekly report page over one store showed the other's. Without ``--out`` the
    command writes into the store's own folder, the one the page lists for that store (``store_folder`` of the
    DSN the service's status names, :class:`Dsn`'s text)."""
    from inferensics.analytics.report import STORE_FILE, store_folder
    from inferensics.schema.dsn import resolve_dsn

    week = current_week(datetime.now(UTC))
    env = {**ENV, "INFERENSICS_REPORT_DIR": str(tmp_path)}
    res = runner.invoke(app, ["report", "weekly", "--dsn", served_now], env=env)
    assert res.exit_code == 0, res.output
    named = str(resolve_dsn(served_now))
    folder = store_folder(tmp_path, named)
    assert (folder / f"weekly-{week}.html").exists(), sorted(p.name for p in tmp_path.rglob("*"))
    assert (folder / STORE_FILE).read_text() == named + "\n"
    assert not list(tmp_path.glob("weekly-*")), "a report left loose in the shared folder"
    assert str(folder) in res.output
    other = served_now.replace("?database=", "?database=other_")
    assert store_folder(tmp_path, str(resolve_dsn(other))) != folder


class _WebPage(BaseHTTPRequestHandler):
    """What a dashboard (Streamlit) answers: its page for any GET, 405 for a POST."""

    def do_GET(self) -> None:
        body = b"<!doctype html><html><body>a dashboard</body></html>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        self.send_response(405)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web_page() -> Iterator[str]:
    """The URL of a web server that is not the collector service."""
    with serving(_WebPage) as url:
        yield url


@pytest.mark.parametrize(
    "command",
    [
        ["status"],
        ["report", "weekly"],
        ["canary", "compare", "--baseline", "a", "--candidate", "b", "--model", "m"],
    ],
)
def test_a_url_that_is_not_the_service_says_so(command: list[str], web_page: str, tmp_path: Path) -> None:
    """On main: a JSONDecodeError traceback (status) and "405 Method Not Allowed" (reports); the report's
    --out directory was made before the connection failed."""
    out = tmp_path / "reports"
    extra = ["--out", str(out)] if command[0] != "status" else []
    res = runner.invoke(app, [*command, *extra, "--service", web_page], env=ENV)
    assert res.exit_code == 2, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert f"{web_page} is not an inferensics collector service" in res.output
    assert "inferensics serve" in res.output
    assert not out.exists()


def _helps() -> dict[tuple[str, ...], str]:
    def walk(command: object, path: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        out = [path]
        for name, sub in getattr(command, "commands", {}).items():
            out += walk(sub, (*path, name))
        return out

    paths = walk(typer.main.get_command(app))
    return {p: runner.invoke(app, [*p, "--help"], env={"COLUMNS": "200"}).output for p in paths}


def test_help_texts_read_right() -> None:
    """On main: ``--help <bool>`` (a flag shown as taking a value), ``{path}`` as an argument name, raw reST
    backquotes, a --service help that speaks of status under every command, a --dsn help cut short."""
    helps = _helps()
    assert len(helps) > 10
    for path, text in helps.items():
        assert "<bool>" not in text, path
        assert not re.search(r"\{\w+\}", text), path
        assert "``" not in text, path
        if path != ("status",):
            assert "status goes through" not in text, path
        assert "http(s)://..." not in text, path
    assert "import-trace [OPTIONS] PATH" in helps[("import-trace",)]
    assert "[default: now]" in helps[("canary", "compare")]
    assert "[default: the current week, up to now]" in " ".join(helps[("report", "weekly")].split())


def test_canary_compare_takes_bundle_ids_as_shown(store: Store) -> None:
    """Bundle ids are shown shortened (12 or 16 digits); given so, without --model, canary compare said "cannot
    tell the model: pass --model (the candidate bundle is not registered)" of a registered bundle."""
    at = datetime.now(UTC) - timedelta(minutes=1)
    base, cand, twin = "ab" * 32, "cd" * 32, "cd" + "ef" * 31
    store.insert_events(
        [BundleEvent(ts=at, bundle_id=b, bundle_name=b[:4], model="m", host="h") for b in (base, cand, twin)]
    )
    store.insert_events(
        [
            RequestEvent(request_id=f"r-{b[:4]}-{i}", ts=at, host="h", model="m", hw_pool="p", traffic_class="c",
                         bundle_id=b, latency_ms=10.0)
            for b in (base, cand)
            for i in range(3)
        ]
    )  # fmt: skip
    dsn = ["--dsn", f"chdb://{store.dsn.path}?database={store.database}", "--min-requests", "3", "--min-pairs", "1"]
    res = runner.invoke(app, ["canary", "compare", "--baseline", base[:12], "--candidate", cand[:16], *dsn], env=ENV)
    assert res.exit_code in (0, 1, 3), res.output
    assert res.output.startswith(f"canary m: {base} → {cand}, hardware pool p ("), res.output
    verdict = next(line for line in res.output.splitlines() if line.startswith("verdict  requests"))
    assert verdict.split()[2:6] == ["3", "requests", "3", "requests"], res.output
    ambiguous = runner.invoke(app, ["canary", "compare", "--baseline", base, "--candidate", "cd", *dsn], env=ENV)
    assert ambiguous.exit_code == 2, ambiguous.output
    assert f"--candidate cd: the start of 2 bundle ids ({cand[:16]}, {twin[:16]}); give more digits" in ambiguous.output
    unknown = runner.invoke(app, ["canary", "compare", "--baseline", base, "--candidate", "ffff", *dsn], env=ENV)
    assert unknown.exit_code == 2, unknown.output
    assert "bundle ffff is not in the store's bundles table" in unknown.output
