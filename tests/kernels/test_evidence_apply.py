"""Evidence reaches a process that did not measure it: ``kernels.apply_evidence`` makes the registry follow an
evidence file ``kernels qualify`` wrote (dispatch changes, the log says what was applied), refuses one measured
on another device (counted, named, nothing applied), and ``qualify --out`` keeps an existing file unless
``--force``."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from inferensics import kernels
from inferensics.cli.app import app
from tests.kernels.conftest import HAS_CUDA
from tests.kernels.evidence_edits import OTHER_DEVICE, kept_registry, measured_elsewhere, redigest

pytestmark = [
    pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning"),
    pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated:DeprecationWarning"),
    pytest.mark.skipif(HAS_CUDA, reason="the evidence a CPU host writes (float32 Triton refused in the interpreter)"),
]

runner = CliRunner()
ARGS = (torch.randn(2, 16),)  # silu_mul at the qualified shape: tokens=2, hidden=8, float32


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real evidence file, written by `kernels qualify` here; its registry is put back afterwards."""
    folder = tmp_path_factory.mktemp("evidence")
    (folder / "shapes.json").write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    args = ["kernels", "qualify", "--shapes", str(folder / "shapes.json"), "--dtype", "float32"]
    with kept_registry():
        result = runner.invoke(app, [*args, "--out", str(folder / "e.json"), "--trials", "2", "--iters", "1"])
    assert result.exit_code == 0, result.output
    doc = json.loads((folder / "e.json").read_text())
    # Triton's interpreter is not bit-exact with eager float32 SiLU: the accuracy gate refused it for the bucket.
    assert [(c["op"], c["after"]) for c in doc["changes"]] == [("silu_mul", ["reference"])]
    return folder / "e.json"


@pytest.mark.usefixtures("restored_registry")
def test_applied_evidence_changes_dispatch_and_says_what_it_applied(evidence: Path) -> None:
    reg = kernels.registry()
    doc = json.loads(evidence.read_text())
    assert kernels.registry_state()["digest"] != doc["registry"]["digest"]  # a process that did not qualify
    assert kernels.silu_mul(*ARGS) is not None
    assert reg.op("silu_mul").select(ARGS).provider == "triton"  # the interpreter serves it, for lack of evidence
    before = reg.log.stats()["evidence_applied"].get("silu_mul", 0)

    applied = kernels.apply_evidence(evidence)

    bucket = "float32/n16/t2"
    refusal = doc["registry"]["policy"]["silu_mul"]["refused"][0]["reason"]
    assert applied.applied == (f"silu_mul {bucket}: triton refused ({refusal})",)
    assert applied.refused == ()
    assert applied.follows  # the registry now reads as the qualifying process left it, down to the digest
    assert kernels.registry_state()["digest"] == doc["registry"]["digest"]
    where = "cpu (Triton interpreter)" if applied.interpreter else "cpu"  # the head names it, as the reason would
    assert applied.summary() == f"evidence {doc['digest'][:12]} ({evidence}) measured on {where}: 1 applied, 0 refused"
    kernels.silu_mul(*ARGS)
    decision = next(d for d in reg.decisions() if d.op == "silu_mul" and d.signature == "float32[2,16]@cpu")
    assert (decision.provider, decision.skipped) == ("reference", (("triton", refusal),))
    # A compiled graph takes the same decision while it is traced.
    torch.compile(lambda x: kernels.silu_mul(x) * 2, fullgraph=True)(*ARGS)
    traced = next(d for d in reg.decisions() if d.op == "silu_mul" and d.compiled and d.bucket == bucket)
    assert dict(traced.skipped)["triton"] == refusal
    assert reg.log.applications()[-1] == applied
    assert reg.log.stats()["evidence_applied"]["silu_mul"] == before + 1


@pytest.mark.usefixtures("restored_registry")
def test_evidence_from_another_device_is_reported_and_not_applied(evidence: Path) -> None:
    reg = kernels.registry()
    state = kernels.registry_state()
    before = reg.log.stats()["evidence_refused"].get("silu_mul", 0)

    applied = kernels.apply_evidence(measured_elsewhere(evidence), origin="gpu-host")

    assert applied.applied == ()
    assert len(applied.refused) == 1
    assert applied.refused[0].endswith(f"(measured on {OTHER_DEVICE}, not on this host's cpu)")
    assert applied.reason == f"measured on {OTHER_DEVICE}, not on this host's cpu"
    assert not applied.follows
    assert applied.summary().endswith(
        f"(gpu-host) measured on {OTHER_DEVICE}: 0 applied, 1 refused: not applied, "
        f"measured on {OTHER_DEVICE}, not on this host's cpu"
    )
    assert kernels.registry_state() == state  # nothing of it took effect
    assert reg.op("silu_mul").select(ARGS).provider == "triton"
    assert reg.log.stats()["evidence_refused"]["silu_mul"] == before + 1


