"""The collector package's public face is the host SDK; it must not pull in the service or its client."""

from __future__ import annotations

import subprocess
import sys

from inferensics import collector


def test_all_is_pinned() -> None:
    assert sorted(collector.__all__) == [
        "CaptureRules",
        "ConfigError",
        "SdkConfig",
        "ShapePolicy",
        "Tracker",
        "instrument",
    ]


def test_host_sdk_does_not_import_the_service() -> None:
    code = (
        "import sys, inferensics.collector;"
        "print(sorted(m for m in sys.modules if m.startswith(('inferensics.collector.service',"
        " 'inferensics.collector.client', 'starlette', 'uvicorn', 'chdb', 'streamlit'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"
