"""FX passes the bundle tests install (importable by ``module:name``, so a fresh process can too)."""

from __future__ import annotations

import torch
from torch._inductor.custom_graph_pass import CustomGraphPass  # the public protocol of Inductor's pass slots


def plain_pass(graph: torch.fx.Graph) -> None:
    """A plain-function pass (no ``uuid()``): Inductor compiles every graph past its cache while it is set."""
    del graph


class NoOpPass(CustomGraphPass):
    """A pass that changes nothing, with a stable ``uuid()``: Inductor caches the graphs compiled with it."""

    def __call__(self, graph: torch.fx.Graph) -> None:
        """Leave the graph as it is."""
        del graph

    def uuid(self) -> str:
        """The pass's cache identity."""
        return "tests.bundle.fx_passes.NoOpPass/1"


class NoneUuidPass(NoOpPass):
    """A pass whose ``uuid()`` returns ``None``: Inductor bypasses its cache for it, as for a plain function."""

    def uuid(self) -> None:  # type: ignore[override]
        """No cache identity."""
        return None


no_op_pass = NoOpPass()
none_uuid_pass = NoneUuidPass()


class CountingPass(NoOpPass):
    """A pass that changes nothing and counts the graphs it ran on (``runs``), with a stable ``uuid()``."""

    runs = 0

    def __call__(self, graph: torch.fx.Graph) -> None:
        """Count the graph."""
        del graph
        CountingPass.runs += 1

    def uuid(self) -> str:
        """The pass's cache identity."""
        return "tests.bundle.fx_passes.CountingPass/1"


counting_pass = CountingPass()
