"""Roles: a ``metrics`` token scrapes ``/metrics`` and nothing else.

A Prometheus scrape token needed ``read``, which also reads generated code, blobs and every named query: whoever
read the scraper's configuration could read the store. ``read`` and ``admin`` still scrape.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from inferensics.collector.errors import ConfigError
from inferensics.collector.service import ServiceState, build_state, create_app, load_config
from inferensics.collector.service.auth import METRICS, ROLES, AuthError, TokenAuth
from inferensics.collector.service.config import TOKENS_FORM, TOKENS_TABLE_FORM
from inferensics.schema.store import Store
from tests.collector.service.named import TEST_QUERIES

SCRAPE = "scrape-token"
TOKENS = f"ingest-token=ingest,read-token=read,{SCRAPE}=metrics,replay-token=replay,admin-token=admin"


def auth_tokens() -> list[str]:
    return [entry.split("=")[0] for entry in TOKENS.split(",")]


def _refused(auth: TokenAuth, token: str, role: str) -> int | None:
    try:
        auth.check(f"Bearer {token}", role)
    except AuthError as exc:
        return exc.status
    return None


def test_a_metrics_token_holds_metrics_only_and_read_and_admin_hold_metrics() -> None:
    auth = TokenAuth(load_config({"tokens": TOKENS}, environ={}).tokens)
    holds = {token: {role for role in ROLES if _refused(auth, token, role) is None} for token in auth_tokens()}
    assert holds == {
        "ingest-token": {"ingest"},
        "read-token": {"read", "metrics"},
        SCRAPE: {"metrics"},
        "replay-token": {"replay"},
        "admin-token": set(ROLES),
    }
    assert _refused(auth, SCRAPE, "read") == 403
    assert _refused(auth, "ingest-token", METRICS) == 403


def test_the_metrics_role_is_taken_from_the_environment_and_the_tokens_table(tmp_path: Path) -> None:
    config_file = tmp_path / "collector.toml"
    config_file.write_text('[tokens]\n"scrape-a" = ["metrics"]\n"scrape-b" = "metrics"\n', encoding="utf-8")
    config = load_config(environ={"INFERENSICS_TOKENS": "scrape-c=metrics"}, config_file=str(config_file))
    assert config.tokens == {name: frozenset({"metrics"}) for name in ("scrape-a", "scrape-b", "scrape-c")}
    # the forms a refusal quotes name it with the others
    for form in (TOKENS_FORM, TOKENS_TABLE_FORM):
        assert "roles: ingest, read, metrics, replay, admin" in form
    with pytest.raises(ConfigError) as info:
        load_config(environ={"INFERENSICS_TOKENS": "t=metric"})
    assert "unknown roles ['metric']; known: ['ingest', 'read', 'metrics', 'replay', 'admin']" in str(info.value)


@pytest.fixture
def api(store_dsn: str, tmp_path: Path) -> Iterator[TestClient]:
    config = load_config({"dsn": store_dsn, "spool_dir": str(tmp_path / "spool"), "tokens": TOKENS}, environ={})
    state: ServiceState = build_state(config, open_store=lambda: Store.open(store_dsn), named_queries=TEST_QUERIES)
    try:
        with TestClient(create_app(state)) as client:
            yield client
    finally:
        state.close()
        store = Store.open(store_dsn)
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
        store.close()


def test_a_metrics_token_scrapes_and_is_refused_everything_else(api: TestClient) -> None:
    """Needs app.py's route table to guard /metrics with the metrics role (read held it before)."""
    scrape = {"Authorization": f"Bearer {SCRAPE}"}
    got = api.get("/metrics", headers=scrape)
    assert got.status_code == 200, got.text
    assert "inferensics_collector_store_up" in got.text
    digest = "0" * 64
    for method, path in (
        ("GET", "/api/v1/status"),
        ("GET", "/api/v1/queries"),
        ("POST", "/api/v1/query/request_count"),
        ("GET", f"/api/v1/blobs/{digest}"),
        ("PUT", f"/api/v1/blobs/{digest}"),
        ("POST", "/api/v1/sql"),
        ("POST", "/v1/traces"),
        ("POST", "/api/v1/_faults"),
    ):
        refused = api.request(method, path, headers=scrape)
        assert refused.status_code == 403, (method, path, refused.text)
    # the tokens that scraped before still do; one without either role does not
    for token, status in (("read-token", 200), ("admin-token", 200), ("ingest-token", 403), ("replay-token", 403)):
        assert api.get("/metrics", headers={"Authorization": f"Bearer {token}"}).status_code == status, token
