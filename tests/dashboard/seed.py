"""Known events for the dashboard tests, written into a data directory before the service opens it.

Everything is relative to ``now`` (a minute boundary) and lies inside the last hour, the dashboard's
default range. :class:`SeedFacts` holds the numbers the pages must show, computed here from the same
event lists (not from the store), so a test compares the page against an independent answer.

Run as ``python -m tests.dashboard.seed DSN NOW_ISO`` (chDB allows one data directory per process, so the
test process never opens the store itself).
"""

from __future__ import annotations

import hashlib
import random
import sys
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from inferensics.schema import (
    BundleEvent,
    CacheEvent,
    CanaryVerdictEvent,
    CompileEvent,
    GraphBreakEvent,
    GuardFailureEvent,
    KernelInventoryEvent,
    KernelTimingEvent,
    RecompileEvent,
    RequestEvent,
)
from inferensics.schema.table import Event
from tests.analytics.hosts import health_events
from tests.analytics.kernel_events import decision_events, qualification_events
from tests.seeding import seed

if TYPE_CHECKING:
    from inferensics.schema.store import Store

LLAMA = "llama-8b"
MISTRAL = "mistral-7b"
POOL_A = "h200-a"
POOL_B = "h100-b"
INTERACTIVE = "interactive"
BATCH = "batch"
BASELINE = "b" * 8 + hashlib.sha256(b"bundle-baseline").hexdigest()[8:24]
CANDIDATE = "c" * 8 + hashlib.sha256(b"bundle-candidate").hexdigest()[8:24]
DRILL_ID = "req-drill-0001"
STORM_REASON = "tensor 'L['x']' size mismatch at index 1. expected 128, actual 256"
STORM_PATTERN = "tensor 'L['x']' size mismatch at index 1. expected N, actual N"
"""How the fleet pages group :data:`STORM_REASON`: by cause (:mod:`inferensics.analytics.reasons`)."""
GB_ID = "GB0170"
STORM_RECOMPILES = 30
FALLBACK_SPIKE = 15
ERROR_SPIKE = 12
OUTPUT_CODE = '''# AOT ID: ['0_inference']
from ctypes import c_void_p
import torch
import triton

# kernel path: /tmp/torchinductor/ab/cab.py
# Topologically Sorted Source Nodes: [linear, gelu], Original ATen: [aten.addmm, aten.gelu]
# Source node to ATen node mapping:
#   gelu => add, erf, mul
triton_poi_fused_addmm_gelu_0 = async_compile.triton('triton_poi_fused_addmm_gelu_0', """
@triton.jit
def triton_poi_fused_addmm_gelu_0(in_out_ptr0, in_ptr0, xnumel, XBLOCK: tl.constexpr):
    xoffset = tl.program_id(0) * XBLOCK
""")

triton_red_fused_softmax_1 = async_compile.triton('triton_red_fused_softmax_1', """
@triton.jit
def triton_red_fused_softmax_1(in_ptr0, out_ptr2, xnumel, rnumel):
    pass
""")

def call(args):
    arg0_1, arg1_1 = args
    buf0 = empty_strided_cuda((8, 4096), (4096, 1), torch.float16)
    extern_kernels.mm(arg0_1, arg1_1, out=buf0)
    triton_poi_fused_addmm_gelu_0.run(buf0, arg1_1, 32768, grid=grid(32768))
    triton_red_fused_softmax_1.run(buf0, buf1, 8, 4096, grid=grid(8))
    return (buf1, )
'''
PROVIDERS = ("paged_decode_attention=triton", "rms_norm=triton", "silu_mul=triton")
"""The kernel registry's decisions in the seeded compiles of ``ARTIFACT``, each once."""
RECORDED_PROVIDERS = ("paged_decode_attention=triton", "rms_norm=triton", "rms_norm=triton", "silu_mul=triton")
"""The same decisions as a compile record holds them: one ``op=provider`` per op signature, sorted by op, as
the trace assembler writes them (``rms_norm`` traced at two shapes, as the demo's decoder's is)."""
ARTIFACT = hashlib.sha256(OUTPUT_CODE.encode()).hexdigest()
INPUTS_BLOB = b"captured-inputs:" + bytes(range(64))
INPUTS_SHA = hashlib.sha256(INPUTS_BLOB).hexdigest()
GRAPH_KEY = hashlib.sha256(b"fx-key@model.py:10:forward").hexdigest()
KERNELS = (
    ("extern_kernels.mm", "extern", ("mm",), ("model.py:14",)),
    ("triton_poi_fused_addmm_gelu_0", "triton", ("addmm", "gelu"), ("model.py:14", "model.py:15")),
    ("triton_red_fused_softmax_1", "triton", ("amax", "sub", "exp", "sum", "div"), ("model.py:16",)),
)
HOSTS = {  # host -> (pool, bundle, model)
    "host-1": (POOL_A, BASELINE, LLAMA),
    "host-2": (POOL_A, BASELINE, LLAMA),
    "host-3": (POOL_A, CANDIDATE, LLAMA),
    "host-4": (POOL_B, BASELINE, MISTRAL),
}


