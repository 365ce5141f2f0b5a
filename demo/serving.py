"""Serving one request of the workload: inputs, padding under the policy, compiled calls, the output.

:class:`ModelServer` is independent of the SDK: it takes a ``compile_fn`` (plain ``torch.compile`` in the
incident tests, ``tracker.compile`` in the demo's workers). :class:`DispatchModel` predicts, from the policy
alone, how Dynamo will dispatch each request (``hit``, ``compile``, ``recompile``, ``fallback``, ``eager``,
``error``): the ground truth the demo's test holds the SDK's classification to.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

import torch
from torch.nn import functional as F  # noqa: N812 - the conventional alias

from inferensics.demo import incidents
from inferensics.demo.models.decoder import TinyDecoder, pad_cache
from inferensics.demo.workload import (
    DECODER_MODEL,
    HF_MODEL,
    RECOMPILE_LIMIT,
    RequestSpec,
    bypasses_compile,
    padded_batch,
    padded_capacity,
    padded_seq,
)

CompileFn = Callable[[Callable[..., Any], str], Callable[..., Any]]
"""Turns a function or module into its compiled version: ``compile_fn(fn, model)``, ``model`` the label of the
model ``fn`` belongs to (a tracker compiles it under that name, so one worker's two models keep their own rows)."""

_PRECEDENCE = ("error", "fallback", "recompile", "compile", "hit", "eager")


class DispatchModel:
    """Predicts Dynamo's dispatch for each frame call under the policy (one instance per process).

    A frame's cache entries are keyed by the values of its static dimensions; a call with a new key adds an
    entry (``compile`` for the frame's first, ``recompile`` after) until the frame holds ``limit`` entries,
    after which new keys run eagerly (``fallback``).
    """

    def __init__(self, limit: int = RECOMPILE_LIMIT) -> None:
        self.limit = limit
        self.entries: dict[str, list[Hashable]] = {}

    def call(self, frame: str, key: Hashable = ()) -> str:
        """The dispatch of one call of ``frame`` with static key ``key``."""
        entries = self.entries.setdefault(frame, [])
        if key in entries:
            return "hit"
        if len(entries) >= self.limit:
            return "fallback"
        entries.append(key)
        return "compile" if len(entries) == 1 else "recompile"

    def expect(self, spec: RequestSpec) -> str:
        """The outcome of a whole request: the most severe of its calls (``error`` > ``fallback`` > ...)."""
        if spec.incident == "invalid":
            return "error"
        if bypasses_compile(spec):
            return "eager"
        if spec.model == HF_MODEL:
            calls = [self.call("hf")]
        else:
            calls = [self.call("prefill"), self.call("decode", spec.spec_tokens + 1)]
        return min(calls, key=_PRECEDENCE.index)


def request_tokens(spec: RequestSpec, vocab_size: int) -> torch.Tensor:
    """The request's token ids (``batch × prompt_len``), a pure function of ``spec.input_seed``."""
    generator = torch.Generator().manual_seed(spec.input_seed)
    tokens = torch.randint(0, vocab_size, (spec.batch, spec.prompt_len), generator=generator)
    return incidents.make_invalid(tokens, vocab_size) if spec.incident == "invalid" else tokens


def apply_dynamo_policy() -> None:
    """Set the policy's process-wide Dynamo settings (automatic dynamic shapes off, the recompile limit).

    Called by each serving worker and by the release-bundle build, so the bundles record, and their hosts
    reinstall, the settings the workers serve with.
    """
    torch._dynamo.config.automatic_dynamic_shapes = False
    torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT


_F = TypeVar("_F", bound=Callable[..., Any])


# The serving glue below (padding, dynamic marks, the generation loop) is never traced: a release-bundle
# build runs it inside ``torch.compile`` so that exactly the frames the workers compile (the decoder's
# ``prefill`` and ``decode_step``) are compiled, with the same inputs and marks. In a worker it runs outside
# any compile and the markers change nothing.
def never_traced(fn: _F) -> _F:
    """``fn`` and everything it calls run eagerly, even inside a compiled function."""
    return cast(_F, torch.compiler.disable(fn))  # type: ignore[no-untyped-call]


def calls_traced(fn: _F) -> _F:
    """``fn`` itself runs eagerly inside a compiled function; the functions it calls are compiled (each its
    own frame, as when compiled one by one)."""
    return cast(_F, torch.compiler.disable(fn, recursive=False))  # type: ignore[no-untyped-call]


@never_traced
def _mark_dynamic(tensor: torch.Tensor, *dims: int) -> torch.Tensor:
    for d in dims:
        torch._dynamo.mark_dynamic(tensor, d)
    return tensor


def _capacity(spec: RequestSpec, padded_seq_len: int) -> int:
    """The KV-cache capacity of a request: its prompt and every decode step, padded by the policy."""
    q = spec.spec_tokens + 1
    return padded_capacity(max(padded_seq_len, spec.prompt_len + math.ceil(spec.new_tokens / q) * q))


_pad_cache = never_traced(pad_cache)
_poison_cache = never_traced(incidents.poison_cache)


class ModelServer:
    """Both demo models, compiled with ``compile_fn``, served request by request.

    Args:
        compile_fn: Compiles a callable of a model (applied to the decoder's prefill and decode step with
            :data:`DECODER_MODEL`, and to the HF scorer with :data:`HF_MODEL`).
        models: Which models this worker serves.
        device: Where the models run (``cuda`` when available, else ``cpu``).
        seed: Weight seed (the same in every worker, so bundles are compared on the same weights).
    """

    def __init__(
        self,
        compile_fn: CompileFn,
        models: tuple[str, ...] = (DECODER_MODEL, HF_MODEL),
        device: torch.device | None = None,
        seed: int = 0,
    ) -> None:
        self.device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
        self.models = models
        self.dispatch = DispatchModel()
        self.decoder = TinyDecoder(seed=seed).to(self.device)
        self.vocab_size = self.decoder.cfg.vocab_size
        self.prefill = compile_fn(self.decoder.prefill, DECODER_MODEL)
        self.decode = compile_fn(self.decoder.decode_step, DECODER_MODEL)
        self.scorer: torch.nn.Module | None = None
        self.score: Callable[..., Any] | None = None
        if HF_MODEL in models:
            from inferensics.demo.models.hf import build_hf_model

            self.scorer = build_hf_model(seed).to(self.device)
            self.score = compile_fn(self.scorer, HF_MODEL)

    def serve(self, spec: RequestSpec, tokens: torch.Tensor, k_page: torch.Tensor | None = None) -> torch.Tensor:
        """Run one request; returns the logits its output fingerprint is taken from.

        Args:
            spec: The request.
            tokens: Its token ids.
            k_page: A key cache the request resumes from (see :meth:`generate`).

        Raises:
            InvalidRequestError: a token id is outside the vocabulary.
        """
        incidents.validate_tokens(tokens, self.vocab_size)
        tokens = tokens.to(self.device)
        with torch.inference_mode():
            if spec.model == HF_MODEL:
                return self._score(spec, tokens)
            return self.generate(spec, tokens, k_page)

    def corrupt_page(self, spec: RequestSpec, tokens: torch.Tensor) -> torch.Tensor:
        """The ``nan`` incident's resumed key-cache page: the prompt's keys (computed eagerly) at the
        request's cache capacity, with one NaN position (:func:`incidents.poison_cache`).

        The worker captures it with the request's tokens, so replay sees the input at fault.
        """
        with torch.inference_mode():
            padded = self._pad(tokens.to(self.device))
            _, k, _ = self.decoder.prefill(padded)
            return incidents.poison_cache(pad_cache(k, _capacity(spec, padded.shape[1])))

    @never_traced
    def _pad(self, tokens: torch.Tensor) -> torch.Tensor:
        b, s = tokens.shape
        return F.pad(tokens, (0, padded_seq(s) - s, 0, padded_batch(b) - b))

    def _score(self, spec: RequestSpec, tokens: torch.Tensor) -> torch.Tensor:
        if self.scorer is None or self.score is None:
            raise ValueError(f"this worker does not serve {HF_MODEL}")
        b, s = tokens.shape
        padded = self._pad(tokens)
        eager = bypasses_compile(spec)
        logits: torch.Tensor = self.scorer(padded) if eager else self.score(_mark_dynamic(padded, 0, 1))
        return logits[:b, :s]

    @calls_traced
    def generate(
        self, spec: RequestSpec, tokens: torch.Tensor, k_page: torch.Tensor | None = None, *, greedy: bool = True
    ) -> torch.Tensor:
        """Generation: prefill, then decode steps of ``q = spec_tokens + 1`` tokens each.

        With speculative decoding the step verifies the next token plus ``spec_tokens`` draft tokens (the
        drafts are synthetic; every draft is accepted, which keeps the step count fixed).

        Args:
            spec: The request.
            tokens: Its ``batch × prompt`` token ids (unpadded).
            k_page: Keys resumed from the cache store in place of the prompt's own (padded batch, the
                request's capacity; :meth:`corrupt_page`); without it a ``nan`` request poisons its own.
            greedy: Each step continues from the last step's argmax (serving); ``False``: from the prompt's
                last token counting up, so outputs compare position by position across compilers.
        """
        eager = bypasses_compile(spec)
        prefill = self.decoder.prefill if eager else self.prefill
        decode = self.decoder.decode_step if eager else self.decode
        b, s = tokens.shape
        padded = self._pad(tokens)
        logits, k, v = prefill(padded if eager else _mark_dynamic(padded, 0, 1))
        q = spec.spec_tokens + 1
        steps = math.ceil(spec.new_tokens / q)
        capacity = _capacity(spec, padded.shape[1])
        k, v = _pad_cache(k, capacity), _pad_cache(v, capacity)
        if k_page is not None:
            k = k_page.to(device=k.device, dtype=k.dtype)
        elif spec.incident == "nan":
            k = _poison_cache(k)
        outputs = [logits[:, s - 1 : s]]
        next_token = logits[:, s - 1].argmax(-1) if greedy else padded[:, s - 1]
        offsets = torch.arange(q, device=self.device)
        pos = s
        for _ in range(steps):
            step = (next_token.view(-1, 1) + offsets) % self.vocab_size
            if not eager:
                step, k, v = _mark_dynamic(step, 0), _mark_dynamic(k, 1, 3), _mark_dynamic(v, 1, 3)
            out, k, v = decode(step, k, v, torch.tensor(pos, device=self.device))
            outputs.append(out)
            next_token = out[:, -1].argmax(-1) if greedy else (step[:, -1] + 1) % self.vocab_size
            pos += q
        return torch.cat(outputs, dim=1)[:b]
