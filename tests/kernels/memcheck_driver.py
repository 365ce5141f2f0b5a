"""Runs every Triton kernel of the registry once on a GPU, for ``compute-sanitizer --tool memcheck``.

Run by ``test_memcheck.py`` under the sanitizer (with the fixed launch configurations: autotuning would launch
each configuration many times, seconds apiece under the sanitizer). Prints one line per kernel.
"""

from __future__ import annotations

import torch

from inferensics import kernels
from tests.kernels.samples import SAMPLERS


def main() -> None:
    device = torch.device("cuda")
    for name, sampler in SAMPLERS.items():
        op = kernels.registry().op(name)
        triton = op.providers["triton"]
        ran = 0
        for sample in sampler(torch.bfloat16, device):
            ok, _ = triton.supports(sample.args, kernels.CallContext.of(sample.args))
            if ok:
                triton.fn(*sample.args)
                ran += 1
        torch.cuda.synchronize()
        print(f"{name}: {ran} samples", flush=True)


if __name__ == "__main__":
    main()
