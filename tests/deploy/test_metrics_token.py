"""The shipped deployments scrape with a ``metrics`` token, not a ``read`` one.

The scrape configurations in deploy/README.md read a ``read`` token from a file, and ``read`` also reads the
queries, blobs and generated code: a Prometheus host's configuration gave that away. Every shipped token list
now holds a token of the ``metrics`` role (scrapes ``/metrics``, nothing else) and the scrape configurations
use it.
"""

from __future__ import annotations

import re

import yaml

from inferensics.collector.service.auth import METRICS, ROLES
from inferensics.collector.service.config import TOKENS_ENV, parse_tokens
from tests.deploy.layout import COMPOSE, DEPLOY, K8S, SYSTEMD, yaml_docs

README = (DEPLOY / "README.md").read_text(encoding="utf-8")


def _env_value(text: str, name: str) -> str:
    (value,) = re.findall(rf"^{name}=(.*)$", text, flags=re.MULTILINE)
    return str(value)


def _shipped_token_lists() -> dict[str, str]:
    (secret,) = [d for d in yaml_docs(K8S / "secret.yaml") if d["kind"] == "Secret"]
    return {
        "k8s/secret.yaml": secret["stringData"][TOKENS_ENV],
        "systemd/inferensics.env.example": _env_value(
            (SYSTEMD / "inferensics.env.example").read_text(encoding="utf-8"), TOKENS_ENV
        ),
        "compose/.env.example": _env_value((COMPOSE / ".env.example").read_text(encoding="utf-8"), TOKENS_ENV),
    }


def test_every_shipped_token_list_has_a_metrics_only_token() -> None:
    for where, text in _shipped_token_lists().items():
        tokens = parse_tokens(text, where)  # the collector's own parser: an unknown role would stop it
        scrapers = [token for token, roles in tokens.items() if roles == frozenset({METRICS})]
        assert scrapers, f"deploy/{where}: no token with the metrics role alone in {TOKENS_ENV}"


def test_the_scrape_configurations_use_the_metrics_token() -> None:
    section = README.split("\n## Metrics", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```yaml\n(.*?)```", section, flags=re.DOTALL)
    jobs = yaml.safe_load(block)
    assert len(jobs) == 3
    for job in jobs:
        credentials = job["authorization"]["credentials_file"]
        assert "metrics" in credentials, (job["job_name"], credentials)
        assert "read" not in credentials, (job["job_name"], credentials)
    assert "`metrics` role" in section
    assert "inferensics-read-token" not in README


def test_the_settings_table_names_every_role() -> None:
    (row,) = [line for line in README.splitlines() if line.startswith(f"| `{TOKENS_ENV}` |")]
    for role in ROLES:
        assert f"`{role}`" in row, role
