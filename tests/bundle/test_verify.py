"""Verification refuses each bad bundle with one line naming the cause, before anything is loaded."""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path

import pytest

from inferensics import bundle as b
from inferensics.bundle.manifest import MANIFEST_FILE
from tests.bundle.conftest import Keys, copy_bundle, one_line_error
from tests.bundle.resign import resign

pytestmark = pytest.mark.slow


def _refused(directory: Path, keyring: b.Keyring, spy: list[str], cause: str, **kw: object) -> str:
    with pytest.raises(b.BundleError) as info:
        b.load(directory, keyring, **kw)  # type: ignore[arg-type]
    assert info.value.cause == cause, str(info.value)
    assert "\n" not in str(info.value)
    assert spy == [], f"loaded before refusing: {spy}"
    return str(info.value)


def test_a_good_bundle_verifies_and_loads(built: b.BuildResult, keys: Keys, load_spy: list[str]) -> None:
    v = b.verify(built.directory, keys.keyring)
    assert v.bundle_id == built.bundle_id
    assert v.builder_keyid == keys.key.keyid
    assert load_spy == []  # verify alone loads nothing
    loaded = b.load(built.directory, keys.keyring)
    assert load_spy == ["cpu_kernels", "megacache"]
    assert any(r.name.startswith("artifacts/cpu_kernels/") for r in loaded.manifest.resources)
    assert set(loaded.cache_keys) >= {"inductor"}
    assert {g.fx_key for g in loaded.manifest.graphs} <= set(loaded.cache_keys["inductor"])


def test_tampered_artifact_is_refused(built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str]) -> None:
    d = copy_bundle(built, tmp_path)
    code = next((d / "artifacts" / "graphs").glob("*/output_code.py"))
    code.write_text(code.read_text() + "\n# patched\n")
    msg = _refused(d, keys.keyring, load_spy, "tampered")
    assert "output_code.py" in msg


def test_altered_megacache_is_refused(built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str]) -> None:
    d = copy_bundle(built, tmp_path)
    blob = d / "artifacts" / "megacache.bin"
    data = bytearray(blob.read_bytes())
    data[len(data) // 2] ^= 0xFF
    blob.write_bytes(bytes(data))
    assert "megacache.bin" in _refused(d, keys.keyring, load_spy, "tampered")


def test_added_file_is_refused(built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str]) -> None:
    d = copy_bundle(built, tmp_path)
    (d / "artifacts" / "extra.py").write_text("print('hi')\n")
    assert "not in the manifest" in _refused(d, keys.keyring, load_spy, "tampered")


def test_wrong_signature_is_refused(built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str]) -> None:
    d = copy_bundle(built, tmp_path)
    env = json.loads((d / MANIFEST_FILE).read_text())
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicate"]["build"]["builder_host"] = "elsewhere"  # outside the identity, inside the signature
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    (d / MANIFEST_FILE).write_text(json.dumps(env))
    assert "does not verify" in _refused(d, keys.keyring, load_spy, "signature")


def test_unknown_builder_is_refused(built: b.BuildResult, tmp_path: Path, load_spy: list[str]) -> None:
    _, other_pub, _ = b.generate_key(tmp_path / "other")
    msg = _refused(built.directory, b.Keyring.load(other_pub), load_spy, "untrusted_builder")
    assert "not in the keyring" in msg


def test_subject_not_matching_identity_is_refused(
    built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str]
) -> None:
    d = copy_bundle(built, tmp_path)
    env = json.loads((d / MANIFEST_FILE).read_text())
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicate"]["identity"]["weights"]["digest"] = "0" * 64  # identity changed, subject kept
    from inferensics.bundle.canonical import canonical_json
    from inferensics.bundle.dsse import sign_envelope

    (d / MANIFEST_FILE).write_bytes(canonical_json(sign_envelope(canonical_json(statement), keys.key)))
    assert "subject digest" in _refused(d, keys.keyring, load_spy, "tampered")


