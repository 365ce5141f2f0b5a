"""Replay test fixtures.

The fault suite compiles with the FX graph and AOTAutograd caches off (``no_compile_caches``): it patches
the compiler, and those caches' keys do not cover patched code (the stale-artifact faults turn them on
themselves). Bundle builds must not run under it: a bundle records the settings it was built with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def no_compile_caches() -> Iterator[None]:
    import torch
    import torch._functorch.config as functorch_config
    import torch._inductor.config as inductor_config

    with inductor_config.patch(fx_graph_cache=False), functorch_config.patch(enable_autograd_cache=False):
        yield
    torch._dynamo.reset()


TORCH_INTERNAL_WARNINGS = (
    # Raised inside Inductor's own imports on torch 2.13; not ours to fix, and fatal under filterwarnings=error.
    "ignore:`torch.jit.script_method` is deprecated:DeprecationWarning",
    "ignore:`torch.jit.script` is deprecated:DeprecationWarning",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Let torch's own deprecation warnings through for the tests that run real compiles."""
    from pathlib import Path

    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            for warning in TORCH_INTERNAL_WARNINGS:
                item.add_marker(pytest.mark.filterwarnings(warning))
