"""The collector: the host SDK that runs inside serving processes, and the collector service.

The host SDK is the public face of this package (``inferensics.collector.instrument(...)``); it imports
neither the service nor its client, so a bare GPU serving host needs only torch, pydantic and the
OpenTelemetry SDK. The service lives in ``inferensics.collector.service`` (``inferensics serve``) and its
Python client in ``inferensics.collector.client``.

The names below load the host SDK (and torch) on first use, not on ``import inferensics.collector``: the
service's client and the CLI import this package and need neither (``inferensics --help`` took 2.2 s more).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from inferensics.collector.host import CaptureRules, ConfigError, SdkConfig, ShapePolicy, Tracker, instrument

__all__ = ["CaptureRules", "ConfigError", "SdkConfig", "ShapePolicy", "Tracker", "instrument"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        return getattr(importlib.import_module("inferensics.collector.host"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
