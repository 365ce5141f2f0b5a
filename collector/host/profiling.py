"""Kernel timings for sampled requests through ``torch.profiler``, each kernel tied to its artifact.

The profiler runs only around sampled requests (``SdkConfig.sample_rate``); its events are aggregated on
the background thread. A kernel is tied to an artifact by name through the kernel inventory (Triton and
C++ kernels). Inductor's range around each call of a whole compiled graph (``## Call CompiledFxGraph <key> ##``,
:mod:`inferensics.schema.graph_calls`) is kept too, as that graph's call time: tied to its artifact by its
FX-graph-cache key when this process saw the compile with that key, else stored with an empty artifact, the
key still in its name for the store to match (``inferensics.analytics.request_graph_calls``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import torch

from inferensics.collector.host.fingerprint_sampling import request_hash
from inferensics.schema.events import KernelTimingEvent
from inferensics.schema.graph_calls import graph_call_key

_GRAPH_PREFIX = re.compile(r"^graph_\d+_")
"""C++ kernel profile events are named ``graph_<n>_<kernel>``; the inventory knows ``<kernel>``."""

if TYPE_CHECKING:
    from inferensics.collector.host.records import RawRequest
    from inferensics.collector.trace.assembler import AssemblyContext


def is_sampled(request_id: str, rate: float) -> bool:
    """Deterministic sampling on the request id (the same id is sampled on every host): the fingerprint
    sampling's hash (:func:`~inferensics.collector.host.fingerprint_sampling.request_hash`)."""
    return rate >= 1 or (rate > 0 and request_hash(request_id) < rate * 2**32)


def start_profiler() -> Any:
    """Start a profiler for one request (CPU, plus CUDA when available)."""
    activities = [torch.profiler.ProfilerActivity.CPU]
    if torch.cuda.is_available():
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    prof = torch.profiler.profile(activities=activities)
    prof.__enter__()  # type: ignore[no-untyped-call]
    return prof


def stop_profiler(prof: Any) -> None:
    """Stop the profiler (event collection happens here, on the serving thread, for sampled requests only)."""
    prof.__exit__(None, None, None)


def kernel_timings(
    raw: RawRequest, context: AssemblyContext, kernel_artifacts: Mapping[str, str], ts: datetime
) -> list[KernelTimingEvent]:
    """Aggregate the request's profile into one record per kernel that belongs to a compiled artifact, per
    device kernel, and per whole compiled-graph call range (tied or not: its name carries the graph's key)."""
    out: list[KernelTimingEvent] = []
    for avg in raw.profile.key_averages():
        name = str(avg.key)
        artifact = kernel_artifacts.get(name) or kernel_artifacts.get(_GRAPH_PREFIX.sub("", name), "")
        device_us = float(getattr(avg, "device_time_total", 0.0) or 0.0)
        is_device = device_us > 0 and not artifact
        if not artifact and graph_call_key(name) is None and not is_device:
            continue
        out.append(
            KernelTimingEvent(
                ts=ts,
                request_id=raw.request_id,
                host=context.host,
                model=raw.model or context.model,
                hw_pool=context.hw_pool,
                artifact_id=artifact,
                kernel_name=name[:500],
                device="cuda" if device_us > 0 else "cpu",
                calls=int(avg.count),
                total_us=device_us if device_us > 0 else float(avg.cpu_time_total),
            )
        )
    return out
