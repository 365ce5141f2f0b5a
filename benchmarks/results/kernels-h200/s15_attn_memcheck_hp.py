"""compute-sanitizer memcheck target: the paged kernel's plans of several KV heads a program (session 15, run 2)."""

import torch

from inferensics.kernels._triton import paged_attention as pa
from tests.kernels.memcheck_driver import PLANS, _launches

plans = [p for p in PLANS if p.heads_per_program > 1]
plans += [p for p in pa.H200_PLANS.values() if p.heads_per_program > 1]
_launches("paged_decode_attention", torch.device("cuda"), plans, pa.run_with_plan)
