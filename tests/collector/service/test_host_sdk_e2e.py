"""The host SDK's end-to-end path: a real torch.compile'd function, instrumented, exporting OTLP spans with
the real exporter over loopback to a service process, read back through the service API."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch._dynamo

from inferensics.collector.host import instrument
from tests.collector.service.harness import INGEST, RunningService
from tests.polling import poll

pytestmark = [
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]


def _scale(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 3 + 1


def test_compiled_model_requests_reach_the_store_through_the_service(
    service: RunningService, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    tracker = instrument(service_url=service.url, token=INGEST, host="e2e-host", hw_pool="cpu-pool", model="m")
    try:
        compiled = tracker.compile(_scale)
        for i, n in enumerate([4, 4, 7, 9]):
            with tracker.request(f"e2e-{i}", traffic_class="interactive", shape=(n,)) as req:
                req.set_output(compiled(torch.ones(n)))
    finally:
        tracker.shutdown()
        torch._dynamo.reset()
    client = service.client()
    # the SDK has flushed: wait until every spooled span is decoded and written
    poll(
        client.metrics,
        lambda m: (
            m["inferensics_collector_spooled_spans_total"] > 0
            and m["inferensics_collector_spool_files"] == 0
            and m["inferensics_collector_written_rows_total"] == m["inferensics_collector_decoded_rows_total"] > 0
        ),
        timeout=30,
        interval=0.1,
    )
    requests = client.sql(
        "SELECT request_id, outcome, host, model, hw_pool, traffic_class FROM inferensics.requests ORDER BY request_id"
    )
    assert requests["request_id"].to_list() == ["e2e-0", "e2e-1", "e2e-2", "e2e-3"]
    assert requests["outcome"].to_list() == ["compile", "hit", "recompile", "hit"]
    assert set(requests["host"]) == {"e2e-host"}
    assert set(requests["hw_pool"]) == {"cpu-pool"}
    recompiles = client.sql("SELECT request_id, host, model, reason FROM inferensics.recompiles")
    assert recompiles["request_id"].to_list() == ["e2e-2"]
    assert recompiles["host"].to_list() == ["e2e-host"]
    assert "size mismatch" in recompiles["reason"][0]
    compiles = client.sql("SELECT count() AS n FROM inferensics.compiles")
    assert int(compiles[0, 0]) >= 2
    rejected = {k: v for k, v in client.metrics().items() if k.startswith("inferensics_collector_rejected_total{")}
    assert rejected == {}, rejected
