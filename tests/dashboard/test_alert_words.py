"""What the request page says of a graph break, and what the overview says of a slow compile hour with a few
recompiles: each as what it is (newuser finding 2; analytics ``slow_compiles`` now lists hours with 1-9
recompiles)."""

from __future__ import annotations

from streamlit.testing.v1 import AppTest

from inferensics.dashboard.views.request import fallback_text
from tests.dashboard.apptest import TIMEOUT_S

BROKEN = {
    "status": "ok",
    "fallback_reason": "graph_break:GB0124",
    "graph_break_type": "Unsupported Tensor.item() call",
    "graph_break_reason": "Dynamo does not support tracing `Tensor.item()`",
    "graph_break_frame": "model.py:34",
}


def test_a_request_served_by_graphs_split_at_a_break_is_no_fallback() -> None:
    """The page said "The compiled path gave up (graph_break:GB0124) and no eager run served the request
    (graph_break:GB0124)" of requests two compiled graphs served."""
    for outcome in ("hit", "compile", "recompile"):
        text = fallback_text({**BROKEN, "outcome": outcome})
        assert text == (
            "**Split at graph break GB0124 \\(Unsupported Tensor.item\\(\\) call; Dynamo does not support tracing "
            "\\`Tensor.item\\(\\)\\`; at model.py:34\\):** compiled graphs ran, with the code at the break run eagerly "
            "between them; not an eager fallback."
        ), outcome
        assert "gave up" not in text
    eager = fallback_text({**BROKEN, "outcome": "fallback"})
    assert eager.startswith("**Ran eagerly:** graph break GB0124 \\(Unsupported Tensor.item\\(\\) call; ")
    assert eager.endswith("left nothing to compile, so the whole frame ran eagerly \\(an eager fallback\\).")
    other = fallback_text({"outcome": "compile", "status": "ok", "fallback_reason": "compile_error"})
    assert other.count("compile_error") == 1  # the reason once, not twice


def _slow_hours_page() -> None:
    from datetime import UTC, datetime

    import polars as pl

    from inferensics.dashboard.views.overview import slow_compile_alerts

    slow_compile_alerts(pl.DataFrame([
        {"bucket": datetime(2026, 3, 3, 12, tzinfo=UTC), "model": "m", "hw_pool": "p", "recompiles": 3,
         "compile_seconds": 640.0, "why": "640.0 compile s reach max(600, 3 × baseline 10.0) = 600.0 s, with 3 "
         "recompiles: under the storm floor of 10", "cache_lookups": 4, "cache_hits": 4, "cache_misses": 0,
         "cache_bypasses": 0},
        {"bucket": datetime(2026, 3, 3, 11, tzinfo=UTC), "model": "m", "hw_pool": "p", "recompiles": 0,
         "compile_seconds": 700.0, "why": "700.0 compile s reach max(600, 3 × baseline 0.0) = 600.0 s, without a "
         "recompile (first compiles)", "cache_lookups": 0, "cache_hits": 0, "cache_misses": 0, "cache_bypasses": 0},
    ]))  # fmt: skip


def test_a_slow_hour_with_a_few_recompiles_says_so() -> None:
    """The overview said "without a recompile" of every slow hour, though analytics now lists hours with 1-9."""
    at = AppTest.from_function(_slow_hours_page, default_timeout=TIMEOUT_S).run()
    assert not at.exception, at.exception
    shown = [w.value for w in at.warning]
    assert shown == [
        "**Slow compiles** · m / p · hour of 2026-03-03 12:00 UTC: 640.0 compile s reach max(600, 3 × baseline 10.0) "
        "= 600.0 s, with 3 recompiles: under the storm floor of 10; not a cold cache: all 4 of that hour's "
        "compile-cache lookups hit (first compiles and recompiles).",
        "**Slow compiles** · m / p · hour of 2026-03-03 11:00 UTC: 700.0 compile s reach max(600, 3 × baseline 0.0) "
        "= 600.0 s, without a recompile (first compiles); first compiles: no compile-cache lookup was recorded in "
        "that hour.",
    ]
