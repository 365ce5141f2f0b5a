"""The dashboard's seed with its recompile storm cut below the storm rule's default floors (the demo's case:
a short run's storm is a few recompiles), for the weekly report page's storm-rule inputs.

Run as ``python -m tests.dashboard.small_storm DSN NOW_ISO`` (chDB allows one data directory per process, so
the test process never opens the store itself).
"""

from __future__ import annotations

import sys
from datetime import datetime

from tests.dashboard.seed import SeedFacts, build, write_events

SMALL_STORM = 5
"""Recompiling requests kept of the seed's storm (3 compile seconds each): under both default floors (the
test checks), all within the storm's first minute (the first on a minute boundary), so one hour holds them."""


def build_small_storm(now: datetime) -> SeedFacts:
    """The seed of :func:`tests.dashboard.seed.build` for ``now``, without its storm's recompiling requests
    past the first :data:`SMALL_STORM` and their events."""
    facts = build(now)
    storm = [r.request_id for r in facts.requests if r.recompiles]
    cut = set(storm[SMALL_STORM:])
    return SeedFacts(
        now=now,
        requests=[r for r in facts.requests if r.request_id not in cut],
        others=[e for e in facts.others if getattr(e, "request_id", "") not in cut],
    )


def write(dsn: str, now: datetime) -> None:
    """Seed the store at ``dsn`` with the events of :func:`build_small_storm` for ``now``."""
    from inferensics.schema.store import Store

    with Store.open(dsn) as store:
        write_events(store, build_small_storm(now))


if __name__ == "__main__":
    write(sys.argv[1], datetime.fromisoformat(sys.argv[2]))
