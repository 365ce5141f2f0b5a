"""The request page lists the kernel-registry decisions behind a request, eager and compiled, and says which
provider raised and was taken out (walk 41 #10: an eager request's page showed no provider though the store held
its decisions, and the Kernels page links there; a compiled request's page did not say a provider raised)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from inferensics.dashboard._internal.kernel_decisions import HEADING, NONE_RECORDED
from tests.collector.service.harness import READ, new_service
from tests.dashboard.apptest import assert_clean, open_page, texts
from tests.dashboard.conftest import SeededService, seed_store
from tests.dashboard.request_kernels import COMPILED_ID, EAGER_ID, HIT_ID, SIGNATURE
from tests.dashboard.seed import SeedFacts

PAGE = "views/request.py"
pytestmark = pytest.mark.slow
PICKY = (
    f"**picky** for `rms_norm` raised and was taken out for signature `{SIGNATURE}`; **{{served}}** served {{where}} "
    "instead: `RuntimeError: picky kernel failed`"
)


@pytest.fixture(scope="module")
def decided(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SeededService]:
    root: Path = tmp_path_factory.mktemp("request-kernels-service")
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    service = new_service(root)
    seed_store(service.dsn, now, "tests.dashboard.request_kernels")
    service.start()
    try:
        yield SeededService(service=service, token=READ, facts=SeedFacts(now=now, requests=[], others=[]))
    finally:
        service.stop()


def _decisions(at: object) -> list[tuple[object, ...]]:
    (table,) = [d.value for d in at.dataframe if "this_request" in d.value.columns]  # type: ignore[attr-defined]
    return [tuple(r) for r in table[["this_request", "compiled", "op", "provider"]].itertuples(index=False)]


def test_an_eager_requests_page_lists_its_decisions_and_the_provider_that_raised(decided: SeededService) -> None:
    at = open_page(decided, PAGE, **{"drill.request_id": EAGER_ID})
    assert_clean(at)
    shown = texts(at)
    assert PICKY.format(served="reference", where="an eager call") in shown, shown
    assert "2 eager and 0 compiled decisions" in shown, shown
    # One section names what computed each op, the eager calls included (the list read only compiled graphs).
    (listed,) = [str(m.value) for m in at.markdown if str(m.value).startswith("**Kernel providers**")]
    assert listed == HEADING + "\n- eager calls: `rms_norm=reference`, `silu_mul=reference`"
    assert _decisions(at) == [(True, False, "rms_norm", "reference"), (True, False, "silu_mul", "reference")]


def test_a_compiled_request_and_a_later_hit_of_its_graph_say_the_provider_raised(decided: SeededService) -> None:
    at = open_page(decided, PAGE, **{"drill.request_id": COMPILED_ID})
    assert_clean(at)
    assert PICKY.format(served="inductor", where="graph 0") in texts(at)
    assert _decisions(at) == [(True, True, "rms_norm", "inductor")]
    at = open_page(decided, PAGE, **{"drill.request_id": HIT_ID})
    assert_clean(at)
    where = "graph 0, traced in an earlier request's compile on this host"
    assert PICKY.format(served="inductor", where=where) in texts(at)
    assert _decisions(at) == [(False, True, "rms_norm", "inductor")]
    assert NONE_RECORDED not in texts(at)
