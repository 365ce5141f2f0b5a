"""The project's own small decoder-only language model, in plain PyTorch.

A Llama-shaped stack small enough that ``torch.compile`` on a CPU takes seconds per graph: RMSNorm, rotary
position embedding, SwiGLU MLP and multi-head attention with a preallocated KV cache. RMSNorm, rotary and
SiLU·mul go through the kernel registry (``inferensics.kernels``): its reference on CPU, our Triton kernels
on a GPU, the choice recorded in the compile events. Two entry points serve
the two phases of generation:

- :meth:`TinyDecoder.prefill` runs a whole prompt (``tokens`` of shape ``batch × seq``) and returns the
  logits and the keys and values of every layer;
- :meth:`TinyDecoder.decode_step` runs one new token per sequence against caches of a fixed capacity, with
  the position passed as a tensor so that stepping through positions never changes a guard.

Weights are initialised from a seed, so two processes build bit-identical models.

Example:
    >>> import torch
    >>> model = TinyDecoder(DecoderConfig(), seed=0)
    >>> logits, k, v = model.prefill(torch.zeros(2, 8, dtype=torch.long))
    >>> tuple(logits.shape), tuple(pad_cache(k, 32).shape)
    ((2, 8, 256), (2, 2, 4, 32, 16))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import cast

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 - the conventional alias

from inferensics import kernels


@dataclass(frozen=True)
class DecoderConfig:
    """Sizes of :class:`TinyDecoder`."""

    vocab_size: int = 256
    """Number of token ids."""
    dim: int = 64
    """Model (residual stream) width."""
    n_layers: int = 2
    """Number of transformer blocks."""
    n_heads: int = 4
    """Attention heads; ``dim`` must divide evenly."""
    hidden_dim: int = 176
    """Inner width of the SwiGLU MLP."""
    max_seq_len: int = 2048
    """Longest position the rotary table covers."""
    rope_theta: float = 10000.0
    """Base of the rotary frequencies."""
    norm_eps: float = 1e-5
    """Epsilon of RMSNorm."""

    @property
    def head_dim(self) -> int:
        """Width of one attention head."""
        return self.dim // self.n_heads


class RMSNorm(nn.Module):
    """Root-mean-square layer norm, computed in float32 whatever the input dtype."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Normalise the last dimension of ``x`` (through the kernel registry)."""
        return kernels.rms_norm(x, self.weight, self.eps)


