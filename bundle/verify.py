"""``verify``: every check a host makes before any artifact of a bundle is loaded.

In order: the manifest parses (``missing``/``damaged``), a trusted builder signed it (``untrusted_builder``)
and the signature verifies (``signature``), the subject digest is the identity's digest and every file's
sha256 matches with no file added (``tampered``), the bundle is neither revoked nor quarantined, this host's
compatibility key and compiler versions equal the manifest's all-or-nothing (``incompatible``), and each
recorded customisation imports with the same code digest (``customisation``). Each refusal is one
:class:`BundleError` line naming the cause.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import torch

from inferensics.bundle import customisations as custom
from inferensics.bundle import factors
from inferensics.bundle.build import KERNEL_EVIDENCE
from inferensics.bundle.canonical import sha256_file, sha256_hex
from inferensics.bundle.dsse import verify_envelope
from inferensics.bundle.errors import BundleError
from inferensics.bundle.keys import Keyring
from inferensics.bundle.manifest import MANIFEST_FILE, Manifest, parse_statement, read_manifest_unverified
from inferensics.bundle.states import BundleStates

# Compiler-version factors that must match for the artifacts to be usable here.
_VERSION_KEYS = ("torch", "torch_key", "triton", "triton_key", "python", "cuda_runtime")
_REGULAR_ONLY: Final = "a bundle holds regular files only"


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle whose manifest, files, state and compatibility checked out."""

    directory: Path
    manifest: Manifest
    builder_keyid: str
    kernel_evidence: bytes | None = field(default=None, repr=False)
    """The bytes of the kernel evidence file the bundle carries, as read and hashed here (``None`` without one):
    what a load parses and applies, so the file is read once and what applies is exactly what was checked."""

    @property
    def bundle_id(self) -> str:
        """The bundle id."""
        return self.manifest.bundle_id


def check_files(directory: Path, manifest: Manifest, keep: Collection[str] = ()) -> dict[str, bytes]:
    """Every resource is present with its sha256, no file is there that the manifest does not list, and the
    directory holds regular files of one link and folders only (no symlink, wherever it points; no hard link).

    Returns:
        The bytes of each listed resource named in ``keep``, the very bytes whose sha256 was checked.

    Raises:
        BundleError: ``tampered`` naming the first file that differs, is not a regular file or has another name.
    """
    irregular = irregular_entry(directory)
    if irregular is not None:
        raise BundleError("tampered", f"{directory}: {irregular}")
    listed = {r.name for r in manifest.resources}
    kept: dict[str, bytes] = {}
    for r in manifest.resources:
        path = directory / r.name
        if not path.is_file():
            raise BundleError("tampered", f"{directory}: {r.name} is missing: pull or rebuild the bundle")
        data = path.read_bytes() if r.name in keep else None  # hashed, then handed on: read once
        if (sha256_file(path) if data is None else sha256_hex(data)) != r.digest:
            raise BundleError("tampered", f"{directory}: {r.name} does not match its sha256 in the manifest (altered)")
        if data is not None:
            kept[r.name] = data
    for p in directory.rglob("*"):
        name = p.relative_to(directory).as_posix()
        if p.is_file() and name != MANIFEST_FILE and name not in listed:
            raise BundleError("tampered", f"{directory}: {name} is not in the manifest (a file was added)")
    aoti = manifest.identity.get("artifacts", {}).get("aoti")
    if aoti:
        import zipfile

        if aoti["package"] not in listed:
            raise BundleError(
                "tampered", f"{directory}: the AOTInductor package {aoti['package']} is not in the manifest"
            )
        try:
            with zipfile.ZipFile(directory / aoti["package"]) as z:
                members = {i.filename: sha256_hex(z.read(i)) for i in z.infolist()}
        except (OSError, zipfile.BadZipFile) as exc:
            raise BundleError("damaged", f"{directory}: {aoti['package']} is not a readable package ({exc})") from None
        if members != aoti["members"]:
            raise BundleError("tampered", f"{directory}: the members of {aoti['package']} differ from the manifest")
    return kept


