"""Replay's view of the kernel registry: forcing reference providers, pinning a bundle's recorded policy, and
naming a provider's kernel function. No compiles: eager registry calls only."""

from __future__ import annotations

import torch

from inferensics import kernels
from inferensics.kernels import Provider, Requirements
from inferensics.replay._internal.providers import forced_reference, pinned_policy, provider_source, served_by
from tests.replay.faults import HERE, fault_line, planted_provider, rms_norm_unbiased

X = torch.randn(5, 16, generator=torch.Generator().manual_seed(1))
W = torch.ones(16)


def _unbiased() -> Provider:
    return Provider("unbiased", "vendor", rms_norm_unbiased, Requirements(), "planted")


def _policy_snapshot() -> dict[str, object]:
    return kernels.registry().policy()


def test_forced_reference_serves_the_definition_and_restores_priorities() -> None:
    op = kernels.registry().op("rms_norm")
    bucket = op.bucket([X, W, 1e-6])
    with planted_provider("rms_norm", _unbiased(), bucket=lambda _op: bucket):
        before = _policy_snapshot()
        assert served_by(op, [X, W, 1e-6], compiled=False).provider == "unbiased"
        with forced_reference(["rms_norm"]) as forced:
            assert forced == ["rms_norm"]
            assert served_by(op, [X, W, 1e-6], compiled=False).provider == "reference"
            torch.testing.assert_close(kernels.rms_norm(X, W, 1e-6), op.reference(X, W, 1e-6))
        assert _policy_snapshot() == before
        assert served_by(op, [X, W, 1e-6], compiled=False).provider == "unbiased"
    assert bucket not in op.bucket_priority, "the plant leaves no bucket list behind"


def test_pinned_policy_reinstalls_the_recorded_provider_choice() -> None:
    op = kernels.registry().op("rms_norm")
    original = _policy_snapshot()
    op.register(_unbiased(), enabled=False)  # registered (as a bundle's customisation would), not chosen
    try:
        assert served_by(op, [X, W, 1e-6], compiled=False).provider != "unbiased"
        recorded = kernels.registry_state()
        recorded["policy"]["rms_norm"]["priority"] = ["unbiased", "reference"]
        with pinned_policy(recorded) as problems:
            assert problems == []
            assert served_by(op, [X, W, 1e-6], compiled=False).provider == "unbiased"
            expected = rms_norm_unbiased(X, W, 1e-6)
            torch.testing.assert_close(kernels.rms_norm(X, W, 1e-6), expected)
        assert served_by(op, [X, W, 1e-6], compiled=False).provider != "unbiased"
    finally:
        op.unregister("unbiased")
    assert _policy_snapshot() == original


def test_pinned_policy_names_what_this_process_lacks() -> None:
    original = _policy_snapshot()
    recorded = {"policy": {"rms_norm": {"priority": ["gone", "reference"]}, "no_such_op": {"priority": []}}}
    with pinned_policy(recorded) as problems:
        assert any("gone" in p for p in problems), problems
        assert any("no_such_op" in p for p in problems), problems
    assert _policy_snapshot() == original
    with pinned_policy({"state": "none"}) as nothing:  # a bundle built before the registry existed
        assert nothing == []


def test_provider_source_names_the_kernel_function() -> None:
    src = provider_source(rms_norm_unbiased)
    assert (src.file, src.line) == (str(HERE), fault_line("rms_norm_unbiased"))
    assert src.function == "tests.replay.faults.rms_norm_unbiased"
    assert src.text.startswith("def rms_norm_unbiased(")
    triton = kernels.registry().op("rms_norm").providers.get("triton")
    if triton is not None:  # registered where Triton imports: the lazily imported triton_op's own function
        tsrc = provider_source(triton.fn)
        assert tsrc.function == "inferensics.kernels._triton.norm.rms_norm_triton"
        assert tsrc.text.startswith("def rms_norm_triton(")
