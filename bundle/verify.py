"""``verify``: every check a host makes before any artifact of a bundle is loaded.

In order: the manifest parses (``missing``/``damaged``), a trusted builder signed it (``untrusted_builder``)
and the signature verifies (``signature``), the subject digest is the identity's digest and every file's
sha256 matches with no file added (``tampered``), the bundle is neither revoked nor quarantined, this host's
compatibility key and compiler versions equal the manifest's all-or-nothing (``incompatible``), and each
recorded customisation imports with the same code digest (``customisation``). Each refusal is one
:class:`BundleError` line naming the cause.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from inferensics.bundle import customisations as custom
from inferensics.bundle import factors
from inferensics.bundle.canonical import sha256_file, sha256_hex
from inferensics.bundle.dsse import verify_envelope
from inferensics.bundle.errors import BundleError
from inferensics.bundle.keys import Keyring
from inferensics.bundle.manifest import MANIFEST_FILE, Manifest, parse_statement, read_manifest_unverified
from inferensics.bundle.states import BundleStates

# Compiler-version factors that must match for the artifacts to be usable here.
_VERSION_KEYS = ("torch", "torch_key", "triton", "triton_key", "python", "cuda_runtime")


@dataclass(frozen=True)
class VerifiedBundle:
    """A bundle whose manifest, files, state and compatibility checked out."""

    directory: Path
    manifest: Manifest
    builder_keyid: str

    @property
    def bundle_id(self) -> str:
        """The bundle id."""
        return self.manifest.bundle_id


def check_files(directory: Path, manifest: Manifest) -> None:
    """Every resource is present with its sha256, and no file is there that the manifest does not list.

    Raises:
        BundleError: ``tampered`` naming the first file that differs.
    """
    listed = {r.name for r in manifest.resources}
    for r in manifest.resources:
        path = directory / r.name
        if not path.is_file():
            raise BundleError("tampered", f"{directory}: {r.name} is missing: pull or rebuild the bundle")
        if sha256_file(path) != r.digest:
            raise BundleError("tampered", f"{directory}: {r.name} does not match its sha256 in the manifest (altered)")
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


def compatibility_problems(manifest: Manifest, device: str | None = None) -> list[str]:
    """``factor: built → here`` for each compatibility or compiler-version factor that differs on this host."""
    recorded: dict[str, Any] = manifest.identity.get("compatibility", {})
    here = factors.compatibility(device or str(recorded.get("device_type", "cpu")))
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
    if not d.is_dir():
        raise BundleError("missing", f"{d} is not a bundle directory (no such folder)")
    _, payload, sigs = read_manifest_unverified(d)
    keyid = verify_envelope(payload, sigs, keyring, str(d / MANIFEST_FILE))
    manifest = parse_statement(payload, str(d / MANIFEST_FILE))
    check_files(d, manifest)
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
    return VerifiedBundle(d, manifest, keyid)


def identity_digest_matches(manifest: Manifest, subject: str) -> bool:
    """Whether ``subject`` is the digest of the manifest's identity."""
    return subject == manifest.bundle_id and len(subject) == len(sha256_hex(b""))
