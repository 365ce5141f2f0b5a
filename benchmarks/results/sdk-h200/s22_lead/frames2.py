import difflib
import sys

import torch

sys.path.insert(0, "tree")
import torch._functorch.config as fconf
import torch._inductor.config as iconf

from inferensics.collector.host.backend import InductorBackend
from tests.collector.host.test_graph_counts import _python_frames


def plain_fn(x):
    return x * 2 + 1


def ours_fn(x):
    return x * 2 + 1


def show(tag, plain, ours):
    print(tag, len(plain), len(ours))
    for line in difflib.unified_diff(plain, ours, "plain", "ours", lineterm="", n=1):
        print("  ", line)


x = torch.randn(4, 8)
with fconf.patch(enable_autograd_cache=False), iconf.patch(fx_graph_cache=False):
    show(
        "nocache",
        _python_frames(torch.compile(plain_fn), x),
        _python_frames(torch.compile(ours_fn, backend=InductorBackend()), x),
    )


def plain2(x):
    return x * 3 + 1


def ours2(x):
    return x * 3 + 1


o = _python_frames(torch.compile(ours2, backend=InductorBackend()), x)
p = _python_frames(torch.compile(plain2), x)
show("ours-first", p, o)
