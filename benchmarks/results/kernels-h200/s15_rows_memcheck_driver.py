"""Session 15: every candidate configuration of ``s15_rows_cells.py`` (add+RMSNorm two-pass / one-pass, SiLU·mul
launch and arithmetic variants) launched on every odd, unaligned and strided sample its op accepts, for
``compute-sanitizer --tool memcheck`` (so a candidate that goes into the launch table has been memchecked in the
same visit). Run from the repository root (with ``tests/`` importable):

    INFERENSICS_KERNELS_FIXED_CONFIG=1 compute-sanitizer --tool memcheck --leak-check no \\
        python3 benchmarks/results/kernels-h200/s15_rows_memcheck_driver.py
"""

import sys

import torch

sys.path.insert(0, "benchmarks/results/kernels-h200")
from s15_rows_cells import ADD_CANDIDATES, SILU_CANDIDATES

from inferensics.kernels._triton import activation, norm
from tests.kernels.memcheck_driver import _launches

device = torch.device("cuda")
_launches("fused_add_rms_norm", device, ADD_CANDIDATES, norm.fused_add_rms_norm_with)
_launches("silu_mul", device, SILU_CANDIDATES, activation.silu_mul_with)
