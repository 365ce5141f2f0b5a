"""A bundle's manifest is a boundary: whatever a damaged, edited or hostile manifest holds, reading, showing,
diffing and verifying it say what is wrong in one line and raise nothing else (property-based: the ``suite``
profile draws the same examples every run; ``make fuzz`` draws fresh ones).

Two kinds of edit: the envelope or its statement changed without a valid signature (anyone's file: ``bundle
show`` and ``diff`` read it unverified, ``verify`` must refuse it), and a statement changed and signed again by
the trusted key with its subject digest recomputed (a builder's bug or a stolen key: what lies behind the
signature is parsed too, and must not reach a file outside the bundle or a traceback).
"""

from __future__ import annotations

import base64
import contextlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle.canonical import canonical_json, digest_json, sha256_file
from inferensics.bundle.dsse import sign_envelope
from inferensics.bundle.manifest import MANIFEST_FILE, Manifest
from inferensics.cli.app import app
from tests.bundle.conftest import Keys
from tests.json_edits import edit

pytestmark = pytest.mark.slow

runner = CliRunner()
# Resource names a hostile manifest may list: each must be refused, never read.
ESCAPES = ["/etc/hostname", "../outside.bin", "artifacts/../../outside.bin", "", ".", "artifacts", "a\\..\\b"]


