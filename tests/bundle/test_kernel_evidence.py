"""Kernel qualification evidence reaches the serving host through the bundle: ``build --kernel-evidence`` checks
and signs it, a fresh host process that loads the bundle dispatches on it (eager and compiled), a tampered file
fails verification, and evidence measured on another device is reported, not applied."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from inferensics import bundle as b
from inferensics import kernels
from inferensics.bundle import torch_adapter
from inferensics.bundle.build import KERNEL_EVIDENCE, resources_of
from inferensics.bundle.canonical import sha256_file
from inferensics.bundle.load import kernel_evidence_line
from inferensics.bundle.manifest import MANIFEST_FILE, read_manifest_unverified
from inferensics.cli.app import app
from tests.bundle.conftest import Keys, spec, tar_folder, without_progress
from tests.kernels.evidence_edits import OTHER_DEVICE, kept_registry, measured_elsewhere, redigest

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        torch.cuda.is_available(), reason="qualifies and builds on the CPU (a GPU host qualifies there)"
    ),
]

ROOT = Path(__file__).resolve().parents[2]
MODEL, INPUTS = "tests.bundle.kernel_models:silu_mlp", "tests.bundle.kernel_models:inputs"
SHAPES = b.ShapeDistribution.of([(2, 8)], [1])
INTERPRETER = {"TRITON_INTERPRET": "1", "INFERENSICS_KERNELS_INTERPRET": "1"}
"""Our Triton kernels serve CPU tensors in the interpreter: without evidence the fresh host's SiLU·mul is Triton's."""

HOST = """
import json, sys, torch
from inferensics import kernels
from inferensics.collector.host import instrument
from inferensics.collector.testing import InMemoryExporter
from tests.bundle.kernel_models import inputs, silu_mlp

model, (x,) = silu_mlp(), inputs((2, 8))

def eager():
    with torch.inference_mode():
        model(x)
    return next(d for d in kernels.registry().decisions() if not d.compiled).to_json()

before = eager()
tracker = instrument(exporter=InMemoryExporter(), host="h1", model="silu")
compiled = tracker.compile(model, bundle=sys.argv[1], keyring=sys.argv[2])
after = eager()
with torch.inference_mode():
    compiled(x)
