"""The measured launch tables: the shipped file parses into every kernel's table; a missing or broken file
means no entries (one line on stderr), never an error."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferensics.kernels._triton import activation, norm, paged_attention, rotary, tables


def test_shipped_tables_fill_every_kernel_table() -> None:
    data = tables.h200_tables()
    assert data.get("measured_on", "").startswith("NVIDIA H200")
    assert len(norm.H200_CONFIGS) == 6  # RMSNorm and add+RMSNorm at 8, 512 and 8192 tokens
    assert len(activation.H200_CONFIGS) == 3
    assert len(rotary.H200_CONFIGS) == 3
    assert len(paged_attention.H200_PLANS) == 9  # batch 1/8/64 x context 1k/4k/32k
    assert any(plan.merge_kernel for plan in paged_attention.H200_PLANS.values())  # rows of 8 fields parse
    for plan in paged_attention.H200_PLANS.values():
        assert plan.block_n % 16 == 0
        assert plan.warps in (4, 8)
        assert plan.waves >= 1


def test_missing_or_broken_tables_mean_no_entries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(tables, "TABLES_FILE", tmp_path / "absent.json")
    tables.h200_tables.cache_clear()
    try:
        assert tables.h200_tables() == {}
        broken = tmp_path / "broken.json"
        broken.write_text("{not json")
        monkeypatch.setattr(tables, "TABLES_FILE", broken)
        tables.h200_tables.cache_clear()
        assert tables.entries("rms_norm") == []
        assert "ignoring broken.json" in capsys.readouterr().err
    finally:
        monkeypatch.undo()
        tables.h200_tables.cache_clear()


def test_plans_apply_only_on_compute_capability_9() -> None:
    import torch

    plan, measured = paged_attention.choose_plan(torch.device("cpu"), 64, 8, 32768)
    assert (plan, measured) == (paged_attention.DEFAULT_PLAN, False)


def test_plan_rows_of_every_length_parse() -> None:
    # Rows gained fields over the sessions (merge kernel, dependent launch, prefetched page numbers); older, shorter
    # rows mean those options off.
    plan_of, plan = paged_attention._plan_of, paged_attention.Plan
    base = ["p8/t1024", 2, 64, 64, 4, 3, True]
    assert plan_of(base) == plan(2, 64, 64, 4, 3, True)
    assert plan_of([*base, True]) == plan(2, 64, 64, 4, 3, True, merge_kernel=True)
    assert plan_of([*base, True, True, True]) == plan(2, 64, 64, 4, 3, True, True, pdl=True, prefetch_pages=True)
