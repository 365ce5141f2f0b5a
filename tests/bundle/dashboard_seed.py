"""Seed a store for the Bundles page test (run as a child process: chDB lets one process open a directory).

python -m tests.bundle.dashboard_seed DSN NOW_ISO PACKED_BUNDLE BUNDLE_ID
"""

from __future__ import annotations

import sys
from datetime import datetime, timedelta
from pathlib import Path

from inferensics.schema.events import BundleEvent, BundleMissEvent, BundleStateEvent, RequestEvent
from inferensics.schema.store import Store

OTHER = "c" * 64
"""A second bundle, promoted and healthy."""


def write(dsn: str, now: datetime, packed: Path, bundle_id: str) -> None:
    """Registrations, states (the built bundle pushed, promoted, then revoked), misses and traffic."""
    with Store.open(dsn) as store:
        store.migrate()
        sha = store.put_blob(packed.read_bytes(), "bundle", media_type="application/x-tar")
        start = now - timedelta(minutes=50)
        store.insert_events([
            BundleEvent(ts=start, bundle_id=bundle_id, bundle_name="tiny", host="h1", hw_pool="cpu",
                        signature_state="verified", builder_keyid="k" * 64),
            BundleEvent(ts=start, bundle_id=OTHER, bundle_name="other", host="h2", hw_pool="cpu",
                        signature_state="verified", builder_keyid="k" * 64),
        ])  # fmt: skip
        store.insert_events([
            BundleStateEvent(ts=start, bundle_id=bundle_id, state="pushed", attrs={"pack_blob": sha}),
            BundleStateEvent(ts=start + timedelta(minutes=1), bundle_id=OTHER, state="promoted", channel="prod"),
            BundleStateEvent(ts=start + timedelta(minutes=2), bundle_id=bundle_id, state="revoked", reason="bad"),
        ])  # fmt: skip
        store.insert_events([
            BundleMissEvent(ts=now - timedelta(minutes=5), bundle_id=OTHER, host="h2", action="eager",
                            factors=("accepted_shapes: inputs float32[5,8]",), reason="on_bundle_miss=eager"),
        ])  # fmt: skip
        store.insert_events([
            RequestEvent(request_id=f"r{i}", ts=now - timedelta(minutes=i + 1), host="h1" if i % 2 else "h2",
                         model="tiny", hw_pool="cpu", traffic_class="interactive",
                         bundle_id=bundle_id if i % 2 else OTHER)
            for i in range(10)
        ])  # fmt: skip


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]), Path(sys.argv[3]), sys.argv[4])
