"""Whole compiled-graph call ranges among the ``kernel_timings`` rows: how they are named and what key they carry.

Inductor opens a profiler range named ``## Call CompiledFxGraph <key> ##`` around every call of a compiled
graph (``torch._inductor.output_code.CompiledFxGraph.__call__`` in torch 2.13), where ``<key>`` is the
graph's FX-graph-cache key (``compiles.fx_cache_key``), or ``None`` when the compile bypassed that cache. The
host SDK stores the range of a sampled request under that name in ``kernel_timings``: it is the time of a
whole compiled-graph call, not a kernel, and the key ties it to the compile (and so the artifact) it ran.
"""

from __future__ import annotations

from typing import Final

GRAPH_CALL_PREFIX: Final = "## Call CompiledFxGraph "
"""How a whole-graph call range's name starts (the key and :data:`GRAPH_CALL_SUFFIX` follow)."""
GRAPH_CALL_SUFFIX: Final = " ##"
"""How a whole-graph call range's name ends."""
NO_KEY: Final = "None"
"""The key torch writes when the graph has no FX-graph-cache key (the cache was bypassed or off)."""


def graph_call_name(fx_cache_key: str) -> str:
    """The profiler range name of a call of the graph whose FX-graph-cache key is ``fx_cache_key``.

    >>> graph_call_name("fabc")
    '## Call CompiledFxGraph fabc ##'
    """
    return f"{GRAPH_CALL_PREFIX}{fx_cache_key or NO_KEY}{GRAPH_CALL_SUFFIX}"


def graph_call_key(name: str) -> str | None:
    """The FX-graph-cache key in a whole-graph call range's name: ``""`` when torch had none, ``None`` when
    ``name`` is not a whole-graph call range (a kernel, an aten op).

    >>> graph_call_key("## Call CompiledFxGraph fabc ##"), graph_call_key("## Call CompiledFxGraph None ##")
    ('fabc', '')
    >>> graph_call_key("cpp_fused_add_0") is None
    True
    """
    if not (name.startswith(GRAPH_CALL_PREFIX) and name.endswith(GRAPH_CALL_SUFFIX)):
        return None
    key = name[len(GRAPH_CALL_PREFIX) : -len(GRAPH_CALL_SUFFIX)]
    return "" if key == NO_KEY else key