@pytest.mark.parametrize("state", ["revoked", "quarantined"])
def test_revoked_or_quarantined_is_refused(built: b.BuildResult, keys: Keys, load_spy: list[str], state: str) -> None:
    states = b.BundleStates(**{state: frozenset({built.bundle_id})})
    assert state in _refused(built.directory, keys.keyring, load_spy, state, states=states)


def test_states_file_from_environment(
    built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "states.json"
    b.BundleStates(revoked=frozenset({built.bundle_id})).write(path)
    monkeypatch.setenv("INFERENSICS_BUNDLE_STATES", str(path))
    _refused(built.directory, keys.keyring, load_spy, "revoked")


@pytest.mark.parametrize(
    ("field", "value"),
    [("device_name", "NVIDIA H200"), ("compute_capability", "9.0"), ("cpu_isa", "NEON"), ("runtime_abi", "cp312")],
)
def test_incompatible_target_is_refused(  # noqa: PLR0917 - fixtures and parameters
    built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str], field: str, value: str
) -> None:
    d = copy_bundle(built, tmp_path)
    resign(d, keys.key, lambda ident: ident["compatibility"].__setitem__(field, value))
    msg = _refused(d, keys.keyring, load_spy, "incompatible")
    assert f"compatibility.{field}" in msg


def test_other_torch_is_incompatible(built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str]) -> None:
    d = copy_bundle(built, tmp_path)
    resign(d, keys.key, lambda ident: ident["compiler_versions"].__setitem__("torch", "2.11.0+cu130"))
    assert "compiler_versions.torch" in _refused(d, keys.keyring, load_spy, "incompatible")


def test_changed_customisation_is_refused(
    built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str]
) -> None:
    d = copy_bundle(built, tmp_path)
    c = b.describe_customisation("decomposition", "aten.gelu.default", _import_fast_gelu())
    record = {**c.model_dump(), "code_digest": "f" * 64}
    resign(d, keys.key, lambda ident: ident.__setitem__("customisations", [record]))
    assert "changed since the bundle was built" in _refused(d, keys.keyring, load_spy, "customisation")


def test_missing_and_damaged_manifests(built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str]) -> None:
    _refused(tmp_path / "nowhere", keys.keyring, load_spy, "missing")
    d = copy_bundle(built, tmp_path)
    (d / MANIFEST_FILE).write_text("{not json")
    _refused(d, keys.keyring, load_spy, "damaged")
    (d / MANIFEST_FILE).unlink()
    _refused(d, keys.keyring, load_spy, "missing")


def test_packed_bundle_round_trips(built: b.BuildResult, keys: Keys, tmp_path: Path) -> None:
    one = b.pack(built.directory, tmp_path / "a.bundle")
    two = b.pack(built.directory, tmp_path / "b.bundle")
    assert one.read_bytes() == two.read_bytes()
    out = b.unpack(one, tmp_path / "unpacked")
    assert b.verify(out, keys.keyring).bundle_id == built.bundle_id


def _symlinked_artifact(d: Path, outside: Path) -> tuple[str, Path]:
    """Replace one of ``d``'s CPU kernels by a symlink to a copy of it outside the bundle (the same bytes)."""
    lib = next((d / "artifacts" / "cpu_kernels").glob("*/*.so"))
    outside.write_bytes(lib.read_bytes())
    lib.unlink()
    lib.symlink_to(outside)
    return lib.relative_to(d).as_posix(), outside


def _symlinked_manifest(d: Path, outside: Path) -> tuple[str, Path]:
    outside.write_bytes((d / MANIFEST_FILE).read_bytes())
    (d / MANIFEST_FILE).unlink()
    (d / MANIFEST_FILE).symlink_to(outside)
    return MANIFEST_FILE, outside


