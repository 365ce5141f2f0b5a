"""``bundle push`` / ``pull`` / ``promote`` through a running collector service (blob API, OTLP records,
SQL API), and the pulled bundle verifies."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle.manifest import MANIFEST_FILE
from inferensics.cli.app import app
from tests.bundle.conftest import Keys, copy_bundle, one_line_error
from tests.collector.service.harness import ADMIN, new_service

pytestmark = pytest.mark.slow
runner = CliRunner()


def test_push_pull_promote_through_the_service(built: b.BuildResult, keys: Keys, tmp_path: Path) -> None:
    (tmp_path / "service").mkdir()
    service = new_service(tmp_path / "service").start()
    try:
        args = ["--service", service.url, "--token", ADMIN]
        pushed = runner.invoke(app, ["bundle", "push", str(built.directory), *args])
        assert pushed.exit_code == 0, pushed.output
        assert built.bundle_id in pushed.output
        out = tmp_path / "pulled"
        for _ in range(60):  # the pushed record reaches the store through the service's spool
            pulled = runner.invoke(app, ["bundle", "pull", built.bundle_id[:12], "--out", str(out), *args])
            if pulled.exit_code == 0:
                break
            assert "unknown bundle id" in pulled.output, pulled.output
            time.sleep(0.5)
        assert pulled.exit_code == 0, pulled.output
        assert b.verify(out, keys.keyring).bundle_id == built.bundle_id
        # The push names the bundle: the Bundles page's picker shows it before any host registers it.
        name = service.client().sql("SELECT attrs['bundle_name'] FROM bundle_states WHERE state = 'pushed'").item()
        assert name == b.read_manifest(built.directory).name == "tiny"
        assert "no model label recorded (no host has registered this bundle): pass --model NAME" in pushed.output
        promoted = runner.invoke(
            app, ["bundle", "promote", built.bundle_id[:12], "--channel", "prod", "--new-channel", *args]
        )
        assert promoted.exit_code == 0, promoted.output
        unknown = runner.invoke(app, ["bundle", "pull", "fff", "--out", str(tmp_path / "x"), *args])
        assert unknown.exit_code != 0
        assert unknown.output.strip().startswith("error: unknown bundle id fff")
    finally:
        service.stop()


def test_a_pushed_bundles_states_carry_the_traffic_model_label(built: b.BuildResult, tmp_path: Path) -> None:
    """The push recorded the manifest's factory (``tests.bundle.models:tiny_mlp``) as the bundle's model, and its
    promotion copied it: the dashboard's release table (``bundle_release``) listed the bundle under a model no
    request has. The push records the label its hosts serve it under (``--model``), the factory apart."""
    from datetime import UTC, datetime, timedelta

    (tmp_path / "service").mkdir()
    service = new_service(tmp_path / "service").start()
    try:
        args = ["--service", service.url, "--token", ADMIN]
        pushed = runner.invoke(app, ["bundle", "push", str(built.directory), "--model", "tiny-traffic", *args])
        assert pushed.exit_code == 0, pushed.output
        assert "no model label" not in pushed.output
        promoted = runner.invoke(
            app, ["bundle", "promote", built.bundle_id[:12], "--channel", "prod", "--new-channel", *args]
        )
        assert promoted.exit_code == 0, promoted.output
        client = service.client()
        rows = client.sql("SELECT state, model, attrs['factory'] FROM bundle_states ORDER BY ts").rows()
        assert rows == [("pushed", "tiny-traffic", "tests.bundle.models:tiny_mlp"), ("promoted", "tiny-traffic", "")]
        now = datetime.now(UTC)
        release = client.query("bundle_release", start=now - timedelta(days=1), end=now + timedelta(minutes=1))
        assert release.select("bundle_id", "model").rows() == [(built.bundle_id, "tiny-traffic")]
    finally:
        service.stop()


def test_a_state_command_returns_once_the_service_has_written_it(built: b.BuildResult, tmp_path: Path) -> None:
    """Through a service a state went out as an OTLP record and the command returned at once, before the
    service's next batch wrote it: ``bundle states`` right after ``bundle revoke`` wrote a states file without
    the revoke (hosts kept loading the bundle), and ``bundle release`` right after it was not refused. Seen
    on the demo's store (the service's default 1 s batches); here the batches wait 3 s."""
    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service", batch_max_age_s="3") as service:
        args = ["--service", service.url, "--token", ADMIN]
        pushed = runner.invoke(app, ["bundle", "push", str(built.directory), *args])
        assert pushed.exit_code == 0, pushed.output
        revoked = runner.invoke(app, ["bundle", "revoke", built.bundle_id[:12], *args])
        assert revoked.exit_code == 0, revoked.output
        released = runner.invoke(app, ["bundle", "release", built.bundle_id[:12], *args])
        assert released.exit_code == 2, released.output
        assert "a revocation is final" in released.output
        out = tmp_path / "states.json"
        states = runner.invoke(app, ["bundle", "states", "--out", str(out), *args])
        assert states.exit_code == 0, states.output
        assert b.BundleStates.load(out).revoked == frozenset({built.bundle_id})


def tampered_copy(built: b.BuildResult, tmp_path: Path) -> tuple[Path, str]:
    """A copy of the bundle with one line appended to a graph's output code (as the new user's ``t1``)."""
    copy = copy_bundle(built, tmp_path)
    code = sorted(copy.glob("artifacts/graphs/*/output_code.py"))[0]
    code.write_text(code.read_text() + "print('not the signed code')\n")
    return copy, code.relative_to(copy).as_posix()


def test_push_refuses_a_bundle_whose_files_do_not_match_its_manifest(
    built: b.BuildResult, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tampered copy was uploaded and recorded unchecked ("pushed tiny ... as blob ...", rc 0), and pulls then
    served it (the newest push wins), so replays failed "does not match its sha256" until the good one was pushed
    again. Push checks every file first; with a keyring the signature too, and says which it checked."""
    monkeypatch.delenv("INFERENSICS_BUNDLE_KEYRING", raising=False)
    copy, altered = tampered_copy(built, tmp_path)
    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service") as service:
        args = ["--service", service.url, "--token", ADMIN]
        text = one_line_error(["bundle", "push", str(copy), *args], "[tampered]")
        assert f"{altered} does not match its sha256 in the manifest (altered)" in text
        assert "nothing was packed" in text
        _, other_pub, _ = b.generate_key(tmp_path / "other")
        one_line_error(
            ["bundle", "push", str(built.directory), *args, "--keyring", str(other_pub)], "[untrusted_builder]"
        )
        client = service.client(ADMIN)
        assert client.sql("SELECT count() AS n FROM blobs").item() == 0
        assert client.sql("SELECT count() AS n FROM bundle_states").item() == 0
        unchecked = runner.invoke(app, ["bundle", "push", str(built.directory), *args])
        assert unchecked.exit_code == 0, unchecked.output
        assert "files match; signature not checked (no --keyring or $INFERENSICS_BUNDLE_KEYRING)" in unchecked.output
        signed = runner.invoke(app, ["bundle", "push", str(built.directory), *args, "--keyring", str(keys.public)])
        assert signed.exit_code == 0, signed.output
        assert f"signed by {keys.key.keyid[:16]}" in signed.output


