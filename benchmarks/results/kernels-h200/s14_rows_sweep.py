"""Session 14's H200 sweep for the last row cell below 1.0x Inductor: add+RMSNorm at 8192 tokens (hidden 4096,
bf16). First what Inductor generates and launches for it (the kernel source, every config its autotuner was given,
the config it chose with registers / spills / shared memory, and the PTX loads and stores of the chosen binary,
next to ours compiled the same way); then our candidates against it and a same-bytes copy in shuffled CUDA-graph
rounds (outputs checked first): the one-pass incumbents, the two-pass kernel with its 16-byte stores (Inductor's
loop shape: chunk 2048 or 4096, 8 or 16 warps, residual in either pass, ``.cs`` stores) and the persistent kernel
(2-4 programs a multiprocessor, the next row's loads in flight). Prints TABLE_ROW lines for the merge script. Run
from the repository root, with TORCHINDUCTOR_CACHE_DIR pointing at an empty folder:

    python3 benchmarks/results/kernels-h200/s14_rows_sweep.py [ROUNDS] [PTX_DIR]
"""

import collections
import os
import random
import re
import sys
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, "benchmarks")
import bench_kernels as bench

from inferensics import kernels
from inferensics.kernels._triton import norm
from inferensics.kernels.samples import make_args

ROUNDS = int(sys.argv[1]) if len(sys.argv) > 1 else 9
PTX_DIR = Path(sys.argv[2]) if len(sys.argv) > 2 else None

# (rows, warps, early weight, hints (bit 0: .cs stores), late residual, chunk, programs a multiprocessor)
ONE_PASS = [(1, 16, False, 0, True), (1, 16, False, 0), (1, 8, False, 0, True)]
TWO_PASS = [(1, w, False, 0, late, chunk) for chunk in (4096, 2048) for w in (8, 16) for late in (True, False)]
TWO_PASS += [(1, 16, False, 1, True, 4096), (1, 8, False, 1, True, 4096), (1, 16, False, 1, True, 2048)]
PERSISTENT = [(1, w, False, 0, late, 0, p) for w, ps in ((16, (2, 3)), (8, (2, 3, 4))) for p in ps
              for late in (True, False)]  # fmt: skip
PERSISTENT += [(1, 16, False, 1, True, 0, 3), (1, 8, False, 1, True, 0, 4)]


def ptx_summary(ptx: str) -> str:
    loads = collections.Counter(re.findall(r"(ld\.global[\w.:]*)", ptx))
    stores = collections.Counter(re.findall(r"(st\.global[\w.:]*)", ptx))
    return f"loads {dict(loads)} stores {dict(stores)} bar.sync {ptx.count('bar.sync')}"


def inductor_report(args: tuple[Any, ...]) -> None:
    """The autotuners of the Inductor kernels loaded in this process: configs offered, the one chosen, resources."""
    from torch._inductor.codecache import PyCodeCache

    mods = list(getattr(PyCodeCache, "modules", [])) + list(getattr(PyCodeCache, "modules_no_attr", {}).values())
    for mod in mods:
        for name, obj in vars(mod).items():
            if not hasattr(obj, "launchers") or not name.startswith("triton_"):
                continue
            print(f"# inductor kernel {name} (module {getattr(mod, '__file__', '?')})")
            print(f"#   size_hints {getattr(obj, 'size_hints', '?')}")
            print(f"#   inductor_meta {getattr(obj, 'inductor_meta', {})}")
            for c in getattr(obj, "configs", []) or []:
                print(f"#   offered config {c}")
            for launcher in obj.launchers:
                cfg = getattr(launcher, "config", None)
                regs, spills = getattr(launcher, "n_regs", "?"), getattr(launcher, "n_spills", "?")
                shared = getattr(launcher, "shared", "?")
                print(f"#   LAUNCHED config {cfg} n_regs {regs} n_spills {spills} shared {shared}")
                binary = getattr(launcher, "bin", None)
                asm = getattr(binary, "asm", {}) if binary is not None else {}
                if "ptx" in asm:
                    print(f"#   chosen binary PTX: {ptx_summary(asm['ptx'])}")
                    if PTX_DIR is not None:
                        (PTX_DIR / "s14_rows_inductor_add8192.ptx").write_text(asm["ptx"])
    cache = os.environ.get("TORCHINDUCTOR_CACHE_DIR")
    if cache:
        for p in sorted(Path(cache).rglob("*.best_config")):
            print(f"# best_config file {p.name}: {p.read_text().strip()}")


def ours_report(args: tuple[Any, ...]) -> None:
    """Registers and PTX loads/stores of our candidates' compiled kernels at this shape."""
    x, residual, weight, eps = args
    kinds = {"one-pass": norm._rms_norm_kernel, "two-pass": norm._add_rms_norm_two_pass_kernel,
             "persistent": norm._add_rms_norm_persistent_kernel}  # fmt: skip
    for c in ONE_PASS + TWO_PASS + PERSISTENT:
        norm.fused_add_rms_norm_with(x, residual, weight, eps, c)
    torch.cuda.synchronize()
    for kind, fn in kinds.items():
        for key, k in getattr(fn, "device_caches", {}).get(0, [{}])[0].items():
            regs = getattr(k, "n_regs", "?")
            print(f"# ours {kind}: n_regs {regs} n_spills {getattr(k, 'n_spills', '?')} "
                  f"{ptx_summary(k.asm.get('ptx', ''))} key {str(key)[-160:]}")  # fmt: skip


if __name__ == "__main__":
    import triton

    print(f"# {torch.cuda.get_device_name()} torch {torch.__version__} triton {triton.__version__} "
          f"load {os.getloadavg()[0]:.2f}")  # fmt: skip
    reg = kernels.registry().op("fused_add_rms_norm")
    args = make_args("fused_add_rms_norm", {"tokens": 8192, "hidden": 4096}, torch.bfloat16, torch.device("cuda"))
    compiled = torch.compile(reg.reference, fullgraph=True, dynamic=False)
    _, code = bench.inductor_kernels(compiled, args)
    print(f"# inductor code, fused_add_rms_norm tokens=8192:\n{code}\n# end of inductor code", flush=True)
    try:
        inductor_report(args)
    except Exception as exc:  # a diagnostic: it must not stop the sweep
        print(f"# inductor report failed: {type(exc).__name__}: {exc}")
    try:
        ours_report(args)
    except Exception as exc:
        print(f"# ours report failed: {type(exc).__name__}: {exc}")
    sys.stdout.flush()
    rng = random.Random(14)
    cands = {"fused_add_rms_norm": ONE_PASS + TWO_PASS + PERSISTENT}
    bench.sweep_rows(ROUNDS, [], rng, {}, candidates=cands, tokens_by_op={"fused_add_rms_norm": [8192]})
