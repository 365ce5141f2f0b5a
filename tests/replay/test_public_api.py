"""The public API of inferensics.replay is what __all__ says."""

from __future__ import annotations

from inferensics import replay


def test_all_is_pinned() -> None:
    assert replay.__all__ == [
        "CATEGORIES",
        "RATIO_LIMIT",
        "Comparison",
        "ReplayError",
        "ReplayPack",
        "Verdict",
        "compare",
        "investigate",
        "read_pack",
        "replay_pack",
        "write_pack",
    ]
    assert all(hasattr(replay, name) for name in replay.__all__)
    assert replay.CATEGORIES == (
        "source_op", "kernel_provider", "decomposition", "lowering", "graph_pass", "schedule",
        "shape_specialization", "artifact_mismatch", "inputs", "none",
    )  # fmt: skip
