"""The demo's release step: build the two release bundles (one process each, in parallel), then push them
to the collector service and record their promotion, as ``inferensics bundle push`` and ``bundle promote``
do: the baseline promoted on ``production``, the candidate on ``canary``.

The builder's signing key is made in the run's data directory; its public key is the workers' keyring.
"""

from __future__ import annotations

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


@dataclass(frozen=True)
class Release:
    """The run's two bundles and the keyring that trusts their builder."""

    bundles: dict[str, ReleaseBundle]
    keyring: Path
    build_s: float


def build(data_dir: Path, *, threads: int = 1, progress: Callable[[list[str], float], None] | None = None) -> Release:
    """Build both release bundles under ``data_dir/bundles`` (rebuilt on every run), one process each.

    ``progress`` is called about twice a second with the bundles still building and the seconds so far.

    Raises:
        RuntimeError: a build failed or ran past :data:`BUILD_TIMEOUT_S`; the message carries its log.
    """
    root = data_dir / "bundles"
    key_path = root / "builder-key"
    if not key_path.exists():
        root.mkdir(parents=True, exist_ok=True)
        bundle.generate_key(key_path)
    keyring = key_path.with_name(key_path.name + ".pub")
    t0 = time.monotonic()
    children = []
    for name in (BASELINE, CANDIDATE):
        shutil.rmtree(root / name, ignore_errors=True)
        args = ["-m", "inferensics.demo.bundles", "--out", str(root), "--key", str(key_path), "--only", name]
        args += ["--threads", str(threads)]
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
        built[name] = ReleaseBundle(name, manifest.bundle_id, root / name)
    return Release(built, keyring, time.monotonic() - t0)


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
