"""``inferensics kernels list`` and ``kernels qualify`` through the real command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner, Result

from inferensics import kernels
from inferensics.cli.app import app
from inferensics.cli.kernels_commands import SHAPES_HELP, TIMED_AS, TIMING
from inferensics.kernels.evidence import device_label
from inferensics.kernels.requirements import INTERPRETER_ENV
from inferensics.kernels.samples import SHAPE_FIELDS
from inferensics.schema.store import Store
from tests.kernels.evidence_edits import OTHER_DEVICE, measured_elsewhere
from tests.polling import poll

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
    # Printed as written: rich would read '[T, D/2]' as a markup tag and drop it. T, not "positions": the op takes
    # cos/sin of exactly x's token count (S for [B,H,S,D]), whatever positions they hold.
    assert "cos/sin [T, D/2] ([S, D/2] for [B,H,S,D]), rows contiguous" in result.output
    assert "registry digest" in result.output
    state = json.loads(runner.invoke(app, ["kernels", "list", "--json"]).output)
    assert set(state["ops"]) >= {"rms_norm", "silu_mul"}


@pytest.mark.usefixtures("restored_registry")
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
        rows = store.query_rows(
            f"SELECT provider, status, evidence_digest, timing, trials FROM {store.database}.kernel_qualifications"
        )
        store.client.command(f"DROP DATABASE IF EXISTS {store.database} SYNC")
    assert {r[0] for r in rows} >= {"reference", "triton"}
    assert {r[2] for r in rows} == {doc["digest"]}
    want = "cuda_graph" if torch.cuda.is_available() else "wall"
    assert {r[3] for r in rows if r[4]} == {want}  # each record says how its median was measured
    assert {r["timing"] for r in doc["records"] if r["trials"]} == {want}
    assert f"timed as: {TIMED_AS[want]}" in result.output


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


def _qualify(*args: str) -> Result:
    return runner.invoke(app, ["kernels", "qualify", "--trials", "2", "--warmup", "0", "--iters", "1", *args])


@pytest.mark.skipif(torch.cuda.is_available(), reason="what a CPU host without the interpreter shows")
def test_list_says_what_cannot_serve_on_this_host_and_why(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(INTERPRETER_ENV, raising=False)
    result = runner.invoke(app, ["kernels", "list"])
    assert result.exit_code == 0, result.output
    rms = result.output[result.output.index("\nrms_norm") : result.output.index("\nrotary_embedding")]
    # Under its row, each provider that cannot serve here says so; the priority list alone read as if it could.
    assert "  triton     triton " in rms
    assert "unavailable on this host: platform cpu not in ['cuda', 'interpreter']" in rms
    assert "compiled graphs only here (eager calls: platform cpu not in ['cuda'])" in rms
    assert f"TRITON_INTERPRET=1 {INTERPRETER_ENV}=1" in result.output
    # The tolerance a tolerant provider (the batch-invariant Triton RMSNorm) is held to, not only the exact rule.
    assert "close for the others (" in rms
    assert "bfloat16 atol=0.01 rtol=0.01" in rms
    here = json.loads(runner.invoke(app, ["kernels", "list", "--json"]).output)["available_here"]
    assert here["rms_norm"]["reference"] == ""
    assert here["rms_norm"]["triton"].startswith("unavailable on this host")


@pytest.mark.usefixtures("restored_registry")
def test_list_shows_the_evidence_file_qualify_wrote(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    out = tmp_path / "evidence.json"
    result = _qualify("--shapes", str(shapes), "--out", str(out))
    assert result.exit_code == 0, result.output
    assert f"`inferensics kernels list --evidence {out}` shows it" in result.output
    doc = json.loads(out.read_text())
    result = runner.invoke(app, ["kernels", "list", "--evidence", str(out)])
    assert result.exit_code == 0, result.output
    assert f"evidence {doc['digest']} from {out}" in result.output
    silu = result.output[result.output.index("\nsilu_mul") :]
    assert "  evidence records:" in silu
    assert "    tokens=2,hidden=8  reference " in silu
    assert "    tokens=2,hidden=8  triton " in silu
    # Its priorities applied: the registry reads as the qualifying process left it, down to the digest, and the
    # evidence it names is the file's (the digest its stored records carry).
    assert f"registry digest {doc['registry']['digest']}" in result.output
    assert doc["registry"]["evidence"] in ([], [doc["digest"]])
    for bad, why in (("nope.json", "cannot read it (No such file"), (str(shapes), "not a qualification evidence")):
        result = runner.invoke(app, ["kernels", "list", "--evidence", bad])
        assert result.exit_code == 2
        assert why in result.output
        assert "Traceback" not in result.output


@pytest.mark.skipif(torch.cuda.is_available(), reason="CPU qualification: the interpreter's Triton is refused")
@pytest.mark.usefixtures("restored_registry")
def test_list_says_evidence_from_another_device_would_not_apply_here(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    result = _qualify("--shapes", str(shapes), "--dtype", "float32", "--out", str(tmp_path / "evidence.json"))
    assert result.exit_code == 0, result.output
    (tmp_path / "gpu.json").write_text(json.dumps(measured_elsewhere(tmp_path / "evidence.json")))
    doc = json.loads((tmp_path / "gpu.json").read_text())
    (refusal,) = doc["registry"]["policy"]["silu_mul"]["refused"]  # the interpreter's Triton is not bit-exact
    for op in kernels.registry().ops.values():  # this host's own policy, not the one qualify left in this process
        op.bucket_priority.clear()
        op.refused.clear()
    own = kernels.registry_state()["digest"]

    result = runner.invoke(app, ["kernels", "list", "--evidence", str(tmp_path / "gpu.json")])

    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[0].endswith("float32; it would not apply here")
    assert lines[1] == (
        f"  measured on {OTHER_DEVICE}, not on this host's {device_label()} (evidence holds only on the device it was "
        "measured on): the priorities below are this host's own; what the evidence would set reads 'evidence (not "
        "applied here)'"
    )
    silu = result.output[result.output.index("\nsilu_mul") :]
    # What it holds is still shown: its refusal, marked, and its records; the registry stays this host's own.
    why = f"{refusal['provider']} in {refusal['bucket']}: {refusal['reason']}"
    assert f"  evidence (not applied here): refused: {why}" in silu
    assert f"\n  refused: {why}" not in silu
    assert "    tokens=2,hidden=8  triton " in silu
    assert f"registry digest {own} " in result.output
    result = runner.invoke(app, ["kernels", "list", "--json", "--evidence", str(tmp_path / "gpu.json")])
    shown = json.loads(result.output)
    assert shown["digest"] == own
    assert shown["evidence"] == {
        "digest": doc["digest"],
        "file": str(tmp_path / "gpu.json"),
        "measured_on": OTHER_DEVICE,
        "this_host": device_label(),
        "applied": False,
        "not_applied": f"measured on {OTHER_DEVICE}, not on this host's {device_label()}",
    }


def test_qualify_checks_every_shape_before_measuring_any(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.json"
    good, wrong, negative = {"tokens": 2, "hidden": 8}, {"tokens": 2, "hidden_size": 8}, {"tokens": -1, "hidden": 8}
    shapes.write_text(json.dumps({"rms_norm": [good, wrong], "silu_mul": [negative]}))
    out = tmp_path / "evidence.json"
    result = _qualify("--shapes", str(shapes), "--out", str(out))
    assert result.exit_code == 2
    assert result.output.count("error:") == 1
    assert "2 of 3 shapes rejected, nothing measured" in result.output
    assert "rms_norm[1] tokens=2,hidden_size=8: lacks hidden and has unknown hidden_size" in result.output
    assert "(rms_norm takes tokens, hidden)" in result.output
    assert "silu_mul[0] tokens=-1,hidden=8: tokens=-1 is not a positive integer" in result.output
    assert "qualification on" not in result.output
    assert "Traceback" not in result.output
    assert not out.exists()
    result = _qualify("--shapes", str(tmp_path / "missing.json"))
    assert result.exit_code == 2
    assert "cannot read it (No such file or directory)" in result.output


def test_qualify_refuses_an_unwritable_out_before_measuring(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    for out, why in ((tmp_path / "no" / "e.json", "its folder does not exist"), (tmp_path, "a directory")):
        result = _qualify("--shapes", str(shapes), "--out", str(out))
        assert result.exit_code == 2, result.output
        assert f"--out {out}: {why}" in result.output
        assert "qualification on" not in result.output
        assert result.exception is None or isinstance(result.exception, SystemExit)


@pytest.mark.usefixtures("restored_registry")
def test_a_shape_the_op_cannot_take_is_a_counted_reject_and_the_rest_kept(tmp_path: Path) -> None:
    shapes = tmp_path / "shapes.json"
    odd_rotary = {"tokens": 4, "heads": 2, "head_dim": 5}  # the reference's cos/sin halves cannot pair up
    shapes.write_text(json.dumps({"rotary_embedding": [odd_rotary], "silu_mul": [{"tokens": 2, "hidden": 8}]}))
    out = tmp_path / "evidence.json"
    result = _qualify("--shapes", str(shapes), "--out", str(out))
    assert result.exit_code == 1, result.output
    assert "1 of 2 shapes rejected: the op's reference cannot take them" in result.output
    assert "rotary_embedding tokens=4,heads=2,head_dim=5" in result.output
    doc = json.loads(out.read_text())
    # Only the file's ops (not every op at its default shapes), the reject's rows kept beside the good shape's.
    assert {r["op"] for r in doc["records"]} == {"rotary_embedding", "silu_mul"}
    rotary = {r["provider"]: r for r in doc["records"] if r["op"] == "rotary_embedding"}
    assert rotary["reference"]["status"] == "error"
    assert any(r["status"] == "measured" for r in doc["records"] if r["op"] == "silu_mul")


@pytest.mark.usefixtures("restored_registry")
def test_list_evidence_shows_how_medians_were_timed_also_for_files_written_before_it_was_recorded(
    tmp_path: Path,
) -> None:
    from tests.kernels.evidence_edits import redigest

    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    out = tmp_path / "evidence.json"
    result = _qualify("--shapes", str(shapes), "--out", str(out), "--timing", "events", "--dry-run")
    assert result.exit_code == 0, result.output
    assert any(line.startswith("op ") and " timed " in line for line in result.output.splitlines())  # the column
    result = _qualify("--shapes", str(shapes), "--out", str(out))
    assert result.exit_code == 0, result.output
    doc = json.loads(out.read_text())
    assert doc["options"]["timing"] == "auto"
    method = "cuda_graph" if torch.cuda.is_available() else "wall"
    result = runner.invoke(app, ["kernels", "list", "--evidence", str(out)])
    assert result.exit_code == 0, result.output
    silu = result.output[result.output.index("\nsilu_mul") :]
    assert f"    timed as: {TIMED_AS[method]}" in silu
    assert f"({method})" in silu
    for r in doc["records"]:  # as an older qualify wrote it
        del r["timing"]
    old = tmp_path / "old.json"
    old.write_text(json.dumps(redigest(doc)))
    result = runner.invoke(app, ["kernels", "list", "--evidence", str(old)])
    assert result.exit_code == 0, result.output
    silu = result.output[result.output.index("\nsilu_mul") :]
    assert f"    timed as: {TIMED_AS['']}" in silu
    assert "(timing not recorded)" in silu
    result = _qualify("--shapes", str(shapes), "--out", str(out), "--timing", "graphs", "--force")
    assert result.exit_code == 2
    assert "--timing graphs: expected one of auto, events" in result.output


def test_the_cli_names_the_timing_options_and_methods_qualify_has() -> None:
    from inferensics.kernels.qualify import TIMING_METHODS, TIMING_OPTIONS

    assert TIMING == TIMING_OPTIONS
    assert {k: v for k, v in TIMED_AS.items() if k} == TIMING_METHODS


def test_the_shapes_help_names_each_ops_fields() -> None:
    for op, fields in SHAPE_FIELDS.items():
        assert f"{', '.join(fields)} (" in SHAPES_HELP
        assert op in SHAPES_HELP


@pytest.mark.slow
@pytest.mark.usefixtures("restored_registry")
def test_qualify_stores_its_records_through_the_service_that_owns_the_store(tmp_path: Path) -> None:
    from tests.collector.service.harness import ADMIN, INGEST, new_service

    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    out = tmp_path / "evidence.json"
    (tmp_path / "svc").mkdir()
    with new_service(tmp_path / "svc", via_cli=True) as service:
        # The store is the service's: opening it directly is refused, so the records go through its API.
        args = ["--shapes", str(shapes), "--out", str(out), "--store", "--service", service.url]
        result = _qualify(*args, "--token", INGEST)
        assert result.exit_code == 0, result.output
        assert "qualification records recorded in kernel_qualifications through" in result.output
        digest = json.loads(out.read_text())["digest"]
        client = service.client(ADMIN)

        def stored() -> list[str]:
            frame = client.sql("SELECT DISTINCT evidence_digest FROM inferensics.kernel_qualifications")
            return [str(d) for d in frame["evidence_digest"].to_list()]

        assert poll(stored, bool, timeout=60) == [digest]
        result = _qualify(*args, "--token", "wrong", "--force")  # the file is written again, the rows refused
        assert result.exit_code == 2
        assert "not recorded in kernel_qualifications" in result.output
        assert f"(the evidence file {out} is written)" in result.output
        assert f"`inferensics kernels qualify --store --from-evidence {out}`" in result.output
        # Stored later from the file, without measuring again; a second retry finds them all stored.
        records, second = len(json.loads(out.read_text())["records"]), json.loads(out.read_text())["digest"]
        retry = ["kernels", "qualify", "--store", "--from-evidence", str(out), "--service", service.url]
        result = runner.invoke(app, [*retry, "--token", ADMIN])
        assert result.exit_code == 0, result.output
        assert f"{records} qualification records recorded in kernel_qualifications through" in result.output
        both = poll(stored, lambda d: len(d) == 2, timeout=60)
        assert sorted(both) == sorted([digest, second])
        result = runner.invoke(app, [*retry, "--token", ADMIN])
        assert result.exit_code == 0, result.output
        assert f"all {records} qualification records of evidence {second} are stored already" in result.output
