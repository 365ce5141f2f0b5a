"""The demo's failing requests get the right verdicts in process: the NaN cache page is the input at fault
(named, with positions); the canary's prefill is the candidate's SiLU decomposition at the SwiGLU line."""

from __future__ import annotations

import pytest

from inferensics.demo import incidents
from inferensics.replay import investigate
from tests.replay.demo_requests import DECODER_FILE, SILU_LINE, nan_decode_request, prefill_request

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_compile_caches")]


def test_nan_request_names_the_poisoned_cache() -> None:
    model, inputs = nan_decode_request()
    verdict = investigate(model, inputs)
    assert verdict.category == "inputs", verdict.summary
    bad = verdict.evidence["bad_inputs"][0]
    assert bad["tensor"] == "k_cache"
    assert bad["positions"][0][:2] == [0, 1]
    assert bad["positions"][0][3] == 0
    assert "k_cache" in verdict.summary


def test_canary_request_names_the_silu_decomposition() -> None:
    model, inputs = prefill_request()
    with incidents.decomposition_fault():
        verdict = investigate(model, inputs)
    assert verdict.category == "decomposition", verdict.summary
    assert verdict.op == "aten.silu"
    assert verdict.source_file == str(DECODER_FILE)
    assert verdict.source_line == SILU_LINE
    assert verdict.evidence["rungs"][1]["top1_agree"] is not None  # logits get KL and top-k figures
