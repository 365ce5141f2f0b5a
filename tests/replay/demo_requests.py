"""The demo's failing requests as replay sees them: the canary's prefill and the NaN-cache decode step.

Shared by ``test_demo_requests.py`` and the H200 timing run.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import torch
from torch import nn

from inferensics.demo.models.decoder import TinyDecoder, pad_cache

DECODER_FILE = Path(inspect.getsourcefile(TinyDecoder) or "")
SILU_LINE = next(i for i, t in enumerate(DECODER_FILE.read_text().splitlines(), 1) if "kernels.silu_mul(" in t)


class DecodeStep(nn.Module):
    """The decoder's decode step as a module (what the demo server compiles for decode)."""

    def __init__(self, model: TinyDecoder) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: torch.Tensor
    ) -> torch.Tensor:
        """Logits of one decode step."""
        return self.model.decode_step(tokens, k_cache, v_cache, pos)[0]


def prefill_request(batch: int = 2, seq: int = 16) -> tuple[TinyDecoder, tuple[torch.Tensor]]:
    """The canary's failing prefill: the decoder and its prompt."""
    model = TinyDecoder(seed=0)
    tokens = torch.randint(0, model.cfg.vocab_size, (batch, seq), generator=torch.Generator().manual_seed(5))
    return model, (tokens,)


def nan_decode_request() -> tuple[DecodeStep, tuple[torch.Tensor, ...]]:
    """The demo's NaN request: a decode step resuming from a KV cache with a NaN page in sequence 1."""
    from inferensics.demo.incidents import poison_cache

    model = TinyDecoder(seed=0)
    prompt = torch.randint(0, model.cfg.vocab_size, (2, 8), generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        _, k, v = model.prefill(prompt)
    k, v = pad_cache(k, 16), pad_cache(v, 16)
    step = torch.randint(0, model.cfg.vocab_size, (2, 1), generator=torch.Generator().manual_seed(7))
    return DecodeStep(model), (step, poison_cache(k), v, torch.tensor(8))
