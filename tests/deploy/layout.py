"""Where the deployment files are, and small readers shared by the deploy tests."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
CLICKHOUSE = DEPLOY / "clickhouse"
COMPOSE = DEPLOY / "compose"
K8S = DEPLOY / "k8s"
SYSTEMD = DEPLOY / "systemd"
COMPOSE_FILES = (COMPOSE / "single.yml", COMPOSE / "cluster.yml")
SERVER_CONFIG = CLICKHOUSE / "config.d" / "inferensics.xml"
CLUSTER_CONFIG = CLICKHOUSE / "config.d" / "cluster.xml"
USERS_CONFIG = CLICKHOUSE / "users.d" / "inferensics.xml"
KEEPER_CONFIG = CLICKHOUSE / "keeper" / "keeper.xml"
FORMAT_SCHEMAS = CLICKHOUSE / "format_schemas"


def xml_root(path: Path) -> ET.Element:
    """The ``<clickhouse>`` element of a server config file."""
    root = ET.parse(path).getroot()
    assert root.tag == "clickhouse", f"{path}: the root element must be <clickhouse>, not <{root.tag}>"
    return root


def yaml_docs(path: Path) -> list[dict[str, Any]]:
    """Every document of a YAML file."""
    return [d for d in yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]


def cluster_hosts() -> list[list[str]]:
    """The replicas' host names of each shard of the ``inferensics`` cluster, from cluster.xml."""
    cluster = xml_root(CLUSTER_CONFIG).find("remote_servers/inferensics")
    assert cluster is not None
    return [[r.findtext("host", "") for r in shard.findall("replica")] for shard in cluster.findall("shard")]


def keeper_hosts() -> list[str]:
    """The Keeper hosts the servers connect to, from cluster.xml."""
    return [n.findtext("host", "") for n in xml_root(CLUSTER_CONFIG).findall("zookeeper/node")]


def env_names(path: Path) -> set[str]:
    """The environment variables a server config file reads (``from_env`` attributes)."""
    return {e.get("from_env", "") for e in ET.parse(path).getroot().iter() if e.get("from_env")}
