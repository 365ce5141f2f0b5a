"""The collector: the host SDK that runs inside serving processes, and the collector service.

The host SDK is the public face of this package (``inferensics.collector.instrument(...)``); it imports
neither the service nor its client, so a bare GPU serving host needs only torch, pydantic and the
OpenTelemetry SDK. The service lives in ``inferensics.collector.service`` (``inferensics serve``) and its
Python client in ``inferensics.collector.client``.
"""

from inferensics.collector.host import (
    CaptureRules,
    ConfigError,
    SdkConfig,
    ShapePolicy,
    Tracker,
    instrument,
)

__all__ = ["CaptureRules", "ConfigError", "SdkConfig", "ShapePolicy", "Tracker", "instrument"]
