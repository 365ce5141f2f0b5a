"""The compile caches key on the registry's policy: after a priority change, a refusal or a quarantine, a compile
of the same graph is never served the artifact traced with the provider chosen before. Real ``torch.compile``
(Inductor) on the CPU, with the FX graph cache and the AOTAutograd cache on, in a cache folder of each test's own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch
import torch._functorch.config
import torch._inductor.config
import torch.compiler.config

from inferensics.kernels import DecisionLog, Provider, Requirements, SemanticOp, ToleranceSpec, _torch_adapter
from inferensics.kernels.ops.common import rows_bucket

pytestmark = [
    pytest.mark.slow,
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

_names = (f"test_salt_op_{i}" for i in itertools.count())
MARK = 1000.0
"""What the marked provider adds: its output tells which provider a compiled graph runs."""


@pytest.fixture(autouse=True)
def _warm_caches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch._dynamo.reset()
    with (
        torch._functorch.config.patch(enable_autograd_cache=True),
        torch._inductor.config.patch(fx_graph_cache=True),
    ):
        yield
    torch._dynamo.reset()


def _marked(fails: list[bool]) -> Callable[..., torch.Tensor]:
    """A custom operator (as a vendor kernel is) computing the reference plus :data:`MARK`; raises while
    ``fails[0]``."""

    @torch.library.custom_op(f"inferensics_test::{next(_names)}_marked", mutates_args=())
    def marked(x: torch.Tensor) -> torch.Tensor:
        if fails[0]:
            raise RuntimeError("planted")
        return x * 2 + MARK

    @marked.register_fake
    def _(x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)

    return marked


def _op(fails: list[bool] | None = None) -> SemanticOp:
    op = SemanticOp(
        next(_names),
        "(Tensor x) -> Tensor",
        lambda x: x * 2,
        tolerance=ToleranceSpec(),
        bucket=rows_bucket,
        doc="doubles x",
        log=DecisionLog(),
    )
    op.register(Provider("marked", "vendor", _marked(fails or [False]), Requirements()))
    return op


def _serve(op: SemanticOp, traced: list[str]) -> torch.Tensor:
    """``op`` compiled afresh (Dynamo's frames dropped first, as in a new process), called on ones(4); appends
    to ``traced`` the provider the compile's decision names (Dynamo's fake propagation records one even when
    the caches serve the graph)."""
    torch._dynamo.reset()
    op.log = DecisionLog()

    def serve(x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = op(x) + 1
        return out

    out = torch.compile(serve, backend="inductor")(torch.ones(4))
    traced.extend(d.provider for d in op.log.snapshot() if d.compiled)
    return out


REFERENCE_OUT = torch.full((4,), 3.0)
MARKED_OUT = torch.full((4,), 3.0 + MARK)


def test_a_priority_change_is_not_served_the_graph_traced_before_it() -> None:
    op, traced = _op(), list[str]()
    torch.testing.assert_close(_serve(op, traced), MARKED_OUT)
    op.set_priority(["reference"])
    # Before: the caches handed back the marked graph (3 + MARK) while the compile's decision said reference.
    torch.testing.assert_close(_serve(op, traced), REFERENCE_OUT)
    assert traced == ["marked", "reference"]
    op.set_priority(["marked"])  # back to the first policy: its entries are found again
    torch.testing.assert_close(_serve(op, traced), MARKED_OUT)
    assert traced == ["marked", "reference", "marked"]


def test_a_bucket_refusal_is_not_served_the_graph_traced_before_it() -> None:
    op, traced = _op(), list[str]()
    torch.testing.assert_close(_serve(op, traced), MARKED_OUT)
    op.refuse(rows_bucket([torch.ones(4)]), "marked", "outside tolerance")
    torch.testing.assert_close(_serve(op, traced), REFERENCE_OUT)
    assert traced == ["marked", "reference"]


def test_a_quarantine_is_not_served_the_graph_traced_before_it() -> None:
    fails = [False]
    op, traced = _op(fails), list[str]()
    torch.testing.assert_close(_serve(op, traced), MARKED_OUT)
    fails[0] = True
    torch.testing.assert_close(op(torch.ones(4)), torch.full((4,), 2.0))  # eager: raises, quarantined, reference
    assert set(op.quarantined) == {("float32[4]@cpu", "marked")}
    # Before: the cached graph still called the marked kernel, which raised RuntimeError (planted) to the caller.
    torch.testing.assert_close(_serve(op, traced), REFERENCE_OUT)
    assert traced == ["marked", "reference"]


def test_the_same_policy_is_served_from_the_caches() -> None:
    from torch._dynamo.utils import counters

    op, traced = _op(), list[str]()
    torch.testing.assert_close(_serve(op, traced), MARKED_OUT)
    counters.clear()
    torch.testing.assert_close(_serve(op, traced), MARKED_OUT)
    assert counters["aot_autograd"]["autograd_cache_hit"] == 1
    assert traced == ["marked", "marked"]


def test_the_kernel_salt_is_one_named_part_of_the_tag_and_keeps_the_users_own() -> None:
    saved = torch.compiler.config.cache_key_tag
    try:
        torch.compiler.config.cache_key_tag = "mine"
        op = _op()
        base, parts = _torch_adapter.cache_tag_parts(torch.compiler.config.cache_key_tag)
        assert base == "mine"
        assert set(parts) == {_torch_adapter.KERNELS_TAG_PART}
        before = parts[_torch_adapter.KERNELS_TAG_PART]
        _torch_adapter.set_cache_tag_part("customisations", "0123")
        op.set_priority(["reference"])
        base, parts = _torch_adapter.cache_tag_parts(torch.compiler.config.cache_key_tag)
        assert base == "mine"
        assert parts["customisations"] == "0123"
        assert parts[_torch_adapter.KERNELS_TAG_PART] != before
        op.set_priority(["marked"])
        assert _torch_adapter.cache_tag_parts(torch.compiler.config.cache_key_tag)[1] == {
            "customisations": "0123",
            _torch_adapter.KERNELS_TAG_PART: before,
        }
        sep = _torch_adapter.CACHE_TAG_SEP
        assert torch.compiler.config.cache_key_tag == f"mine{sep}customisations-0123{sep}kernels-{before}"
    finally:
        torch.compiler.config.cache_key_tag = saved
        _torch_adapter.sync_cache_tag()


SERVE_IN_A_PROCESS = """
import sys
import torch
from torch._dynamo.utils import counters
from inferensics.kernels import DecisionLog, Provider, Requirements, SemanticOp, ToleranceSpec
from inferensics.kernels.ops.common import rows_bucket

