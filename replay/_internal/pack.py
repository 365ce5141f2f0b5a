"""The replay pack: a folder holding everything a fresh process needs to re-execute one request.

Layout (``pack.json`` lists every other file with its sha256)::

    pack.json            format, request record, bundle id, served graph keys and artifact ids, files
    inputs.safetensors   the captured inputs, as the host SDK stored them
    bundle/              the bundle that served the request (manifest.json + artifacts), when known

Reading a pack checks every file's hash before anything is used, and the inputs against the digest the host
SDK recorded for them when the request ran (the request row's ``capture_blob``). ``pack.json`` is not signed:
whoever can edit the inputs can edit its hashes and its copy of the request row too, so only the digest the
store holds for the request (``recorded_inputs``, which ``inferensics replay`` asks the service for) is one the
pack cannot forge; a check against ``pack.json``'s copy alone says so in its note. Only torch and the standard
library are needed (the safetensors format is read here, so a GPU host needs no extra package).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import shutil
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import torch
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from inferensics.bundle.manifest import first_error, safe_name
from inferensics.schema.columns import CAPTURE_BLOB

PACK_FORMAT: Final = "inferensics-replay-pack-v1"
PACK_FILE: Final = "pack.json"
INPUTS_FILE: Final = "inputs.safetensors"
BUNDLE_DIR: Final = "bundle"


class ReplayError(RuntimeError):
    """A replay that cannot go on; the message is one line saying what is wrong and what to do."""


@dataclass(frozen=True)
class InputsCheck:
    """What a pack's captured inputs were checked against."""

    sha256: str
    """The digest of the inputs as read."""
    against: str
    """``store`` (the digest the store recorded for the request), ``pack.json`` (its copy of the request row
    only) or ``""`` (nothing recorded to check them against)."""
    note: str = ""
    """One line saying what was not checked, ``""`` when the store's digest was."""

    def to_dict(self) -> dict[str, str]:
        """The check as the verdict's evidence keeps it."""
        return {"sha256": self.sha256, "checked_against": self.against, "note": self.note}


@dataclass(frozen=True)
class ReplayPack:
    """A verified pack on disk."""

    directory: Path
    meta: dict[str, Any]
    inputs_check: InputsCheck | None = None
    """What the inputs were checked against (``None`` for a pack not opened by :func:`read_pack`)."""
    inputs_bytes: bytes | None = field(default=None, repr=False)
    """The inputs as read and hashed by :func:`read_pack`: what :meth:`inputs` decodes, so the tensors replayed
    are the bytes that were checked, not a second read of the file."""

    @property
    def request_id(self) -> str:
        """The replayed request."""
        return str(self.meta["request"].get("request_id", ""))

    @property
    def bundle_dir(self) -> Path | None:
        """The bundle folder, when the pack carries one."""
        d = self.directory / BUNDLE_DIR
        return d if d.is_dir() else None

    def inputs(self) -> dict[str, torch.Tensor]:
        """The captured inputs by name, in stored order."""
        data = self.inputs_bytes if self.inputs_bytes is not None else (self.directory / INPUTS_FILE).read_bytes()
        return read_safetensors(data)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def export_problem(out: Path) -> str:
    """Why a pack cannot be written to ``out`` (a file, a folder that is not empty, no writable folder to create
    it in), or ``""``. A pack never replaces what is there: the folder may be the bundle itself or the working
    directory (``--export .``)."""
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        return f"{out} exists and is not a folder: choose a new --export folder"
    if out.is_dir():
        try:
            empty = next(out.iterdir(), None) is None
        except OSError as exc:
            return f"{out} cannot be read ({exc.strerror}): choose a new --export folder"
        return "" if empty else f"{out} exists and is not empty: choose a new --export folder"
    why = uncreatable(out)
    return f"{out} cannot be created ({why}): choose a new --export folder" if why else ""


def uncreatable(folder: Path) -> str:
    """Why ``folder`` (which does not exist) cannot be created: its nearest existing parent ``is a file`` or ``is not
    writable``; ``""`` when it can."""
    parent = next(p for p in folder.absolute().parents if p.exists())
    if not parent.is_dir():
        return f"{parent} is a file"
    return "" if os.access(parent, os.W_OK | os.X_OK) else f"{parent} is not writable"


