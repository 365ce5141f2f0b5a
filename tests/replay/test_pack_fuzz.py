"""A replay pack is a boundary: its ``pack.json`` and captured inputs come from wherever the pack was exported
(unsigned), so whatever a damaged or edited pack holds, opening it and reading its inputs either work or say
what is wrong in one :class:`ReplayError` line, and never read a file outside the pack (property-based: the
``suite`` profile draws the same examples every run; ``make fuzz`` draws fresh ones)."""

from __future__ import annotations

import hashlib
import json
import shutil
import struct
from pathlib import Path
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from inferensics.replay import ReplayError, read_pack, write_pack
from inferensics.replay._internal.pack import INPUTS_FILE, PACK_FILE, read_safetensors, write_safetensors
from tests.json_edits import edit

ESCAPES = ["/etc/hostname", "../outside.bin", "inputs/../../outside.bin", "", ".", "a\\..\\b"]
INPUTS = {"input_ids": torch.arange(6, dtype=torch.int64).reshape(2, 3), "scale": torch.tensor(0.5)}


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A pack written by the real writer (no bundle: opening a pack checks its files, not a bundle)."""
    root = tmp_path_factory.mktemp("packfuzz")
    (root / "outside.bin").write_bytes(b"outside the pack\n")
    request = {"request_id": "req-1", "bundle_id": "", "graph_keys": ["fxkey"], "graph_artifacts": []}
    return write_pack(root / "pack", request=request, inputs=write_safetensors(INPUTS))


def _opens_or_one_line(directory: Path) -> None:
    try:
        pack = read_pack(directory)
        assert isinstance(pack.request_id, str)
        for name in pack.meta["files"]:
            assert (directory / name).resolve().is_relative_to(directory.resolve()), name
        inputs = pack.inputs()
        assert all(isinstance(t, torch.Tensor) for t in inputs.values())
    except ReplayError as exc:
        problem = str(exc)
        assert "\n" not in problem, problem


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_edited_pack_json_opens_or_is_one_line(pack_dir: Path, data: st.DataObject) -> None:
    original = (pack_dir / PACK_FILE).read_bytes()
    try:
        if data.draw(st.booleans(), label="bytes"):
            at = data.draw(st.integers(0, len(original) - 1), label="at")
            raw = original[:at] + data.draw(st.sampled_from([b"", b"\x00\xff{[", b'"x"']), label="splice")
        else:
            raw = json.dumps(edit(json.loads(original), data, ESCAPES)).encode()
        (pack_dir / PACK_FILE).write_bytes(raw)
        _opens_or_one_line(pack_dir)
    finally:
        (pack_dir / PACK_FILE).write_bytes(original)


def _safetensors_header(blob: bytes) -> dict[str, Any]:
    (n,) = struct.unpack("<Q", blob[:8])
    header: dict[str, Any] = json.loads(blob[8 : 8 + n])
    return header


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_edited_captured_inputs_read_or_are_one_line(pack_dir: Path, data: st.DataObject) -> None:
    """The inputs edited (their header, or their bytes) and their hash in pack.json updated, as an editor
    would: the pack opens, and reading the inputs either works or is one line."""
    original_meta = (pack_dir / PACK_FILE).read_bytes()
    original = (pack_dir / INPUTS_FILE).read_bytes()
    try:
        (n,) = struct.unpack("<Q", original[:8])
        if data.draw(st.booleans(), label="edit the header"):
            head = json.dumps(edit(_safetensors_header(original), data, ESCAPES)).encode()
            blob = struct.pack("<Q", len(head)) + head + original[8 + n :]
        else:
            at = data.draw(st.integers(0, len(original) - 1), label="at")
            flipped = original[:at] + bytes([original[at] ^ 0x41]) + original[at + 1 :]
            huge = struct.pack("<Q", 2**62) + original[8:]
            blob = data.draw(st.sampled_from([original[:at], huge, flipped]), label="bytes")
        (pack_dir / INPUTS_FILE).write_bytes(blob)
        meta = json.loads(original_meta)
        meta["files"][INPUTS_FILE] = hashlib.sha256(blob).hexdigest()
        (pack_dir / PACK_FILE).write_text(json.dumps(meta))
        _opens_or_one_line(pack_dir)
    finally:
        (pack_dir / INPUTS_FILE).write_bytes(original)
        (pack_dir / PACK_FILE).write_bytes(original_meta)


def test_the_inputs_round_trip(pack_dir: Path) -> None:
    """The fuzzed reader still reads what the writer wrote, exactly."""
    got = read_pack(pack_dir).inputs()
    assert list(got) == list(INPUTS)
    for name, t in INPUTS.items():
        assert torch.equal(got[name], t)
        assert got[name].dtype == t.dtype


@pytest.mark.parametrize("name", ESCAPES[:3])
def test_a_pack_file_outside_the_pack_is_refused(pack_dir: Path, tmp_path: Path, name: str) -> None:
    """pack.json listing a path that leaves the pack (with the outside file's true hash) is refused before it
    is read: it was hashed, and a pack could make replay read any file the user can."""
    d = tmp_path / "pack"
    shutil.copytree(pack_dir, d)
    (tmp_path / "outside.bin").write_bytes(b"outside the pack\n")
    meta = json.loads((d / PACK_FILE).read_text())
    meta["files"][name] = hashlib.sha256(b"outside the pack\n").hexdigest()
    (d / PACK_FILE).write_text(json.dumps(meta))
    with pytest.raises(ReplayError, match="files") as info:
        read_pack(d)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ({"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 8]}, "24 expected"),
        ({"dtype": "F32", "shape": [2], "data_offsets": [0, 10**9]}, "not a byte range"),
        ({"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}, "not one replay reads"),
        ({"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}, "not a list of sizes"),
        ("F32", "not an object"),
    ],
)
def test_a_bad_inputs_entry_is_named(spec: Any, says: str) -> None:
    head = json.dumps({"x": spec}).encode()
    with pytest.raises(ReplayError, match=says):
        read_safetensors(struct.pack("<Q", len(head)) + head + bytes(24))
