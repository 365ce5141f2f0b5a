"""One-file form of a bundle: a tar of its directory (manifest first, then files in name order, fixed
metadata), so the same bundle packs to the same bytes and unpacks to a directory :func:`verify` checks."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from inferensics.bundle.errors import BundleError
from inferensics.bundle.manifest import MANIFEST_FILE


def pack(directory: Path, out: Path) -> Path:
    """Write ``directory`` as one tar file ``out``.

    Raises:
        BundleError: ``directory`` has no manifest.
    """
    if not (directory / MANIFEST_FILE).is_file():
        raise BundleError("missing", f"{directory} has no {MANIFEST_FILE}: not a bundle directory")
    files = sorted(p for p in directory.rglob("*") if p.is_file())
    files.sort(key=lambda p: p.name != MANIFEST_FILE or p.parent != directory)
    with tarfile.open(out, "w") as tar:
        for p in files:
            info = tarfile.TarInfo(p.relative_to(directory).as_posix())
            data = p.read_bytes()
            info.size, info.mode, info.mtime = len(data), 0o644, 0
            tar.addfile(info, io.BytesIO(data))
    return out


def unpack(archive: Path, out: Path) -> Path:
    """Unpack a packed bundle into ``out`` (refusing absolute paths, ``..`` and links).

    Raises:
        BundleError: not a bundle archive, or an unsafe member.
    """
    try:
        with tarfile.open(archive, "r") as tar:
            members = tar.getmembers()
            for m in members:
                if not m.isfile() or m.name.startswith("/") or ".." in Path(m.name).parts:
                    raise BundleError("damaged", f"{archive}: unsafe member {m.name!r}: not a packed bundle")
            if MANIFEST_FILE not in {m.name for m in members}:
                raise BundleError("damaged", f"{archive} holds no {MANIFEST_FILE}: not a packed bundle")
            out.mkdir(parents=True, exist_ok=True)
            tar.extractall(out, filter="data")
    except (OSError, tarfile.TarError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise BundleError("missing", f"{archive} does not exist") from None
        raise BundleError("damaged", f"{archive} is not a packed bundle ({exc})") from None
    return out