def write_pack(out: Path, *, request: dict[str, Any], inputs: bytes, bundle_dir: Path | None = None) -> Path:
    """Write a pack folder; the same request, inputs and bundle give the same bytes.

    ``out`` must not exist or be an empty folder: nothing there is replaced. A new folder is made private (0700,
    as an empty one given is left as it is): it holds a request's captured inputs, which are tenant data.

    Raises:
        ReplayError: ``out`` exists and is not an empty folder, cannot be created, or lies inside ``bundle_dir``;
            ``inputs`` are not the inputs whose digest the request row records (its ``capture_blob``).
    """
    problem = export_problem(out)
    if problem:
        raise ReplayError(problem)
    recorded = str(request.get(CAPTURE_BLOB) or "")
    if recorded and (actual := hashlib.sha256(inputs).hexdigest()) != recorded.lower():
        raise ReplayError(swapped_inputs(str(request.get("request_id", "")), actual, recorded, "its request row"))
    if bundle_dir is not None and out.resolve().is_relative_to(bundle_dir.resolve()):
        raise ReplayError(f"{out} is inside the bundle folder {bundle_dir}: choose an --export folder outside it")
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    (out / INPUTS_FILE).write_bytes(inputs)
    if bundle_dir is not None:
        shutil.copytree(bundle_dir, out / BUNDLE_DIR)
    files = {
        p.relative_to(out).as_posix(): _sha256(p) for p in sorted(out.rglob("*")) if p.is_file() and p.name != PACK_FILE
    }
    meta = {
        "format": PACK_FORMAT,
        "request": {k: request[k] for k in sorted(request)},
        "bundle_id": str(request.get("bundle_id", "")),
        "graph_keys": list(request.get("graph_keys", [])),
        "graph_artifacts": list(request.get("graph_artifacts", [])),
        "files": files,
    }
    (out / PACK_FILE).write_text(json.dumps(meta, sort_keys=True, indent=2, default=str) + "\n")
    return out


def read_pack(directory: Path | str, *, recorded_inputs: str | None = None) -> ReplayPack:
    """Open a pack, check every file against ``pack.json`` and the inputs against the digest recorded for them.

    Args:
        directory: The pack folder.
        recorded_inputs: The digest the store holds for the request's captured inputs (its row's
            ``capture_blob``): ``None`` when the store was not asked, ``""`` when its row records none. The
            inputs are checked against it, else against ``pack.json``'s copy of the row, which is not signed
            (the returned pack's ``inputs_check`` says which, with a note when it was not the store's).

    Raises:
        ReplayError: not a pack, another format, a missing file, a hash that does not match, or inputs that
            are not the ones whose digest was recorded for the request.
    """
    d = Path(directory)
    meta_path = d / PACK_FILE
    if not meta_path.is_file():
        raise ReplayError(
            f"{d} is not a replay pack (no {PACK_FILE}): export one with `inferensics replay ID --export DIR`"
        )
    try:
        meta = json.loads(meta_path.read_bytes())
    except json.JSONDecodeError as exc:
        raise ReplayError(f"{meta_path} is damaged ({exc.msg} at line {exc.lineno}): export the pack again") from None
    except (UnicodeDecodeError, OSError) as exc:
        raise ReplayError(f"{meta_path} cannot be read ({exc}): export the pack again") from None
    if not isinstance(meta, dict) or meta.get("format") != PACK_FORMAT:
        found = meta.get("format") if isinstance(meta, dict) else type(meta).__name__
        raise ReplayError(f"{meta_path} has format {found!r}, expected {PACK_FORMAT!r}: export the pack again")
    try:
        _PackMeta.model_validate(meta)
    except ValidationError as exc:
        raise ReplayError(f"{meta_path}: {first_error(exc)}: export the pack again") from None
    inputs: bytes | None = None
    for rel, digest in sorted(meta["files"].items()):
        path = d / rel
        if not path.is_file():
            raise ReplayError(f"pack file {rel} is missing: export the pack again")
        data = path.read_bytes()  # the inputs are kept: what is replayed is what was hashed here
        actual = hashlib.sha256(data).hexdigest()
        if actual != digest:
            raise ReplayError(
                f"pack file {rel} fails its hash (sha256 {actual[:12]}, pack.json {digest[:12]}): "
                "the pack was altered; export it again"
            )
        if rel == INPUTS_FILE:
            inputs = data
    if inputs is None:
        raise ReplayError(f"pack {d} holds no captured inputs: export it again from a request with captured inputs")
    request_id = str(meta["request"].get("request_id", ""))
    check = check_inputs(request_id, inputs, str(meta["request"].get(CAPTURE_BLOB) or ""), recorded_inputs)
    return ReplayPack(d, meta, check, inputs)


def swapped_inputs(request_id: str, actual: str, recorded: str, where: str) -> str:
    """The refusal of inputs that are not the ones ``where`` recorded the digest of."""
    return (
        f"request {request_id}: the pack's captured inputs hash to sha256 {actual}, but {where} recorded sha256 "
        f"{recorded} for the inputs it ran with: the inputs were swapped or altered; do not trust this pack, "
        f"export it again (`inferensics replay {request_id} --export DIR`)"
    )