@torch.library.custom_op("inferensics_test::salt_process_marked", mutates_args=())
def marked(x: torch.Tensor) -> torch.Tensor:
    return x * 2 + 1000.0

@marked.register_fake
def _(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)

op = SemanticOp("test_salt_process_op", "(Tensor x) -> Tensor", lambda x: x * 2, tolerance=ToleranceSpec(),
                bucket=rows_bucket, doc="doubles x", log=DecisionLog())
op.register(Provider("marked", "vendor", marked, Requirements()))
op.set_priority([sys.argv[1]])
out = torch.compile(lambda x: op(x) + 1, backend="inductor")(torch.ones(4))
print(out[0].item(), counters["aot_autograd"]["autograd_cache_hit"], [d.provider for d in op.log.snapshot()])
"""


def test_another_process_with_another_policy_misses_and_one_with_the_same_policy_hits(tmp_path: Path) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "shared-cache")}

    def serve(priority: str) -> list[str]:
        proc = subprocess.run(
            [sys.executable, "-P", "-c", SERVE_IN_A_PROCESS, priority],
            capture_output=True, text=True, timeout=300, check=False, env=env, cwd=tmp_path,
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr[-3000:]
        return proc.stdout.strip().splitlines()[-1].split(" ", 2)

    assert serve("marked") == ["1003.0", "0", "['marked']"]
    # Before: served from the first process's cache entries, the marked graph (1003) under a reference decision.
    assert serve("reference") == ["3.0", "0", "['reference']"]
    assert serve("marked") == ["1003.0", "1", "['marked']"]  # the same policy: the warm cache serves it
