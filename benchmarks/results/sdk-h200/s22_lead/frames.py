import difflib
import sys

import torch

sys.path.insert(0, "tree")
from inferensics.collector.host.backend import InductorBackend
from tests.collector.host.test_graph_counts import _python_frames


def plain_fn(x):
    return x * 2 + 1


def ours_fn(x):
    return x * 2 + 1


for dev in ("cpu", "cuda"):
    x = torch.randn(4, 8, device=dev)
    plain = _python_frames(torch.compile(plain_fn), x)
    ours = _python_frames(torch.compile(ours_fn, backend=InductorBackend()), x)
    print(dev, len(plain), len(ours))
    for line in difflib.unified_diff(plain, ours, "plain", "ours", lineterm="", n=2):
        print("  ", line)
