"""The kernel registry: one semantic contract per op, many providers, dispatch on evidence.

Each op (``rms_norm``, ``fused_add_rms_norm``, ``silu_mul``, ``rotary_embedding``,
``paged_decode_attention``) is defined by its reference implementation and served by the first provider in
its priority list whose requirements the call meets: our Triton kernels, a vendor path, Inductor's code or
the reference itself, always last. Every decision is recorded; qualification changes priorities only on
measured evidence, and another process follows that evidence through :func:`apply_evidence` (a bundle that
carries it applies it on load). Imports only torch, triton and ``inferensics.schema``: it runs on a bare GPU host.

Example:
    >>> import torch
    >>> from inferensics import kernels
    >>> x = torch.ones(2, 8)
    >>> kernels.rms_norm(x, torch.ones(8), 1e-6).shape
    torch.Size([2, 8])
    >>> decision = kernels.registry().op("rms_norm").select((x, torch.ones(8), 1e-6))  # what that call got
    >>> decision.op, decision.signature
    ('rms_norm', 'float32[2,8]@cpu float32[8]@cpu')

    ``kernels.registry().decisions()`` lists every decision kept, ordered by op and signature (not by time).
"""

from __future__ import annotations

if __name__ != "inferensics.kernels":  # this folder imported by its bare name: a checkout's root is on sys.path
    raise ImportError(
        f"{__file__} is inferensics' kernels/ folder, imported as the top-level module {__name__!r} because the "
        "checkout's root is on sys.path (a script run from there); Hugging Face's `kernels`, which transformers "
        "imports, has that name: run the script from another directory, or with `python -P`"
    )

from typing import Any

import torch

from inferensics.kernels.decisions import Decision, DecisionLog, EvidenceApplication
from inferensics.kernels.evidence import EvidenceError, apply_evidence
from inferensics.kernels.op import REFERENCE, SemanticOp
from inferensics.kernels.provider import Provider
from inferensics.kernels.qualify import QualifyOptions, QualifyResult, qualify
from inferensics.kernels.registry import Registry, canonical_digest, default_registry, environment
from inferensics.kernels.requirements import CallContext, Requirements
from inferensics.kernels.samples import Samples
from inferensics.kernels.signatures import signature
from inferensics.kernels.tolerance import Rule, ToleranceSpec, Verdict, compare

_REGISTRY = default_registry()  # defines the torch.ops.inferensics operators the functions below run
_RMS_NORM, _FUSED_ADD_RMS_NORM, _SILU_MUL, _ROTARY, _PAGED_ATTENTION = (
    _REGISTRY.ops[name]
    for name in ("rms_norm", "fused_add_rms_norm", "silu_mul", "rotary_embedding", "paged_decode_attention")
)


def registry() -> Registry:
    """The process's kernel registry."""
    return default_registry()


def registry_state() -> dict[str, Any]:
    """Registry state and selection policy as JSON-ready data with a digest (what a bundle records)."""
    return default_registry().state()


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm of the last dimension of ``x`` (see ``ops.norm.rms_norm_reference``)."""
    out: torch.Tensor = _RMS_NORM(x, weight, eps)
    return out


def fused_add_rms_norm(
    x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(rms_norm(x + residual), x + residual)``."""
    out, res = _FUSED_ADD_RMS_NORM(x, residual, weight, eps)
    return out, res


def silu_mul(x: torch.Tensor) -> torch.Tensor:
    """``silu(x[..., :d]) * x[..., d:]``."""
    out: torch.Tensor = _SILU_MUL(x)
    return out


def rotary_embedding(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """NeoX rotary embedding of ``x`` (``[T, H, D]`` or ``[B, H, S, D]``) by per-position ``cos``/``sin``."""
    out: torch.Tensor = _ROTARY(x, cos, sin)
    return out


def paged_decode_attention(  # noqa: PLR0917 (the op's schema)
    q: torch.Tensor,
    k_cache: torch.Tensor,
    v_cache: torch.Tensor,
    block_table: torch.Tensor,
    seq_lens: torch.Tensor,
    scale: float,
) -> torch.Tensor:
    """Decode attention of ``q`` (``[B, Hq, D]``) over paged caches through ``block_table``."""
    out: torch.Tensor = _PAGED_ATTENTION(q, k_cache, v_cache, block_table, seq_lens, scale)
    return out


__all__ = [
    "REFERENCE",
    "CallContext",
    "Decision",
    "DecisionLog",
    "EvidenceApplication",
    "EvidenceError",
    "Provider",
    "QualifyOptions",
    "QualifyResult",
    "Registry",
    "Requirements",
    "Rule",
    "Samples",
    "SemanticOp",
    "ToleranceSpec",
    "Verdict",
    "apply_evidence",
    "canonical_digest",
    "compare",
    "environment",
    "fused_add_rms_norm",
    "paged_decode_attention",
    "qualify",
    "registry",
    "registry_state",
    "rms_norm",
    "rotary_embedding",
    "signature",
    "silu_mul",
]
