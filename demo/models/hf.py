"""A Hugging Face transformers causal LM built from a small config: model code no one here wrote.

No download: the architecture comes from a :class:`transformers.LlamaConfig` and the weights from a seed,
so every process builds the same model. The demo serves it as a scoring endpoint (one forward pass over the
prompt, no KV cache), compiled with dynamic batch and sequence dimensions.

Requires the ``demo`` extra (transformers).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from inferensics.schema.install_hint import pip_install_hint

HF_CONFIG: dict[str, Any] = {
    "vocab_size": 256,
    "hidden_size": 64,
    "intermediate_size": 176,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "max_position_embeddings": 1024,
    "rms_norm_eps": 1e-5,
    "tie_word_embeddings": False,
}
"""The LlamaConfig fields of the demo's model (grouped-query attention: 4 query heads, 2 KV heads)."""


class CausalLMScorer(nn.Module):
    """Wraps a transformers causal LM so that ``forward(input_ids)`` returns logits only.

    Compiling this wrapper rather than the LM keeps the frame's inputs to one tensor and drops the output
    dataclass, which keeps guards simple.
    """

    def __init__(self, lm: nn.Module) -> None:
        super().__init__()
        self.lm = lm

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits (``batch × seq × vocab``) of a batch of token ids."""
        logits: torch.Tensor = self.lm(input_ids=input_ids, use_cache=False).logits
        return logits


def build_hf_model(seed: int = 0) -> CausalLMScorer:
    """Build the seeded Llama-architecture scorer, in eval mode.

    Raises:
        ImportError: transformers is not installed; the message names the extra that provides it.
    """
    try:
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as exc:  # pragma: no cover - the dev environment has it
        raise ImportError(f"the demo's second model needs transformers: {pip_install_hint('demo')}") from exc
    config = LlamaConfig(**HF_CONFIG)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        lm = LlamaForCausalLM(config)
    return CausalLMScorer(lm).eval()