def rotary_tables(cfg: DecoderConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """Cosine and sine tables of the rotary embedding, ``max_seq_len × head_dim / 2`` each."""
    half = cfg.head_dim // 2
    freqs = 1.0 / (cfg.rope_theta ** (torch.arange(half, dtype=torch.float32) / half))
    angles = torch.outer(torch.arange(cfg.max_seq_len, dtype=torch.float32), freqs)
    return angles.cos(), angles.sin()


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of ``x`` (``batch × heads × seq × head_dim``) by per-position angles (``seq × half``),
    through the kernel registry."""
    return kernels.rotary_embedding(x, cos, sin)


class Attention(nn.Module):
    """Multi-head self-attention with a KV cache."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.n_heads = cfg.n_heads
        self.head_dim = cfg.head_dim
        self.qkv = nn.Linear(cfg.dim, 3 * cfg.dim, bias=False)
        self.out = nn.Linear(cfg.dim, cfg.dim, bias=False)

    def _split(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, s, _ = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.n_heads, self.head_dim).permute(2, 0, 3, 1, 4).unbind(0)
        return q, k, v

    def prefill(
        self, x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Causal attention over a whole prompt; returns the output and this layer's keys and values."""
        b, s, d = x.shape
        q, k, v = self._split(x)
        q, k = apply_rotary(q, cos, sin), apply_rotary(k, cos, sin)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, d)), k, v

    def decode(
        self,
        x: torch.Tensor,
        rope: tuple[torch.Tensor, torch.Tensor],
        k_cache: torch.Tensor,
        v_cache: torch.Tensor,
        pos: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Attend ``q`` new tokens at positions ``pos … pos+q-1`` (``pos`` a 0-d tensor) to the cache.

        Returns the output and the updated caches. ``q`` is 1 for ordinary decoding and larger when draft
        tokens of speculative decoding are verified in one step.
        """
        b, q_len, d = x.shape
        q, k, v = self._split(x)
        q, k = apply_rotary(q, *rope), apply_rotary(k, *rope)
        capacity = k_cache.shape[2]
        positions = pos + torch.arange(q_len, device=x.device)
        # Out-of-place writes keep the graph free of input mutation, which compiles faster and replays cleanly.
        k_cache = k_cache.index_copy(2, positions, k)
        v_cache = v_cache.index_copy(2, positions, v)
        visible = torch.arange(capacity, device=x.device).view(1, capacity) <= positions.view(q_len, 1)
        scores = (q @ k_cache.transpose(-1, -2)) / math.sqrt(self.head_dim)
        probs = torch.softmax(scores.masked_fill(~visible, float("-inf")), dim=-1)
        y = probs @ v_cache
        return self.out(y.transpose(1, 2).reshape(b, q_len, d)), k_cache, v_cache


class SwiGLU(nn.Module):
    """Gated MLP: ``down(silu(gate(x)) * up(x))``."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.gate = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.up = nn.Linear(cfg.dim, cfg.hidden_dim, bias=False)
        self.down = nn.Linear(cfg.hidden_dim, cfg.dim, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Apply the MLP to the last dimension (the gate through the kernel registry's SiLU·mul)."""
        out: torch.Tensor = self.down(kernels.silu_mul(torch.cat((self.gate(x), self.up(x)), dim=-1)))
        return out


class Block(nn.Module):
    """Pre-norm transformer block."""

    def __init__(self, cfg: DecoderConfig) -> None:
        super().__init__()
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.attn = Attention(cfg)
        self.mlp_norm = RMSNorm(cfg.dim, cfg.norm_eps)
        self.mlp = SwiGLU(cfg)


class TinyDecoder(nn.Module):
    """A small decoder-only language model with prefill and single-token decode paths."""

    rope_cos: torch.Tensor
    rope_sin: torch.Tensor

    def __init__(self, cfg: DecoderConfig | None = None, *, seed: int = 0) -> None:
        super().__init__()
        self.cfg = cfg = cfg or DecoderConfig()
        generator = torch.Generator().manual_seed(seed)
        with torch.random.fork_rng(devices=[]):  # default initialisers draw from the global RNG; keep it untouched
            self.embed = nn.Embedding(cfg.vocab_size, cfg.dim)
            self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layers))
            self.norm = RMSNorm(cfg.dim, cfg.norm_eps)
            self.lm_head = nn.Linear(cfg.dim, cfg.vocab_size, bias=False)
        cos, sin = rotary_tables(cfg)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)
        with torch.no_grad():
            for name, param in self.named_parameters():
                if name.endswith("norm.weight"):
                    continue
                param.copy_(torch.randn(param.shape, generator=generator) * (1.0 / math.sqrt(param.shape[-1])))
        self.eval()

    def layers(self) -> list[Block]:
        """The transformer blocks, typed."""
        return [cast(Block, block) for block in self.blocks]

    def prefill(self, tokens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run a prompt of ``batch × seq`` token ids.

        Returns ``batch × seq × vocab`` logits and the keys and values of every layer
        (``layers × batch × heads × seq × head_dim``); :func:`pad_cache` makes room for decode steps.
        """
        s = tokens.shape[1]
        cos, sin = self.rope_cos[:s], self.rope_sin[:s]
        x = self.embed(tokens)
        keys, values = [], []
        for block in self.layers():
            h, k, v = block.attn.prefill(block.attn_norm(x), cos, sin)
            x = x + h
            x = x + block.mlp(block.mlp_norm(x))
            keys.append(k)
            values.append(v)
        return self.lm_head(self.norm(x)), torch.stack(keys), torch.stack(values)

    def decode_step(
        self, tokens: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor, pos: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Run ``batch × q`` new tokens starting at position ``pos`` (0-d int tensor) against the caches.

        Returns ``batch × q × vocab`` logits and the updated key and value caches (new tensors).
        """
        positions = pos + torch.arange(tokens.shape[1], device=tokens.device)
        cos = self.rope_cos.index_select(0, positions)
        sin = self.rope_sin.index_select(0, positions)
        x = self.embed(tokens)
        new_k, new_v = [], []
        for i, block in enumerate(self.layers()):
            h, k, v = block.attn.decode(block.attn_norm(x), (cos, sin), k_cache[i], v_cache[i], pos)
            x = x + h
            x = x + block.mlp(block.mlp_norm(x))
            new_k.append(k)
            new_v.append(v)
        return self.lm_head(self.norm(x)), torch.stack(new_k), torch.stack(new_v)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Prefill logits only, so the model can be used as a plain ``tokens → logits`` module."""
        return self.prefill(tokens)[0]


def pad_cache(cache: torch.Tensor, capacity: int) -> torch.Tensor:
    """Zero-pad a ``layers × batch × heads × seq × head_dim`` cache to ``capacity`` positions."""
    missing = capacity - cache.shape[3]
    if missing < 0:
        raise ValueError(f"cache holds {cache.shape[3]} positions, more than the capacity {capacity}")
    return F.pad(cache, (0, 0, 0, missing)) if missing else cache
