"""Every compose file passes ``docker-compose config`` (the Compose tool's own validator, Debian's package,
installed by ``make setup``), and the resolved files agree with the ClickHouse cluster layout."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from inferensics.schema.dsn import parse_dsn
from tests.deploy.layout import COMPOSE, COMPOSE_FILES, cluster_hosts, env_names, keeper_hosts

ENV_EXAMPLE = COMPOSE / ".env.example"


def _compose(*args: str) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("docker-compose")
    assert tool, "docker-compose is missing: `make setup` installs it (Debian's docker-compose package)"
    return subprocess.run([tool, *args], capture_output=True, text=True, timeout=120, check=False, cwd=COMPOSE)


def _resolved(path: Path) -> dict[str, Any]:
    done = _compose("-f", str(path), "--env-file", str(ENV_EXAMPLE), "config")
    assert done.returncode == 0, f"{path.name} is not a valid compose file:\n{done.stderr}"
    out = yaml.safe_load(done.stdout)
    assert isinstance(out, dict)
    return out


def _mounts(service: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(source, target, mode) of each volume, as docker-compose prints them (``src:target:mode``)."""
    out = []
    for volume in service.get("volumes", []):
        source, target, mode = str(volume).split(":")
        out.append((source, target, mode))
    return out


@pytest.fixture(scope="module", params=COMPOSE_FILES, ids=lambda p: p.name)
def resolved(request: pytest.FixtureRequest) -> tuple[Path, dict[str, Any]]:
    path: Path = request.param
    return path, _resolved(path)


def test_compose_file_is_valid_and_every_mounted_file_exists(resolved: tuple[Path, dict[str, Any]]) -> None:
    path, config = resolved
    for name, service in config["services"].items():
        for source, target, mode in _mounts(service):
            if source.startswith("/"):  # a bind mount of a file of this repository
                assert Path(source).exists(), f"{path.name}: {name} mounts missing {source}"
                assert mode == "ro", f"{path.name}: {name} mounts {source} writable at {target}"
            else:
                assert source in config["volumes"], f"{path.name}: {name} uses undeclared volume {source}"
        build = service.get("build")
        if build:
            assert (Path(build["context"]) / build["dockerfile"]).is_file(), f"{name}: no Dockerfile"


