"""The collector package's public face is the host SDK; it must not pull in the service, its client or any
package of the service extra (a serving host has none of them)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from inferensics import collector
from inferensics.collector import host

FORBIDDEN = (
    "inferensics.collector.service",
    "inferensics.collector.client",
    "inferensics.analytics",
    "inferensics.dashboard",
    "starlette",
    "uvicorn",
    "httpx",
    "chdb",
    "clickhouse_connect",
    "pyarrow",
    "polars",
    "streamlit",
    "altair",
)


def test_all_is_pinned() -> None:
    assert sorted(collector.__all__) == [
        "CaptureRules",
        "ConfigError",
        "SdkConfig",
        "ShapePolicy",
        "Tracker",
        "instrument",
    ]


def test_lazy_names_are_the_host_sdks() -> None:
    for name in collector.__all__:
        assert getattr(collector, name) is getattr(host, name)


@pytest.mark.slow
def test_host_sdk_in_use_imports_nothing_of_the_service() -> None:
    # Every public name resolved, the testing helpers loaded and a tracker started and used: the modules a
    # serving process really loads, not just the package's lazy shell.
    code = f"""
import json, sys
import inferensics.collector as c
for name in c.__all__:
    getattr(c, name)
from inferensics.collector.testing import FixedClock, InMemoryExporter
exporter = InMemoryExporter()
tracker = c.instrument(exporter=exporter, host="h", model="m")
with tracker.request("r1"):
    pass
tracker.shutdown()
assert [r.request_id for r in exporter.requests] == ["r1"], exporter.requests
forbidden = {FORBIDDEN!r}
print(json.dumps(sorted(m for m in sys.modules if any(m == f or m.startswith(f + ".") for f in forbidden))))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert json.loads(out.strip().splitlines()[-1]) == []