@dataclass
class SeedFacts:
    """What the pages must show, computed from the seeded events."""

    now: datetime
    requests: list[RequestEvent] = field(default_factory=list)
    others: list[Event] = field(default_factory=list)

    def total_requests(self, **dims: str) -> int:
        """Requests matching the given dimension values."""
        return sum(1 for r in self.requests if all(getattr(r, k) == v for k, v in dims.items()))

    def errors(self, **dims: str) -> int:
        """Error requests matching the given dimension values."""
        return sum(1 for r in self.requests if r.status == "error" and all(getattr(r, k) == v for k, v in dims.items()))

    def count(self, kind: type[Event]) -> int:
        """Seeded events of one kind (requests excluded)."""
        return sum(1 for e in self.others if isinstance(e, kind))


def build(now: datetime) -> SeedFacts:
    """The seeded events, deterministic for a given ``now``."""
    rng = random.Random(20261130)
    facts = SeedFacts(now=now)
    start = now - timedelta(minutes=50)

    def req(i: int, host: str, traffic: str, minute: float, **kw: object) -> RequestEvent:
        pool, bundle, model = HOSTS[host]
        base = {
            "request_id": f"req-{host}-{i:04d}",
            "ts": start + timedelta(minutes=minute),
            "host": host,
            "model": model,
            "hw_pool": pool,
            "traffic_class": traffic,
            "bundle_id": bundle,
            "shape": "8x128",
            "shape_bucket": "b<=8,s<=128",
            "latency_ms": rng.uniform(20, 40),
            "graph_keys": (GRAPH_KEY,),
            "graph_artifacts": (ARTIFACT,),
            "graph_calls": (1,),
            "graph_us": (900,),
            "input_digest": f"in{i % 50:04d}",
            "fp_argmax_digest": f"am{i % 50:04d}",
        }
        base.update(kw)
        return RequestEvent.model_validate(base)

    # Baseline llama on two hosts: 2 errors out of 160.
    for i in range(160):
        host = "host-1" if i % 2 else "host-2"
        err = {"status": "error", "error": "RuntimeError: CUDA error", "outcome": "error"} if i in (7, 90) else {}
        facts.requests.append(req(i, host, INTERACTIVE, i * 50 / 160, **err))
    # Candidate llama: slower, 12 scattered errors out of 120, argmax drift on a fifth of the inputs.
    for i in range(120):
        err = (
            {"status": "error", "error": "RuntimeError: illegal memory access", "outcome": "error"}
            if i % 10 == 3
            else {}
        )
        drift = {"fp_argmax_digest": f"drift{i}"} if i % 5 == 0 else {}
        facts.requests.append(
            req(i, "host-3", INTERACTIVE, i * 50 / 120, latency_ms=rng.uniform(45, 70), **err, **drift)
        )
    # An error burst on the candidate: 12 failing requests within minute 20 (an error spike).
    for i in range(ERROR_SPIKE):
        facts.requests.append(
            req(
                500 + i,
                "host-3",
                INTERACTIVE,
                20 + i / 15,
                latency_ms=rng.uniform(45, 70),
                status="error",
                error="RuntimeError: illegal memory access",
                outcome="error",
            )
        )
    # Mistral batch, steady: 100 requests over 50 minutes.
    for i in range(100):
        facts.requests.append(req(i, "host-4", BATCH, i * 50 / 100))
    # A recompile storm: 30 recompiling requests in minutes 30-35.
    for i in range(STORM_RECOMPILES):
        facts.requests.append(req(600 + i, "host-4", BATCH, 30 + i * 5 / STORM_RECOMPILES, outcome="recompile",
                                  recompiles=1, compile_ms=3000.0, cache_status="miss", guard_outcome="miss",
                                  latency_ms=3100.0))  # fmt: skip
    # A fallback spike: 15 requests run eagerly after a graph break, within minute 40.
    for i in range(FALLBACK_SPIKE):
        facts.requests.append(req(700 + i, "host-4", BATCH, 40 + i / 20, outcome="fallback",
                                  fallback_reason=f"graph_break:{GB_ID}", guard_outcome="none"))  # fmt: skip
    # The drill-down request: served by the artifact above, sampled, inputs captured.
    drill_fields = {"request_id": DRILL_ID, "latency_ms": 33.0, "sampled": True, "capture_blob": INPUTS_SHA}
    facts.requests.append(req(9999, "host-1", INTERACTIVE, 45, **drill_fields))

    storm = [r for r in facts.requests if r.outcome == "recompile"]
    for r in storm:
        facts.others.append(RecompileEvent(
            ts=r.ts, host=r.host, model=r.model, hw_pool=r.hw_pool, traffic_class=r.traffic_class,
            request_id=r.request_id, code_location="model.py:10:forward", reason=STORM_REASON,
            reasons=(STORM_REASON,),
        ))  # fmt: skip
        facts.others.append(GuardFailureEvent(
            ts=r.ts, host=r.host, model=r.model, hw_pool=r.hw_pool, request_id=r.request_id,
            code_location="model.py:10:forward", reason=STORM_REASON,
        ))  # fmt: skip
        facts.others.append(CompileEvent(
            ts=r.ts, host=r.host, model=r.model, hw_pool=r.hw_pool, bundle_id=r.bundle_id,
            request_id=r.request_id, graph_key=hashlib.sha256(r.request_id.encode()).hexdigest(),
            code_location="model.py:10:forward", trigger="recompile", entire_frame_s=3.0, backend_s=2.4,
            inductor_s=2.0, recompile_reason=STORM_REASON, cache_status="miss", artifact_id=ARTIFACT,
            kernel_providers=RECORDED_PROVIDERS,
        ))  # fmt: skip
        facts.others.append(CacheEvent(
            ts=r.ts, host=r.host, model=r.model, hw_pool=r.hw_pool, bundle_id=r.bundle_id,
            request_id=r.request_id, cache="fx_graph", result="miss", reason="cold", entry_bytes=40_000,
        ))  # fmt: skip
    for r in (r for r in facts.requests if r.outcome == "fallback"):
        facts.others.append(GraphBreakEvent(
            ts=r.ts, host=r.host, model=r.model, hw_pool=r.hw_pool, request_id=r.request_id,
            code_location="model.py:10:forward", registry_id=GB_ID, break_type="Data-dependent branching",
            reason="generic_jump on a tensor", user_frame="model.py:21 in forward",
        ))  # fmt: skip
    for host, (pool, bundle, model) in HOSTS.items():
        facts.others.append(CompileEvent(
            ts=start, host=host, model=model, hw_pool=pool, bundle_id=bundle, graph_key=GRAPH_KEY,
            code_location="model.py:10:forward", trigger="first", entire_frame_s=20.0, backend_s=15.0,
            inductor_s=12.0, cache_status="hit", artifact_id=ARTIFACT, kernel_providers=RECORDED_PROVIDERS,
        ))  # fmt: skip
        for cache in ("fx_graph", "triton"):
            facts.others.append(CacheEvent(
                ts=start, host=host, model=model, hw_pool=pool, bundle_id=bundle, cache=cache, result="hit",
                time_saved_ms=8000.0, entry_bytes=120_000,
            ))  # fmt: skip
        # The baseline was registered the day before the candidate.
        registered = start - (timedelta(days=1) if bundle == BASELINE else timedelta(0))
        facts.others.append(BundleEvent(
            ts=registered, bundle_id=bundle, bundle_name="baseline" if bundle == BASELINE else "canary-2026-11-30",
            model=model, host=host, hw_pool=pool, torch_version="2.11.0", device_name="NVIDIA H200",
        ))  # fmt: skip
    for name, backend, nodes, lines in KERNELS:
        facts.others.append(KernelInventoryEvent(
            ts=start, artifact_id=ARTIFACT, kernel_name=name, kernel_backend=backend, graph_key=GRAPH_KEY,
            post_grad_nodes=nodes, source_lines=lines, host="host-1",
        ))  # fmt: skip
    drill = next(r for r in facts.requests if r.request_id == DRILL_ID)
    for n, (name, _, _, _) in enumerate(KERNELS):
        facts.others.append(KernelTimingEvent(
            ts=drill.ts, request_id=DRILL_ID, host=drill.host, model=drill.model, hw_pool=drill.hw_pool,
            artifact_id=ARTIFACT, kernel_name=name, device="cuda:0", calls=1, total_us=100.0 * (n + 1),
        ))  # fmt: skip
    # Two verdicts `inferensics canary compare` recorded for the candidate: inconclusive early, fail later.
    for minutes, verdict, rule in ((40, "inconclusive", "too few requests"), (10, "fail", "failed: error_rate")):
        facts.others.append(CanaryVerdictEvent(
            ts=now - timedelta(minutes=minutes), model=LLAMA, baseline=BASELINE, candidate=CANDIDATE,
            window_start=start, window_end=now - timedelta(minutes=minutes), verdict=verdict, rule=rule,
        ))  # fmt: skip
    # The fleet's SDK health records (the Hosts page): its range ends at the seed's clock.
    facts.others.extend(health_events(now))
    # The fleet's kernel-registry decisions and qualification records (the Kernels page).
    facts.others.extend([*decision_events(now), *qualification_events(now)])
    return facts


def write_events(store: Store, facts: SeedFacts) -> None:
    """Migrate ``store`` and insert the facts' events and the blobs."""
    blobs = [
        (OUTPUT_CODE.encode(), "output_code", "text/x-python"),
        (INPUTS_BLOB, "inputs", "application/octet-stream"),
    ]
    seed(store, events=[*facts.requests, *facts.others], blobs=blobs)


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with the events of :func:`build` for ``now``."""
    from inferensics.schema.store import Store

    with Store.open(dsn) as store:
        write_events(store, build(now))


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