def irregular_entry(directory: Path) -> str | None:
    """Why the first entry under ``directory``, in name order, may not be in a bundle, with what to do
    (``<name> is a symlink (to <target>): a bundle holds regular files only``), or ``None`` when every entry is a
    folder or a regular file of one link.

    A symlink is refused wherever it points, even at a file of the same bytes: a check hashes what the link
    reads now, and whoever can write its target can change the code after the check (``unpack`` refuses link
    members for the same reason, and ``pack`` would pack the target's bytes). A hard link (a regular file with
    more than one name) is refused for the same reason: its other name may lie outside the bundle, and a write
    through it changes the file that was checked. Nothing is followed here.

    Raises:
        BundleError: ``damaged`` when a folder of the bundle cannot be listed.
    """
    for path, entry in _entries(directory):
        name = path.relative_to(directory).as_posix()
        if entry.is_symlink():
            return f"{name} is a symlink (to {os.readlink(path)}): {_REGULAR_ONLY}"
        if entry.is_dir(follow_symlinks=False):
            continue
        st = entry.stat(follow_symlinks=False)
        if not stat.S_ISREG(st.st_mode):
            return f"{name} is {_kind(st.st_mode)}, not a regular file: {_REGULAR_ONLY}"
        if st.st_nlink > 1:
            return (
                f"{name} has {st.st_nlink} hard links (a write through another name changes it after the check): "
                "copy the bundle's files in as files of their own (cp -r --no-preserve=links) or rebuild the bundle"
            )
    return None


def _entries(folder: Path) -> Iterator[tuple[Path, os.DirEntry[str]]]:
    """Every entry under ``folder`` in name order, folders before their contents, symlinks not followed."""
    try:
        with os.scandir(folder) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError as exc:
        raise BundleError("damaged", f"cannot list {folder}: {exc.strerror or exc}") from None
    for e in entries:
        yield Path(e.path), e
        if e.is_dir(follow_symlinks=False):
            yield from _entries(Path(e.path))


def _kind(mode: int) -> str:
    """What a non-regular, non-folder file is, as a message names it."""
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "a special file"


def compatibility_problems(manifest: Manifest, device: str | None = None) -> list[str]:
    """``factor: built → here`` for each compatibility or compiler-version factor that differs on this host."""
    recorded: dict[str, Any] = manifest.identity.get("compatibility", {})
    built_for = str(recorded.get("device_type", "cpu"))
    if device is None and built_for == "cuda" and not torch.cuda.is_available():
        problems = ["compatibility.device_type: 'cuda' → no CUDA device here"]
    else:
        here = factors.compatibility(device or built_for)  # a --device this host lacks: one line, raised
        problems = [
            f"compatibility.{k}: {recorded.get(k)!r} → {here.get(k)!r}"
            for k in sorted(set(recorded) | set(here))
            if recorded.get(k) != here.get(k)
        ]
    built = manifest.identity.get("compiler_versions", {})
    local = factors.compiler_versions()
    problems += [
        f"compiler_versions.{k}: {str(built.get(k))[:16]!r} → {str(local.get(k))[:16]!r}"
        for k in _VERSION_KEYS
        if built.get(k) != local.get(k)
    ]
    return problems


def verify(
    directory: Path | str,
    keyring: Keyring,
    *,
    states: BundleStates | None = None,
    device: str | None = None,
    check_customisations: bool = True,
) -> VerifiedBundle:
    """Verify a bundle directory without loading any artifact.

    Raises:
        BundleError: the first failed check, one line naming its cause.
    """
    d = Path(directory)
    _, payload, sigs = read_manifest_unverified(d)
    keyid = verify_envelope(payload, sigs, keyring, str(d / MANIFEST_FILE))
    manifest = parse_statement(payload, str(d / MANIFEST_FILE))
    kept = check_files(d, manifest, keep=(KERNEL_EVIDENCE,))
    refusal = (states or BundleStates.load()).refusal(manifest.bundle_id)
    if refusal is not None:
        raise refusal
    problems = compatibility_problems(manifest, device)
    if problems:
        raise BundleError(
            "incompatible",
            f"bundle {manifest.bundle_id[:12]} was built for another target: {'; '.join(problems[:4])}"
            + (f" (+{len(problems) - 4} more)" if len(problems) > 4 else "")
            + ": build a bundle on this target",
        )
    if check_customisations:
        for c in manifest.identity.get("customisations", []):
            custom.resolve_checked(custom.Customisation(**c))
    return VerifiedBundle(d, manifest, keyid, kept.get(KERNEL_EVIDENCE))


def identity_digest_matches(manifest: Manifest, subject: str) -> bool:
    """Whether ``subject`` is the digest of the manifest's identity."""
    return subject == manifest.bundle_id and len(subject) == len(sha256_hex(b""))
