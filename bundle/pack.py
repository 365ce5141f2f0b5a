"""One-file form of a bundle: a tar of its directory (manifest first, then files in name order, fixed
metadata), so the same bundle packs to the same bytes and unpacks to a directory :func:`verify` checks.

A pack is what is pushed, shared and diffed, so it carries only an intact bundle: every file is hashed as it is
written and must be the file the manifest lists (an altered, missing or added file refuses the pack). The
signature is :func:`verify`'s to check: packing needs no keyring.
"""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path, PurePosixPath

from inferensics.bundle.errors import BundleError, unwritable
from inferensics.bundle.manifest import MANIFEST_FILE, manifest_path, parse_manifest, read_manifest_bytes


def pack(directory: Path, out: Path, *, overwrite: bool = False, manifest: bytes | None = None) -> Path:
    """Write ``directory`` as one tar file ``out``, checking each file against the manifest's sha256.

    The tar is written beside ``out`` and renamed onto it once every file checked out, so a refused or failed
    pack leaves ``out`` as it was.

    Args:
        directory: The bundle directory.
        out: The file to write.
        overwrite: Replace an existing ``out`` (refused otherwise).
        manifest: The manifest's bytes as the caller read (and checked) them; read here when not given.

    Raises:
        BundleError: ``directory`` has no manifest (``missing``) or a damaged one (``damaged``); a file is
            altered, missing or not listed (``tampered``); ``out`` exists or cannot be written (``bad_input``).
    """
    if out.is_dir() or not out.parent.is_dir():
        raise unwritable(out, OSError(f"cannot write {out}"))
    if out.exists() and not overwrite:
        raise BundleError("bad_input", f"{out} already exists: choose a new --out, or pass --force to replace it")
    data = pack_bytes(directory, manifest=manifest)
    partial = out.with_name(f".{out.name}.partial")
    try:
        partial.write_bytes(data)
        partial.replace(out)
    except OSError as exc:
        partial.unlink(missing_ok=True)  # no half-written pack left behind
        raise unwritable(out, exc) from None
    return out


def pack_bytes(directory: Path, *, manifest: bytes | None = None) -> bytes:
    """``directory`` as the bytes of :func:`pack`'s tar: each file read once, checked against the manifest's
    sha256, and those same bytes packed, manifest included, so what is packed is exactly what was checked.

    Args:
        directory: The bundle directory.
        manifest: The manifest's bytes as the caller read (and checked) them, for example its signature
            (``bundle push``); read here, once, when not given.

    Raises:
        BundleError: ``directory`` has no manifest (``missing``) or a damaged one (``damaged``); a file is
            altered, missing, not listed (``tampered``) or cannot be read (``damaged``).
    """
    from inferensics.bundle.verify import check_files  # torch comes with it: only when a bundle is packed

    raw = read_manifest_bytes(directory) if manifest is None else manifest
    parsed = parse_manifest(raw, str(manifest_path(directory)))[0]
    listed = [r.name for r in parsed.resources]
    try:
        kept = check_files(directory, parsed, keep=listed)  # each file read once: hashed, then packed
    except BundleError as exc:
        detail = str(exc).removeprefix(f"{directory}: ")
        raise BundleError(
            exc.cause,
            f"{directory}: {detail}: nothing was packed (`inferensics bundle verify` checks a bundle; "
            "rebuild or pull it again)",
        ) from None
    except OSError as exc:
        raise BundleError("damaged", f"{directory}: cannot read {exc.filename} ({exc.strerror or exc})") from None
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for name in [MANIFEST_FILE, *sorted(kept, key=lambda n: PurePosixPath(n).parts)]:
            data = raw if name == MANIFEST_FILE else kept[name]
            info = tarfile.TarInfo(name)
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def check_unpack_target(out: Path) -> None:
    """Refuse an ``out`` that :func:`unpack` may not fill: a file, or a folder with something in it (a bundle
    merged into another folder's files fails verification as tampered).

    Raises:
        BundleError: ``bad_input``, naming ``out``.
    """
    if out.exists() and not out.is_dir():
        raise BundleError("bad_input", f"{out} exists and is not a folder: choose a new --out")
    if out.is_dir() and any(out.iterdir()):
        raise BundleError("bad_input", f"{out} exists and is not empty: choose a new --out")


def unpack(archive: Path, out: Path) -> Path:
    """Unpack a packed bundle into ``out``, a new or empty folder (refusing absolute paths, ``..`` and links).

    Raises:
        BundleError: not a bundle archive, or an unsafe member (``missing``, ``damaged``); ``out`` is not a new
            or empty folder, or cannot be made (``bad_input``).
    """
    check_unpack_target(out)
    try:
        with tarfile.open(archive, "r") as tar:
            members = tar.getmembers()
            for m in members:
                if not m.isfile() or m.name.startswith("/") or ".." in Path(m.name).parts:
                    raise BundleError("damaged", f"{archive}: unsafe member {m.name!r}: not a packed bundle")
            if MANIFEST_FILE not in {m.name for m in members}:
                raise BundleError("damaged", f"{archive} holds no {MANIFEST_FILE}: not a packed bundle")
            created = not out.exists()
            try:
                out.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # the folder's fault, not the archive's
                raise BundleError(
                    "bad_input", f"cannot create {out}: {exc.strerror or exc}: choose another --out"
                ) from None
            try:
                tar.extractall(out, filter="data")
            except BaseException as exc:  # no half-unpacked bundle left behind
                shutil.rmtree(out, ignore_errors=True)
                if not created:
                    out.mkdir(exist_ok=True)
                if isinstance(exc, OSError):  # writing ``out`` failed (a bad archive raises TarError)
                    raise BundleError("bad_input", f"cannot unpack into {out}: {exc.strerror or exc}") from None
                raise
    except (OSError, tarfile.TarError) as exc:
        if isinstance(exc, FileNotFoundError) and not archive.exists():
            raise BundleError("missing", f"{archive} does not exist") from None
        why = "not a tar file" if isinstance(exc, tarfile.ReadError) else str(exc)  # ReadError lists every codec tried
        raise BundleError(
            "damaged", f"{archive} is not a packed bundle ({why}; `inferensics bundle pack` writes one)"
        ) from None
    return out