def test_push_refuses_other_bytes_under_a_bundle_id_the_service_holds(built: b.BuildResult, tmp_path: Path) -> None:
    """The same bundle id must name the same bytes: a second builder's signature over the same identity packs to
    other bytes, and pulls serve the newest push, so it is refused unless --replace says so."""
    other = copy_bundle(built, tmp_path)
    other_key = b.load_signing_key(b.generate_key(tmp_path / "other")[0])
    (other / MANIFEST_FILE).write_bytes(b.read_manifest(other).sign(other_key))
    assert b.read_manifest(other).bundle_id == built.bundle_id
    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service") as service:
        args = ["--service", service.url, "--token", ADMIN]
        first = runner.invoke(app, ["bundle", "push", str(built.directory), *args])
        assert first.exit_code == 0, first.output
        again = runner.invoke(app, ["bundle", "push", str(built.directory), *args])  # the same bytes: fine
        assert again.exit_code == 0, again.output
        text = one_line_error(["bundle", "push", str(other), *args], f"already holds bundle {built.bundle_id[:12]}")
        assert "pass --replace" in text
        assert "nothing was uploaded" in text
        client = service.client(ADMIN)
        assert client.sql("SELECT count() AS n FROM blobs").item() == 1
        replaced = runner.invoke(app, ["bundle", "push", str(other), *args, "--replace"])
        assert replaced.exit_code == 0, replaced.output


