"""``kernels qualify --store`` whose store failed keeps the evidence file; ``--store --from-evidence FILE`` stores
that file's records later without measuring again, and never stores a record twice. Against a real chDB store
and a real measurement (Triton's interpreter without a GPU)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from inferensics import kernels
from inferensics.cli.app import app
from inferensics.schema.store import Store, StoreError

pytestmark = [
    # Raised inside Inductor's own imports (torch 2.11 and 2.13); fatal under filterwarnings=error.
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
]

runner = CliRunner()


def _one_line_error(result: Result) -> str:
    assert result.exit_code != 0, result.output
    text = result.output.strip()
    assert "Traceback" not in text
    assert len(text.splitlines()) == 1, text
    assert text.startswith("error:"), text
    return text


def _stored(dsn: str) -> list[tuple[Any, ...]]:
    with Store.open(dsn) as store:
        store.migrate()
        return store.query_rows(
            f"SELECT op, provider, shape, evidence_digest, ts FROM {store.database}.kernel_qualifications "
            "ORDER BY provider"
        )


def _store_lost(*_: object, **__: object) -> None:
    raise StoreError("store lost (planted)")


def _no_measuring(*_: object, **__: object) -> None:
    raise AssertionError("--from-evidence measured again")


@pytest.mark.usefixtures("restored_registry")
def test_a_store_that_failed_is_stored_later_from_the_evidence_file(
    tmp_path: Path, store_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before, the evidence file was written but its records could be stored only by measuring again with
    ``--force``: ``--out`` exists, and qualify had no way to store a file it had already written."""
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"rms_norm": [{"tokens": 2, "hidden": 32}]}))
    out = tmp_path / "evidence.json"
    measure = ["kernels", "qualify", "--op", "rms_norm", "--shapes", str(shapes), "--trials", "2", "--warmup", "0",
               "--iters", "1", "--out", str(out)]  # fmt: skip
    # The store answers before measuring (checked then), and fails when the records come: lost meanwhile.
    with monkeypatch.context() as lost:
        lost.setattr(Store, "insert_events", _store_lost)
        failed = runner.invoke(app, [*measure, "--store", "--dsn", store_dsn])
    text = failed.output.strip().splitlines()[-1]
    assert failed.exit_code == 2, failed.output
    assert text.startswith("error: store lost (planted)"), text
    assert f"the evidence file {out} is written; nothing was stored" in text
    assert f"`inferensics kernels qualify --store --from-evidence {out}`" in text
    doc = json.loads(out.read_text())

    monkeypatch.setattr(kernels, "qualify", _no_measuring)
    retry = ["kernels", "qualify", "--store", "--from-evidence", str(out), "--dsn", store_dsn]
    stored = runner.invoke(app, retry)
    assert stored.exit_code == 0, stored.output
    n = len(doc["records"])
    assert f"{n} qualification records stored in" in stored.output
    assert f"evidence_digest {doc['digest']}" in stored.output
    rows = _stored(store_dsn)
    assert len(rows) == n
    assert {r[3] for r in rows} == {doc["digest"]}
    assert sorted(r[1] for r in rows) == sorted(r["provider"] for r in doc["records"])
    measured = datetime.fromisoformat(doc["ts"])
    assert {r[4].replace(tzinfo=UTC) for r in rows} == {measured}  # the time it was measured, not the retry's

    again = runner.invoke(app, retry)  # a second retry (or one after a store that did take them) adds nothing
    assert again.exit_code == 0, again.output
    assert f"all {n} qualification records of evidence {doc['digest']} are stored already" in again.output
    assert len(_stored(store_dsn)) == n
    with Store.open(store_dsn) as store:
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        ([], "--from-evidence stores an evidence file's records: add --store"),
        (["--store", "--op", "rms_norm"], "--op would measure again"),
        (["--store", "--trials", "3", "--force"], "--trials, --force would measure again"),
    ],
)
def test_from_evidence_refuses_what_it_cannot_do_in_one_line(
    tmp_path: Path, extra: list[str], needle: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(kernels, "qualify", _no_measuring)
    text = _one_line_error(
        runner.invoke(app, ["kernels", "qualify", "--from-evidence", str(tmp_path / "e.json"), *extra])
    )
    assert needle in text, text


def test_from_evidence_names_a_file_it_cannot_store(tmp_path: Path, store_dsn: str) -> None:
    missing = tmp_path / "missing.json"
    args = ["kernels", "qualify", "--store", "--dsn", store_dsn, "--from-evidence"]
    text = _one_line_error(runner.invoke(app, [*args, str(missing)]))
    assert f"--from-evidence {missing}: cannot read it" in text, text
    other = tmp_path / "other.json"
    other.write_text('{"kind": "something else"}')
    text = _one_line_error(runner.invoke(app, [*args, str(other)]))
    assert "not a qualification evidence file" in text, text
    older = tmp_path / "older.json"
    doc = _evidence_written_before_records_carried_timing()
    older.write_text(json.dumps(doc))
    text = _one_line_error(runner.invoke(app, [*args, str(older)]))
    assert f"--from-evidence {older}: evidence {doc['digest']} was written before its records carried timing" in text


def _evidence_written_before_records_carried_timing() -> dict[str, Any]:
    from inferensics.kernels.qualify import Evidence, QualifyResult
    from tests.kernels.evidence_edits import redigest

    result = QualifyResult(
        ts=datetime(2025, 1, 1, tzinfo=UTC),
        records=[Evidence("rms_norm", "reference", "b", "tokens=2,hidden=8", "float32", "measured")],
        environment=kernels.environment(),
        state=kernels.registry_state(),
    )
    doc = result.to_json()
    for r in doc["records"]:
        del r["timing"]
    return dict(redigest(doc))
