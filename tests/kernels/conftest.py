"""Kernel tests run our Triton kernels on a GPU when there is one, else in Triton's interpreter.

``TRITON_INTERPRET=1`` is set for these tests only (and restored after): Triton reads it when a kernel is
defined, and the registry imports its Triton modules on first use, so kernels first used here run in the
interpreter. Later tests see the variable unset, so the registry declines the Triton providers for CPU
tensors there and the demo and replay keep the reference.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()


@pytest.fixture(autouse=True, scope="package")
def _triton_interpreter() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        if not HAS_CUDA:
            mp.setenv("TRITON_INTERPRET", "1")
        yield


@pytest.fixture(scope="package")
def device() -> torch.device:
    """The device the differential suite runs on."""
    return torch.device("cuda" if HAS_CUDA else "cpu")
