"""The demo's models: the decoder's decode path agrees with its prefill; both models are seeded."""

from __future__ import annotations

import pytest
import torch

from inferensics.demo.models.decoder import TinyDecoder, pad_cache
from inferensics.demo.models.hf import build_hf_model


def test_decode_steps_match_prefill_of_the_longer_prompt() -> None:
    """One-token and three-token (speculative) steps reproduce the prefill logits of the same positions."""
    model = TinyDecoder(seed=0)
    tokens = torch.randint(0, 256, (2, 12), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        full = model.prefill(tokens)[0]
        _, k, v = model.prefill(tokens[:, :8])
        k, v = pad_cache(k, 32), pad_cache(v, 32)
        one, k, v = model.decode_step(tokens[:, 8:9], k, v, torch.tensor(8))
        three, _, _ = model.decode_step(tokens[:, 9:12], k, v, torch.tensor(9))
    torch.testing.assert_close(torch.cat([one, three], dim=1), full[:, 8:], rtol=1e-4, atol=1e-5)


def test_weights_depend_only_on_the_seed() -> None:
    """Two builds with one seed are identical, another seed differs, and the global RNG is untouched."""
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    a, b, c = TinyDecoder(seed=0), TinyDecoder(seed=0), TinyDecoder(seed=1)
    hf_a, hf_b = build_hf_model(0), build_hf_model(0)
    assert torch.equal(torch.rand(1), before)
    assert torch.equal(a.lm_head.weight, b.lm_head.weight)
    assert not torch.equal(a.lm_head.weight, c.lm_head.weight)
    for p, q in zip(hf_a.parameters(), hf_b.parameters(), strict=True):
        assert torch.equal(p, q)


def test_pad_cache_refuses_to_shrink() -> None:
    """A capacity below the cache length is a caller bug, reported as such."""
    with pytest.raises(ValueError, match="more than the capacity"):
        pad_cache(torch.zeros(2, 1, 4, 16, 8), 8)
