"""Inputs that are easy to get wrong, each refused in one line that says what it is and what to do: a packed
bundle where a directory is expected, an unsigned manifest, a keyring file that is no key, a shape weight that
is not a positive finite number, an unreachable ``--shapes-from-service`` URL. No bundle is built here."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest

from inferensics import bundle as b
from inferensics.bundle.dsse import verify_envelope
from inferensics.collector.client import ServiceClient, ServiceError
from tests.bundle.conftest import one_line_error

UNREACHABLE = "http://127.0.0.1:1"
"""Nothing listens on port 1: the connection is refused at once."""


@pytest.fixture
def packed(tmp_path: Path) -> Path:
    """A tar file where a bundle directory is expected (what `bundle pack` writes)."""
    (tmp_path / "manifest.txt").write_text("x")
    path = tmp_path / "llama.tar"
    with tarfile.open(path, "w") as tar:
        tar.add(tmp_path / "manifest.txt", arcname="manifest.txt")
    return path


def test_verify_of_a_packed_bundle_says_to_unpack_it(packed: Path, tmp_path: Path) -> None:
    _, pub, _ = b.generate_key(tmp_path / "k")
    text = one_line_error(["bundle", "verify", str(packed), "--keyring", str(pub)], "is a packed bundle")
    assert f"`inferensics bundle unpack {packed} --out DIR`" in text
    assert "no such folder" not in text


def test_push_of_a_packed_bundle_says_to_unpack_it(packed: Path) -> None:
    one_line_error(["bundle", "push", str(packed), "--service", UNREACHABLE], f"inferensics bundle unpack {packed}")


def test_a_file_that_is_no_bundle_is_named_a_file(tmp_path: Path) -> None:
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(b.BundleError, match="is a file, not a bundle directory") as info:
        b.read_manifest(other)
    assert info.value.cause == "bad_input"
    with pytest.raises(b.BundleError, match="no such folder") as info:
        b.read_manifest(tmp_path / "none")
    assert info.value.cause == "missing"


def test_an_unsigned_manifest_is_called_unsigned(tmp_path: Path) -> None:
    _, pub, _ = b.generate_key(tmp_path / "k")
    with pytest.raises(b.BundleError, match=r"m\.json is unsigned") as info:
        verify_envelope(b'{"a":1}', [], b.Keyring.load(pub), "m.json")
    assert "inferensics bundle build" in str(info.value)
    assert "key none" not in str(info.value)
    assert info.value.cause == "signature"


def test_a_keyring_file_that_holds_no_key_is_refused_by_name(tmp_path: Path) -> None:
    ring = tmp_path / "ring"
    b.generate_key(ring / "good")
    garbage = ring / "garbage.pub"
    garbage.write_text("not a key\n")
    with pytest.raises(b.BundleError, match=f"{garbage} holds no PEM public key") as info:
        b.Keyring.load(ring)
    assert info.value.cause == "bad_key"
    garbage.unlink()
    (ring / "folder.pub").mkdir()  # matches *.pub but cannot be read as a file
    with pytest.raises(b.BundleError, match=r"cannot read key file .*folder\.pub") as info:
        b.Keyring.load(ring)
    assert info.value.cause == "bad_key"


@pytest.mark.parametrize("weight", [float("nan"), float("inf"), -1.0, 0, True])
def test_a_shape_weight_must_be_positive_and_finite(weight: object) -> None:
    with pytest.raises(b.BundleError, match=r"shapes\.json: entry 1 needs .* a positive finite weight") as info:
        b.ShapeDistribution.parse([{"shape": [2, 8]}, {"shape": [4, 8], "weight": weight}], "shapes.json")
    assert info.value.cause == "bad_input"


def test_a_shapes_file_with_nan_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "shapes.json"
    path.write_text('{"shapes": [{"shape": [2, 8], "weight": NaN}]}')  # Python's json reads NaN
    with pytest.raises(b.BundleError, match="entry 0"):
        b.ShapeDistribution.load(path)


def test_an_unreachable_shapes_service_names_the_flag_used(tmp_path: Path) -> None:
    priv, _, _ = b.generate_key(tmp_path / "k")
    args = ["bundle", "build", "--model", "tests.bundle.models:tiny_mlp", "--inputs", "tests.bundle.models:inputs",
            "--key", str(priv), "--out", str(tmp_path / "out"), "--shapes-from-service", UNREACHABLE,
            "--traffic-model", "tiny"]  # fmt: skip
    text = one_line_error(args, f"cannot reach the inferensics service at {UNREACHABLE}")
    assert "Pass its URL with --shapes-from-service" in text
    assert not (tmp_path / "out").exists()


def test_the_client_names_service_by_default() -> None:
    with ServiceClient(UNREACHABLE) as client, pytest.raises(ServiceError) as info:
        client.health()
    assert "Pass its URL with --service or $INFERENSICS_SERVICE_URL" in info.value.message
