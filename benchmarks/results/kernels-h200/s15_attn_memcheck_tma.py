"""compute-sanitizer memcheck target: the paged kernel's tensor-descriptor plans only (session 15, run 1)."""

import torch

from inferensics.kernels._triton import paged_attention as pa
from tests.kernels.memcheck_driver import _launches

plans = [p for p in __import__("tests.kernels.memcheck_driver", fromlist=["PLANS"]).PLANS if p.tma]
plans += [pa.Plan(4, 64, 64, 4, 3, True, False, tma=True), pa.Plan(16, 64, 32, 4, 4, True, True, True, tma=True)]
_launches("paged_decode_attention", torch.device("cuda"), plans, pa.run_with_plan)