def check_inputs(request_id: str, inputs: bytes, in_pack: str, in_store: str | None) -> InputsCheck:
    """Check ``inputs`` against the digest the store recorded for the request (``in_store``: ``None`` when the
    store was not asked, ``""`` when its row records none), else against ``pack.json``'s copy (``in_pack``).

    Raises:
        ReplayError: the inputs hash to another digest than the one checked against.
    """
    actual = hashlib.sha256(inputs).hexdigest()
    if in_store:
        if actual != in_store.lower():
            raise ReplayError(swapped_inputs(request_id, actual, in_store, "the store"))
        return InputsCheck(actual, "store")
    if in_pack and actual != in_pack.lower():
        raise ReplayError(swapped_inputs(request_id, actual, in_pack, f"its request row in {PACK_FILE}"))
    against = "pack.json" if in_pack else ""
    checked = (
        f"checked against request {request_id}'s row as copied into {PACK_FILE} only, which whoever can edit the "
        "pack can change too"
        if in_pack
        else f"not checked against any recorded digest: request {request_id}'s row in {PACK_FILE} records none"
    )
    if in_store is None:
        return InputsCheck(
            actual,
            against,
            f"the pack's inputs (sha256 {actual[:12]}) were {checked}: replay it with --service URL to check them "
            "against the digest the store recorded",
        )
    return InputsCheck(
        actual,
        against,
        f"request {request_id}'s row in the store records no digest of its captured inputs (an older row): the "
        f"pack's inputs (sha256 {actual[:12]}) were {checked}",
    )


class _PackMeta(BaseModel):
    """What ``pack.json`` must hold for the replay to read it (strictly typed; other fields left open)."""

    model_config = ConfigDict(extra="allow", strict=True)

    format: str
    request: dict[str, Any]
    bundle_id: str = ""
    graph_keys: list[str] = Field(default_factory=list)
    graph_artifacts: list[str] = Field(default_factory=list)
    files: dict[str, str]

    @field_validator("files")
    @classmethod
    def _inside(cls, value: dict[str, str]) -> dict[str, str]:
        for name in value:
            safe_name(name)
        return value


_DTYPES: Final = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
}


def read_safetensors(data: bytes) -> dict[str, torch.Tensor]:
    """Decode a safetensors blob with torch alone (the host SDK writes inputs in this format).

    Raises:
        ReplayError: not a safetensors blob, or an entry whose dtype, shape or byte range does not hold.
    """
    bad = "captured inputs are not a safetensors blob ({}): capture them again"
    if len(data) < 8:
        raise ReplayError(bad.format("too short"))
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ReplayError(bad.format(f"a header of {n} bytes in a blob of {len(data)}"))
    try:
        header = json.loads(data[8 : 8 + n])
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ReplayError(bad.format("bad header")) from None
    if not isinstance(header, dict):
        raise ReplayError(bad.format("its header is not an object"))
    base, size = 8 + n, len(data) - 8 - n
    entries: list[tuple[str, torch.dtype, list[int], int, int]] = []
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        problem = _entry_problem(spec, size)
        if problem:
            raise ReplayError(f"captured input {name!r}: {problem}: capture it again")
        dtype = _DTYPES[spec["dtype"]]
        start, end = spec["data_offsets"]
        entries.append((name, dtype, spec["shape"], start, end))
    out: dict[str, torch.Tensor] = {}
    for name, dtype, shape, start, end in sorted(entries, key=lambda e: e[3]):
        raw = bytearray(data[base + start : base + end])
        tensor = torch.frombuffer(raw, dtype=dtype) if raw else torch.empty(0, dtype=dtype)
        out[name] = tensor.reshape(shape).clone()
    return out


def _entry_problem(spec: Any, size: int) -> str | None:
    """Why a safetensors header entry cannot be read from a data section of ``size`` bytes, or ``None``."""
    if not isinstance(spec, dict):
        return "its entry is not an object"
    dtype, shape, offsets = spec.get("dtype"), spec.get("shape"), spec.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in _DTYPES:
        return f"dtype {dtype!r} is not one replay reads ({', '.join(_DTYPES)})"
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        return f"shape {shape!r} is not a list of sizes"
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(type(o) is int for o in offsets)
        or not 0 <= offsets[0] <= offsets[1] <= size
    ):
        return f"data offsets {offsets!r} are not a byte range of the {size}-byte data"
    want = math.prod(shape) * _DTYPES[dtype].itemsize
    if offsets[1] - offsets[0] != want:
        return f"{offsets[1] - offsets[0]} bytes for shape {shape} of {dtype} ({want} expected)"
    return None


def write_safetensors(tensors: dict[str, torch.Tensor]) -> bytes:
    """Encode tensors as safetensors with torch alone (tests and exports)."""
    names = {v: k for k, v in _DTYPES.items()}
    header: dict[str, Any] = {"__metadata__": {"format": "inferensics-inputs-v1"}}
    chunks: list[bytes] = []
    offset = 0
    for name, t in tensors.items():
        raw = t.detach().cpu().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": names[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    head = json.dumps(header, separators=(",", ":")).encode()
    head += b" " * ((8 - len(head) % 8) % 8)
    return struct.pack("<Q", len(head)) + head + b"".join(chunks)
