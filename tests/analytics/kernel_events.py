"""Kernel-registry decisions and qualification records of a small fleet, for the ``kernel_fleet`` queries and the
Kernels page (the dashboard's seed holds them too).

Two GPU hosts of ``llama-8b`` in pool ``h200-a`` (the dashboard seed's model and pool) serve ``rms_norm`` (at two
signatures on g1, one on g2), ``silu_mul`` and paged attention by our Triton kernels inside one compiled graph, and
``rms_norm`` once in eager; on g2 the Triton ``rms_norm`` raised for one signature, so Inductor's code served it. A
CPU host of ``mistral-7b`` falls back by design. One decision is older than the hour. Qualification: an H200 run
measured ``rms_norm`` (an older run of the same bucket is superseded), the accuracy gate refused a planted provider,
and a CPU run measured the reference alone.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Final

from inferensics.schema.events import KernelDecisionEvent, KernelQualificationEvent
from inferensics.schema.table import Event

GPU_MODEL: Final = "llama-8b"
GPU_POOL: Final = "h200-a"
CPU_MODEL: Final = "mistral-7b"
CPU_POOL: Final = "cpu"
GRAPH: Final = "a" * 64
REQUEST: Final = "req-kernels-1"
RAISED: Final = "raised RuntimeError: CUDA error: an illegal memory access was encountered"
ON_CPU: Final = "platform cpu not in ['cuda', 'interpreter']"
H200: Final = "NVIDIA H200 (sm_90)"
BUCKET: Final = "bfloat16/n4096/t8"


def _sig(rows: int) -> str:
    return f"bfloat16[{rows},4096]/4096,1@cuda:0 bfloat16[4096]@cuda:0"


def decision_events(now: datetime) -> list[Event]:
    """The fleet's decisions: all in the hour before ``now`` but one, two hours before."""
    t = now - timedelta(minutes=50)

    def gpu(host: str, op: str, provider: str, rows: int, **kw: object) -> KernelDecisionEvent:
        compiled = kw.pop("compiled", True)
        return KernelDecisionEvent(
            ts=kw.pop("ts", t), host=host, model=GPU_MODEL, hw_pool=GPU_POOL, op=op, provider=provider,
            signature=_sig(rows), bucket=BUCKET, compiled=compiled, graph_key=GRAPH if compiled else "",
            request_id=REQUEST if compiled else "", **kw,
        )  # fmt: skip

    def cpu(op: str, provider: str, compiled: bool) -> KernelDecisionEvent:
        return KernelDecisionEvent(
            ts=t, host="c1", model=CPU_MODEL, hw_pool=CPU_POOL, op=op, provider=provider,
            signature="float32[8,64]/64,1@cpu", bucket="float32/n64/t8", compiled=compiled, fallback=True,
            skipped=(f"triton: {ON_CPU}",),
        )  # fmt: skip

    return [
        gpu("g1", "rms_norm", "triton", 8),
        gpu("g1", "rms_norm", "triton", 32),
        gpu("g2", "rms_norm", "triton", 8),
        gpu("g1", "rms_norm", "triton", 8, compiled=False),
        gpu("g2", "rms_norm", "inductor", 16, fallback=True, skipped=(f"triton: {RAISED}",)),
        gpu("g1", "silu_mul", "triton", 8),
        gpu("g1", "paged_decode_attention", "triton", 8),
        gpu("g1", "silu_mul", "reference", 8, ts=now - timedelta(hours=2), fallback=True),  # before the range
        cpu("silu_mul", "inductor", True),
        cpu("rotary_embedding", "reference", False),
    ]


def qualification_events(now: datetime) -> list[Event]:
    """An H200 run (and an older one it supersedes) and a CPU run, in the hour before ``now``."""

    def record(provider: str, median: float, **kw: object) -> KernelQualificationEvent:
        values: dict[str, object] = {
            "ts": now - timedelta(minutes=20), "host": "g1", "device_name": H200, "op": "rms_norm",
            "provider": provider, "bucket": BUCKET, "shape": "tokens=8,hidden=4096", "dtype": "bfloat16",
            "status": "measured", "accuracy_passed": True, "rule": "close atol=0.02 rtol=0.02", "median_us": median,
            "ci_low_us": median * 0.95, "ci_high_us": median * 1.05, "trials": 30, "timing": "cuda_graph",
            "tb_s": 0.1, "decision": "kept", "evidence_digest": "e" * 64, "torch_version": "2.11.0",
        }  # fmt: skip
        values.update(kw)
        return KernelQualificationEvent(**values)

    wrong = {"detail": "max abs err 0.5 > tolerance", "max_abs_err": 0.5}
    on_cpu = {"host": "c1", "device_name": "cpu", "dtype": "float32", "bucket": "float32/n64/t8"}

    return [
        record("triton", 3.0, decision="incumbent"),
        record("inductor", 2.4),
        record("reference", 15.0),
        record("planted_wrong", 1.0, status="refused", accuracy_passed=False, decision="refused", **wrong),
        record("triton", 9.0, ts=now - timedelta(minutes=45), decision="incumbent"),  # superseded
        record("reference", 20.0, timing="wall", decision="incumbent", **on_cpu),
        record("triton", 0.0, status="unsupported", detail=ON_CPU, decision="", **on_cpu),
    ]