@pytest.fixture(scope="module")
def bundle_copy(built: b.BuildResult, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the session's bundle whose manifest each example rewrites (the other files stay)."""
    d = tmp_path_factory.mktemp("fuzz") / "bundle"
    shutil.copytree(built.directory, d)
    (d.parent / "outside.bin").write_bytes(b"outside the bundle\n")
    return d


def _statement(directory: Path) -> dict[str, Any]:
    envelope = json.loads((directory / MANIFEST_FILE).read_bytes())
    statement: dict[str, Any] = json.loads(base64.b64decode(envelope["payload"]))
    return statement


def _one_line_or_nothing(directory: Path, keys: Keys) -> None:
    """Every reader of the manifest either works or raises one :class:`BundleError` line; the CLI prints one
    ``error:`` line and exits 2, never a traceback."""
    readers: list[Callable[[], Manifest]] = [
        lambda: b.read_manifest(directory),
        lambda: b.verify(directory, keys.keyring).manifest,
    ]
    for read in readers:
        try:
            manifest = read()
        except b.BundleError as exc:
            problem = str(exc)
            assert "\n" not in problem, problem
            continue
        assert isinstance(manifest.graphs, list)
        assert isinstance(manifest.accepted_shapes, list)
        for r in manifest.resources:  # a verified or readable manifest lists only files inside the bundle
            assert (directory / r.name).resolve().is_relative_to(directory.resolve()), r.name
    pub = str(keys.public)
    for args in (["show", str(directory)], ["show", "--json", str(directory)], ["diff", str(directory), str(directory)],
                 ["verify", str(directory), "--keyring", pub]):  # fmt: skip
        result = runner.invoke(app, ["bundle", *args])
        assert result.exception is None or isinstance(result.exception, SystemExit), (args, result.exception)
        if result.exit_code not in {0, 1}:
            assert result.exit_code == 2, (args, result.output)
            lines = [ln for ln in result.output.splitlines() if ln.strip()]
            assert len(lines) == 1, (args, result.output)
            assert lines[0].startswith("error:"), (args, result.output)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_an_unsigned_edit_is_one_line_never_a_traceback(bundle_copy: Path, keys: Keys, data: st.DataObject) -> None:
    original = (bundle_copy / MANIFEST_FILE).read_bytes()
    try:
        envelope = json.loads(original)
        if data.draw(st.booleans(), label="edit the statement"):
            statement = edit(_statement(bundle_copy), data, ESCAPES)
            envelope["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
            raw = json.dumps(envelope).encode()
        elif data.draw(st.booleans(), label="edit the envelope"):
            raw = json.dumps(edit(envelope, data, ESCAPES)).encode()
        else:  # bytes: cut, flipped or spliced
            at = data.draw(st.integers(0, len(original) - 1), label="at")
            raw = data.draw(
                st.sampled_from([original[:at], original[:at] + bytes([original[at] ^ 0x5A]) + original[at + 1 :],
                                 original[:at] + b"\x00\xff{[" + original[at:]]), label="bytes")  # fmt: skip
        (bundle_copy / MANIFEST_FILE).write_bytes(raw)
        _one_line_or_nothing(bundle_copy, keys)
    finally:
        (bundle_copy / MANIFEST_FILE).write_bytes(original)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_signed_edit_is_one_line_never_a_traceback(bundle_copy: Path, keys: Keys, data: st.DataObject) -> None:
    original = (bundle_copy / MANIFEST_FILE).read_bytes()
    try:
        statement = edit(_statement(bundle_copy), data, ESCAPES)
        with contextlib.suppress(KeyError, IndexError, TypeError, ValueError):  # as an editor with the key would
            statement["subject"][0]["digest"]["sha256"] = digest_json(statement["predicate"]["identity"])
        (bundle_copy / MANIFEST_FILE).write_bytes(canonical_json(sign_envelope(canonical_json(statement), keys.key)))
        _one_line_or_nothing(bundle_copy, keys)
    finally:
        (bundle_copy / MANIFEST_FILE).write_bytes(original)


@pytest.mark.parametrize("name", ESCAPES[:4])
def test_a_signed_resource_outside_the_bundle_is_refused(bundle_copy: Path, keys: Keys, name: str) -> None:
    """A trusted signature over a resource path that leaves the bundle (absolute, ``..``) is refused as damaged
    before any file is read: the digest of a file outside the bundle is no business of verification."""
    original = (bundle_copy / MANIFEST_FILE).read_bytes()
    try:
        statement = _statement(bundle_copy)
        digest = sha256_file(bundle_copy.parent / "outside.bin")  # the real digest: only the path is wrong
        statement["predicate"]["resources"].append({"name": name, "algorithm": "sha256", "digest": digest, "size": 19})
        (bundle_copy / MANIFEST_FILE).write_bytes(canonical_json(sign_envelope(canonical_json(statement), keys.key)))
        with pytest.raises(b.BundleError) as info:
            b.verify(bundle_copy, keys.keyring)
        assert info.value.cause == "damaged", str(info.value)
        assert "resources" in str(info.value), str(info.value)
        assert "\n" not in str(info.value)
    finally:
        (bundle_copy / MANIFEST_FILE).write_bytes(original)


def test_a_signed_digest_algorithm_other_than_sha256_is_refused(bundle_copy: Path, keys: Keys) -> None:
    """Verification computes sha256 only: a resource signed as ``md5`` (its digest left the sha256) is a damaged
    manifest naming the field, never checked as if it said sha256 (fuzz walk #9)."""
    original = (bundle_copy / MANIFEST_FILE).read_bytes()
    try:
        statement = _statement(bundle_copy)
        statement["predicate"]["resources"][0]["algorithm"] = "md5"
        (bundle_copy / MANIFEST_FILE).write_bytes(canonical_json(sign_envelope(canonical_json(statement), keys.key)))
        for read in (lambda: b.verify(bundle_copy, keys.keyring), lambda: b.read_manifest(bundle_copy)):
            with pytest.raises(b.BundleError) as info:
                read()
            assert info.value.cause == "damaged", str(info.value)
            assert "resources.0.algorithm: Input should be 'sha256'" in str(info.value), str(info.value)
            assert "\n" not in str(info.value)
    finally:
        (bundle_copy / MANIFEST_FILE).write_bytes(original)
    assert all(r.algorithm == "sha256" for r in b.verify(bundle_copy, keys.keyring).manifest.resources)


@pytest.mark.parametrize(
    ("package", "cause"), [("artifacts/aoti/absent.pt2", "tampered"), ("artifacts/megacache.bin", "damaged")]
)
def test_a_signed_aoti_package_that_is_no_package_is_refused(
    bundle_copy: Path, keys: Keys, package: str, cause: str
) -> None:
    """An AOTInductor record naming a file the manifest does not list, or a listed file that is no zip, is one
    line (it was a FileNotFoundError or BadZipFile traceback)."""
    original = (bundle_copy / MANIFEST_FILE).read_bytes()
    try:
        statement = _statement(bundle_copy)
        identity = statement["predicate"]["identity"]
        identity["artifacts"]["aoti"] = {"package": package, "members": {}}
        statement["subject"][0]["digest"]["sha256"] = digest_json(identity)
        (bundle_copy / MANIFEST_FILE).write_bytes(canonical_json(sign_envelope(canonical_json(statement), keys.key)))
        with pytest.raises(b.BundleError) as info:
            b.verify(bundle_copy, keys.keyring)
        assert info.value.cause == cause, str(info.value)
        assert package in str(info.value), str(info.value)
        assert "\n" not in str(info.value)
    finally:
        (bundle_copy / MANIFEST_FILE).write_bytes(original)
