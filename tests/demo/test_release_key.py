"""The demo builder's key in the bundle cache: made whole once, kept by later runs, a lost race harmless."""

from __future__ import annotations

from pathlib import Path

from inferensics import bundle
from inferensics.demo.release import BUILDER_KEY, _make_key


def test_builder_key_is_made_once_and_kept(tmp_path: Path) -> None:
    key_path = tmp_path / "cache" / BUILDER_KEY
    _make_key(key_path)
    pub = key_path.with_name(key_path.name + ".pub")
    keyid = bundle.load_signing_key(key_path).keyid
    assert bundle.Keyring.load(pub).keys.keys() == {keyid}
    # A second run that lost the race (the folder appeared meanwhile) keeps the first pair.
    _make_key(key_path)
    assert bundle.load_signing_key(key_path).keyid == keyid
    assert not [p for p in key_path.parent.parent.iterdir() if p.name.startswith(".key-")]
