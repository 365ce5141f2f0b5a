"""A real collector service holding served requests for replay tests: a signed bundle built from a factory, the
requests' rows sent over OTLP by an ingest token (as a serving host sends them) and their captured inputs stored
through the blob API (kind ``inputs``, as the host SDK stores them).

Shared by the tests that replay through a service (``test_replay_service.py``, ``test_replay_as_served.py``,
``test_replay_access.py``), which each seeded their own copy."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from inferensics import bundle as b
from inferensics.replay._internal.pack import write_safetensors
from inferensics.schema.events import RequestEvent
from tests.collector.service.harness import ADMIN, INGEST, RunningService, new_service

INPUTS_KIND = "inputs"
"""The blob kind the host SDK stores captured inputs as (the service serves it to the replay role only)."""


@dataclass(frozen=True)
class Built:
    """A signed bundle and the keyring that trusts its builder."""

    bundle: Path
    keyring: Path
    bundle_id: str


def build_bundle(folder: Path, *, model: str, inputs: str, name: str, import_path: Path | None = None) -> Built:
    """Build and sign a bundle of ``model`` (``module:function``) on shape 4x8 in ``folder``; ``import_path``: a
    project folder the factory is imported from (on ``sys.path`` for the build only)."""
    priv, pub, _ = b.generate_key(folder / "builder")
    if import_path is not None:
        sys.path.insert(0, str(import_path))
    try:
        spec = b.BuildSpec(model=model, inputs=inputs, shapes=b.ShapeDistribution.of([(4, 8)]), advise=False,
                           name=name, repeats=1)  # fmt: skip
        result = b.build(spec, b.load_signing_key(priv), folder / "bundle")
    finally:
        if import_path is not None:
            sys.path.remove(str(import_path))
            sys.modules.pop(model.partition(":")[0], None)
    return Built(result.directory, pub, result.bundle_id)


def put_inputs(service: RunningService, **tensors: torch.Tensor) -> str:
    """Store ``tensors`` as a request's captured inputs; their digest (the ``capture_blob`` of its row)."""
    return service.client(ADMIN).put_blob(write_safetensors(tensors), INPUTS_KIND)


def seed_requests(service: RunningService, requests: Sequence[RequestEvent], timeout_s: float = 60.0) -> None:
    """Send the rows as each one's host does (OTLP, ingest token), and wait until the store holds them all."""
    from inferensics.collector.host.otlp_exporter import OtlpExporter

    for host in dict.fromkeys(r.host for r in requests):
        exporter = OtlpExporter(service.url, host=host, token=INGEST)
        for request in requests:
            if request.host == host:
                exporter.export_request(request, [])
        exporter.flush()
        exporter.shutdown()
    ids = ", ".join(f"'{i}'" for i in dict.fromkeys(r.request_id for r in requests))
    client = service.client(ADMIN)
    deadline = time.monotonic() + timeout_s
    while client.sql(f"SELECT request_id FROM requests WHERE request_id IN ({ids})").height < len(requests):
        assert time.monotonic() < deadline, "the requests never reached the store"
        time.sleep(0.3)


@contextmanager
def running_service(root: Path, *, tokens: str | None = None) -> Iterator[RunningService]:
    """``inferensics serve`` (its named queries too) over a new embedded store in ``root``; ``tokens`` as in
    ``$INFERENSICS_TOKENS`` (the harness's ingest, read and admin tokens by default)."""
    settings = {"tokens": tokens} if tokens is not None else {}
    with new_service(root, via_cli=True, **settings) as service:
        yield service
