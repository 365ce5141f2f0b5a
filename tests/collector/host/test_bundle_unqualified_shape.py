"""A request that a dynamic bundle's hit served at sizes the bundle never qualified is marked on its stored row.

A graph compiled with symbolic sizes serves every size its guards admit, so a call at a size the build never ran
is a bundle hit like any other. The bundle session reports each such call; the host SDK counts it in ``stats()``,
stores the sizes on the request (``attrs['bundle_unqualified_shape']``: every such shape once, up to a bound;
``attrs['bundle_unqualified_calls']``: the request's calls at them) and logs each shape once, up to a bound. Real
parts: a dynamic bundle built on batch sizes 2 and 3, ``tracker.compile(bundle=...)``, a real chDB store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from inferensics.collector.host import SdkConfig, bundle_guard, instrument, records
from inferensics.schema.request_attrs import BUNDLE_STATUS, BUNDLE_UNQUALIFIED_CALLS, BUNDLE_UNQUALIFIED_SHAPE
from inferensics.schema.store import Store
from tests.bundle.models import inputs, tiny_mlp

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def dynamic_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[b.BuildResult, Path]:
    """The tiny MLP built with dynamic shapes on batch sizes 2 and 3, and the public key that trusts it."""
    keys = tmp_path_factory.mktemp("keys")
    private, public, _ = b.generate_key(keys / "builder")
    spec = b.BuildSpec(
        model="tests.bundle.models:tiny_mlp", inputs="tests.bundle.models:inputs",
        shapes=b.ShapeDistribution.of([(2, 8), (3, 8)], [3, 1]), dynamic=True, advise=False, name="tiny", repeats=1,
    )  # fmt: skip
    built = b.build(spec, b.load_signing_key(private), tmp_path_factory.mktemp("dynamic") / "bundle")
    return built, public


@pytest.fixture
def _fresh_compiler(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """An empty Inductor cache (the bundle's artifacts serve the hit), and the compiler state the bundle's load
    installs taken out again afterwards."""
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    with torch_adapter.compiler_state_restored():
        torch_adapter.reset_compiler()
        yield


@pytest.mark.usefixtures("_fresh_compiler")
def test_a_request_served_at_an_unqualified_shape_is_counted_marked_and_logged_once_per_shape(
    dynamic_bundle: tuple[b.BuildResult, Path],
    store: Store,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built, public = dynamic_bundle
    (graph,) = built.manifest.graphs
    assert graph.qualified_shapes == ["[2,8]", "[3,8]"]
    monkeypatch.setattr(bundle_guard, "LOGGED_SHAPES_LIMIT", 2)  # the third new shape is counted, not logged
    monkeypatch.setattr(records, "REQUEST_UNQUALIFIED_SHAPES", 2)  # a request's third shape: its calls counted
    caplog.set_level(logging.WARNING, logger="inferensics.collector.host")
    tracker = instrument(store=store, host="h", hw_pool="cpu", model="tiny", config=SdkConfig(batch_rows=10))
    try:
        compiled = tracker.compile(tiny_mlp(), bundle=built.directory, keyring=public, on_bundle_miss="refuse")
        requests = {
            "r2": [(2, 8)],
            "r5": [(5, 8)],
            "r3": [(3, 8)],
            "r5-again": [(5, 8)],
            "r7": [(7, 8)],
            "r-mixed": [(3, 8), (9, 8), (7, 8)],  # every unqualified shape, in the order of its first call
            "r-again": [(5, 8), (3, 8), (5, 8)],  # each call counted, each shape named once
            "r-many": [(4, 8), (5, 8), (6, 8), (5, 8), (4, 8), (6, 8)],  # two named, the other's calls counted
        }
        with torch.inference_mode():
            for rid, shapes in requests.items():
                with tracker.request(rid, shape=shapes[0]) as req:
                    for shape in shapes:
                        out = compiled(*inputs(shape))
                    req.set_output(out)
            compiled(*inputs((6, 8)))  # outside any request: counted only
        tracker.flush()
        stats = tracker.stats()
    finally:
        tracker.shutdown()

    rows = store.query_rows(
        f"SELECT request_id, attrs[%(status)s], mapContains(attrs, %(shape)s), attrs[%(shape)s], attrs[%(calls)s] "
        f"FROM {store.database}.requests WHERE bundle_id = %(b)s",
        {"status": BUNDLE_STATUS, "shape": BUNDLE_UNQUALIFIED_SHAPE, "calls": BUNDLE_UNQUALIFIED_CALLS,
         "b": built.bundle_id},
    )  # fmt: skip
    assert {r[0]: r[1:] for r in rows} == {
        "r2": ("hit", False, "", ""),
        "r5": ("hit", True, "[5,8]", "1"),
        "r3": ("hit", False, "", ""),
        "r5-again": ("hit", True, "[5,8]", "1"),
        "r7": ("hit", True, "[7,8]", "1"),
        "r-mixed": ("hit", True, "[9,8], [7,8]", "2"),
        "r-again": ("hit", True, "[5,8]", "2"),
        "r-many": ("hit", True, "[4,8], [5,8] (+2 calls at other shapes)", "6"),
    }
    assert (stats["bundle_hit_graphs"], stats["bundle_miss_graphs"]) == (1, 0)  # one artifact served every size
    assert stats["bundle_unqualified_shape_calls"] == 14  # 5, 5, 7, 9, 7, 5, 5, six in r-many in requests; 6 outside
    said = [r.getMessage() for r in caplog.records if "never qualified" in r.getMessage()]
    assert len(said) == 2, said
    # The request's shape was 5x8: saying the graph's sizes were "not the request's input shape" confused.
    assert "at graph sizes [5,8], which it never qualified" in said[0], said
    assert "at graph sizes [7,8]" in said[1], said  # [9,8] was the third new shape: over the bound, counted only
    qualified = "(qualified: input shapes 2x8, 3x8; graph sizes [2,8], [3,8])"
    assert all(qualified in line and built.bundle_id[:16] in line for line in said), said
    assert all(f"attrs['{BUNDLE_UNQUALIFIED_SHAPE}']" in line for line in said), said


def test_a_tracker_without_a_bundle_counts_no_unqualified_shape(store: Store) -> None:
    tracker = instrument(store=store, host="h", hw_pool="cpu", model="plain")
    try:
        stats = tracker.stats()
        assert stats["bundle_unqualified_shape_calls"] == 0  # always present, as every bundle counter
        assert stats["bundle_dynamic_overridden"] == 0
    finally:
        tracker.shutdown()


def test_the_request_shape_is_named_beside_graph_sizes_only_where_it_differs() -> None:
    note = bundle_guard._request_shape_note
    assert note("[5,8]", (5, 8)) == ""
    assert note("[5,8]", "5x8") == ""
    assert note("[4,128]", (4, 120)) == " (the graph's dynamic sizes; the request's input shape is 4x120)"
    assert note("[4,1];[2,4,4,128,16]", (4, 1)) == " (the graph's dynamic sizes; the request's input shape is 4x1)"
    assert note("[5,8]", None) == " (its dynamic inputs' sizes, after any padding the model does)"
