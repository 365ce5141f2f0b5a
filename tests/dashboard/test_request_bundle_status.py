"""The request page says what the request's bundle did: it ran from the verified bundle, a bundle miss (and why),
or a shape the bundle never qualified. It named the bundle and nothing of the request's ``attrs['bundle_status']``
or ``attrs['bundle_unqualified_shape']``."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.collector.service.harness import READ
from tests.dashboard.apptest import assert_clean, open_page
from tests.dashboard.bundle_statuses import (
    BUNDLE_NAME,
    HIT,
    LATER,
    MISS,
    MISS_FACTOR,
    MISS_REASON,
    NONE,
    REQUEST_SHAPE,
    SHAPE,
    UNQUALIFIED_CALLS,
    UNQUALIFIED_SHOWN,
    events,
)
from tests.dashboard.conftest import SeededService, seeded_service
from tests.dashboard.seed import SeedFacts

PAGE = "views/request.py"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def statuses(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    root = tmp_path_factory.mktemp("bundle-status-service")
    with seeded_service(root, "tests.dashboard.bundle_statuses", lambda now: now) as (service, now):
        assert events(now)  # the module's events are what the service holds
        yield SeededService(service=service, token=READ, facts=SeedFacts(now=now, requests=[], others=[]))


def _alerts(at: object, kind: str) -> list[str]:
    return [str(e.value) for e in getattr(at, kind)]


def test_each_bundle_status_is_on_the_request_page(statuses: SeededService) -> None:
    hit = open_page(statuses, PAGE, **{"drill.request_id": HIT})
    assert_clean(hit)
    assert f"Ran from bundle {BUNDLE_NAME}, verified on its host: every graph that served it came from the bundle" in (
        _alerts(hit, "success")
    )

    shape = open_page(statuses, PAGE, **{"drill.request_id": SHAPE})
    assert_clean(shape)
    shown = UNQUALIFIED_SHOWN.replace("[", r"\[").replace("]", r"\]").replace("(", r"\(").replace(")", r"\)")
    assert any(  # Markdown's brackets and parentheses shown as themselves
        w.startswith(
            rf"A graph of bundle {BUNDLE_NAME} served {UNQUALIFIED_CALLS} of its calls at graph sizes {shown} "
            rf"\(request {REQUEST_SHAPE}\), which the bundle never qualified that graph at \(its"
        )
        for w in _alerts(shape, "warning")
    ), _alerts(shape, "warning")

    miss = open_page(statuses, PAGE, **{"drill.request_id": MISS})
    assert_clean(miss)
    (said,) = [w for w in _alerts(miss, "warning") if w.startswith("Bundle miss:")]
    assert f"not in bundle {BUNDLE_NAME}" in said
    assert MISS_FACTOR.split(" ")[0].replace("_", r"\_") in said
    assert said.endswith(MISS_REASON.replace("_", r"\_"))

    later = open_page(statuses, PAGE, **{"drill.request_id": LATER})
    assert_clean(later)
    assert any(w.endswith(r"\(in an earlier request's compile on its host\)") for w in _alerts(later, "warning"))

    none = open_page(statuses, PAGE, **{"drill.request_id": NONE})
    assert_clean(none)
    assert any(i.startswith(f"No graph of bundle {BUNDLE_NAME} served it") for i in _alerts(none, "info"))
