"""``inferensics bundle ...`` end to end through typer's runner: bad input is one line and a non-zero exit;
verify, show, diff, promote/revoke/states against a real embedded store."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics.bundle.manifest import MANIFEST_FILE
from inferensics.cli.app import app
from inferensics.cli.bundle_commands import _factor_lines
from inferensics.schema.store import Store
from tests.bundle.conftest import Keys, copy_bundle, without_progress
from tests.bundle.resign import resign

runner = CliRunner()


def _one_line_error(args: list[str], needle: str) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code != 0, res.output
    text = without_progress(res.output).strip()
    assert "Traceback" not in text
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error:"), text
    assert needle in text, text


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    priv, pub, _ = b.generate_key(tmp_path / "k")
    _one_line_error(["bundle", "verify", str(tmp_path / "none"), "--keyring", str(pub)], "[missing]")
    _one_line_error(["bundle", "show", str(tmp_path / "none")], "[missing]")
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / MANIFEST_FILE).write_text("{oops")
    _one_line_error(["bundle", "show", str(broken)], "[damaged]")
    _one_line_error(["bundle", "diff", str(broken), str(broken)], "[damaged]")
    shapes = tmp_path / "shapes.json"
    shapes.write_text('{"shapes": [{"shape": [2, 8]}]}')
    wrong_key = ["bundle", "build", "--model", "tests.bundle.models:tiny_mlp", "--shapes", str(shapes),
                 "--key", str(pub), "--out", str(tmp_path / "o")]  # fmt: skip
    _one_line_error(wrong_key, "not the .pub")
    missing_shapes = ["bundle", "build", "--model", "tests.bundle.models:tiny_mlp", "--shapes", str(tmp_path / "x"),
                      "--key", str(priv), "--out", str(tmp_path / "o")]  # fmt: skip
    _one_line_error(missing_shapes, "cannot read shapes file")
    bad_model = ["bundle", "build", "--model", "nomodule", "--shapes", str(shapes), "--key", str(priv),
                 "--out", str(tmp_path / "o")]  # fmt: skip
    _one_line_error(bad_model, "must be module:function")
    _one_line_error(["bundle", "keygen", "--out", str(tmp_path / "k")], "already exists")
    # A folder in the path that is a file: mkdir said "File exists" of a key that does not exist.
    (tmp_path / "afile").write_text("")
    _one_line_error(["bundle", "keygen", "--out", str(tmp_path / "afile" / "k")], f"{tmp_path / 'afile'} is a file")


def test_a_shape_the_model_cannot_take_is_one_line(tmp_path: Path) -> None:
    """A shapes file with a shape the model cannot take (a typo, another hidden size) printed ~190 lines of
    Dynamo's traceback from inside the compile; it is the user's input: one line naming the shape."""
    priv, _, _ = b.generate_key(tmp_path / "k")
    shapes = tmp_path / "shapes.json"
    shapes.write_text('{"shapes": [{"shape": [2, 8]}, {"shape": [2, 5]}]}')
    args = ["bundle", "build", "--model", "tests.bundle.models:tiny_mlp", "--inputs", "tests.bundle.models:inputs",
            "--shapes", str(shapes), "--key", str(priv), "--out", str(tmp_path / "o"), "--no-advise"]  # fmt: skip
    _one_line_error(
        args,
        "error: the model cannot run shape [2, 5] with --inputs tests.bundle.models:inputs, not even eagerly: "
        "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x5 and 8x16); fix the shapes file or the "
        "inputs function [bad_input]",
    )
    assert not (tmp_path / "o").exists()


def test_unknown_id_is_one_line(store: Store) -> None:
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    _one_line_error(["bundle", "revoke", "abc123", "--dsn", dsn], "unknown bundle id abc123")
    _one_line_error(["bundle", "promote", "not-hex", "--channel", "prod", "--dsn", dsn], "is not a bundle id")


@pytest.mark.slow
def test_verify_show_diff(built: b.BuildResult, keys: Keys, tmp_path: Path) -> None:
    ok = runner.invoke(app, ["bundle", "verify", str(built.directory), "--keyring", str(keys.public)])
    assert ok.exit_code == 0, ok.output
    assert f"verified tiny {built.bundle_id}" in ok.output
    shown = runner.invoke(app, ["bundle", "show", str(built.directory)])
    assert shown.exit_code == 0
    assert built.bundle_id in shown.output
    # every identity group whole: show cut each group's JSON at 300 characters, mid-token, and left out the
    # weights and the source modules' digests
    identity = built.manifest.identity
    assert all(cls in shown.output for cls in identity["model"]["classes"])
    assert f"digest: {identity['weights']['digest']}" in shown.output
    assert all(f"{module}: {digest[:16]}" in shown.output for module, digest in identity["code"].items())
    for op, policy in identity["kernel_registry"]["policy"].items():
        assert f"policy.{op}: {' > '.join(policy['priority'])}" in shown.output
    assert all(f"traced from {g.code_location} inputs" in shown.output for g in built.manifest.graphs)
    same = runner.invoke(app, ["bundle", "diff", str(built.directory), str(built.directory)])
    assert same.exit_code == 0
    assert "same identity" in same.output
    other = copy_bundle(built, tmp_path)
    resign(other, keys.key, lambda i: i["compatibility"].__setitem__("compute_capability", "9.0"))
    changed = runner.invoke(app, ["bundle", "diff", str(built.directory), str(other)])
    assert changed.exit_code == 1
    assert "[compatibility]" in changed.output
    assert "compatibility.compute_capability: '' → '9.0'" in changed.output
    refused = runner.invoke(app, ["bundle", "verify", str(other), "--keyring", str(keys.public)])
    assert refused.exit_code != 0
    assert "[incompatible]" in refused.output
    shutil.rmtree(other)


@pytest.mark.slow
def test_promote_revoke_and_states(built: b.BuildResult, store: Store, tmp_path: Path) -> None:
    from datetime import UTC, datetime

    from inferensics.schema.events import BundleEvent

    store.insert_events([
        BundleEvent(ts=datetime.now(UTC), bundle_id=built.bundle_id, model="tiny", host="h"),
        BundleEvent(ts=datetime.now(UTC), bundle_id="ab" * 32, model="tiny", host="h"),
    ])  # fmt: skip
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    first = runner.invoke(app, ["bundle", "promote", "abab", "--channel", "prod", "--new-channel", "--dsn", dsn])
    assert first.exit_code == 0, first.output
    second = runner.invoke(app, ["bundle", "promote", built.bundle_id[:10], "--channel", "prod", "--dsn", dsn])
    assert second.exit_code == 0, second.output
    assert "previous abababababab kept for rollback" in second.output
    assert runner.invoke(app, ["bundle", "revoke", "abab", "--dsn", dsn, "--reason", "bad"]).exit_code == 0
    assert runner.invoke(app, ["bundle", "quarantine", built.bundle_id[:8], "--dsn", dsn]).exit_code == 0
    out = tmp_path / "states.json"
    res = runner.invoke(app, ["bundle", "states", "--out", str(out), "--dsn", dsn])
    assert res.exit_code == 0, res.output
    states = b.BundleStates.load(out)
    assert states.revoked == {"ab" * 32}
    assert states.quarantined == {built.bundle_id}
    assert runner.invoke(app, ["bundle", "release", built.bundle_id[:8], "--dsn", dsn]).exit_code == 0
    runner.invoke(app, ["bundle", "states", "--out", str(out), "--dsn", dsn])
    assert b.BundleStates.load(out).quarantined == frozenset()
    rows = store.query_rows(f"SELECT state, previous_bundle_id FROM {store.database}.bundle_states ORDER BY ts")
    assert rows[1] == ("promoted", "ab" * 32)


def test_promote_refuses_a_revoked_or_quarantined_bundle(built: b.BuildResult, store: Store) -> None:
    from datetime import UTC, datetime

    from inferensics.schema.events import BundleEvent

    store.insert_events([
        BundleEvent(ts=datetime.now(UTC), bundle_id=built.bundle_id, model="tiny", host="h"),
        BundleEvent(ts=datetime.now(UTC), bundle_id="ab" * 32, model="tiny", host="h"),
    ])  # fmt: skip
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    promote = ["bundle", "promote", built.bundle_id[:10], "--channel", "production", "--new-channel", "--dsn", dsn]
    assert runner.invoke(app, ["bundle", "quarantine", built.bundle_id[:8], "--dsn", dsn]).exit_code == 0
    _one_line_error(promote, f"bundle {built.bundle_id[:12]} is quarantined")
    _one_line_error(promote, f"inferensics bundle release {built.bundle_id[:12]}")
    assert runner.invoke(app, ["bundle", "release", built.bundle_id[:8], "--dsn", dsn]).exit_code == 0
    released = runner.invoke(app, promote)
    assert released.exit_code == 0, released.output
    assert runner.invoke(app, ["bundle", "revoke", "abab", "--dsn", dsn]).exit_code == 0
    _one_line_error(["bundle", "promote", "abab", "--channel", "production", "--dsn", dsn], "is revoked")
    rows = store.query_rows(f"SELECT state, bundle_id FROM {store.database}.bundle_states WHERE state = 'promoted'")
    assert rows == [("promoted", built.bundle_id)]


def test_a_revocation_is_final(built: b.BuildResult, store: Store, tmp_path: Path) -> None:
    """``bundle release`` after a revoke cleared it: the states file hosts read dropped the bundle and it
    could be promoted again. Release lifts only a quarantine; on a revoked bundle it is refused."""
    from datetime import UTC, datetime

    from inferensics.schema.events import BundleEvent

    store.insert_events([BundleEvent(ts=datetime.now(UTC), bundle_id=built.bundle_id, model="tiny", host="h")])
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    assert runner.invoke(app, ["bundle", "quarantine", built.bundle_id[:8], "--dsn", dsn]).exit_code == 0
    assert runner.invoke(app, ["bundle", "revoke", built.bundle_id[:8], "--dsn", dsn]).exit_code == 0
    _one_line_error(["bundle", "release", built.bundle_id[:8], "--dsn", dsn], "a revocation is final")
    # Even a release recorded after the revoke (an older CLI, a direct insert) leaves it revoked.
    from inferensics.schema.events import BundleStateEvent

    store.insert_events([BundleStateEvent(ts=datetime.now(UTC), bundle_id=built.bundle_id, state="released")])
    out = tmp_path / "states.json"
    res = runner.invoke(app, ["bundle", "states", "--out", str(out), "--dsn", dsn])
    assert res.exit_code == 0, res.output
    assert b.BundleStates.load(out).revoked == frozenset({built.bundle_id})
    assert b.BundleStates.load(out).quarantined == frozenset()
    _one_line_error(["bundle", "promote", built.bundle_id[:8], "--channel", "production", "--dsn", dsn], "revoked")


def test_promote_channel_is_free_form_but_not_empty(built: b.BuildResult, store: Store) -> None:
    from datetime import UTC, datetime

    from inferensics.schema.events import BundleEvent

    store.insert_events([BundleEvent(ts=datetime.now(UTC), bundle_id=built.bundle_id, model="tiny", host="h")])
    dsn = f"chdb://{store.dsn.path}?database={store.database}"
    _one_line_error(["bundle", "promote", built.bundle_id[:10], "--channel", " ", "--dsn", dsn], "--channel is empty")
    _one_line_error(
        ["bundle", "promote", built.bundle_id[:10], "--channel", "eu-shadow", "--dsn", dsn], "--new-channel"
    )
    new = ["bundle", "promote", built.bundle_id[:10], "--channel", "eu-shadow", "--new-channel", "--dsn", dsn]
    res = runner.invoke(app, new)
    assert res.exit_code == 0, res.output
    assert "on eu-shadow" in res.output
    promote = typer.main.get_command(app).commands["bundle"].commands["promote"]  # type: ignore[attr-defined]
    assert "free-form" in next(p.help for p in promote.params if p.name == "channel")


def test_build_imports_the_model_from_the_working_directory(
    keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``--model walk_model:make`` beside the user resolves as under ``python -m`` (the console script's
    import path lacks the working directory: it was "cannot import walk_model"); the bundle is compiled with
    provenance tracking unless an --option says otherwise."""
    (tmp_path / "walk_model.py").write_text("import torch\n\n\ndef make():\n    return torch.nn.Linear(8, 4)\n")
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps(b.ShapeDistribution.of([(2, 8)], [1]).to_json()))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    monkeypatch.delitem(sys.modules, "walk_model", raising=False)
    args = ["bundle", "build", "--model", "walk_model:make", "--shapes", str(shapes), "--key", str(keys.private),
            "--out", str(tmp_path / "out"), "--no-advise"]  # fmt: skip
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert "built " in res.output
    verified = b.verify(tmp_path / "out", keys.keyring)
    monkeypatch.delitem(sys.modules, "walk_model", raising=False)
    # Compiled with provenance tracking, as the host SDK compiles by default: without it the request page of
    # every request served from the bundle said "No kernel carries its FX nodes and source lines".
    assert verified.manifest.identity["settings"]["compile"]["options"] == {"trace.provenance_tracking_level": 1}


