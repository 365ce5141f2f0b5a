"""The host SDK: per-request attribution of compiled graphs, guards, caches and kernels.

Adopting it takes a few lines::

    from inferensics.collector.host import instrument, SdkConfig

    tracker = instrument(service_url="http://127.0.0.1:4318", host="h1", hw_pool="h200-a", model="llama")
    compiled = tracker.compile(model, mode="max-autotune-no-cudagraphs")
    with tracker.request(request_id, traffic_class="interactive", tenant="acme", shape=(2, 128)) as req:
        req.set_output(compiled(input_ids))
    tracker.stats()      # drop and activity counters
    tracker.shutdown()

The serving path never raises and never blocks: hooks append to a bounded queue and a background thread
assembles records and exports them (OTLP spans to the collector service, or straight into a store).
"""

from inferensics.collector.errors import ConfigError
from inferensics.collector.host.backend import InductorBackend
from inferensics.collector.host.config import CaptureRules, SdkConfig
from inferensics.collector.host.exporter import Exporter, NullExporter
from inferensics.collector.host.instrument import instrument
from inferensics.collector.host.process_lifecycle import active_tracker
from inferensics.collector.host.request_tracker import RequestScope, Tracker
from inferensics.collector.host.shape_policy import ShapePolicy
from inferensics.collector.host.torch_adapter import Capability, probe_capabilities

__all__ = [
    "Capability",
    "CaptureRules",
    "ConfigError",
    "Exporter",
    "InductorBackend",
    "NullExporter",
    "RequestScope",
    "SdkConfig",
    "ShapePolicy",
    "Tracker",
    "active_tracker",
    "instrument",
    "probe_capabilities",
]
