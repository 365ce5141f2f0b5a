"""Shared fixtures: a real embedded chDB store per test, isolated by database name.

One process can open only one chDB directory, so every test of a pytest process shares one directory
(created per session) and gets its own database inside it.

Property-based tests draw the same examples on every run (the ``suite`` profile, derandomized), so a red run
points at a change, not at a new draw. ``make fuzz`` runs them with fresh random examples (``explore``); a
failure it finds becomes an ``@example`` in the test.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from inferensics.schema.store import Store
from tests.seeding import migrated_store, scratch_dsn

# The parts are folders of the repository root (kernels/, schema/, ...) installed as inferensics.*. With the root on
# sys.path (`python -m pytest` puts the working directory there) they would shadow installed modules of the same
# top-level name: Hugging Face's `kernels`, which transformers imports. Off the path here (the product's own child
# processes, where transformers runs, start with -P).
ROOT = Path(__file__).resolve().parents[1]
sys.path[:] = [p for p in sys.path if Path(p or os.curdir).resolve() != ROOT]

settings.register_profile("suite", derandomize=True)
settings.register_profile("explore", derandomize=False, database=None)
settings.load_profile("suite")  # `pytest --hypothesis-profile explore` overrides it


JOURNAL_DIR_ENV = "INFERENSICS_JOURNAL_DIR"
"""``inferensics.collector.host.journal.JOURNAL_DIR_ENV`` (importing it here would import torch into every part's
session; tests/collector/host/test_crash_journal.py pins that the two agree)."""


@pytest.fixture(scope="session", autouse=True)
def _crash_journals(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The host SDK's crash journals of this session's trackers and child processes in a folder of the session's,
    not the user's state folder."""
    patch = pytest.MonkeyPatch()
    patch.setenv(JOURNAL_DIR_ENV, str(tmp_path_factory.mktemp("journal")))
    yield
    patch.undo()


@pytest.fixture(scope="session")
def chdb_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one chDB directory this test process opens."""
    return tmp_path_factory.mktemp("chdb")


@pytest.fixture
def store_dsn(chdb_dir: Path) -> str:
    """A DSN naming a fresh, empty database in the session's chDB directory."""
    return scratch_dsn(chdb_dir)


@pytest.fixture
def store(store_dsn: str) -> Iterator[Store]:
    """A migrated store in its own database, dropped afterwards."""
    with migrated_store(store_dsn) as s:
        yield s
