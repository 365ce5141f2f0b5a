"""Arguments an op has no meaning for are refused in one line by its reference, whichever provider would have
served them, and counted as nobody's failure; edge sizes it does define (an empty batch) give their result on
every provider."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch

from inferensics import kernels
from inferensics.kernels import QualifyOptions

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]


@pytest.fixture
def failures() -> Iterator[Callable[[], dict[str, int]]]:
    """The registry's failure counts since the test began (providers it quarantined put back after)."""
    reg = kernels.registry()
    before = dict(reg.log.stats()["failures"])
    quarantined = {name: dict(op.quarantined) for name, op in reg.ops.items()}

    def since() -> dict[str, int]:
        now = reg.log.stats()["failures"]
        return {k: n - before.get(k, 0) for k, n in now.items() if n != before.get(k, 0)}

    yield since
    for name, op in reg.ops.items():
        op.quarantined.clear()
        op.quarantined.update(quarantined[name])
        op._invalidate()


def _refused(call: Callable[[], Any], error: type[Exception], *words: str) -> str:
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert "\n" not in message, message
    for word in words:
        assert word in message, message
    return message


# --- rotary_embedding --------------------------------------------------------------------------------------


def test_rotary_refuses_an_odd_head_dim_rather_than_return_another_shape(failures: Callable[[], Any]) -> None:
    x = torch.arange(6.0).reshape(1, 2, 3)
    _refused(lambda: kernels.rotary_embedding(x, torch.ones(1, 1), torch.zeros(1, 1)), ValueError, "even head_dim")
    _refused(lambda: kernels.rotary_embedding(torch.ones(2, 1, 3, 5), torch.ones(3, 2), torch.ones(3, 2)), ValueError)
    assert failures() == {}


@pytest.mark.parametrize(
    ("x", "table", "want"),
    [
        ((5, 2, 8), (1, 4), "[T, head_dim/2] = [5, 4]"),  # one position's angles for five positions
        ((5, 2, 8), (5, 3), "[T, head_dim/2] = [5, 4]"),  # another width
        ((5, 2, 8), (5, 8), "[T, head_dim/2] = [5, 4]"),  # the full head_dim, not its half
        ((2, 3, 5, 8), (4, 4), "[S, head_dim/2] = [5, 4]"),  # [B, H, S, D]: positions are the third dimension
        ((2, 3, 5, 8), (2, 4), "[S, head_dim/2] = [5, 4]"),  # ... not the batch
        ((5, 2, 8), (5, 1, 4), "[T, head_dim/2] = [5, 4]"),  # a 3-dim table
    ],
)
def test_rotary_refuses_cos_and_sin_that_do_not_fit_x(
    x: tuple[int, ...], table: tuple[int, ...], want: str, failures: Callable[[], Any]
) -> None:
    args = (torch.randn(x), torch.randn(table), torch.randn(table))
    _refused(lambda: kernels.rotary_embedding(*args), ValueError, want, f"got cos {table}")
    assert failures() == {}


def test_rotary_refuses_x_of_other_ranks_and_integers(failures: Callable[[], Any]) -> None:
    _refused(lambda: kernels.rotary_embedding(torch.ones(4, 8), torch.ones(4, 4), torch.ones(4, 4)), ValueError)
    x = torch.arange(16).reshape(1, 2, 8)
    _refused(lambda: kernels.rotary_embedding(x, torch.ones(1, 4), torch.ones(1, 4)), TypeError, "floating-point x")
    assert failures() == {}


def test_rotary_still_rotates_what_it_defines() -> None:
    x, angles = torch.randn(5, 2, 8), torch.randn(5, 4)
    out = kernels.rotary_embedding(x, angles.cos(), angles.sin())
    x1, x2 = x.chunk(2, dim=-1)
    c, s = angles.cos()[:, None], angles.sin()[:, None]
    torch.testing.assert_close(out, torch.cat((x1 * c - x2 * s, x1 * s + x2 * c), dim=-1))
    bhsd = kernels.rotary_embedding(x.transpose(0, 1)[None], angles.cos(), angles.sin())
    torch.testing.assert_close(bhsd[0].transpose(0, 1), out)
    empty = kernels.rotary_embedding(torch.ones(0, 2, 8), torch.ones(0, 4), torch.ones(0, 4))
    assert empty.shape == (0, 2, 8)


