"""Kernel tests run our Triton kernels on a GPU when there is one, else in Triton's interpreter.

This conftest sets ``TRITON_INTERPRET=1`` without a GPU, before any kernel test module imports Triton (Triton
reads it at import; ``make test`` runs this part in its own process). The registry
lets Triton providers serve CPU tensors only with ``INFERENSICS_KERNELS_INTERPRET=1`` as well, set here for
these tests alone and restored after, so other tests (the demo, replay) keep the reference on CPU.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
if not HAS_CUDA:
    os.environ.setdefault("TRITON_INTERPRET", "1")
    _EARLY = sorted(m for m in sys.modules if m.startswith("inferensics.kernels._triton"))
    if _EARLY:
        raise pytest.UsageError(
            f"{_EARLY[0]} was imported before this conftest set TRITON_INTERPRET, so its kernels cannot run in "
            "Triton's interpreter; import kernel modules inside tests or fixtures, not at a conftest's top"
        )


@pytest.fixture(autouse=True, scope="package")
def _triton_interpreter() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        if not HAS_CUDA:
            mp.setenv("INFERENSICS_KERNELS_INTERPRET", "1")
        yield


@pytest.fixture(scope="package")
def device() -> torch.device:
    """The device the differential suite runs on."""
    return torch.device("cuda" if HAS_CUDA else "cpu")


@pytest.fixture
def restored_registry() -> Iterator[None]:
    """:func:`~tests.kernels.evidence_edits.kept_registry` around a test. Imported here, not at the top: that
    module imports the kernels, and Triton must see ``TRITON_INTERPRET`` (set above) before they are defined."""
    from tests.kernels.evidence_edits import kept_registry

    with kept_registry():
        yield
