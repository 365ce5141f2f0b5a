"""Fixtures: a running collector service per test, stopped afterwards."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.collector.service.harness import RunningService, new_service


@pytest.fixture
def service(tmp_path: Path) -> Iterator[RunningService]:
    """A started service with its own data and spool directories."""
    svc = new_service(tmp_path).start()
    try:
        yield svc
    finally:
        svc.stop()
