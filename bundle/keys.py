"""Builder keys: ed25519 key pairs, key ids, and the keyring of trusted builders.

A private key is a PKCS#8 PEM file, a public key a SubjectPublicKeyInfo PEM file (``<name>.pub``). The key
id is the sha256 of the raw 32-byte public key, so the same key has the same id on every host. The keyring
is a file of public keys or a folder of ``*.pub`` files, named by argument, else ``$INFERENSICS_BUNDLE_KEYRING``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from inferensics.bundle.canonical import sha256_hex
from inferensics.bundle.errors import BundleError

KEYRING_ENV: Final = "INFERENSICS_BUNDLE_KEYRING"
"""Environment variable naming the keyring (a file of PEM public keys or a folder of ``*.pub`` files)."""

_PEM_END = b"-----END PUBLIC KEY-----"


def key_id(public: Ed25519PublicKey) -> str:
    """The key's id: hex sha256 of its raw 32 bytes."""
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return sha256_hex(raw)


def public_pem(public: Ed25519PublicKey) -> bytes:
    """The public key as SubjectPublicKeyInfo PEM."""
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


@dataclass(frozen=True)
class SigningKey:
    """A builder's private key and its id."""

    private: Ed25519PrivateKey
    keyid: str

    def sign(self, data: bytes) -> bytes:
        """Ed25519 signature of ``data``."""
        return self.private.sign(data)


def generate_key(out: Path) -> tuple[Path, Path, str]:
    """Write a new key pair: ``out`` (private, PKCS#8 PEM, mode 0600) and ``out.pub``.

    Returns:
        (private path, public path, key id).

    Raises:
        BundleError: ``out`` exists (keys are never overwritten) or its folder cannot be written.
    """
    pub_path = out.with_name(out.name + ".pub")
    for p in (out, pub_path):
        if p.exists():
            raise BundleError("bad_input", f"{p} already exists: choose another --out (keys are never overwritten)")
    private = Ed25519PrivateKey.generate()
    pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(pem)
        pub_path.write_bytes(public_pem(private.public_key()))
    except OSError as exc:
        # mkdir of a folder whose parent is a file says "File exists" (or "Not a directory"): name the file.
        blocking = next((p for p in (out.parent, *out.parent.parents) if p.exists() and not p.is_dir()), None)
        why = f"{blocking} is a file, not a folder" if blocking is not None else exc.strerror
        raise BundleError("bad_input", f"cannot write the key to {out}: {why}") from None
    return out, pub_path, key_id(private.public_key())


def load_signing_key(path: Path) -> SigningKey:
    """Read a private key written by :func:`generate_key`.

    Raises:
        BundleError: the file is missing or is not an ed25519 private key.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BundleError("bad_key", f"cannot read key file {path}: {exc.strerror}") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise BundleError(
            "bad_key",
            f"{path} is not an unencrypted PEM private key: pass the file `inferensics bundle keygen` wrote "
            "(not the .pub)",
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise BundleError("bad_key", f"{path} holds a {type(key).__name__}, not an ed25519 key: make one with keygen")
    return SigningKey(key, key_id(key.public_key()))


def _parse_public_keys(data: bytes, source: Path) -> list[Ed25519PublicKey]:
    keys: list[Ed25519PublicKey] = []
    for block in data.split(_PEM_END):
        if b"-----BEGIN PUBLIC KEY-----" not in block:
            continue
        pem = block[block.index(b"-----BEGIN") :] + _PEM_END + b"\n"
        try:
            key = serialization.load_pem_public_key(pem)
        except ValueError:
            raise BundleError("bad_key", f"{source} holds a damaged public key: re-export it with keygen") from None
        if not isinstance(key, Ed25519PublicKey):
            raise BundleError("bad_key", f"{source} holds a {type(key).__name__}, not an ed25519 public key")
        keys.append(key)
    return keys


@dataclass(frozen=True)
class Keyring:
    """Public keys of the trusted builders, by key id."""

    keys: dict[str, Ed25519PublicKey]
    source: str = ""

    @classmethod
    def load(cls, path: Path | str | None = None) -> Keyring:
        """Read a keyring file or folder (``path``, else ``$INFERENSICS_BUNDLE_KEYRING``).

        Raises:
            BundleError: neither is given, the path is missing, or a key in it is damaged.
        """
        chosen = path if path is not None else os.environ.get(KEYRING_ENV)
        if not chosen:
            raise BundleError(
                "bad_key",
                f"no keyring of trusted builders: pass --keyring (in Python, keyring=) or set ${KEYRING_ENV} to a "
                ".pub file or folder",
            )
        p = Path(chosen)
        if p.is_dir():
            files = sorted(p.glob("*.pub"))
        elif p.is_file():
            files = [p]
        else:
            raise BundleError("bad_key", f"keyring {p} does not exist: pass a .pub file or a folder of them")
        keys: dict[str, Ed25519PublicKey] = {}
        for f in files:  # every file is read: a keyring is a trust decision, so none is skipped unsaid
            try:
                data = f.read_bytes()
            except OSError as exc:
                raise BundleError(
                    "bad_key", f"cannot read key file {f} in keyring {p}: {exc.strerror}; fix or remove it"
                ) from None
            found = _parse_public_keys(data, f)
            if not found:
                raise BundleError(
                    "bad_key",
                    f"{f} holds no PEM public key (-----BEGIN PUBLIC KEY-----): put the .pub `inferensics bundle "
                    "keygen` wrote there, or remove the file from the keyring",
                )
            for k in found:
                keys[key_id(k)] = k
        if not keys:
            raise BundleError("bad_key", f"keyring {p} holds no public key: add the builders' .pub files")
        return cls(keys, str(p))

    @classmethod
    def of(cls, *public: Ed25519PublicKey) -> Keyring:
        """A keyring of the given keys (tests, embedding)."""
        return cls({key_id(k): k for k in public}, "memory")

    def verify(self, keyid: str, signature: bytes, data: bytes) -> bool:
        """Whether ``keyid`` is trusted here and ``signature`` is its signature of ``data``."""
        key = self.keys.get(keyid)
        if key is None:
            return False
        try:
            key.verify(signature, data)
        except InvalidSignature:
            return False
        return True
