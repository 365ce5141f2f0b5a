"""The envelope decoder never raises on arbitrary input, and round-trips what PyTorch writes."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from inferensics.collector.trace import CompileAssembler, Damaged, Envelope, iter_file_envelopes, read_trace_file
from inferensics.collector.trace.assembler import AssemblyContext
from inferensics.collector.trace.envelope import decode_record

PREFIX = "V1130 08:11:57.905000 12768 torch/_dynamo/utils.py:2350] "

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)


def _record(metadata: dict[str, object], payload: str | None) -> list[str]:
    if payload is not None:
        metadata = {**metadata, "has_payload": hashlib.md5(payload.encode(), usedforsecurity=False).hexdigest()}
    lines = [PREFIX + json.dumps(metadata)]
    if payload is not None:
        lines += ["\t" + ln for ln in payload.split("\n")]
    return lines


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=80), max_size=30))
def test_arbitrary_lines_never_raise(lines: list[str]) -> None:
    out = list(iter_file_envelopes(lines))
    assert all(isinstance(x, Envelope | Damaged) for x in out)
    asm = CompileAssembler(AssemblyContext(host="h", source="trace"), lambda e: None)
    for x in out:
        if isinstance(x, Envelope):
            asm.feed(x)
    asm.finish()


kinds = st.sampled_from(["compilation_metrics", "dynamo_start", "artifact", "inductor_output_code", "str", "x"])


@settings(max_examples=200, deadline=None)
@given(
    kinds,
    json_values,
    st.integers(0, 50),
    st.integers(0, 9),
    st.one_of(
        st.none(),
        # no lone surrogates: torch hashes a payload as UTF-8 and could not write one (see the test below)
        st.text(
            alphabet=st.characters(
                blacklist_characters="\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029", blacklist_categories=["Cs"]
            ),
            max_size=60,
        ),
    ),
)
def test_well_formed_records_round_trip(kind: str, body: object, frame: int, fcid: int, payload: str | None) -> None:
    lines = _record({kind: body, "frame_id": frame, "frame_compile_id": fcid, "attempt": 0}, payload)
    (env,) = list(iter_file_envelopes(lines))
    assert isinstance(env, Envelope)
    assert env.kind == kind
    assert env.body == body
    assert env.compile_id == f"{frame}/{fcid}"
    assert env.payload == payload
    assert env.payload_ok


def test_a_payload_with_a_lone_surrogate_reads_as_damaged() -> None:
    """A live record whose payload holds a lone surrogate (no file has one: files are read with errors=replace)
    cannot match any hash torch wrote: the envelope is kept, its payload flagged, nothing raised (CI's fuzzing
    generated such a payload)."""
    metadata = {"artifact": {"name": "x"}, "frame_id": 0, "frame_compile_id": 0, "has_payload": "0" * 32}
    env = decode_record(metadata, "code \ud800 more")
    assert env.kind == "artifact"
    assert env.payload == "code \ud800 more"
    assert not env.payload_ok


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=40), st.integers(0, 5))
def test_damaged_payload_is_flagged(payload: str, cut: int) -> None:
    payload = payload.replace("\r", "").replace("\n", " ") + "x"
    lines = _record({"chromium_event": {}, "frame_id": 0, "frame_compile_id": 0}, payload)
    lines[-1] = lines[-1][: max(1, len(lines[-1]) - 1 - cut)] + "\u2603"
    (env,) = list(iter_file_envelopes(lines))
    assert isinstance(env, Envelope)
    assert not env.payload_ok


def test_truncated_header_is_damaged() -> None:
    out = list(iter_file_envelopes([PREFIX + '{"compilation_metrics": {"co_name": "f"', "\tstray"]))
    assert len(out) == 1
    assert isinstance(out[0], Damaged)


def test_carriage_return_in_a_payload_is_payload_text(tmp_path: Path) -> None:
    payload = 'x = "a\rb"\ny = "c"\r\n'
    lines = [ln + "\n" for ln in _record({"dynamo_output_graph": {}, "frame_id": 0, "frame_compile_id": 0}, payload)]
    (env,) = list(iter_file_envelopes(lines))
    assert isinstance(env, Envelope)
    assert (env.payload, env.payload_ok) == (payload, True)
    path = tmp_path / "cr.log"
    path.write_bytes("".join(lines).encode())
    report, _ = read_trace_file(path, host="h")
    assert (report.envelopes, report.damaged_lines, report.stats.damaged_payloads) == (1, 0, 0)
