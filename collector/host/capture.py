"""Capturing a request's inputs for replay: safetensors bytes, a size cap and a redaction hook.

Runs on the background thread. Inputs are tenant data: nothing is captured unless
:class:`~inferensics.collector.host.config.CaptureRules` ``enabled`` is set.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import torch

from inferensics.collector.host.config import CaptureRules


@dataclass(frozen=True, slots=True)
class CaptureDecision:
    """Whether to capture and why (``error``, ``nonfinite``, ``rule``)."""

    capture: bool
    why: str = ""


def decide(
    rules: CaptureRules, *, request_id: str, model: str, traffic_class: str, error: bool, nonfinite: bool
) -> CaptureDecision:
    """Apply the rules to one finished request."""
    if not rules.enabled:
        return CaptureDecision(False)
    if rules.models and model not in rules.models:
        return CaptureDecision(False)
    if rules.traffic_classes and traffic_class not in rules.traffic_classes:
        return CaptureDecision(False)
    if error and rules.on_error:
        return CaptureDecision(True, "error")
    if nonfinite and rules.on_nonfinite:
        return CaptureDecision(True, "nonfinite")
    if rules.rate > 0 and _unit(request_id) < rules.rate:
        return CaptureDecision(True, "rule")
    return CaptureDecision(False)


def _unit(key: str) -> float:
    """A deterministic number in [0, 1) from ``key`` (same request id, same decision on every host)."""
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big") / 2**64


def serialize_inputs(rules: CaptureRules, inputs: dict[str, torch.Tensor]) -> bytes | None:
    """Redact, then serialize as safetensors; ``None`` when over the size cap."""
    from safetensors.torch import save

    named = dict(inputs)
    if rules.redact is not None:
        named = rules.redact(named)
    size = sum(t.numel() * t.element_size() for t in named.values())
    if size > rules.max_bytes:
        return None
    tensors = {k: v.detach().cpu().contiguous() for k, v in named.items()}
    data: bytes = save(tensors, metadata={"format": "inferensics-inputs-v1"})
    return data