def test_qualify_reports_an_odd_head_dim_as_rejected_not_exact() -> None:
    shapes = {"rotary_embedding": [{"tokens": 2, "heads": 2, "head_dim": 3}]}
    opts = QualifyOptions(ops=("rotary_embedding",), shapes=shapes, warmup=0, trials=2, iters=1, apply=False)
    result = kernels.qualify(kernels.registry(), opts)
    by = {r.provider: r for r in result.records}
    assert by["reference"].status == "error"
    assert "even head_dim" in by["reference"].detail
    assert not [r for r in result.records if r.status == "measured"]


# --- rms_norm and fused_add_rms_norm -----------------------------------------------------------------------


def test_norms_refuse_integer_inputs_rather_than_truncate(failures: Callable[[], Any]) -> None:
    ints, w = torch.tensor([[3, 4]]), torch.ones(2)
    _refused(lambda: kernels.rms_norm(ints, w, 1e-6), TypeError, "rms_norm", "floating-point x", "int64")
    _refused(lambda: kernels.fused_add_rms_norm(ints, ints.float(), w, 1e-6), TypeError, "floating-point x")
    _refused(lambda: kernels.fused_add_rms_norm(ints.float(), ints, w, 1e-6), TypeError, "floating-point residual")
    _refused(lambda: kernels.rms_norm(torch.tensor([[True, False]]), w, 1e-6), TypeError, "bool")
    assert failures() == {}
    torch.testing.assert_close(
        kernels.rms_norm(ints.float(), w, 1e-6), torch.tensor([[0.8485, 1.1314]]), atol=1e-4, rtol=0
    )
    normed, residual = kernels.fused_add_rms_norm(ints.float(), ints.float(), w, 1e-6)
    torch.testing.assert_close(residual, torch.tensor([[6.0, 8.0]]))
    torch.testing.assert_close(normed, torch.tensor([[0.8485, 1.1314]]), atol=1e-4, rtol=0)


def test_no_provider_is_offered_integer_rows() -> None:
    reg = kernels.registry()
    for name, args in (
        ("rms_norm", (torch.tensor([[3, 4]]), torch.ones(2), 1e-6)),
        ("fused_add_rms_norm", (torch.tensor([[3, 4]]), torch.tensor([[1, 1]]), torch.ones(2), 1e-6)),
    ):
        decision = reg.op(name).select(args)
        assert decision.provider == "reference", decision
        assert all("floating-point" in why for _, why in decision.skipped if not why.startswith("platform")), decision


# --- paged_decode_attention --------------------------------------------------------------------------------


def _paged(batch: int, width: int, pages: int) -> tuple[Any, ...]:
    q = torch.randn(batch, 4, 64)
    k, v = torch.randn(pages, 16, 2, 64), torch.randn(pages, 16, 2, 64)
    return q, k, v, torch.zeros(batch, width, dtype=torch.int32), torch.zeros(batch, dtype=torch.int32), 0.125


@pytest.mark.parametrize("pages", [4, 0])
def test_paged_attention_of_an_empty_batch_is_empty_on_every_provider(pages: int) -> None:
    args = _paged(0, 2, pages)
    for provider in kernels.registry().op("paged_decode_attention").providers.values():
        out = provider.fn(*args)
        assert (provider.name, out.shape, out.dtype) == (provider.name, (0, 4, 64), torch.float32)


@pytest.mark.usefixtures("restored_registry")
def test_an_empty_batch_is_served_by_each_provider_without_a_failure(failures: Callable[[], Any]) -> None:
    op = kernels.registry().op("paged_decode_attention")
    for first in [p for p in op.providers if p != "reference"]:
        op.set_priority([first])
        out = kernels.paged_decode_attention(*_paged(0, 2, 4))
        assert out.shape == (0, 4, 64)
        assert not op.quarantined, op.quarantined
    assert failures() == {}


@pytest.mark.parametrize(("width", "pages"), [(0, 4), (2, 0)])
def test_paged_attention_of_empty_sequences_is_zeros(width: int, pages: int) -> None:
    # No page to read (a table 0 pages wide, or a cache of none): every sequence is empty, so zeros.
    args = _paged(2, width, pages)
    for name in ("reference", "sdpa"):
        out = kernels.registry().op("paged_decode_attention").providers[name].fn(*args)
        assert torch.equal(out, torch.zeros(2, 4, 64)), name


def test_paged_attention_refuses_an_integer_query(failures: Callable[[], Any]) -> None:
    q, k, v, table, lens, scale = _paged(1, 1, 1)
    args = (q.long(), k.long(), v.long(), table, lens, scale)
    _refused(lambda: kernels.paged_decode_attention(*args), TypeError, "floating-point q", "int64")
    assert failures() == {}
