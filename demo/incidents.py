"""The incidents the demo injects, and the mechanisms that produce them for real.

Nothing here fakes an event: each incident is a real behaviour of ``torch.compile`` (or of the serving
code) that the host SDK has to observe.

1. **Recompilation storm** (``storm``). Partway through the run the ``agent`` tenant turns on speculative
   decoding: each decode step now verifies ``k`` draft tokens, so the decode graph sees ``k + 1`` tokens
   per step. The policy keeps that dimension static, so every new step size is a guard failure and a
   recompile of the decode frame (:data:`inferensics.demo.workload.STORM_BURST` opens with a burst).
2. **Eager fallback after the recompile limit** (``fallback``). The storm fills the decode frame's
   ``recompile_limit`` (4 entries): from then on Dynamo runs any further new step size eagerly, silently.
3. **Numeric fault in the canary bundle only** (``canary``). The candidate release bundle
   (:mod:`inferensics.demo.bundles`) records a "fast SiLU" decomposition (:func:`fast_silu`, the
   sigmoid-approximation constant of GELU applied to SiLU) as a compiler customisation, and hosts loading it
   register it in Inductor's decomposition table. Both models' MLPs use SiLU, so the candidate's logits
   drift and greedy tokens change. The FX-graph and AOTAutograd cache keys do not cover a patched
   decomposition table, so installing a customisation salts them and the candidate never shares an entry
   with the baseline (tests use :func:`decomposition_fault`, salted with :data:`CANARY_CACHE_SALT`).
4. **Failing requests with captured inputs** (``invalid`` and ``nan``). A client sends token ids outside
   the vocabulary: the server's validation raises :class:`InvalidRequestError` inside the request (the
   compiled embedding would abort the whole process with an out-of-bounds index, so the server must
   check first). A batch request resumes from a corrupt KV-cache page (:func:`poison_cache`): its logits
   come out NaN. Both kinds are the requests whose inputs the SDK captures for replay.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch

INCIDENTS: tuple[str, ...] = ("storm", "fallback", "canary", "invalid", "nan")
"""Names of the injected incidents, as reported by the demo."""

FAULT_OP = "aten.silu.default"
"""The operator whose decomposition the candidate bundle replaces."""
CANARY_CACHE_SALT = "inferensics-demo-candidate:fast_silu-v1"
"""``torch.compiler.config.cache_key_tag`` of the candidate: keeps its compile-cache entries apart."""
INVALID_TOKEN_OFFSET = 7
"""An invalid request carries the token id ``vocab_size + INVALID_TOKEN_OFFSET``."""


class InvalidRequestError(ValueError):
    """A request's inputs fail validation (for example a token id outside the vocabulary)."""


def fast_silu(x: torch.Tensor) -> torch.Tensor:
    """The faulty decomposition: ``x * sigmoid(1.702 x)`` instead of ``x * sigmoid(x)``."""
    return x * torch.sigmoid(1.702 * x)


def _decomposition_tables() -> tuple[dict[Any, Callable[..., Any]], Callable[[], dict[Any, Callable[..., Any]]]]:
    from torch._inductor import decomposition

    return decomposition.decompositions, decomposition.fast_random_decomps


def install_decomposition_fault() -> None:
    """Register :func:`fast_silu` for ``aten.silu`` in Inductor, for the rest of this process.

    Also salts the compile caches. Inductor caches its merged decomposition table
    (``fast_random_decomps``), so the cache is cleared; without that a process that already compiled
    would keep the correct table.
    """
    table, merged = _decomposition_tables()
    table[torch.ops.aten.silu.default] = fast_silu
    merged.cache_clear()  # type: ignore[attr-defined]
    torch.compiler.config.cache_key_tag = CANARY_CACHE_SALT
    torch._dynamo.reset()


@contextmanager
def decomposition_fault() -> Iterator[None]:
    """:func:`install_decomposition_fault` for the duration of a block (tests), then restore everything."""
    table, merged = _decomposition_tables()
    op = torch.ops.aten.silu.default
    saved, saved_tag = table.get(op), torch.compiler.config.cache_key_tag
    install_decomposition_fault()
    try:
        yield
    finally:
        if saved is None:
            table.pop(op, None)
        else:
            table[op] = saved
        merged.cache_clear()  # type: ignore[attr-defined]
        torch.compiler.config.cache_key_tag = saved_tag
        torch._dynamo.reset()


def validate_tokens(tokens: torch.Tensor, vocab_size: int) -> None:
    """Raise :class:`InvalidRequestError` when a token id is outside ``[0, vocab_size)``."""
    bad = (tokens < 0) | (tokens >= vocab_size)
    if bool(bad.any()):
        row, col = (int(i) for i in bad.nonzero()[0])
        raise InvalidRequestError(
            f"token id {int(tokens[row, col])} at [{row}, {col}] is outside the vocabulary (0..{vocab_size - 1})"
        )


def make_invalid(tokens: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """A copy of ``tokens`` with one id past the vocabulary (a client with the wrong tokenizer)."""
    bad = tokens.clone()
    bad[0, tokens.shape[1] // 2] = vocab_size + INVALID_TOKEN_OFFSET
    return bad


def poison_cache(k_cache: torch.Tensor, row: int = 1) -> torch.Tensor:
    """A copy of a ``layers × batch × heads × capacity × head_dim`` key cache with one NaN page.

    Position 0 of sequence ``row`` becomes NaN in every layer, so every later attention over that sequence,
    compiled or eager, yields NaN logits, while the other sequences of the batch are untouched.
    """
    poisoned = k_cache.clone()
    poisoned[:, min(row, k_cache.shape[1] - 1), :, 0, :] = float("nan")
    return poisoned