def test_show_lists_a_refused_provider_with_its_reason() -> None:
    policy = {"rms_norm": {"priority": ["reference"], "refused": [{"bucket": "bf16[8,4096]", "provider": "triton",
                                                                    "reason": "max error 3.1 > 0.02"}]}}  # fmt: skip
    lines = _factor_lines("kernel_registry", {"policy": policy, "ops": {"rms_norm": {}}, "evidence": []})
    assert lines == [
        "evidence: (none)",
        "ops: 1 (providers and their requirements: --json)",
        "policy.rms_norm: reference",
        "policy.rms_norm refused: triton at bf16[8,4096] (max error 3.1 > 0.02)",
    ]


def test_show_lists_the_priorities_evidence_set_per_bucket() -> None:
    """A bundle carrying `kernels qualify` evidence that promoted the reference at one bucket (the interpreter's
    Triton SiLU·mul lost on time): `bundle show` printed only `policy.silu_mul: triton > reference`, the list the
    host does not follow at that bucket."""
    buckets = {"bfloat16/n128/t4": ["reference"], "bfloat16/n64/t2": ["reference", "triton"]}
    policy = {"silu_mul": {"priority": ["triton", "reference"], "refused": [], "bucket_priority": buckets}}
    lines = _factor_lines("kernel_registry", {"policy": policy})
    assert lines == [
        "policy.silu_mul: triton > reference",
        "policy.silu_mul bfloat16/n128/t4: reference",
        "policy.silu_mul bfloat16/n64/t2: reference > triton",
    ]
