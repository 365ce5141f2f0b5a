"""``investigate()`` on a request of the wrong shape says so in its verdict and nothing else: torch's fake-tensor
logger printed one ``failed while attempting to run meta for aten.mm.default`` record (with its traceback) to
the terminal first, from the compile that traces the request. Silenced for the investigation only."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
import torch

from inferensics.replay import investigate

FAKE_TENSOR_LOG = "torch._subclasses.fake_tensor"
META_FAILURE = "failed while attempting to run meta"


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_shape_mismatch_prints_only_the_verdict(capfd: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger(FAKE_TENSOR_LOG)
    records = _Records()
    logger.addHandler(records)
    filters, disabled, level = list(logger.filters), logger.disabled, logger.level
    try:
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU())
        verdict = investigate(model, torch.randn(2, 5, generator=torch.Generator().manual_seed(0)))
        assert verdict.category == "inputs"
        assert "mat1 and mat2 shapes cannot be multiplied (2x5 and 8x16)" in verdict.summary
        assert not [m for m in records.messages if META_FAILURE in m]
        _, err = capfd.readouterr()
        assert META_FAILURE not in err
        # Scoped: the logger is as it was, and says what it says outside an investigation.
        assert (list(logger.filters), logger.disabled, logger.level) == (filters, disabled, level)
        logger.error("%s for %s", META_FAILURE, "a compile outside replay")
        assert records.messages == [f"{META_FAILURE} for a compile outside replay"]
    finally:
        logger.removeHandler(records)
        capfd.readouterr()


FX_CALL_NOTE = "Call using an FX-traced Module"


def test_a_dtype_mismatch_prints_only_the_verdict(capfd: pytest.CaptureFixture[str]) -> None:
    """A request of the wrong dtype (integer ids into a float model) printed ~20 lines to stderr first: torch.fx
    prints the traceback of an error raised inside a traced graph's forward ("mat1 and mat2 must have the same
    dtype ... Call using an FX-traced Module") before re-raising it; the verdict names the same error."""
    from torch.fx.graph_module import _WrappedCall  # pyright: ignore[reportPrivateUsage]

    original = _WrappedCall.__call__
    capfd.readouterr()
    model = torch.nn.Sequential(torch.nn.Linear(16, 8), torch.nn.GELU(), torch.nn.Linear(8, 4))
    verdict = investigate(model, (torch.randint(0, 3, (4, 16), generator=torch.Generator().manual_seed(0)),))
    out, err = capfd.readouterr()
    assert verdict.category == "inputs"
    assert "mat1 and mat2 must have the same dtype" in verdict.summary
    assert (out, err) == ("", "")
    # Scoped: outside an investigation a failing traced graph says what torch says.
    assert _WrappedCall.__call__ is original
    traced = torch.fx.symbolic_trace(torch.nn.Linear(16, 8))
    with pytest.raises(RuntimeError, match="same dtype"):
        traced(torch.randint(0, 3, (4, 16)))
    assert FX_CALL_NOTE in capfd.readouterr().err


class _ChecksWidth(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != 8:
            raise ValueError(f"expected 8 features, got {x.shape[-1]}")  # the line a verdict names
        return x * 2


def test_a_shape_mismatch_says_what_it_located_and_what_it_could_not() -> None:
    """A request of the wrong shape gets no FX node (Dynamo cannot trace it), and its verdict named nothing else
    either. Now it names what running it eagerly finds: the op and, where the model's own code called it, the line;
    an op reached only through torch's modules, or a model line that raises outside any op, is said as such."""
    seq = investigate(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU()), torch.randn(2, 5))
    assert (seq.op, seq.fx_node, seq.source_file, seq.source_line) == ("aten.addmm", "", "", 0)
    assert seq.summary.endswith(
        "; located by running it eagerly (no FX node: Dynamo could not trace the request with these inputs); "
        "aten.addmm was reached through torch's own modules only, from no line of the model's code"
    ), seq.summary
    assert seq.evidence["located_by"] == "eager run"
    checked = investigate(_ChecksWidth(), torch.randn(2, 5))
    line = next(i for i, t in enumerate(Path(__file__).read_text().splitlines(), 1) if "the line a verdict" in t)
    assert (checked.op, checked.fx_node, checked.source_file, checked.source_line) == ("", "", __file__, line)
    assert checked.summary == (
        "eager raised on this request, in fp64 too: ValueError: expected 8 features, got 5; raised outside any "
        "operator, at the model's line (no FX node: Dynamo could not trace the request with these inputs)"
    )
