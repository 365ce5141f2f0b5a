"""A real collector service (embedded chDB store) holding recorded requests, for the builds that take their shapes
from traffic (``bundle build --shapes-from-service``).

Shared by ``test_shapes_from_service.py`` and ``test_traffic_shapes.py``, which each seeded their own copy."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from tests.collector.service.harness import RunningService, new_service

ROOT: Final = Path(__file__).resolve().parents[2]
ROW_DEFAULTS: Final = {"host": "h1", "hw_pool": "cpu", "traffic_class": "interactive"}
"""Fields every seeded request has unless its row gives them."""

_SEED: Final = """
import json
import sys
from datetime import UTC, datetime, timedelta
from inferensics.schema.events import RequestEvent
from inferensics.schema.store import Store

now = datetime.now(UTC)
rows = json.loads(sys.stdin.read())
with Store.open(sys.argv[1]) as store:
    store.migrate()
    store.insert_events([RequestEvent(ts=now - timedelta(minutes=r.pop("minutes_ago")), **r) for r in rows])
"""


def clean_env() -> dict[str, str]:
    """This process's environment without any ``INFERENSICS_*`` setting (a build reads none but its flags)."""
    return {k: v for k, v in os.environ.items() if not k.startswith("INFERENSICS_")}


@contextmanager
def traffic_service(root: Path, rows: Sequence[Mapping[str, Any]]) -> Iterator[RunningService]:
    """A started service whose store holds ``rows``: each the fields of a ``RequestEvent`` (over
    :data:`ROW_DEFAULTS`) with ``minutes_ago`` in place of ``ts``. A child process seeds the store before the
    service opens it (chDB locks its directory)."""
    svc = new_service(root)
    seeded = json.dumps([{**ROW_DEFAULTS, **r} for r in rows])
    subprocess.run([sys.executable, "-c", _SEED, svc.dsn], input=seeded, text=True, cwd=ROOT, env=clean_env(),
                   check=True, timeout=300)  # fmt: skip
    svc.start()
    try:
        yield svc
    finally:
        svc.stop()
