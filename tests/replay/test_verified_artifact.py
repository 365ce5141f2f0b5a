"""A served output from a verified bundle hit (exactly the signed artifact) that a fresh compile does not reproduce
is never called a stale or poisoned cache entry (``artifact_mismatch``): the bundle's build compiled it.

What it got wrong: the evidence said every served graph key was a verified bundle hit, and the verdict said "a
stale or poisoned cache entry", sending on-call to purge caches.
"""

from __future__ import annotations

import pytest
import torch

from inferensics.replay._internal.investigate import investigate_keeping_graph
from tests.replay.faults import Centre

pytestmark = pytest.mark.usefixtures("no_compile_caches")


def _verdict(*, history: list[tuple[torch.Tensor]], verified: bool) -> tuple[str, str]:
    model = Centre().eval()
    x = torch.randn(4, 13, generator=torch.Generator().manual_seed(3))
    wrong = model(x) + 1.0  # the signed artifact's output, wrong
    verdict, _ = investigate_keeping_graph(
        model, (x,), compile_kwargs={"dynamic": True}, warmup_inputs=history, served_output=wrong,
        served_verified=verified,
    )  # fmt: skip
    return verdict.category, verdict.summary


@pytest.mark.slow
def test_a_verified_hit_at_a_shape_its_build_never_ran_is_a_shape_specialisation() -> None:
    category, summary = _verdict(history=[(torch.randn(4, 8),)], verified=True)
    assert category == "shape_specialization", summary
    assert "stale or poisoned" not in summary


@pytest.mark.slow
def test_a_verified_hit_is_never_a_stale_cache_entry() -> None:
    category, summary = _verdict(history=[], verified=True)
    assert category != "artifact_mismatch", summary
    assert "not a stale cache entry" in summary
    # The same served output from a cache (not a verified bundle hit) is still a stale entry.
    assert _verdict(history=[], verified=False)[0] == "artifact_mismatch"
