"""Session 20, H200 call 1 and 3: the Python frames of one compiled call, plain ``torch.compile`` against the SDK's
``InductorBackend`` (only ``backend.py:run`` may be extra), and the zero-copy fingerprint (list read and fold)
against the CPU reference ops for three dtypes and four shapes with a NaN and an inf.

Run from a tree built by ``s16_lead/build.sh`` (``PYTHONPATH=/tmp/site:tree python3 check_frames.py``).
"""

import sys
import time
from typing import Any

import torch

from inferensics.collector.host import fingerprint as fpm
from inferensics.collector.host.backend import InductorBackend


def frames(fn: Any, x: torch.Tensor) -> list[str]:
    names: list[str] = []

    def prof(frame: Any, event: str, arg: Any) -> None:
        if event == "call":
            c = frame.f_code
            if "torchinductor" in c.co_filename:
                names.append("<gen>")
            elif c.co_filename == __file__:
                names.append("<user>")
            else:
                names.append(f"{c.co_filename.rsplit('/', 1)[-1]}:{c.co_name}")

    with torch.no_grad():
        fn(x)
        fn(x)
        sys.setprofile(prof)
        fn(x)
        sys.setprofile(None)
    return names


def p(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


def o(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1


for dev in ("cpu", "cuda"):
    for mode in ("default", "reduce-overhead"):
        if dev == "cpu" and mode != "default":
            continue
        x = torch.randn(8, 64, device=dev)
        torch._dynamo.reset()
        a = frames(torch.compile(p, mode=mode), x)
        b = frames(torch.compile(o, backend=InductorBackend(mode=mode)), x)
        extra = [n for n in set(b) if b.count(n) > a.count(n)]
        print(dev, mode, "plain", len(a), "sdk", len(b), "extra", sorted(extra))

ok = bad = 0
for dtype in (torch.bfloat16, torch.float16, torch.float32):
    for shape in ((8, 32000), (1, 128256), (64, 4096), (3, 7)):
        x = torch.randn(*shape, device="cuda", dtype=dtype) * 4
        if shape[0] > 2:
            x[1, 3] = float("nan")
            x[2, 5] = float("inf")
        fpm.start_fingerprint(x).result()
        t0 = time.perf_counter()
        while dtype not in fpm.KERNELS.ready and not fpm.KERNELS.failed and time.perf_counter() - t0 < 120:
            time.sleep(0.05)
        for _ in range(3):
            got = fpm.start_fingerprint(x).result()
        x2 = x.reshape(-1, x.shape[-1]).cpu()
        want = fpm.finish(fpm.row_stats_torch(x2).numpy(), x.numel(), True, 16)
        exact = (got.argmax_digest, got.argmax_head, got.nan, got.inf) == (
            want.argmax_digest,
            want.argmax_head,
            want.nan,
            want.inf,
        )
        pairs = ((got.mean, want.mean), (got.std, want.std), (got.absmax, want.absmax))
        same = exact and all(abs(a - b) <= 1e-3 * max(1.0, abs(b)) for a, b in pairs)
        ok += same
        bad += not same
        if not same:
            print("MISMATCH", dtype, shape, got, want)
zero_copy = sorted(map(str, fpm.KERNELS.zero_copy))
print("fingerprint vs reference:", ok, "same,", bad, "different; zero-copy dtypes", zero_copy)
