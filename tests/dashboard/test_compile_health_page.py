"""The compile & cache health page against the seeded service."""

from __future__ import annotations

import io
import json
from typing import Any

import polars as pl
import pytest
from streamlit.testing.v1 import AppTest

from inferensics.dashboard._internal import charts
from inferensics.dashboard._internal.filters import BUNDLE_KEY, MODEL_KEY
from inferensics.dashboard.views.compile_health import COMPILE_SECONDS_EVERYWHERE, RECOMPILES_OF_BUNDLE
from inferensics.schema import CacheEvent, CompileEvent, GraphBreakEvent
from tests.dashboard.apptest import assert_clean, metric, open_page
from tests.dashboard.conftest import SeededService
from tests.dashboard.expected import cache_lookups, graph_keys_per_pool
from tests.dashboard.seed import CANDIDATE, GB_ID, LLAMA, STORM_PATTERN, STORM_REASON, STORM_RECOMPILES

PAGE = "views/compile_health.py"
pytestmark = pytest.mark.slow


def frame_with(at: AppTest, column: str) -> Any:
    """The one table on the page that has ``column`` (a pandas frame, as AppTest gives it)."""
    found = [d.value for d in at.dataframe if column in d.value.columns]
    assert len(found) == 1, f"{len(found)} tables with {column}"
    return found[0]


def compile_seconds_charted(at: AppTest) -> pl.DataFrame:
    """The records of the one chart of compile seconds over time."""
    drawn = [c.proto for c in at.get("vega_lite_chart") if json.loads(c.proto.spec)["title"].startswith("Compile s")]
    assert len(drawn) == 1, [json.loads(c.proto.spec)["title"] for c in at.get("vega_lite_chart")]
    (records,) = [pl.read_ipc_stream(io.BytesIO(d.data.data)) for d in drawn[0].datasets if d.name == charts.DATASET]
    return records


def test_compile_health_tabs_match_the_seed(seeded: SeededService) -> None:
    at = open_page(seeded, PAGE)
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    assert [t.label for t in at.tabs] == ["Recompiles", "Graph breaks & guards", "Caches", "Specializations"]

    reasons = frame_with(at, "code_locations")
    assert reasons["reason"].tolist() == [STORM_PATTERN]
    assert reasons["example_reason"].tolist() == [STORM_REASON]
    assert reasons["recompiles"].tolist() == [STORM_RECOMPILES]

    breaks = frame_with(at, "break_type")
    assert breaks["registry_id"].tolist() == [GB_ID]
    assert breaks["events"].tolist() == [sum(r.outcome == "fallback" for r in seeded.facts.requests)]

    guards = frame_with(at, "failures")
    assert guards["reason"].tolist() == [STORM_PATTERN]
    assert guards["example_reason"].tolist() == [STORM_REASON]
    assert guards["failures"].tolist() == [STORM_RECOMPILES]

    health = frame_with(at, "cold_miss_cost_s")
    lookups = cache_lookups(seeded.facts)
    assert int(health["lookups"].sum()) == sum(lookups.values())
    assert int(health["hits"].sum()) == lookups["hit"]
    assert int(health["misses"].sum()) == lookups["miss"]

    # The headline counts every recompile that compiled, inside requests or not, as the reasons table does (a
    # store of imported logs alone read 0 above its reasons).
    assert metric(at, "Recompile records") == str(int(reasons["recompiles"].sum())) == str(STORM_RECOMPILES)
    recompiles = next(m for m in at.metric if m.label == "Recompile records")
    assert "inside requests or not" in recompiles.proto.help
    # Every compile's time (warm-up and imported logs too), not only the part inside requests, which a store of
    # imported TORCH_TRACE logs alone has none of (its page read 0.0 s above 15 compiles).
    compiled = [e for e in seeded.facts.others if isinstance(e, CompileEvent)]
    assert metric(at, "Compile seconds") == f"{sum(e.entire_frame_s for e in compiled):,.1f} s"
    assert sum(e.entire_frame_s for e in compiled) > sum(r.compile_ms for r in seeded.facts.requests) / 1000
    assert "imported TORCH_TRACE logs" in next(m for m in at.metric if m.label == "Compile seconds").proto.help
    assert metric(at, "Graph breaks") == str(breaks["events"].sum())
    assert metric(at, "Cache hit ratio") == f"{100 * lookups['hit'] / sum(lookups.values()):.2f} %"

    specs = frame_with(at, "total_graph_keys")
    got = {(r.model, r.hw_pool): r.active_graph_keys for r in specs.itertuples()}
    assert got == graph_keys_per_pool(seeded.facts)
    # Charts drawn: recompiles and compile seconds over time, top reasons, hit ratio, cold-miss cost, new keys.
    assert len(at.get("vega_lite_chart")) >= 6


