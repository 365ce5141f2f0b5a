"""A request's cache status says what its compiles did: a compile that served a graph without any cache
lookup compiled (``miss``), so a request whose one compile hit the FX-graph cache and whose other compile
ran for 89 s reads ``mixed``, never ``hit`` (issue 20: "Compile cache: hit" beside a long recompile)."""

from __future__ import annotations

from inferensics.collector.host.classify import classify
from inferensics.collector.trace.assembler import CompileSummary


def _compile(
    cid: str, cache_status: str, seconds: float, *, outcome: str = "ok", graph_key: str = "k"
) -> CompileSummary:
    return CompileSummary(
        compile_id=cid,
        outcome=outcome,
        cache_status=cache_status,
        entire_frame_s=seconds,
        graph_key=graph_key and f"{graph_key}-{cid}",
        artifact_id="",
        recompile=cid != "0/0",
    )


def _status(*compiles: CompileSummary) -> tuple[str, str, float]:
    cls = classify(
        errored=False,
        guard_hits=0,
        guard_misses=1,
        compiles=list(compiles),
        graph_compile_ids=[c.compile_id for c in compiles],
        summaries={c.compile_id: c for c in compiles},
        limit_hit_before=False,
        backend_compile_ms=0.0,
    )
    return cls.outcome, cls.cache_status, cls.compile_ms


def test_a_long_compile_without_a_lookup_beside_a_hit_is_mixed_not_hit() -> None:
    assert _status(_compile("0/1", "hit", 0.4), _compile("1/1", "none", 89.0)) == ("recompile", "mixed", 89400.0)


def test_a_compile_without_a_lookup_is_a_miss() -> None:
    assert _status(_compile("0/1", "none", 89.0))[:2] == ("recompile", "miss")


def test_hits_stay_hits_and_graphless_or_failed_compiles_do_not_count() -> None:
    assert _status(_compile("0/1", "hit", 0.4), _compile("1/1", "none", 0.1, graph_key=""))[1] == "hit"
    assert _status(_compile("0/1", "hit", 0.4), _compile("1/1", "none", 3.0, outcome="failed"))[1] == "hit"
    assert _status(_compile("0/1", "miss", 12.0), _compile("1/1", "hit", 0.3))[1] == "mixed"