def _added_folder_link(d: Path, outside: Path) -> tuple[str, Path]:
    outside.mkdir()
    (outside / "code.py").write_text("print('hi')\n")
    (d / "artifacts" / "more").symlink_to(outside, target_is_directory=True)
    return "artifacts/more", outside


@pytest.mark.parametrize("make", [_symlinked_artifact, _symlinked_manifest, _added_folder_link])
def test_a_symlink_in_the_bundle_is_refused_by_verify_load_and_pack(
    built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str], make: object
) -> None:
    """A symlink is refused wherever it points, even at the same bytes: whoever can write its target could change
    the code after the check, and ``pack`` packed the target's bytes (fuzz walk #8; ``unpack`` refuses links)."""
    d = copy_bundle(built, tmp_path)
    name, target = make(d, tmp_path / "outside")  # type: ignore[operator]
    line = f"{name} is a symlink (to {target}): a bundle holds regular files only"
    with pytest.raises(b.BundleError) as info:
        b.verify(d, keys.keyring)
    assert (info.value.cause, str(info.value)) == ("tampered", f"{d}: {line}")
    assert line in _refused(d, keys.keyring, load_spy, "tampered")
    with pytest.raises(b.BundleError) as packed:
        b.pack(d, tmp_path / "x.bundle")
    assert packed.value.cause == "tampered", str(packed.value)
    assert line in str(packed.value), str(packed.value)
    assert "nothing was packed" in str(packed.value)
    assert not (tmp_path / "x.bundle").exists()
    one_line_error(["bundle", "verify", str(d), "--keyring", str(keys.public)], line)


@pytest.mark.parametrize("within", [False, True], ids=["outside", "within"])
def test_a_hard_link_in_the_bundle_is_refused_by_verify_load_pack_and_diff(
    built: b.BuildResult, keys: Keys, tmp_path: Path, load_spy: list[str], within: bool
) -> None:
    """A file with another name (a hard link) is refused as a symlink is, with the same bytes: a write through the
    other name, outside the bundle or inside it, changes the file after it was checked."""
    d = copy_bundle(built, tmp_path)
    lib = next((d / "artifacts" / "cpu_kernels").glob("*/*.so"))
    os.link(lib, (d / "report" / "kept.so") if within else (tmp_path / "outside.so"))
    name = lib.relative_to(d).as_posix()
    line = (
        f"{name} has 2 hard links (a write through another name changes it after the check): copy the bundle's "
        "files in as files of their own (cp -r --no-preserve=links) or rebuild the bundle"
    )
    with pytest.raises(b.BundleError) as info:
        b.verify(d, keys.keyring)
    assert (info.value.cause, str(info.value)) == ("tampered", f"{d}: {line}")
    assert line in _refused(d, keys.keyring, load_spy, "tampered")
    with pytest.raises(b.BundleError) as packed:
        b.pack(d, tmp_path / "x.bundle")
    assert packed.value.cause == "tampered", str(packed.value)
    assert line in str(packed.value), str(packed.value)
    assert "nothing was packed" in str(packed.value)
    assert not (tmp_path / "x.bundle").exists()
    one_line_error(["bundle", "verify", str(d), "--keyring", str(keys.public)], line)
    one_line_error(["bundle", "diff", str(built.directory), str(d)], line)
    one_line_error(["bundle", "pack", str(d), "--out", str(tmp_path / "y.bundle")], line)


def test_a_named_pipe_in_the_bundle_is_refused(built: b.BuildResult, keys: Keys, tmp_path: Path) -> None:
    d = copy_bundle(built, tmp_path)
    os.mkfifo(d / "artifacts" / "pipe")
    with pytest.raises(b.BundleError) as info:
        b.verify(d, keys.keyring)  # never opened: a read would block
    assert info.value.cause == "tampered"
    assert (
        str(info.value) == f"{d}: artifacts/pipe is a named pipe, not a regular file: a bundle holds regular files only"
    )


def _import_fast_gelu() -> object:
    from tests.bundle.models import fast_gelu

    return fast_gelu
