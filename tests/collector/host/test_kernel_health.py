"""A serving process's kernel-registry trouble (a provider that raised, a call that fell back to the reference, a
provider a compiler could not trace) is counted in ``tracker.stats()`` and carried by its ``sdk_health`` records, so
a host whose kernels misbehave is visible without reading its logs; a process that never built the registry reads
zeros and does not build it.

What it got wrong: the registry counted untraceable providers apart from failures, but neither ``stats()`` nor the
health records carried that count, so a host whose compiled graphs left a provider out looked healthy."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pytest
import torch
import torch._dynamo
import torch._functorch.config
import torch._inductor.config

from inferensics.collector.host import SdkConfig, instrument
from inferensics.collector.host.kernel_counts import KERNEL_COUNTERS
from inferensics.schema import SdkHealthEvent
from inferensics.schema import columns as col
from inferensics.schema.store import Store


@pytest.fixture
def broken_silu_mul() -> Iterator[list[tuple[int, ...]]]:
    """The process registry's ``silu_mul`` with a planted provider first in line that raises on 3-row inputs."""
    from inferensics import kernels

    op = kernels.registry().op("silu_mul")
    calls: list[tuple[int, ...]] = []

    def broken(x: torch.Tensor) -> torch.Tensor:
        calls.append(tuple(x.shape))
        if x.shape[0] == 3:
            raise RuntimeError("illegal memory access (planted)")
        return torch.nn.functional.silu(x[..., : x.shape[-1] // 2]) * x[..., x.shape[-1] // 2 :]

    def contiguous(args: Sequence[Any]) -> str | None:
        return None if args[0].is_contiguous() else "needs a contiguous input"

    needs = kernels.Requirements(checks=(contiguous,))
    op.register(kernels.Provider("planted_broken", "vendor", broken, needs), before="triton")
    try:
        yield calls
    finally:
        op.unregister("planted_broken")


def test_provider_failures_and_fallbacks_reach_stats_and_the_health_record(
    store: Store, broken_silu_mul: list[tuple[int, ...]]
) -> None:
    from inferensics import kernels

    tracker = instrument(store=store, host="h-kernels", model="m", config=SdkConfig(batch_rows=100))
    try:
        before = tracker.stats()
        x = torch.randn(3, 8)
        with tracker.request("r-1") as req:
            req.set_output(kernels.silu_mul(x))  # the planted provider raises: quarantined, served by the next
        with tracker.request("r-2") as req:
            req.set_output(kernels.silu_mul(torch.randn(6, 16)[:, ::2]))  # strided: nothing but the reference
        after = tracker.stats()
    finally:
        tracker.shutdown()  # exports a last health record
    assert broken_silu_mul == [(3, 8)]
    assert after["kernel_failures"] == before["kernel_failures"] + 1
    assert after["kernel_fallbacks"] >= before["kernel_fallbacks"] + 1
    cols = ", ".join(KERNEL_COUNTERS)
    rows = store.query_rows(
        f"SELECT {cols} FROM {store.database}.{SdkHealthEvent.TABLE.name} WHERE host = 'h-kernels' ORDER BY ts DESC"
    )
    assert rows, "no sdk_health record"
    assert rows[0] == tuple(after[k] for k in KERNEL_COUNTERS)
    # The shutdown's record says the process stopped on purpose (the dashboard does not call it quiet).
    # It says its health interval too (the dashboard's quiet threshold is three of them).
    # It says its health interval too (the dashboard's quiet threshold is three of them), and names its process.
    (stopped,) = store.query_rows(
        f"SELECT argMax(stopped, ts), argMax(interval_s, ts), groupUniqArray(process) "
        f"FROM {store.database}.{SdkHealthEvent.TABLE.name} WHERE host = 'h-kernels'"
    )
    assert stopped[:2] == (True, SdkConfig().health_interval_s)
    ((pid, started),) = [p.split("@") for p in stopped[2]]  # one process: this one
    assert int(pid) == os.getpid()
    assert abs(int(started) / 1000 - time.time()) < 3600


def _numpy_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    a = x.detach().float().numpy()  # fine on real tensors; a trace's fake tensors have no data
    return torch.from_numpy(a / np.sqrt((a**2).mean(-1, keepdims=True) + eps)).to(x.dtype) * weight


@pytest.fixture
def untraceable_rms_norm() -> Iterator[None]:
    """The process registry's ``rms_norm`` with a planted provider first in line that works on real tensors but
    cannot be traced (it reads their data); compile caches off, so the compile traces it here."""
    from inferensics import kernels

    op = kernels.registry().op("rms_norm")
    saved = kernels.registry().policy()
    needs = kernels.Requirements(platforms=frozenset({"cpu"}))
    op.register(kernels.Provider("planted_numpy", "vendor", _numpy_norm, needs), before="reference")
    op.set_priority(["planted_numpy"])
    torch._dynamo.reset()
    try:
        with (
            torch._functorch.config.patch(enable_autograd_cache=False),
            torch._inductor.config.patch(fx_graph_cache=False),
        ):
            yield
    finally:
        torch._dynamo.reset()
        op.unregister("planted_numpy")
        kernels.registry().apply_policy(saved)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")
@pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning")
def test_an_untraceable_provider_reaches_stats_and_the_health_record(store: Store, untraceable_rms_norm: None) -> None:
    from inferensics import kernels

    tracker = instrument(store=store, host="h-untraceable", model="m", config=SdkConfig(batch_rows=100))
    try:
        before = tracker.stats()
        x, w = torch.randn(4, 64), torch.ones(64)
        compiled = torch.compile(lambda x, w: kernels.rms_norm(x, w, 1e-6) * 2)
        with tracker.request("r-1") as req:
            req.set_output(compiled(x, w))  # the trace leaves the planted provider out of the graph
        after = tracker.stats()
    finally:
        tracker.shutdown()  # exports a last health record
    assert after[col.KERNEL_UNTRACEABLE] == before[col.KERNEL_UNTRACEABLE] + 1
    assert after[col.KERNEL_FAILURES] == before[col.KERNEL_FAILURES]  # it raised nothing for real
    rows = store.query_rows(
        f"SELECT {col.KERNEL_UNTRACEABLE} FROM {store.database}.{SdkHealthEvent.TABLE.name} "
        "WHERE host = 'h-untraceable' ORDER BY ts DESC LIMIT 1"
    )
    assert rows == [(after[col.KERNEL_UNTRACEABLE],)]


def test_a_process_without_the_registry_reads_zeros_and_does_not_build_it() -> None:
    code = (
        "import sys\n"
        "from inferensics.collector.host.kernel_counts import kernel_registry_counts\n"
        "print(kernel_registry_counts(), 'inferensics.kernels' in sys.modules, "
        "any(m == 'triton' for m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120)
    assert out.stdout.strip() == f"{dict.fromkeys(KERNEL_COUNTERS, 0)} False False"