def test_published_ports_bind_loopback_by_default(resolved: tuple[Path, dict[str, Any]]) -> None:
    _, config = resolved
    for name, service in config["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback by default"


def test_secrets_are_required_not_defaulted(tmp_path: Path) -> None:
    empty = tmp_path / "empty.env"
    empty.write_text("")
    for path in COMPOSE_FILES:
        done = _compose("-f", str(path), "--env-file", str(empty), "config", "-q")
        assert done.returncode != 0, path.name
        assert "set it in deploy/compose/.env" in done.stderr, path.name


def _dsn(service: dict[str, Any]) -> str:
    if "INFERENSICS_DSN" in service.get("environment", {}):
        return str(service["environment"]["INFERENSICS_DSN"])
    command = service["command"]
    return str(command[command.index("--dsn") + 1])


def test_single_node_migrates_before_the_collector_and_collects_as_the_ingest_user() -> None:
    services = _resolved(COMPOSE / "single.yml")["services"]
    assert services["collector"]["depends_on"]["migrate"]["condition"] == "service_completed_successfully"
    migrate, collect = parse_dsn(_dsn(services["migrate"])), parse_dsn(_dsn(services["collector"]))
    assert (migrate.user, collect.user) == ("inferensics_migrator", "inferensics_ingest")
    assert migrate.cluster == collect.cluster == ""
    assert services["dashboard"]["command"][-1] == "http://collector:4318"


def test_cluster_services_match_the_cluster_layout() -> None:
    services = _resolved(COMPOSE / "cluster.yml")["services"]
    aliases = {
        name: s["networks"]["default"]["aliases"]
        for name, s in services.items()
        if s.get("networks", {}).get("default")
    }
    for shard, hosts in enumerate(cluster_hosts(), start=1):
        for host in hosts:
            name = host.split(".")[0]
            env = services[name]["environment"]
            assert aliases[name] == [host]
            assert (env["CH_SHARD"], env["CH_REPLICA"], env["CH_HOSTNAME"]) == (str(shard), name, host)
            targets = {target for _, target, _ in _mounts(services[name])}
            assert "/etc/clickhouse-server/config.d/cluster.xml" in targets
    for i, host in enumerate(keeper_hosts()):
        name = host.split(".")[0]
        assert aliases[name] == [host]
        assert services[name]["environment"]["KEEPER_ID"] == str(i + 1)
    migrate = parse_dsn(_dsn(services["migrate"]))
    collectors = [parse_dsn(_dsn(services[n])) for n in ("collector-1", "collector-2")]
    assert migrate.cluster == "inferensics"
    assert all(c.cluster == "inferensics" for c in collectors)
    assert migrate.user == "inferensics_migrator"
    assert {c.user for c in collectors} == {"inferensics_ingest"}
    # one ClickHouse node per collector: the engine decoder's staging tables are per node
    assert len({c.host for c in collectors}) == len(collectors)
    assert all(c.host in {h for hosts in cluster_hosts() for h in hosts} for c in [migrate, *collectors])
    nginx = (COMPOSE / "nginx.conf").read_text(encoding="utf-8")
    assert "server collector-1:4318" in nginx
    assert "server collector-2:4318" in nginx


def test_the_live_test_override_publishes_every_node_on_loopback_only() -> None:
    files = ["-f", str(COMPOSE / "cluster.yml"), "-f", str(COMPOSE / "cluster.test.yml")]
    done = _compose(*files, "--env-file", str(ENV_EXAMPLE), "config")
    assert done.returncode == 0, done.stderr
    services = yaml.safe_load(done.stdout)["services"]
    published = {name: s["ports"] for name, s in services.items() if s.get("ports")}
    assert {h.split(".")[0] for hosts in cluster_hosts() for h in hosts} <= set(published)
    assert {"collector-1", "collector-2", "lb", "dashboard"} <= set(published)
    assert all(str(p).startswith("127.0.0.1:") for ports in published.values() for p in ports)
    script = (COMPOSE / "cluster-test.sh").read_text(encoding="utf-8")
    assert "down -v" in script  # the live test removes what it started
    assert "INFERENSICS_BIND=127.0.0.1" in script


def test_an_invalid_file_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.yml"
    broken.write_text("services:\n  x:\n    image: a\n    ports: 8123\n    restart: sometimes-maybe\n")
    done = _compose("-f", str(broken), "config", "-q")
    assert done.returncode != 0
    assert "invalid" in done.stderr


def _nginx_test(conf: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    tool = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin")
    assert tool, "nginx is missing: `make setup` installs it (Debian's nginx package; not started)"
    # the upstreams are compose service names, resolved when nginx loads its config: loopback stands in
    text = conf.read_text(encoding="utf-8").replace("collector-1:", "127.0.0.1:").replace("collector-2:", "127.0.0.2:")
    (tmp_path / "nginx.conf").write_text(text)
    prefix = f"pid {tmp_path}/nginx.pid; error_log stderr;"
    return subprocess.run(
        [tool, "-t", "-c", str(tmp_path / "nginx.conf"), "-p", str(tmp_path), "-g", prefix],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_the_load_balancer_config_passes_nginx_t(tmp_path: Path) -> None:
    done = _nginx_test(COMPOSE / "nginx.conf", tmp_path)
    assert done.returncode == 0, done.stderr
    assert "test is successful" in done.stderr


def test_a_broken_load_balancer_config_is_refused(tmp_path: Path) -> None:
    broken = tmp_path / "broken.conf"
    broken.write_text(
        (COMPOSE / "nginx.conf")
        .read_text(encoding="utf-8")
        .replace("proxy_next_upstream_tries 2;", "proxy_next_upstream_tries;")
    )
    done = _nginx_test(broken, tmp_path)
    assert done.returncode != 0
    assert "proxy_next_upstream_tries" in done.stderr


def test_every_variable_a_mounted_server_file_reads_is_set(resolved: tuple[Path, dict[str, Any]]) -> None:
    # A from_env variable the container lacks leaves the setting empty: a password-less user, no macro.
    path, config = resolved
    for name, service in config["services"].items():
        needed: set[str] = set()
        for source, _, _ in _mounts(service):
            if source.endswith(".xml"):
                needed |= env_names(Path(source))
        missing = needed - set(service.get("environment", {}))
        assert not missing, f"{path.name}: {name} mounts files reading {sorted(missing)}, which it does not set"
