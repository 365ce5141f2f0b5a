"""A host that asks ``tracker.compile(dynamic=True)`` of a bundle built static (the default of ``bundle build``).

The bundle's recorded options win, so the model compiles static and every batch size the bundle did not qualify is a
bundle miss. That used to happen without a word: the host now says so once at load (and counts it), and each miss on
sizes alone names the model's own input (not its parameters, which Dynamo lifts to graph inputs) and says the two ways
to cover it: this shape, or ``--dynamic``. Real parts: a static bundle of the tiny MLP built at 2x8, a real
``torch.compile`` through the host SDK, a real chDB store.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from inferensics import bundle as b
from inferensics.bundle import torch_adapter
from inferensics.bundle.shape_factor import STATIC_ADVICE
from inferensics.collector.host import SdkConfig, instrument
from inferensics.schema.store import Store
from tests.bundle.conftest import Keys, spec
from tests.bundle.models import inputs, tiny_mlp

pytestmark = pytest.mark.slow

OVERRIDDEN = "built static: the bundle's compile options win over dynamic=True"
MISSED_ON_SIZE = (
    "accepted_shapes: inputs not qualified: input 1 of 1 is float32[5,8], the bundle qualified float32[2,8] "
    f"(4 parameters equal); {STATIC_ADVICE}"
)
"""The tiny MLP has one input and four parameters (two Linear layers' weights and biases)."""


@pytest.fixture(scope="module")
def static_bundle(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> b.BuildResult:
    """The tiny MLP built as ``bundle build`` builds by default: static, here at one shape."""
    built = b.build(spec(shapes=b.ShapeDistribution.of([(2, 8)], [1])), keys.key, tmp_path_factory.mktemp("s") / "b")
    assert built.manifest.identity["settings"]["compile"]["dynamic"] is False
    return built


@pytest.fixture
def fresh(tmp_path: Path) -> Iterator[None]:
    """An empty compile cache (the bundle's artifacts serve the hit) and this test's compiler state kept in it."""
    with torch_adapter.temporary_cache_dir(str(tmp_path / "cache")), torch_adapter.compiler_state_restored():
        torch_adapter.reset_compiler()
        yield


def _serve(
    built: b.BuildResult, keys: Keys, store: Store, shapes: list[tuple[int, int]], dynamic: bool | None = None
) -> dict[str, int]:
    tracker = instrument(store=store, host="h", hw_pool="cpu", model="tiny", config=SdkConfig(batch_rows=10))
    try:
        compiled = tracker.compile(tiny_mlp(), bundle=built.directory, keyring=keys.public, dynamic=dynamic)
        with torch.inference_mode():
            for i, shape in enumerate(shapes):
                with tracker.request(f"r{i}-{shape[0]}", shape=shape) as req:
                    req.set_output(compiled(*inputs(shape)))
        tracker.flush()
        return tracker.stats()
    finally:
        tracker.shutdown()


@pytest.mark.usefixtures("fresh")
def test_dynamic_true_with_a_static_bundle_is_said_once_and_each_size_miss_says_rebuild_or_dynamic(
    static_bundle: b.BuildResult, keys: Keys, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inferensics.collector.host")
    stats = _serve(static_bundle, keys, store, [(2, 8), (5, 8), (2, 8)], dynamic=True)
    said = [r.getMessage() for r in caplog.records]
    overridden = [line for line in said if OVERRIDDEN in line]
    assert len(overridden) == 1, said
    assert "tracker.compile(dynamic=True)" in overridden[0]
    assert "rebuild it with `inferensics bundle build --dynamic` for a batch size that varies" in overridden[0]
    assert static_bundle.bundle_id[:16] in overridden[0]
    assert stats["bundle_dynamic_overridden"] == 1
    assert (stats["bundle_hit_graphs"], stats["bundle_miss_graphs"]) == (1, 1)  # 5x8 compiled static: a miss
    db = store.database
    rows = store.query_rows(f"SELECT request_id, factors FROM {db}.bundle_misses WHERE bundle_id = %(b)s",
                            {"b": static_bundle.bundle_id})  # fmt: skip
    assert [(r[0], r[1][0]) for r in rows] == [("r1-5", MISSED_ON_SIZE)]
    missed = [line for line in said if "is not in the bundle" in line]
    assert len(missed) == 1, said
    assert missed[0].endswith(MISSED_ON_SIZE.removeprefix("accepted_shapes: ")), missed[0]


@pytest.mark.usefixtures("fresh")
def test_a_host_that_asks_nothing_of_dynamic_is_told_nothing(
    static_bundle: b.BuildResult, keys: Keys, store: Store, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="inferensics.collector.host")
    stats = _serve(static_bundle, keys, store, [(2, 8)])
    assert stats["bundle_dynamic_overridden"] == 0
    assert not [r for r in caplog.records if OVERRIDDEN in r.getMessage()]
