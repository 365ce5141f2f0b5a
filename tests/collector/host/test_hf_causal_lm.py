"""Model code no one here wrote: a tiny Hugging Face Llama (seeded, built from a config, no download),
compiled through the SDK and served a varied shape distribution; every request lands in the store."""

from __future__ import annotations

import random

import pytest
import torch

from inferensics.collector.host import Tracker
from inferensics.schema import CompileEvent, RequestEvent
from inferensics.schema.store import Store

transformers = pytest.importorskip("transformers")


@pytest.mark.slow
def test_llama_served_through_sdk(tracker: Tracker, store: Store) -> None:
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        vocab_size=96,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=64,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    compiled = tracker.compile(model)
    rng = random.Random(7)
    # Batch sizes from 2 up: size 1 is specialised by Dynamo and would only add compile time here.
    shapes = [(2, 4), (2, 4)] + [(rng.choice([2, 3]), rng.choice([3, 5, 8, 13, 16])) for _ in range(10)]
    ids = []
    with torch.no_grad():
        for i, (b, s) in enumerate(shapes):
            rid = f"hf-{i:02d}"
            ids.append(rid)
            input_ids = torch.randint(0, config.vocab_size, (b, s), generator=torch.Generator().manual_seed(i))
            with tracker.request(
                rid, traffic_class="batch", tenant="t1", shape=(b, s), inputs={"input_ids": input_ids}
            ) as req:
                out = compiled(input_ids=input_ids, use_cache=False)
                req.set_output(out.logits)
            if i == 0:
                eager = model(input_ids=input_ids, use_cache=False).logits
                torch.testing.assert_close(out.logits, eager, rtol=1e-4, atol=1e-4)
    tracker.shutdown()
    assert tracker.stats()["dropped"] == 0

    rows = {r.request_id: r for r in store.select_events(RequestEvent)}
    assert sorted(rows) == ids
    assert rows["hf-00"].outcome == "compile"
    assert rows["hf-01"].outcome == "hit"
    outcomes = {r.outcome for r in rows.values()}
    assert outcomes <= {"compile", "recompile", "hit"}
    assert "recompile" in outcomes
    for rid, (b, s) in zip(ids, shapes, strict=True):
        r = rows[rid]
        assert r.shape == f"{b}x{s}"
        assert r.tenant == "t1"
        assert r.traffic_class == "batch"
        assert r.graph_keys
        assert all(r.graph_keys)
        assert all(r.graph_artifacts)
        assert len(r.fp_argmax_head) == min(16, b * s)
        assert r.fp_nan == 0
        assert r.fp_argmax_digest
        assert r.input_digest
    recompiled = [r for r in rows.values() if r.outcome == "recompile"]
    compiles = {c.request_id for c in store.select_events(CompileEvent) if c.trigger == "recompile"}
    assert {r.request_id for r in recompiled} == compiles  # every recompile is the request that caused it
