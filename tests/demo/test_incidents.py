"""Each injected incident happens for real with plain ``torch.compile`` (no SDK involved).

The recompile limit is lowered to 2 here so that the storm costs two decode compiles instead of four; the
mechanism is the one the demo uses at its limit of 4.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import pytest
import torch

from inferensics.demo import incidents
from inferensics.demo.serving import DispatchModel, ModelServer, apply_dynamo_policy, request_tokens
from inferensics.demo.workload import DECODER_MODEL, POOL_A, RequestSpec

pytestmark = [
    pytest.mark.slow,
    # Raised inside Inductor's own imports on torch 2.13; fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    # Inductor's performance advice on CUDA (TF32, online softmax); these tests also run on GPU hosts.
    pytest.mark.filterwarnings("ignore::UserWarning:torch._inductor"),
    pytest.mark.filterwarnings("ignore:TensorFloat32 tensor cores:UserWarning"),
]


def _spec(spec_tokens: int = 0, incident: Any = "", prompt_len: int = 40) -> RequestSpec:
    return RequestSpec(
        request_id=f"t-{spec_tokens}-{incident}",
        at_s=0.0,
        model=DECODER_MODEL,
        traffic_class="agent",
        tenant="t",
        pool=POOL_A,
        kind="generate",
        batch=2,
        prompt_len=prompt_len,
        new_tokens=6,
        spec_tokens=spec_tokens,
        incident=incident,
        input_seed=11,
    )


@pytest.fixture
def dynamo_settings() -> Iterator[None]:
    """The bundle's Dynamo settings with the limit lowered to 2, restored afterwards."""
    saved = (torch._dynamo.config.automatic_dynamic_shapes, torch._dynamo.config.recompile_limit)
    torch._dynamo.reset()
    apply_dynamo_policy()
    torch._dynamo.config.recompile_limit = 2
    try:
        yield
    finally:
        torch._dynamo.config.automatic_dynamic_shapes, torch._dynamo.config.recompile_limit = saved
        torch._dynamo.reset()


def _graphs() -> int:
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


def _limit_hits() -> int:
    return sum(1 for m in torch._dynamo.utils.get_compilation_metrics() if "recompile limit" in (m.fail_reason or ""))


def test_storm_fills_the_recompile_limit_then_falls_back(dynamo_settings: None) -> None:
    """q=1 compiles prefill and decode; q=3 recompiles decode; q=4 hits the limit and runs eagerly."""
    torch._dynamo.utils.clear_compilation_metrics()
    server = ModelServer(lambda fn, _model: torch.compile(fn), models=(DECODER_MODEL,))
    model = DispatchModel(limit=2)
    seen = []
    for spec in (_spec(0), _spec(2), _spec(3), _spec(2), _spec(0)):
        graphs, hits = _graphs(), _limit_hits()
        expected = model.expect(spec)
        out = server.serve(spec, request_tokens(spec, server.vocab_size))
        seen.append((expected, _graphs() - graphs, _limit_hits() - hits))
        with torch.inference_mode():
            eager = server.decoder.prefill(request_tokens(spec, server.vocab_size).to(server.device))[0][:, -1]
        torch.testing.assert_close(out[:, 0], eager, rtol=1e-4, atol=1e-4)
    assert seen == [("compile", 2, 0), ("recompile", 1, 0), ("fallback", 0, 1), ("hit", 0, 0), ("hit", 0, 0)]


def test_invalid_tokens_raise_before_any_graph_runs() -> None:
    """An out-of-vocabulary id is refused by validation (the compiled embedding would abort the process)."""
    server = ModelServer(lambda fn, _model: fn, models=(DECODER_MODEL,))
    spec = _spec(incident="invalid")
    with pytest.raises(incidents.InvalidRequestError, match="outside the vocabulary"):
        server.serve(spec, request_tokens(spec, server.vocab_size))


def test_poisoned_cache_yields_nan_logits_in_one_sequence() -> None:
    """The corrupt KV page turns one sequence's decode logits NaN and leaves the other finite."""
    server = ModelServer(lambda fn, _model: fn, models=(DECODER_MODEL,))
    spec = _spec(incident="nan")
    out = server.serve(spec, request_tokens(spec, server.vocab_size))
    assert out[1, 1:].isnan().all()
    assert out[0].isfinite().all()
    assert out[1, 0].isfinite().all()  # the prefill logits come before the corrupt page is read


def test_canary_decomposition_changes_output_and_spares_the_baseline(dynamo_settings: None) -> None:
    """Compiled under the fault the output drifts and greedy tokens change; before and after, it matches eager.

    The baseline compile runs first and again after the fault is removed, so a compile-cache entry shared
    between the two would show up as a wrong baseline or a correct candidate.
    """
    spec = replace(_spec(), prompt_len=64, batch=4)

    def compiled_logits() -> tuple[torch.Tensor, torch.Tensor]:
        torch._dynamo.reset()
        server = ModelServer(lambda fn, _model: torch.compile(fn), models=(DECODER_MODEL,))
        tokens = request_tokens(spec, server.vocab_size).to(server.device)
        with torch.inference_mode():
            return server.prefill(tokens)[0], server.decoder.prefill(tokens)[0]

    before, eager = compiled_logits()
    torch.testing.assert_close(before, eager, rtol=1e-4, atol=1e-4)
    with incidents.decomposition_fault():
        faulty, _ = compiled_logits()
    after, _ = compiled_logits()
    torch.testing.assert_close(after, eager, rtol=1e-4, atol=1e-4)
    assert (faulty - eager).abs().max() > 0.1
    agreement = (faulty.argmax(-1) == eager.argmax(-1)).float().mean()
    assert agreement < 0.95