tracker.flush()
stats = tracker.stats()
tracker.shutdown()
log = kernels.registry().log
print(json.dumps({
    "before": before, "after": after,
    "compiled": [d.to_json() for d in kernels.registry().decisions() if d.compiled],
    "applications": [a.to_json() for a in log.applications()], "log": log.stats(),
    "sdk": {k: v for k, v in stats.items() if k.startswith(("kernel_evidence", "bundle_"))},
    "digest": kernels.registry_state()["digest"],
}))
"""


@pytest.fixture(autouse=True)
def _fresh_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "cache"))
    torch_adapter.reset_compiler()


def _env(tmp: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TRITON_", "INFERENSICS_", "TORCHINDUCTOR_"))}
    return {**env, "TORCHINDUCTOR_CACHE_DIR": str(tmp / "inductor"), "INFERENSICS_JOURNAL_DIR": "off", **extra}


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Evidence `inferensics kernels qualify` wrote in its own process (float32 SiLU·mul at the model's shape:
    the interpreter's Triton kernel is not bit-exact with eager, so the accuracy gate refuses it there)."""
    folder = tmp_path_factory.mktemp("qualify")
    (folder / "shapes.json").write_text(json.dumps({"silu_mul": [{"tokens": 2, "hidden": 8}]}))
    args = ["kernels", "qualify", "--shapes", "shapes.json", "--dtype", "float32", "--out", "evidence.json"]
    cmd = [sys.executable, "-m", "inferensics.cli", *args, "--trials", "2", "--iters", "1", "--warmup", "0"]
    done = subprocess.run(cmd, cwd=folder, env=_env(folder, **INTERPRETER), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    doc = json.loads((folder / "evidence.json").read_text())
    assert [(c["op"], c["bucket"], c["after"]) for c in doc["changes"]] == [
        ("silu_mul", "float32/n16/t2", ["reference"])
    ]
    return folder / "evidence.json"


@pytest.fixture(scope="module")
def carried(tmp_path_factory: pytest.TempPathFactory, keys: Keys, evidence: Path) -> b.BuildResult:
    """The SiLU·mul model's bundle, built with the evidence."""
    out = tmp_path_factory.mktemp("built") / "silu"
    return b.build(spec(model=MODEL, inputs=INPUTS, shapes=SHAPES, kernel_evidence=evidence), keys.key, out)


def test_the_bundle_carries_the_evidence_signed_and_records_its_registry_state(
    carried: b.BuildResult, evidence: Path, keys: Keys
) -> None:
    doc = json.loads(evidence.read_text())
    m = carried.manifest
    listed = {r.name: r.digest for r in m.resources}
    assert listed[KERNEL_EVIDENCE] == sha256_file(evidence)  # the file as qualify wrote it, its sha256 signed
    assert m.build["kernel_evidence"] == doc["digest"]
    assert m.identity["kernel_registry"]["digest"] == doc["registry"]["digest"]
    assert m.identity["kernel_registry"]["policy"]["silu_mul"]["refused"][0]["bucket"] == "float32/n16/t2"
    assert b.verify(carried.directory, keys.keyring).bundle_id == carried.bundle_id
    # The build followed the evidence while it compiled and put this process's registry back after.
    assert kernels.registry_state()["digest"] != doc["registry"]["digest"]


def test_a_fresh_host_that_loads_the_bundle_dispatches_on_its_evidence(
    carried: b.BuildResult, evidence: Path, keys: Keys, tmp_path: Path
) -> None:
    doc = json.loads(evidence.read_text())
    refusal = doc["registry"]["policy"]["silu_mul"]["refused"][0]["reason"]
    cmd = [sys.executable, "-c", HOST, str(carried.directory), str(keys.public)]
    done = subprocess.run(cmd, cwd=ROOT, env=_env(tmp_path, **INTERPRETER), capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert (seen["before"]["provider"], seen["before"]["skipped"]) == ("triton", [])  # no evidence yet
    assert seen["after"]["provider"] == "reference"
    assert seen["after"]["skipped"] == [{"provider": "triton", "reason": refusal}]
    assert [d["skipped"] for d in seen["compiled"]] == [[{"provider": "triton", "reason": refusal}]]
    (applied,) = seen["applications"]
    assert applied["applied"] == [f"silu_mul float32/n16/t2: triton refused ({refusal})"]
    assert (applied["refused"], applied["follows"], applied["origin"]) == ([], True, f"bundle {carried.bundle_id[:12]}")
    assert seen["digest"] == doc["registry"]["digest"]
    assert seen["log"]["evidence_applied"] == {"silu_mul": 1}
    assert seen["sdk"]["kernel_evidence_applied"] == 1
    assert seen["sdk"].get("kernel_evidence_refused", 0) == 0
    assert seen["sdk"]["bundle_hit_graphs"] == 1


def test_a_tampered_evidence_file_fails_verification(carried: b.BuildResult, keys: Keys, tmp_path: Path) -> None:
    copy = tmp_path / "bundle"
    shutil.copytree(carried.directory, copy)
    # A well-formed edit (digests recomputed) still differs from the sha256 the manifest signed.
    (copy / KERNEL_EVIDENCE).write_text(json.dumps(measured_elsewhere(copy / KERNEL_EVIDENCE)))
    with pytest.raises(b.BundleError, match=f"{KERNEL_EVIDENCE} does not match its sha256") as refused:
        b.load(copy, keys.keyring, apply_settings=False)
    assert refused.value.cause == "tampered"


def test_evidence_from_another_device_is_reported_not_applied(
    carried: b.BuildResult, keys: Keys, tmp_path: Path
) -> None:
    copy = tmp_path / "bundle"
    shutil.copytree(carried.directory, copy)
    (copy / KERNEL_EVIDENCE).write_text(json.dumps(measured_elsewhere(copy / KERNEL_EVIDENCE)))
    m = read_manifest_unverified(copy)[0]  # signed again by the builder: a bundle that verifies
    (copy / MANIFEST_FILE).write_bytes(m.model_copy(update={"resources": resources_of(copy)}).sign(keys.key))
    state = kernels.registry_state()

    loaded = b.load(copy, keys.keyring, apply_settings=False)

    ev = loaded.kernel_evidence
    assert ev is not None
    assert (ev.applied, ev.follows, ev.measured_on, ev.device) == ((), False, OTHER_DEVICE, "cpu")
    assert ev.reason == f"measured on {OTHER_DEVICE}, not on this host's cpu"
    assert [line.split(" (")[0] for line in ev.refused] == ["silu_mul float32/n16/t2: triton refused"]
    assert kernels.registry_state() == state
    assert kernels.registry().log.applications()[-1] == ev


def test_build_refuses_evidence_it_cannot_carry(evidence: Path, keys: Keys, tmp_path: Path) -> None:
    doc = json.loads(evidence.read_text())
    edited = json.loads(evidence.read_text())
    edited["records"][0]["median_us"] = 0.001
    (tmp_path / "edited.json").write_text(json.dumps(edited))
    (tmp_path / "gpu.json").write_text(json.dumps(measured_elsewhere(evidence)))
    other = json.loads(evidence.read_text())
    other["registry"]["ops"]["silu_mul"]["doc"] = "another build of the op"
    (tmp_path / "other.json").write_text(json.dumps(redigest(other)))
    cases = {
        "edited.json": "its contents do not match its digest: damaged or edited since qualify wrote it",
        "gpu.json": f"was measured on {OTHER_DEVICE}, and this bundle is built for cpu",
        "other.json": 'ops.silu_mul.doc: here "silu(x[..., :d]) * x[..., d:] (bit-exact with eager)", evidence '
        '"another build of the op"',
    }
    for name, why in cases.items():
        with pytest.raises(b.BundleError) as refused:
            b.build(spec(model=MODEL, inputs=INPUTS, shapes=SHAPES, kernel_evidence=tmp_path / name), keys.key,
                    tmp_path / f"out-{name}")  # fmt: skip
        assert refused.value.cause == "bad_input"
        assert why in str(refused.value)
        assert not (tmp_path / f"out-{name}").exists()
    (tmp_path / "shapes.json").write_text(json.dumps({"shapes": [{"shape": [2, 8]}]}))
    result = CliRunner().invoke(app, [
        "bundle", "build", "--model", MODEL, "--inputs", INPUTS, "--key", str(keys.private),
        "--out", str(tmp_path / "cli"), "--shapes", str(tmp_path / "shapes.json"),
        "--kernel-evidence", str(tmp_path / "gpu.json"),
    ])  # fmt: skip
    assert result.exit_code == 2
    assert without_progress(result.output).count("\n") == 0
    assert kernels.registry_state()["digest"] != doc["registry"]["digest"]


def _signed_with(carried: b.BuildResult, keys: Keys, folder: Path, evidence: bytes) -> Path:
    """A copy of the bundle whose evidence file is ``evidence``, signed again by its builder (it verifies)."""
    copy = folder / "signed"
    shutil.copytree(carried.directory, copy)
    (copy / KERNEL_EVIDENCE).write_bytes(evidence)
    m = read_manifest_unverified(copy)[0]
    (copy / MANIFEST_FILE).write_bytes(m.model_copy(update={"resources": resources_of(copy)}).sign(keys.key))
    return copy


def test_verify_and_show_say_what_evidence_the_bundle_carries_and_whether_a_load_here_applies_it(
    carried: b.BuildResult, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in INTERPRETER.items():  # the evidence was measured in the interpreter: this host runs it too
        monkeypatch.setenv(name, value)
    here = json.loads((carried.directory / KERNEL_EVIDENCE).read_text())
    elsewhere = measured_elsewhere(carried.directory / KERNEL_EVIDENCE)
    other = _signed_with(carried, keys, tmp_path, json.dumps(elsewhere).encode())
    packed = b.pack(other, tmp_path / "other.tar")
    follows = (
        f"kernel evidence {here['digest'][:16]}: measured on cpu, this host's device: a load here follows its "
        "priorities"
    )
    refused = (
        f"kernel evidence {elsewhere['digest'][:16]}: measured on {OTHER_DEVICE}, not on this host's cpu: a load here "
        "applies none of it (the bundle still loads)"
    )
    for bundle, line in ((carried.directory, follows), (other, refused)):
        result = CliRunner().invoke(app, ["bundle", "verify", str(bundle), "--keyring", str(keys.public)])
        assert result.exit_code == 0, result.output
        lines = result.output.splitlines()
        assert lines[1].startswith("qualified: input shapes "), result.output
        assert lines[2:] == [line]
    for bundle, line in ((carried.directory, follows), (other, refused), (packed, refused)):
        result = CliRunner().invoke(app, ["bundle", "show", str(bundle)])
        assert result.exit_code == 0, result.output
        assert f"\n  {line}\n" in result.output
    # A bundle without evidence says so; one whose signed evidence is damaged is refused, as a load refuses it.
    none = "kernel evidence: none (hosts keep their own kernel priorities)"
    assert kernel_evidence_line(carried.manifest, None) == none
    damaged = _signed_with(carried, keys, tmp_path / "damaged", b'{"kind": "something else"}')
    result = CliRunner().invoke(app, ["bundle", "verify", str(damaged), "--keyring", str(keys.public)])
    assert result.exit_code == 2
    assert result.output.count("\n") == 1
    assert "not a qualification evidence file" in result.output
    assert "[damaged]" in result.output
    assert "Traceback" not in result.output


def test_show_says_when_the_evidence_file_is_not_the_one_the_manifest_signed(
    carried: b.BuildResult, keys: Keys, tmp_path: Path
) -> None:
    # Before: show read the swapped file as the bundle's evidence ("a load here follows its priorities"), though
    # verify and every load refuse the bundle.
    copy = tmp_path / "swapped"
    shutil.copytree(carried.directory, copy)
    (copy / KERNEL_EVIDENCE).write_text(json.dumps(measured_elsewhere(copy / KERNEL_EVIDENCE)))  # not signed again
    line = (
        f"kernel evidence: {KERNEL_EVIDENCE} is not the file the manifest signed (its sha256 differs): verify and a "
        "load refuse the bundle; restore the file or rebuild the bundle"
    )
    for bundle in (copy, tar_folder(copy, tmp_path / "swapped.tar")):  # `bundle pack` refuses it
        shown = CliRunner().invoke(app, ["bundle", "show", str(bundle)])
        assert shown.exit_code == 0, shown.output
        assert f"\n  {line}\n" in shown.output
    verified = CliRunner().invoke(app, ["bundle", "verify", str(copy), "--keyring", str(keys.public)])
    assert verified.exit_code == 2
    assert KERNEL_EVIDENCE in verified.output


def test_a_load_applies_the_evidence_bytes_it_verified_reading_the_file_once(
    carried: b.BuildResult, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    load_module = importlib.import_module("inferensics.bundle.load")  # `bundle.load` is the function
    copy = tmp_path / "bundle"
    shutil.copytree(carried.directory, copy)
    real_verify: Callable[..., b.VerifiedBundle] = load_module.verify

    def verify_then_swap(*args: object, **kwargs: object) -> b.VerifiedBundle:
        verified = real_verify(*args, **kwargs)
        # Changed after its sha256 was checked: a load that read the file again would apply other evidence.
        (copy / KERNEL_EVIDENCE).write_text(json.dumps(measured_elsewhere(copy / KERNEL_EVIDENCE)))
        return verified

    monkeypatch.setattr(load_module, "verify", verify_then_swap)
    for name, value in INTERPRETER.items():  # as where the evidence was measured (a host without it refuses it)
        monkeypatch.setenv(name, value)
    with kept_registry():
        loaded = b.load(copy, keys.keyring, apply_settings=False)
        ev = loaded.kernel_evidence
        assert ev is not None
        assert (ev.measured_on, ev.reason, ev.follows) == ("cpu", "", True)
        assert ev.digest == json.loads((carried.directory / KERNEL_EVIDENCE).read_text())["digest"]


def test_interpreter_evidence_is_not_followed_by_a_host_without_the_interpreter(
    carried: b.BuildResult, keys: Keys, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Timings and accuracy verdicts taken in Triton's interpreter say nothing of a CPU host that does not run it:
    verify says a load there applies none of it, and the bundle still verifies."""
    for name in INTERPRETER:
        monkeypatch.delenv(name, raising=False)
    here = json.loads((carried.directory / KERNEL_EVIDENCE).read_text())
    result = CliRunner().invoke(app, ["bundle", "verify", str(carried.directory), "--keyring", str(keys.public)])
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    assert lines[1].startswith("qualified: input shapes "), result.output
    assert lines[2:] == [
        f"kernel evidence {here['digest'][:16]}: measured in Triton's interpreter, which this host does not run: its "
        "timings and accuracy verdicts hold only with TRITON_INTERPRET=1 INFERENSICS_KERNELS_INTERPRET=1: a load here "
        "applies none of it (the bundle still loads)"
    ]


OWN_MODEL = "tests.bundle.own_provider_model:silu_mlp"
QUALIFY_OWN = """
import json, sys, torch
import tests.bundle.own_provider_model  # registers the provider `mine`
from inferensics import kernels
opts = kernels.QualifyOptions(ops=("silu_mul",), shapes={"silu_mul": [{"tokens": 2, "hidden": 8}]},
                              dtype=torch.float32, trials=2, iters=1, warmup=0)
open(sys.argv[1], "w").write(json.dumps(kernels.qualify(kernels.registry(), opts).to_json()))
"""


def _cli(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "inferensics.cli", *args]
    return subprocess.run(cmd, cwd=ROOT, env=_env(tmp), capture_output=True, text=True, check=False, timeout=600)


def test_evidence_naming_a_provider_the_model_module_registers_builds_and_one_it_lacks_says_what_to_do(
    keys: Keys, tmp_path: Path
) -> None:
    """The build checked the evidence before it imported the model, so a provider the model's module registers at
    import was unknown ("qualify again with this code and these versions", which changes nothing)."""
    ev = tmp_path / "own.json"
    done = subprocess.run([sys.executable, "-c", QUALIFY_OWN, str(ev)], cwd=ROOT, env=_env(tmp_path),
                          capture_output=True, text=True, check=False, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    names = [p["name"] for p in json.loads(ev.read_text())["registry"]["ops"]["silu_mul"]["providers"]]
    assert "mine" in names
    (tmp_path / "shapes.json").write_text(json.dumps({"shapes": [{"shape": [2, 8]}]}))
    built = _cli(tmp_path, "bundle", "build", "--model", OWN_MODEL, "--inputs", INPUTS, "--key", str(keys.private),
                 "--out", str(tmp_path / "own"), "--shapes", str(tmp_path / "shapes.json"), "--no-advise",
                 "--kernel-evidence", str(ev))  # fmt: skip
    assert built.returncode == 0, built.stdout + built.stderr[-3000:]
    assert f"from {ev} carried: measured on cpu: hosts that load the bundle follow its priorities" in built.stdout
    # A model whose module does not register it: the advice names the provider and where to register it.
    with pytest.raises(b.BundleError) as refused:
        b.build(spec(model=MODEL, inputs=INPUTS, shapes=SHAPES, kernel_evidence=ev), keys.key, tmp_path / "not")
    assert str(refused.value).startswith(
        f"--kernel-evidence {ev} names kernel providers this process does not register, even with --model {MODEL}'s "
        "module imported (silu_mul: mine): register them when that module (or one it imports) is imported"
    ), str(refused.value)
    assert not (tmp_path / "not").exists()


def test_build_says_interpreter_evidence_is_followed_only_where_the_interpreter_runs(
    evidence: Path, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built on a host without the interpreter, the build said "hosts that load the bundle follow its kernel
    priorities" and the `bundle verify` after it said a load there applies none of it."""
    for name in INTERPRETER:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "shapes.json").write_text(json.dumps({"shapes": [{"shape": [2, 8]}]}))
    out = tmp_path / "interp"
    built = CliRunner().invoke(app, [
        "bundle", "build", "--model", MODEL, "--inputs", INPUTS, "--key", str(keys.private), "--out", str(out),
        "--shapes", str(tmp_path / "shapes.json"), "--no-advise", "--kernel-evidence", str(evidence),
    ])  # fmt: skip
    assert built.exit_code == 0, built.output
    digest = json.loads(evidence.read_text())["digest"][:16]
    assert built.output.splitlines()[-1] == (
        f"kernel evidence {digest} from {evidence} carried, but measured in Triton's interpreter: only hosts that run "
        "it (TRITON_INTERPRET=1 INFERENSICS_KERNELS_INTERPRET=1) follow its kernel priorities; a CPU host without it "
        "applies none of it and the bundle still loads (this one does not: `bundle verify` here says so)"
    )
    assert "hosts that load the bundle follow" not in built.output
    verified = CliRunner().invoke(app, ["bundle", "verify", str(out), "--keyring", str(keys.public)])
    assert verified.exit_code == 0, verified.output
    assert "measured in Triton's interpreter, which this host does not run" in verified.output
    assert "a load here applies none of it" in verified.output
