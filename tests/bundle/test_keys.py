"""Keys, keyrings and DSSE envelopes (real ed25519 signatures)."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferensics import bundle as b
from inferensics.bundle.dsse import pae, parse_envelope, sign_envelope, verify_envelope


def test_keygen_writes_a_private_and_public_key(tmp_path: Path) -> None:
    priv, pub, keyid = b.generate_key(tmp_path / "k")
    assert priv.stat().st_mode & 0o777 == 0o600
    assert b.load_signing_key(priv).keyid == keyid
    assert keyid in b.Keyring.load(pub).keys
    with pytest.raises(b.BundleError, match="already exists"):
        b.generate_key(tmp_path / "k")


def test_keyring_folder_and_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ring = tmp_path / "ring"
    _, _, a = b.generate_key(ring / "a")
    _, _, c = b.generate_key(ring / "c")
    monkeypatch.setenv("INFERENSICS_BUNDLE_KEYRING", str(ring))
    assert set(b.Keyring.load().keys) == {a, c}
    monkeypatch.delenv("INFERENSICS_BUNDLE_KEYRING")
    with pytest.raises(b.BundleError, match="no keyring"):
        b.Keyring.load()


def test_wrong_key_files_are_one_line_errors(tmp_path: Path) -> None:
    priv, pub, _ = b.generate_key(tmp_path / "k")
    with pytest.raises(b.BundleError, match=r"not the \.pub") as info:
        b.load_signing_key(pub)
    assert info.value.cause == "bad_key"
    with pytest.raises(b.BundleError, match="cannot read key file"):
        b.load_signing_key(tmp_path / "missing")
    with pytest.raises(b.BundleError, match="does not exist"):
        b.Keyring.load(tmp_path / "missing.pub")
    garbage = tmp_path / "bad.pub"
    garbage.write_text("-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")
    with pytest.raises(b.BundleError, match="damaged public key"):
        b.Keyring.load(garbage)
    assert priv.exists()


def test_envelope_signs_the_exact_payload(tmp_path: Path) -> None:
    priv, pub, keyid = b.generate_key(tmp_path / "k")
    env = sign_envelope(b'{"a":1}', b.load_signing_key(priv))
    payload, sigs = parse_envelope(__import__("json").dumps(env).encode(), "env")
    assert verify_envelope(payload, sigs, b.Keyring.load(pub), "env") == keyid
    with pytest.raises(b.BundleError) as info:
        verify_envelope(b'{"a":2}', sigs, b.Keyring.load(pub), "env")
    assert info.value.cause == "signature"
    assert pae("t", b"xy") == b"DSSEv1 1 t 2 xy"
