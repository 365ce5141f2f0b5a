"""The demo's release step: build the two release bundles (one process each, in parallel), then push them
to the collector service and record their promotion, as ``inferensics bundle push`` and ``bundle promote``
do: the baseline promoted on ``production``, the candidate on ``canary``.

The builder's signing key lives in the bundle cache (:data:`BUILDER_KEY`; in the run's data directory when no
cache is used); its public key is the workers' keyring. A build whose inputs are unchanged reuses the
verified bundle from the cache instead of compiling (:class:`inferensics.bundle.BundleCache`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from inferensics import bundle
from inferensics.collector.client import ServiceClient
from inferensics.demo import processes
from inferensics.demo.workload import BASELINE, CANDIDATE, DECODER_MODEL
from inferensics.schema.events import BundleStateEvent

CHANNELS: dict[str, str] = {BASELINE: "production", CANDIDATE: "canary"}
"""The release channel each bundle is promoted on."""
BUILD_TIMEOUT_S = 1800.0
"""How long the bundle builds may take (compiles on a loaded 2-core machine)."""


@dataclass(frozen=True)
class ReleaseBundle:
    """A built release bundle."""

    name: str
    bundle_id: str
    directory: Path
    reused: bool = False
    """Taken from the bundle cache (verified) instead of built in this run."""
    rejected: str = ""
    """Why a cached bundle of the same build was not reused (empty: none cached, or reused)."""


@dataclass(frozen=True)
class Release:
    """The run's two bundles and the keyring that trusts their builder."""

    bundles: dict[str, ReleaseBundle]
    keyring: Path
    build_s: float
    cache: Path | None = None
    """The bundle cache the build reused from and stored into (``None``: none)."""

    @property
    def reused(self) -> list[str]:
        """Names of the bundles reused from the bundle cache."""
        return [name for name, b in self.bundles.items() if b.reused]


BUILDER_KEY = "demo-builder/builder-key"
"""The demo builder's signing key in the bundle cache (a cached bundle is reused only as its signer's, so the
key outlives the run's data directory)."""


def keyring_path(data_dir: Path, cache: Path | None) -> Path:
    """The public key the workers (and replay) trust: the builder key's ``.pub``, in the bundle ``cache`` or,
    without one, in ``data_dir``'s bundles (known before the build makes it: the dashboard starts first)."""
    key_path = (cache / BUILDER_KEY) if cache is not None else data_dir / "bundles" / "builder-key"
    return key_path.with_name(key_path.name + ".pub")


def _make_key(key_path: Path) -> None:
    """A new key pair at ``key_path`` (and ``.pub``), made whole in a folder of its own and moved into place
    at once: of two runs making it together, one pair wins and both use it."""
    key_path.parent.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".key-", dir=key_path.parent.parent))
    try:
        bundle.generate_key(tmp / key_path.name)
        try:
            os.rename(tmp, key_path.parent)
        except OSError:
            if not key_path.exists():  # not a lost race: say what failed
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def build(
    data_dir: Path,
    *,
    threads: int = 1,
    progress: Callable[[list[str], float], None] | None = None,
    cache: Path | None = None,
    rebuild: bool = False,
) -> Release:
    """Build both release bundles under ``data_dir/bundles``, one process each.

    Without ``cache`` both are built on every run, signed by a key made in ``data_dir``. With it, a build
    whose inputs are unchanged (model source, weights, compiler, settings, target, shapes: see
    :mod:`inferensics.bundle.cache`) reuses the verified bundle cached there, signed by the cache's demo
    builder key (:data:`BUILDER_KEY`); ``rebuild`` builds anew and replaces the cached bundles.

    ``progress`` is called about twice a second with the bundles still building and the seconds so far.

    Raises:
        RuntimeError: a build failed or ran past :data:`BUILD_TIMEOUT_S`; the message carries its log.
    """
    from inferensics.demo.bundles import BUILD_STATUS_SUFFIX

    root = data_dir / "bundles"
    root.mkdir(parents=True, exist_ok=True)
    keyring = keyring_path(data_dir, cache)
    key_path = keyring.with_suffix("")
    if not key_path.exists():
        _make_key(key_path)
    t0 = time.monotonic()
    children = []
    for name in (BASELINE, CANDIDATE):
        shutil.rmtree(root / name, ignore_errors=True)
        (root / (name + BUILD_STATUS_SUFFIX)).unlink(missing_ok=True)
        args = ["-m", "inferensics.demo.bundles", "--out", str(root), "--key", str(key_path), "--only", name]
        args += ["--threads", str(threads)]
        if cache is not None:
            args += ["--cache", str(cache), *(["--rebuild"] if rebuild else [])]
        children.append(processes.start_child(f"build-{name}", args, data_dir / f"build-{name}.log"))
    try:
        deadline = t0 + BUILD_TIMEOUT_S
        while any(c.alive() for c in children):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the bundle builds ran past {BUILD_TIMEOUT_S:.0f} s; see {data_dir}/build-*.log")
            if progress is not None:
                progress([c.name.removeprefix("build-") for c in children if c.alive()], time.monotonic() - t0)
            time.sleep(0.5)
        for child in children:
            if child.proc.returncode:
                raise RuntimeError(f"{child.name} failed (exit {child.proc.returncode}):\n{child.log_tail()}")
    finally:
        processes.stop_all(children)
    built = {}
    for name in (BASELINE, CANDIDATE):
        manifest = bundle.read_manifest(root / name)
        status = json.loads((root / (name + BUILD_STATUS_SUFFIX)).read_text(encoding="utf-8"))
        built[name] = ReleaseBundle(name, manifest.bundle_id, root / name, bool(status.get("reused")),
                                    str(status.get("rejected") or ""))  # fmt: skip
    return Release(built, keyring, time.monotonic() - t0, cache)


def publish(client: ServiceClient, release: Release, token: str | None = None) -> dict[str, str]:
    """Push each bundle through the service's blob API and record it pushed and promoted on its channel.

    Returns:
        Bundle name → sha256 of its pushed pack.
    """
    from inferensics.collector.host.otlp_exporter import OtlpExporter

    blobs: dict[str, str] = {}
    events: list[BundleStateEvent] = []
    scratch = Path(tempfile.mkdtemp(prefix="inferensics-demo-push-"))
    try:
        for name, b in release.bundles.items():
            packed = bundle.pack(b.directory, scratch / f"{name}.tar")
            blobs[name] = client.put_blob(packed.read_bytes(), "bundle", "application/x-tar")
            now = datetime.now(UTC)
            events.append(BundleStateEvent(ts=now, bundle_id=b.bundle_id, state="pushed", model=DECODER_MODEL,
                                           attrs={"pack_blob": blobs[name]}, actor="inferensics demo"))  # fmt: skip
            events.append(BundleStateEvent(ts=now, bundle_id=b.bundle_id, state="promoted", channel=CHANNELS[name],
                                           model=DECODER_MODEL, actor="inferensics demo",
                                           reason=f"the demo's {name} bundle"))  # fmt: skip
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    exporter = OtlpExporter(client.url, host="inferensics-demo", token=token)
    try:
        exporter.export_records(events)
        exporter.flush()
    finally:
        exporter.shutdown()
    return blobs
