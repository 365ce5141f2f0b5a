"""What a cache miss wrote, in bytes: the host SDK measures the entry on the cache's disk, so cache growth
has sizes (the column was 0 on every row before). A hit writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch._dynamo

from inferensics.collector.host import SdkConfig, instrument
from inferensics.schema import CacheEvent
from inferensics.schema.store import Store


def _square(x: torch.Tensor) -> torch.Tensor:
    return torch.mm(x, x)  # an extern kernel: no C++ build


def _folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def test_a_miss_records_the_bytes_it_wrote(store: Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "inductor"
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(cache))  # empty: every lookup of the first compile misses
    for attempt in range(2):  # the second process-like round finds the entries: hits
        torch._dynamo.reset()
        tracker = instrument(store=store, host="h", model=f"m{attempt}", config=SdkConfig(batch_rows=100))
        try:
            with tracker.request(f"r{attempt}") as req:
                req.set_output(tracker.compile(_square)(torch.ones(8, 8)))
        finally:
            tracker.shutdown()

    events = {(e.model, e.cache, e.result): e for e in store.select_events(CacheEvent)}
    fx, aot = events[("m0", "fx_graph", "miss")], events[("m0", "aot_autograd", "miss")]
    assert fx.entry_bytes == _folder_bytes(cache / "fxgraph" / fx.cache_key[1:3] / fx.cache_key) > 0
    assert aot.entry_bytes == _folder_bytes(cache / "aotautograd" / aot.cache_key) > 0
    hits = [e for (model, _, result), e in events.items() if model == "m1"]
    assert {e.result for e in hits} == {"hit"}
    assert all(e.entry_bytes == 0 for e in hits)
