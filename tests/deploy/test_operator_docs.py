"""What deploy/README.md and deploy/SIZING.md tell an operator matches the code and the files: every collector
setting is named, the commands run as written (the embedded backup, compose with its file), the upgrade, rotation
and scrape instructions match the units and the compose files, and the sizing names the tables that grow."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from inferensics.collector.service.config import CONFIG_ENV, SETTINGS, TOKENS_ENV
from inferensics.collector.service_url import CA_FILE_ENV
from inferensics.schema.dedup import SEEN_TABLE
from inferensics.schema.events import MODELS_BY_TABLE
from tests.deploy.layout import COMPOSE, DEPLOY, SYSTEMD

README = (DEPLOY / "README.md").read_text(encoding="utf-8")
TOP_README = (DEPLOY.parent / "README.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    return README.split(f"\n## {title}", 1)[1].split("\n## ", 1)[0]


def test_every_collector_setting_and_the_tls_variables_are_documented() -> None:
    """TLS, the body limit, the batch, engine and SQL settings were only in collector/service/config.py."""
    section = _section("The collector: settings, health, TLS")
    for name in [s.env for s in SETTINGS if s.name != "fault_control"] + [TOKENS_ENV, CONFIG_ENV, CA_FILE_ENV]:
        assert f"`{name}`" in section or f"{name}=" in section, name


def test_the_embedded_backup_command_archives_the_spool_an_earlier_release_left(tmp_path: Path) -> None:
    """`tar ... store spool` failed on a store first served by an earlier release ("spool: Cannot stat"), whose
    spool is `store-spool`, and the advice to leave the spool out dropped its acknowledged spans."""
    (line,) = [ln for ln in README.splitlines() if ln.startswith("cd /var/lib/inferensics && tar -czf")]
    for folders in (("store", "spool"), ("store", "store-spool"), ("store",)):
        data = tmp_path / "-".join(folders)
        for folder in folders:
            (data / folder).mkdir(parents=True)
            (data / folder / "x.seg").write_text(folder)
        command = line.replace("/var/lib/inferensics", str(data)).replace("~/", f"{data}/")
        done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60, check=False)
        assert done.returncode == 0, (folders, done.stderr)
        (archive,) = data.glob("inferensics-*.tar.gz")
        listed = subprocess.run(["tar", "-tzf", str(archive)], capture_output=True, text=True, check=True).stdout
        assert {p.split("/")[0] for p in listed.split()} == set(folders)
    restore = _section("Backup and restore")
    assert "chown -R inferensics:inferensics /var/lib/inferensics" in restore
    assert "leave it out" not in restore


def test_every_compose_command_names_its_file() -> None:
    """`docker compose exec clickhouse ...` had no `-f`: run from the repository it finds no compose file."""
    for text in (README, TOP_README):
        for line in text.splitlines():
            if "docker compose " in line and "docker compose -f" not in line and not line.startswith("C="):
                assert "docker compose ..." in line, line
    assert 'C="docker compose -f deploy/compose/single.yml --env-file deploy/compose/.env"' in README


def test_upgrades_under_compose_and_kubernetes_are_written_down() -> None:
    section = _section("Upgrades under Docker Compose and Kubernetes")
    assert "kubectl -n inferensics delete job schema-migrator --ignore-not-found" in section
    assert section.index("delete job schema-migrator") < section.index("kubectl apply -k deploy/")
    assert "up -d --build" in section
    assert "inferensics --version" in section
    job = (DEPLOY / "k8s" / "schema-migrator.yaml").read_text(encoding="utf-8")
    assert "kubectl -n inferensics delete job schema-migrator" in job


def test_rotation_matches_the_unit_and_the_example() -> None:
    unit = (SYSTEMD / "inferensics-collector.service").read_text(encoding="utf-8")
    assert "ExecReload=/bin/kill -HUP $MAINPID" in unit
    section = _section("Rotating tokens and passwords")
    for words in (
        "systemctl reload inferensics-collector",
        "rollout restart statefulset/collector deployment/dashboard",
        "up -d --no-deps collector-1",
        "INFERENSICS_CONFIG=/etc/inferensics/collector.toml",
        "clickhouse-passwords.env",
    ):
        assert words in section, words
    assert "INFERENSICS_CONFIG=/etc/inferensics/collector.toml" in (SYSTEMD / "inferensics.env.example").read_text()


def test_the_compose_scrape_targets_are_each_collectors_own_port() -> None:
    """Through nginx a scrape reached either collector: one counter read 1, 1530, 1, 1530."""
    services = yaml.safe_load((COMPOSE / "cluster.yml").read_text(encoding="utf-8"))["services"]
    own = {}
    for name in ("collector-1", "collector-2"):
        (port,) = services[name]["ports"]
        host_port, container_port = port.rsplit(":", 2)[-2:]
        assert container_port == "4318"
        own[name] = host_port
    lb_ports = {p.rsplit(":", 2)[-2] for p in services["lb"]["ports"]}
    assert len(set(own.values())) == 2
    assert not set(own.values()) & lb_ports
    section = _section("Metrics")
    assert f'targets: ["127.0.0.1:{own["collector-1"]}", "127.0.0.1:{own["collector-2"]}"]' in section
    assert "role: pod" in section
    assert "regex: collector" in section


def test_sizing_names_the_key_table_and_the_tables_without_ttl() -> None:
    sizing = (DEPLOY / "SIZING.md").read_text(encoding="utf-8")
    assert f"`{SEEN_TABLE}`" in sizing
    forever = [name for name, model in MODELS_BY_TABLE.items() if not model.TABLE.ttl_days]  # 0: no TTL
    assert "blob_contents" in forever
    for name in forever:
        assert re.search(rf"`{name}`", sizing), name
