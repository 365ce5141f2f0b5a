"""DSSE envelopes (in-toto's signing wrapper): the signature covers the exact payload bytes through PAE."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, Final

from inferensics.bundle.errors import BundleError
from inferensics.bundle.keys import Keyring, SigningKey

PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE pre-authentication encoding: ``"DSSEv1" SP len(type) SP type SP len(body) SP body``."""
    t = payload_type.encode()
    return b"DSSEv1 %d %s %d %s" % (len(t), t, len(payload), payload)


def sign_envelope(payload: bytes, key: SigningKey, payload_type: str = PAYLOAD_TYPE) -> dict[str, Any]:
    """A DSSE envelope of ``payload`` with one ed25519 signature."""
    sig = key.sign(pae(payload_type, payload))
    return {
        "payloadType": payload_type,
        "payload": base64.b64encode(payload).decode(),
        "signatures": [{"keyid": key.keyid, "sig": base64.b64encode(sig).decode()}],
    }


def parse_envelope(data: bytes, source: str) -> tuple[bytes, list[tuple[str, bytes]]]:
    """The payload bytes and (keyid, signature) pairs of an envelope; checks shape only, not signatures.

    Raises:
        BundleError: the envelope is not JSON or lacks a field (``damaged``).
    """
    try:
        env = json.loads(data)
        if env["payloadType"] != PAYLOAD_TYPE:
            raise BundleError("damaged", f"{source}: payload type {env['payloadType']!r} is not an in-toto statement")
        payload = base64.b64decode(env["payload"], validate=True)
        sigs = [(str(s["keyid"]), base64.b64decode(s["sig"], validate=True)) for s in env["signatures"]]
    except BundleError:
        raise
    except (ValueError, KeyError, TypeError, binascii.Error):
        raise BundleError("damaged", f"{source} is not a DSSE envelope: rebuild or pull the bundle again") from None
    return payload, sigs


def verify_envelope(payload: bytes, signatures: list[tuple[str, bytes]], keyring: Keyring, source: str) -> str:
    """The key id of the first trusted signature that verifies.

    Raises:
        BundleError: ``signature`` when the envelope has no signature at all or a trusted key's signature
            does not verify, ``untrusted_builder`` when no signature is by a key in the keyring.
    """
    message = pae(PAYLOAD_TYPE, payload)
    if not signatures:
        raise BundleError(
            "signature",
            f"{source} is unsigned (its envelope has no signatures): build and sign the bundle with "
            "`inferensics bundle build --key KEY`",
        )
    known = [(k, s) for k, s in signatures if k in keyring.keys]
    if not known:
        ids = ", ".join(k[:12] for k, _ in signatures)
        raise BundleError(
            "untrusted_builder",
            f"{source} is signed by builder key {ids}, which is not in the keyring ({keyring.source}): "
            "add the builder's .pub to the keyring if you trust it",
        )
    for keyid, sig in known:
        if keyring.verify(keyid, sig, message):
            return keyid
    raise BundleError(
        "signature", f"{source}: the signature by key {known[0][0][:12]} does not verify (manifest altered)"
    )
