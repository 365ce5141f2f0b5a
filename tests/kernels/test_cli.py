"""``inferensics kernels list`` and ``kernels qualify`` through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from inferensics.cli.app import app
from inferensics.schema.store import Store

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

runner = CliRunner()


def test_list_shows_ops_providers_requirements_and_status() -> None:
    result = runner.invoke(app, ["kernels", "list"])
    assert result.exit_code == 0, result.output
    assert "paged_decode_attention" in result.output
    assert "priority: triton > sdpa > reference" in result.output
    assert "head_dim 64/128/256, page 8/16/32, GQA" in result.output
    # Printed as written: rich would read '[positions, D/2]' as a markup tag and drop it.
    assert "cos/sin [positions, D/2], rows contiguous" in result.output
    assert "registry digest" in result.output
    state = json.loads(runner.invoke(app, ["kernels", "list", "--json"]).output)
    assert set(state["ops"]) >= {"rms_norm", "silu_mul"}


def test_qualify_writes_evidence_and_stores_records(tmp_path: Path, store_dsn: str) -> None:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"rms_norm": [{"tokens": 2, "hidden": 32}]}))
    out = tmp_path / "evidence.json"
    args = ["kernels", "qualify", "--op", "rms_norm", "--shapes", str(shapes), "--trials", "2", "--warmup", "0"]
    result = runner.invoke(app, [*args, "--iters", "1", "--out", str(out), "--store", "--dsn", store_dsn])
    assert result.exit_code == 0, result.output
    assert "tokens=2,hidden=32" in result.output
    doc = json.loads(out.read_text())
    assert doc["kind"] == "inferensics.kernels.qualification"
    assert doc["records"]
    with Store.open(store_dsn) as store:
        rows = store.query_rows(f"SELECT provider, status, evidence_digest FROM {store.database}.kernel_qualifications")
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
    assert {r[0] for r in rows} >= {"reference", "triton"}
    assert {r[2] for r in rows} == {doc["digest"]}


def test_qualify_dry_run_writes_nothing_and_says_what_it_would_do(tmp_path: Path, store_dsn: str) -> None:
    from inferensics import kernels

    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"rms_norm": [{"tokens": 2, "hidden": 32}]}))
    out = tmp_path / "evidence.json"
    args = ["kernels", "qualify", "--op", "rms_norm", "--shapes", str(shapes), "--trials", "2", "--warmup", "0"]
    before = kernels.registry_state()
    result = runner.invoke(app, [*args, "--iters", "1", "--out", str(out), "--dry-run", "--store", "--dsn", store_dsn])
    assert result.exit_code == 0, result.output
    assert "tokens=2,hidden=32" in result.output
    assert "dry run: would write evidence " in result.output
    assert "dry run: would store " in result.output
    assert "written to" not in result.output
    assert not out.exists()
    assert kernels.registry_state() == before
    with Store.open(store_dsn) as store:
        store.migrate()
        rows = store.query_rows(f"SELECT count() FROM {store.database}.kernel_qualifications")
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
    assert rows == [(0,)]


def test_bad_shapes_file_and_unknown_op_say_what_is_wrong(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"nope": []}')
    result = runner.invoke(app, ["kernels", "qualify", "--shapes", str(bad)])
    assert result.exit_code == 2
    assert "unknown op 'nope'" in result.output
    assert "Traceback" not in result.output
    bad.write_text("not json")
    result = runner.invoke(app, ["kernels", "qualify", "--shapes", str(bad)])
    assert result.exit_code == 2
    assert "cannot read it as JSON" in result.output
    result = runner.invoke(app, ["kernels", "qualify", "--op", "gelu"])
    assert result.exit_code == 2
    assert "--op gelu: unknown op" in result.output
