"""Runs every Triton kernel of the registry on a GPU, for ``compute-sanitizer --tool memcheck``.

Run by ``test_memcheck.py`` under the sanitizer (with the fixed launch configurations: autotuning would launch
each configuration many times, seconds apiece under the sanitizer). First every op's serving path on every
sample it accepts (one ``<op>: N samples`` line each); then the launch configurations the serving path takes only
at the measured tables' shapes, on the same odd, unaligned and strided samples: every table entry of the row
kernels, the two-pass add+RMSNorm, SiLU·mul's arithmetic variants, and paged attention's split kernel with the
merge in the last split and in the second kernel (``<op>: N launches`` lines).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from inferensics import kernels
from inferensics.kernels._triton import activation, norm, rotary
from inferensics.kernels._triton import paged_attention as pa
from tests.kernels.samples import SAMPLERS

TWO_PASS = [(1, 4, False, 0, False, 256), (1, 8, False, 0, True, 1024), (1, 16, False, 1, True, 4096)]
PERSISTENT = [(1, 4, False, 0, False, 0, 1), (1, 16, False, 1, True, 0, 3)]
"""Persistent add+RMSNorm configurations, also run on 600 rows: more than the grid's programs, so they loop."""
SILU_VARIANTS = [
    (256, 4, activation.DIV_FAST),
    (256, 4, activation.DIV_GUARDED, True, True),
    (256, 4, activation.DIV_FULL, False, True, 1, True),
]
PLANS = [
    pa.Plan(min_split=16, block_n=16),
    pa.Plan(min_split=16, block_n=16, merge_kernel=True),
    pa.Plan(min_split=64, block_n=64, warps=8, stages=3, kv_fast=False, merge_kernel=True),
    # Session 14: the merge kernel as a dependent launch, and the next step's page numbers loaded a step early.
    pa.Plan(min_split=16, block_n=32, stages=3, merge_kernel=True, pdl=True, prefetch_pages=True),
    pa.Plan(min_split=64, block_n=64, stages=4, prefetch_pages=True),
]


def _accepted(name: str, device: torch.device) -> list[tuple[Any, ...]]:
    triton = kernels.registry().op(name).providers["triton"]
    return [
        s.args
        for s in SAMPLERS[name](torch.bfloat16, device)
        if triton.supports(s.args, kernels.CallContext.of(s.args))[0]
    ]


def _launches(name: str, device: torch.device, configs: list[Any], run: Callable[..., Any]) -> None:
    n = 0
    for config in configs:
        for args in _accepted(name, device):
            run(*args, config)
            n += 1
    torch.cuda.synchronize()
    print(f"{name}: {n} launches of {len(configs)} table/variant configurations", flush=True)


def main() -> None:
    device = torch.device("cuda")
    for name in SAMPLERS:
        args_list = _accepted(name, device)
        triton = kernels.registry().op(name).providers["triton"]
        for args in args_list:
            triton.fn(*args)
        torch.cuda.synchronize()
        print(f"{name}: {len(args_list)} samples", flush=True)
    rms_table = [c for (res, _, _), c in norm.H200_CONFIGS.items() if not res]
    add_table = [c for (res, _, _), c in norm.H200_CONFIGS.items() if res] + TWO_PASS
    _launches("rms_norm", device, rms_table, norm.rms_norm_with)
    _launches("fused_add_rms_norm", device, add_table + PERSISTENT, norm.fused_add_rms_norm_with)
    many = [torch.randn(600, 1030, device=device).to(torch.bfloat16) for _ in range(3)]
    for config in PERSISTENT:
        norm.fused_add_rms_norm_with(many[0], many[1], many[2][0], 1e-6, config)
    torch.cuda.synchronize()
    print(f"fused_add_rms_norm: {len(PERSISTENT)} persistent launches on 600 rows", flush=True)
    silu = list(activation.H200_CONFIGS.values()) + SILU_VARIANTS
    _launches("silu_mul", device, silu, activation.silu_mul_with)
    _launches("rotary_embedding", device, list(rotary.H200_CONFIGS.values()), rotary.rotary_with)
    plans = list(dict.fromkeys([*pa.H200_PLANS.values(), *PLANS]))
    _launches("paged_decode_attention", device, plans, pa.run_with_plan)


if __name__ == "__main__":
    main()