def test_compile_health_of_a_model_without_breaks_or_recompiles_shows_empty_sections(seeded: SeededService) -> None:
    # llama serves requests and hits its caches but never recompiled or broke a graph: the compile-side
    # queries call it an unknown model, which is an empty section here, not a warning.
    at = open_page(seeded, PAGE, **{MODEL_KEY: LLAMA})
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    assert metric(at, "Recompile records") == "0"
    assert metric(at, "Graph breaks") == "0"
    notes = [i.value for i in at.info]
    for note in ("No recompiles in this range.", "No graph breaks in this range.", "No guard failures in this range."):
        assert note in notes, notes
    health = frame_with(at, "cold_miss_cost_s")
    assert set(health["model"]) == {LLAMA}
    lookups = [e for e in seeded.facts.others if isinstance(e, CacheEvent) and e.model == LLAMA]
    assert int(health["lookups"].sum()) == len(lookups)
    assert metric(at, "Cache hit ratio") == f"{100 * sum(e.result == 'hit' for e in lookups) / len(lookups):.2f} %"


def test_compile_health_with_a_bundle_filter_says_which_sections_ignore_it(seeded: SeededService) -> None:
    at = open_page(seeded, PAGE, **{BUNDLE_KEY: CANDIDATE})
    assert_clean(at)
    assert not at.warning, [w.value for w in at.warning]
    candidate = [r for r in seeded.facts.requests if r.bundle_id == CANDIDATE]
    assert metric(at, "Request recompiles") == f"{sum(r.recompiles for r in candidate):,}"
    # So does the chart of recompiles over time, which the bundle's requests count as the headline does.
    assert RECOMPILES_OF_BUNDLE in [c.value for c in at.caption]
    # Graph breaks carry no bundle: the page says so where it shows them for every bundle.
    assert any("carry no bundle" in c.value for c in at.caption)
    assert metric(at, "Graph breaks") == str(seeded.facts.count(GraphBreakEvent))
    assert "carry no bundle" in next(m for m in at.metric if m.label == "Graph breaks").help


def test_compile_seconds_over_time_add_up_to_the_headline(seeded: SeededService) -> None:
    """The chart summed the compile time requests paid (``compile_ms``) while the headline beside it sums every
    compile event: the seed's warm-up compiles, which no request paid, were in the headline and not over time.
    The chart now sums the compile events, as the recompiles chart counts every recompile, and says so; under a
    bundle filter too (compile events carry the bundle)."""
    compiled = [e for e in seeded.facts.others if isinstance(e, CompileEvent)]
    at = open_page(seeded, PAGE)
    assert_clean(at)
    charted = compile_seconds_charted(at)
    assert float(charted["compile_seconds"].sum()) == pytest.approx(sum(e.entire_frame_s for e in compiled))
    assert metric(at, "Compile seconds") == f"{charted['compile_seconds'].sum():,.1f} s"
    assert COMPILE_SECONDS_EVERYWHERE in [c.value for c in at.caption]

    at = open_page(seeded, PAGE, **{BUNDLE_KEY: CANDIDATE})
    assert_clean(at)
    of_bundle = sum(e.entire_frame_s for e in compiled if e.bundle_id == CANDIDATE)
    assert float(compile_seconds_charted(at)["compile_seconds"].sum()) == pytest.approx(of_bundle)


def test_cache_growth_shows_sizes_readable_and_sorts_them_as_numbers(seeded: SeededService) -> None:
    at = open_page(seeded, PAGE)
    assert_clean(at)
    (table,) = [d for d in at.dataframe if "cumulative_bytes" in d.value.columns]
    written = sum(e.entry_bytes for e in seeded.facts.others if isinstance(e, CacheEvent) and e.result == "miss")
    growth = table.value
    # The cells stay integers (the column sorts by size) ...
    assert growth["bytes"].dtype.kind == "u"
    assert int(growth["bytes"].sum()) == written
    # ... and the browser shows them as sizes ("1.2MB"), not as 1200000.
    config = json.loads(table.proto.columns)
    for column in ("bytes", "cumulative_bytes"):
        assert config[column]["type_config"] == {"type": "number", "format": "bytes"}
