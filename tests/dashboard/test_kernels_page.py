"""The Kernels page against the seeded service (its kernel-registry decisions and qualification records are those
of :mod:`tests.analytics.kernel_events`)."""

from __future__ import annotations

import io
import json

import polars as pl
import pytest

from inferensics.dashboard._internal import charts
from inferensics.dashboard._internal.filters import MODEL_KEY, RANGE_KEY, TRAFFIC_KEY
from inferensics.dashboard.navigation import BY_URL
from inferensics.dashboard.views.kernels import QUALIFICATION_HINT, SIGNATURES_TITLE
from tests.analytics.kernel_events import GPU_MODEL, RAISED, REQUEST
from tests.dashboard.apptest import assert_clean, metric, open_page, texts
from tests.dashboard.conftest import SeededService
from tests.dashboard.seed import LLAMA

pytestmark = pytest.mark.slow
PAGE = "views/kernels.py"


def test_the_page_is_in_the_compilation_section() -> None:
    assert BY_URL["kernels"].file == PAGE
    assert BY_URL["kernels"].section == "Compilation"
    assert BY_URL["kernels"].filtered


def test_providers_skips_failures_and_evidence_match_the_seed(seeded: SeededService) -> None:
    at = open_page(seeded, PAGE)
    assert_clean(at)
    assert (
        metric(at, "Ops served"),
        metric(at, "Providers serving"),
        metric(at, "Signatures"),
        metric(at, "Fallback decisions"),
        metric(at, "Provider failures"),
    ) == ("4", "3", "8", "3", "1")
    (warning,) = [str(w.value) for w in at.warning]
    assert warning.startswith("**triton** for `rms_norm` raised and was taken out for that signature")
    assert warning.endswith(f"`{RAISED.removeprefix('raised ')}`")
    assert "(1 decision skipped it; inductor served instead; models llama-8b)" in warning

    tables = {d.value.columns[0] if "drill_down" not in d.value.columns else "providers": d.value for d in at.dataframe}
    providers = tables["providers"]
    assert len(providers) == 7
    assert list(providers.columns[:5]) == ["drill_down", "model", "hw_pool", "op", "provider"]
    links = {(r.op, r.provider, r.compiled): r.drill_down for r in providers.itertuples()}
    assert links[("rms_norm", "triton", True)] == f"request?request_id={REQUEST}"
    assert not isinstance(links[("rotary_embedding", "reference", False)], str)  # eager: no compile to open
    skips = tables["op"]
    assert skips["reason"].tolist()[0] == RAISED
    assert len(skips) == 3
    evidence = next(d.value for d in at.dataframe if "vs_best" in d.value.columns)
    assert evidence["provider"].tolist() == ["inductor", "triton", "reference", "planted_wrong", "reference", "triton"]
    assert evidence["vs_best"].tolist()[:3] == pytest.approx([1.0, 1.25, 6.25])

    # The chart plots what its axis says, op signatures served: per op the table's signatures, in all the
    # headline's (walk 39: titled "op signatures served", it plotted decisions, one per signature and process).
    (drawn,) = [c.proto for c in at.get("vega_lite_chart")]
    spec = json.loads(drawn.spec)
    assert spec["title"] == SIGNATURES_TITLE == "Op signatures served, by the provider chosen"
    assert (spec["encoding"]["x"]["field"], spec["encoding"]["x"]["title"]) == ("signatures", "op signatures served")
    (records,) = [pl.read_ipc_stream(io.BytesIO(d.data.data)) for d in drawn.datasets if d.name == charts.DATASET]
    per_op = dict(records.group_by("op").agg(pl.col("signatures").sum()).iter_rows())
    assert per_op == providers.groupby("op")["signatures"].sum().to_dict()
    assert per_op == {"rms_norm": 4, "silu_mul": 2, "paged_decode_attention": 1, "rotary_embedding": 1}
    assert sum(per_op.values()) == int(metric(at, "Signatures"))


def test_the_model_filter_narrows_decisions_and_the_evidence_stays_whole(seeded: SeededService) -> None:
    assert GPU_MODEL == LLAMA
    at = open_page(seeded, PAGE, **{MODEL_KEY: LLAMA, TRAFFIC_KEY: "interactive"})
    assert_clean(at)
    assert metric(at, "Ops served") == "3"  # not the CPU host's rotary embedding
    assert metric(at, "Fallback decisions") == "1"
    shown = texts(at)
    assert "Kernel decisions carry no traffic class or bundle: those filters are not applied here." in shown
    assert "Qualification records name the host they ran on, no model or pool" in shown
    assert len(next(d.value for d in at.dataframe if "vs_best" in d.value.columns)) == 6
    assert QUALIFICATION_HINT not in shown


def test_a_range_without_decisions_or_evidence_says_how_they_are_recorded(seeded: SeededService) -> None:
    at = open_page(seeded, PAGE)
    at.selectbox(key=RANGE_KEY).select("Last 15 minutes").run()  # the seed's decisions and runs are older
    assert_clean(at)
    infos = [str(i.value) for i in at.info]
    assert any(i.startswith("No kernel-registry decision in this range.") for i in infos), infos
    assert QUALIFICATION_HINT in infos
    assert not at.metric
