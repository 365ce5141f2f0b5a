"""Host-side index bounds for replay on an accelerator.

On a GPU an out-of-range token id is a device-side assert that ends the process's CUDA context, so replay
checks indexing ops' bounds on the host while eager code runs there (seen on the H200: the fault suite's
"token id out of range" took the four tests after it down with it). CI has no GPU: these tests enter the
check directly on CPU tensors, where the native ops would raise their own error instead.
"""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional

from inferensics.replay._internal import torch_adapter as ta


def test_embedding_out_of_range_is_an_index_error_before_the_op() -> None:
    weight = torch.randn(32, 4)
    ids = torch.tensor([[0, 5, 40]])
    with pytest.raises(IndexError, match=r"embedding indices span \[0, 40\] for a size of 32"), ta._IndexBounds():
        functional.embedding(ids, weight)


def test_in_range_indexing_runs_unchanged() -> None:
    source = torch.arange(12.0).reshape(3, 4)
    ids = torch.tensor([2, 0])
    with ta._IndexBounds():
        got = (
            functional.embedding(ids, source),
            torch.index_select(source, 1, ids),
            torch.gather(source, 0, ids.view(2, 1).expand(2, 4)),
            source[torch.tensor([-1, 0])],
        )
    want = (source[ids], source[:, ids], source[ids], source[[2, 0]])
    for g, w in zip(got, want, strict=True):
        assert torch.equal(g, w)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: torch.index_select(s, 1, torch.tensor([4])), r"index_select indices span \[4, 4\] for a size of 4"),
        (lambda s: torch.gather(s, 0, torch.full((1, 4), 3)), r"gather indices span \[3, 3\] for a size of 3"),
        (lambda s: s[torch.tensor([-4])], r"index indices span \[-4, -4\] for a size of 3"),
    ],
)
def test_each_indexing_op_is_checked(call: object, message: str) -> None:
    source = torch.arange(12.0).reshape(3, 4)
    with pytest.raises(IndexError, match=message), ta._IndexBounds():
        call(source)  # type: ignore[operator]


def test_nothing_is_added_on_cpu() -> None:
    with ta.index_bounds_checked([torch.zeros(2, dtype=torch.long)]) as mode:
        assert mode is None
    assert isinstance(ta.index_bounds_checked([torch.zeros(2, device="meta")]), ta._IndexBounds)


def test_the_op_of_an_out_of_range_lookup_is_still_named() -> None:
    """aten_ops_of runs the node with the bounds check beneath its op recorder: the lookup is named, not run."""
    import torch.fx

    from inferensics.replay._internal import graph_probe as gp

    class Lookup(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = torch.nn.Embedding(32, 4)

        def forward(self, ids: torch.Tensor) -> torch.Tensor:
            out: torch.Tensor = self.emb(ids)
            return out

    gm = torch.fx.symbolic_trace(Lookup())
    node = next(n for n in gm.graph.nodes if n.op == "call_module")
    ids = torch.tensor([3, 40])
    real = ta.index_bounds_checked
    consulted: list[object] = []

    def forced(tensors: object) -> object:  # as on a GPU: the check is on
        consulted.append(tensors)
        return ta._IndexBounds()

    ta.index_bounds_checked = forced  # type: ignore[assignment]
    try:
        ops = gp.aten_ops_of(gm, node, {"ids": ids})
    finally:
        ta.index_bounds_checked = real
    assert consulted, "the node ran without the bounds check"
    assert [ta.op_name(op) for op in ops][:1] == ["aten.embedding"]
