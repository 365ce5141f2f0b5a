"""A faulty compiler customisation for the pack tests, importable by a fresh process by its path."""

from __future__ import annotations

import torch


def gelu_wrong(x: torch.Tensor, approximate: str = "none") -> torch.Tensor:
    """A faulty decomposition of ``aten.gelu.default`` (the erf argument off by 10 %)."""
    return 0.5 * x * (1 + torch.erf(x * 0.7071067811865476 * 1.1))


VOCAB = 32


class Lookup(torch.nn.Module):
    """Embedding → Linear: a token id outside ``VOCAB`` is an out-of-range lookup."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.emb = torch.nn.Embedding(VOCAB, 8)
        self.out = torch.nn.Linear(8, VOCAB)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits per token."""
        logits: torch.Tensor = self.out(self.emb(ids))
        return logits


def lookup() -> Lookup:
    """The factory a bundle names as ``tests.replay.packmodels:lookup``."""
    return Lookup()


def lookup_inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    """In-range token ids of ``shape``."""
    return (torch.randint(0, VOCAB, shape, generator=torch.Generator().manual_seed(1)),)


class PaddedLookup(Lookup):
    """:class:`Lookup` behind a serving wrapper: ``forward`` runs eagerly and pads the ids, the compiled frame
    is ``step``, so the graph's token input is a tensor the request never passed (as the demo decoder's
    ``generate`` pads before its compiled ``prefill``)."""

    @torch.compiler.disable(recursive=False)  # type: ignore[no-untyped-call,untyped-decorator]
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """Logits per token of the ids padded by one leading 0."""
        return self.step(torch.nn.functional.pad(ids, (1, 0)))

    def step(self, tokens: torch.Tensor) -> torch.Tensor:
        """The compiled part."""
        logits: torch.Tensor = self.out(self.emb(tokens))
        return logits


def padded_lookup() -> PaddedLookup:
    """The factory a bundle names as ``tests.replay.packmodels:padded_lookup``."""
    return PaddedLookup()


def unseeded() -> torch.nn.Module:
    """A factory that forgot ``torch.manual_seed``: its weights depend on what drew from torch's generator before."""
    return torch.nn.Linear(8, 4).eval()