def test_push_sends_the_manifest_whose_signature_it_checked(
    built: b.BuildResult, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Push read the manifest once to check its signature and again to pack it, so a manifest swapped between the
    two reads (here: the same statement signed by a key the keyring does not trust) was uploaded while push said
    "signed by" the trusted builder. It reads the bytes once, and checks, packs and sends those."""
    import io
    import re
    import tarfile

    from inferensics.bundle import dsse

    copy = copy_bundle(built, tmp_path)
    signed = (copy / MANIFEST_FILE).read_bytes()
    untrusted = b.load_signing_key(b.generate_key(tmp_path / "other")[0])
    swapped = b.read_manifest(copy).sign(untrusted)
    real_verify = dsse.verify_envelope

    def verified_then_swapped(*args: object, **kwargs: object) -> str:
        keyid = real_verify(*args, **kwargs)  # type: ignore[arg-type]
        (copy / MANIFEST_FILE).write_bytes(swapped)  # once the signature is checked, before anything is packed
        return keyid

    monkeypatch.setattr(dsse, "verify_envelope", verified_then_swapped)
    (tmp_path / "service").mkdir()
    with new_service(tmp_path / "service") as service:
        args = ["--service", service.url, "--token", ADMIN, "--keyring", str(keys.public)]
        pushed = runner.invoke(app, ["bundle", "push", str(copy), *args])
        assert pushed.exit_code == 0, pushed.output
        assert f"signed by {keys.key.keyid[:16]}" in pushed.output
        sent = re.search(r" as blob ([0-9a-f]{64}) ", pushed.output)
        assert sent, pushed.output
        data = service.client(ADMIN).get_blob(sent.group(1))
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile(MANIFEST_FILE)
        assert member is not None
        assert member.read() == signed, "the manifest sent is not the one whose signature push checked"
    archive = tmp_path / "sent.tar"
    archive.write_bytes(data)
    b.unpack(archive, tmp_path / "sent")
    assert b.verify(tmp_path / "sent", keys.keyring).builder_keyid == keys.key.keyid


def test_pack_packs_the_manifest_whose_files_it_checked(
    built: b.BuildResult, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``bundle pack`` (and so push) parsed the manifest, checked the files it lists, then read the manifest file
    again to put in the tar: one swapped in between was packed with files checked against another."""
    import importlib
    import tarfile

    verify = importlib.import_module("inferensics.bundle.verify")  # the package's `verify` is the function
    copy = copy_bundle(built, tmp_path)
    signed = (copy / MANIFEST_FILE).read_bytes()
    untrusted = b.load_signing_key(b.generate_key(tmp_path / "other")[0])
    swapped = b.read_manifest(copy).sign(untrusted)
    real_check = verify.check_files

    def checked_then_swapped(*args: object, **kwargs: object) -> dict[str, bytes]:
        kept: dict[str, bytes] = real_check(*args, **kwargs)
        (copy / MANIFEST_FILE).write_bytes(swapped)
        return kept

    monkeypatch.setattr(verify, "check_files", checked_then_swapped)
    with tarfile.open(b.pack(copy, tmp_path / "packed.tar")) as tar:
        member = tar.extractfile(MANIFEST_FILE)
        assert member is not None
        assert member.read() == signed, "the manifest packed is not the one whose files were checked"
