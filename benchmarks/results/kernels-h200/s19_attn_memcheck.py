"""compute-sanitizer memcheck target: the paged kernel's persistent-grid plans (session 19) on every sample the op
accepts, and any persistent rows of the device copy's tables."""

import torch

from inferensics.kernels._triton import paged_attention as pa
from tests.kernels.memcheck_driver import PLANS, _launches

plans = [p for p in PLANS if p.persistent] + [p for p in pa.H200_PLANS.values() if p.persistent]
_launches("paged_decode_attention", torch.device("cuda"), plans, pa.run_with_plan)
