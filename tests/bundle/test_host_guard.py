"""The host SDK under a bundle: verified registration, per-request hit/miss, bundle-miss rows naming the
differing factors, the compile budget, and a refused bundle registered with its cause (real chDB store)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from inferensics.collector.host import SdkConfig, instrument
from inferensics.schema.store import Store
from tests.bundle.conftest import Keys
from tests.bundle.models import inputs, tiny_mlp

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    torch_adapter.reset_compiler()


def test_requests_carry_the_bundle_and_misses_are_recorded(
    built: b.BuildResult, keys: Keys, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inferensics.collector.host")
    tracker = instrument(store=store, host="h1", hw_pool="cpu", model="tiny", config=SdkConfig(batch_rows=10))
    try:
        compiled = tracker.compile(
            tiny_mlp(), bundle=built.directory, keyring=keys.public, on_bundle_miss="compile",
            compile_budget=b.CompileBudget(max_compiles=1),
        )  # fmt: skip
        with torch.inference_mode():
            for rid, shape in [("r-hit", (2, 8)), ("r-miss", (5, 8)), ("r-budget", (6, 8)), ("r-hit2", (3, 8))]:
                with tracker.request(rid, shape=shape) as req:
                    req.set_output(compiled(*inputs(shape)))
        tracker.flush()
        stats = tracker.stats()
    finally:
        tracker.shutdown()
    db = store.database
    reg = store.query_rows(f"SELECT bundle_id, signature_state, builder_keyid, length(graph_keys) FROM {db}.bundles")
    assert reg == [(built.bundle_id, "verified", keys.key.keyid, 2)]
    rows = dict(
        store.query_rows(
            f"SELECT request_id, attrs['bundle_status'] FROM {db}.requests WHERE bundle_id = %(b)s",
            {"b": built.bundle_id},
        )
    )
    assert rows == {"r-hit": "hit", "r-miss": "miss", "r-budget": "miss", "r-hit2": "hit"}
    misses = store.query_rows(f"SELECT request_id, action, reason, factors FROM {db}.bundle_misses ORDER BY request_id")
    assert [(m[0], m[1]) for m in misses] == [("r-budget", "eager"), ("r-miss", "compiled")]
    assert "compile budget spent" in misses[0][2]
    assert all(any(f.startswith("accepted_shapes:") for f in m[3]) for m in misses)
    assert stats["bundle_hit_graphs"] == 2
    assert stats["bundle_miss_graphs"] == 2
    assert stats["bundle_misses"] == 2  # rows exported to the bundle_misses table
    # A host whose graphs drifted from its bundle says so once per reason (it was silent but for stats and rows).
    said = [r.getMessage() for r in caplog.records if "is not in the bundle" in r.getMessage()]
    assert len(said) == 2, said
    assert any(m[2] in line and "compiled here" in line for m in misses[1:] for line in said), said
    assert any(m[2] in line and "run eagerly" in line for m in misses[:1] for line in said), said


def test_refused_bundle_is_registered_with_its_cause(built: b.BuildResult, keys: Keys, store: Store,
                                                     tmp_path: Path) -> None:  # fmt: skip
    states = tmp_path / "states.json"
    b.BundleStates(revoked=frozenset({built.bundle_id})).write(states)
    tracker = instrument(store=store, host="h2", hw_pool="cpu", model="tiny")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("INFERENSICS_BUNDLE_STATES", str(states))
            with pytest.raises(b.BundleError, match="revoked"):
                tracker.compile(tiny_mlp(), bundle=built.directory, keyring=keys.public)
        tracker.flush()
        assert tracker.stats()["bundle_refused_revoked"] == 1
    finally:
        tracker.shutdown()
    rows = store.query_rows(f"SELECT bundle_id, signature_state FROM {store.database}.bundles")
    assert rows == [(built.bundle_id, "revoked")]


def test_a_bundle_without_a_keyring_says_what_to_pass_in_python(built: b.BuildResult, store: Store) -> None:
    """``tracker.compile(model, bundle=DIR)`` with no keyring told a Python caller to "pass --keyring"."""
    tracker = instrument(store=store, host="h3", hw_pool="cpu", model="tiny")
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.delenv("INFERENSICS_BUNDLE_KEYRING", raising=False)
            with pytest.raises(b.BundleError, match=r"keyring=\) or set \$INFERENSICS_BUNDLE_KEYRING") as info:
                tracker.compile(tiny_mlp(), bundle=built.directory)
        assert info.value.cause == "bad_key"
    finally:
        tracker.shutdown()