def test_a_damaged_evidence_file_is_one_line(evidence: Path, tmp_path: Path) -> None:
    edited = json.loads(evidence.read_text())
    edited["records"][0]["median_us"] = 0.001  # edited without recomputing the digest
    bad = tmp_path / "edited.json"
    bad.write_text(json.dumps(edited))
    with pytest.raises(kernels.EvidenceError, match=r"edited.json: its contents do not match its digest"):
        kernels.apply_evidence(bad)
    with pytest.raises(kernels.EvidenceError, match=r"nope.json: cannot read it"):
        kernels.apply_evidence(tmp_path / "nope.json")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_well_formed_edit_of_the_policy_applies_or_is_refused_never_raised(
    evidence: Path, data: st.DataObject
) -> None:
    doc = json.loads(evidence.read_text())
    policy = doc["registry"]["policy"]
    op = data.draw(st.sampled_from([*sorted(policy), "nope"]))
    names = st.sampled_from(["reference", "triton", "inductor", "sdpa", "planted", 3])
    refusal = st.fixed_dictionaries({"bucket": st.text(max_size=4), "provider": names})
    policy[op] = data.draw(
        st.fixed_dictionaries(
            {},
            optional={
                "priority": st.lists(names, max_size=3) | st.none(),
                "bucket_priority": st.dictionaries(st.text(max_size=4), st.lists(names, max_size=3), max_size=2),
                "refused": st.lists(refusal, max_size=2),
            },
        )
        | st.none()
    )
    edited = redigest(copy.deepcopy(doc))
    with kept_registry():
        applied = kernels.apply_evidence(edited, origin="edited")
        assert all(isinstance(line, str) for line in (*applied.applied, *applied.refused))
        assert applied.follows == (kernels.registry_state()["digest"] == edited["registry"]["digest"])


def test_qualify_keeps_an_existing_evidence_file_unless_forced(tmp_path: Path) -> None:
    out = tmp_path / "evidence.json"
    out.write_text("the evidence a bundle was built with")
    shapes = tmp_path / "shapes.json"
    shapes.write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    args = ["kernels", "qualify", "--shapes", str(shapes), "--trials", "2", "--iters", "1", "--warmup", "0"]
    result = runner.invoke(app, [*args, "--out", str(out)])
    assert result.exit_code == 2
    assert result.output.strip() == f"error: --out {out} exists: pass --force to overwrite it, or name another file"
    assert out.read_text() == "the evidence a bundle was built with"
    with kept_registry():
        result = runner.invoke(app, [*args, "--out", str(out), "--force"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["kind"] == "inferensics.kernels.qualification"


@pytest.mark.usefixtures("restored_registry")
def test_interpreter_evidence_says_so_and_a_host_without_the_interpreter_applies_none_of_it(
    evidence: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Before: labelled `cpu`, so the interpreter's refusal of the float32 Triton SiLU·mul applied on any CPU host.
    from inferensics.kernels.qualify import QualifyResult
    from inferensics.kernels.requirements import INTERPRETER_ENV

    doc = json.loads(evidence.read_text())
    assert doc["environment"]["device"] == "cpu (Triton interpreter)"
    assert {e.device_name for e in QualifyResult.from_json(doc).events("h")} == {"cpu (Triton interpreter)"}
    reason = (
        "measured in Triton's interpreter, which this host does not run: its timings and accuracy verdicts hold only "
        f"with TRITON_INTERPRET=1 {INTERPRETER_ENV}=1"
    )
    unstamped = copy.deepcopy(doc)  # a file written before the stamp: its records show the interpreter ran
    unstamped["environment"]["device"] = "cpu"
    reg = kernels.registry()
    monkeypatch.delenv(INTERPRETER_ENV)  # a CPU serving host
    state = kernels.registry_state()
    for source in (evidence, redigest(unstamped)):
        before = reg.log.stats()["evidence_refused"].get("silu_mul", 0)

        applied = kernels.apply_evidence(source, origin="interpreted")

        assert (applied.applied, applied.reason, applied.follows) == ((), reason, False)
        assert [line.split(" (")[0] for line in applied.refused] == ["silu_mul float32/n16/t2: triton refused"]
        assert applied.refused[0].endswith(f"({reason})")
        assert kernels.registry_state() == state
        assert reg.log.stats()["evidence_refused"]["silu_mul"] == before + 1
    result = runner.invoke(app, ["kernels", "list", "--json", "--evidence", str(evidence)])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["evidence"]["not_applied"] == reason
    monkeypatch.setenv(INTERPRETER_ENV, "1")  # where the interpreter runs, it applies
    assert kernels.apply_evidence(evidence).follows
