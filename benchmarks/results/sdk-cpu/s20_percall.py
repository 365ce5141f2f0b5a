"""Session 20: per compiled-graph call, a tiny graph (x * 2 + 1 on 4x8) compiled by plain ``torch.compile`` and by
the SDK's ``InductorBackend``, called in blocks of 2000 in a tight loop, 30 rounds interleaved (outside a request,
and inside one). Run from /tmp with ``PYTHONPATH`` naming another checkout's parent to measure that one."""

import statistics
import time
from typing import Any

import torch

from inferensics.collector.host import InductorBackend, NullExporter, SdkConfig, instrument

tr = instrument(exporter=NullExporter(), host="h", model="m", config=SdkConfig())


def f(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


def g(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


plain = torch.compile(f)
sdk = torch.compile(g, backend=InductorBackend())
x = torch.randn(4, 8)
for fn in (plain, sdk):
    for _ in range(200):
        fn(x)


def block(fn: Any, n: int = 2000) -> float:
    t0 = time.perf_counter_ns()
    for _ in range(n):
        fn(x)
    return (time.perf_counter_ns() - t0) / n / 1000


res: dict[str, list[float]] = {"plain": [], "sdk": [], "sdk_req": []}
for r in range(30):
    res["plain"].append(block(plain))
    res["sdk"].append(block(sdk))
    with tr.request(f"r{r}"):
        res["sdk_req"].append(block(sdk))
for k, v in res.items():
    print(k, f"{statistics.median(v):.2f} us/call")
d = [b - a for a, b in zip(res["plain"], res["sdk"], strict=True)]
print("sdk - plain per round median", f"{statistics.median(d):.3f}", "range", f"{min(d):.3f} {max(d):.3f}")
