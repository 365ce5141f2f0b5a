"""``build``: compile a model against a shape distribution, qualify it, collect the artifacts, sign.

Layout of a bundle directory (pack-friendly: plain files, relative names)::

    manifest.json                       DSSE envelope of the in-toto statement (the only unlisted file)
    artifacts/megacache.bin             torch.compiler.save_cache_artifacts() blob (FX, AOTAutograd, Triton, autotune)
    artifacts/graphs/<fx_key>/output_code.py   generated code of each graph (cache paths normalised)
    artifacts/graphs/<fx_key>/guards.txt       Dynamo's guard tree for it
    artifacts/cpu_kernels/<2ch>/c<hash>.so     compiled C++ kernels (CPU bundles; Inductor's cache layout)
    artifacts/aoti/<name>.pt2           optional AOTInductor package (each member hashed in the identity)
    artifacts/kernel_evidence.json      optional qualification evidence the kernel-registry policy follows
    report/qualification.{md,html,json} the qualification report
"""

from __future__ import annotations

import importlib
import os
import platform
import shutil
import tempfile
import time
import zipfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final

import torch

from inferensics.bundle import accuracy, factors, torch_adapter
from inferensics.bundle import customisations as custom
from inferensics.bundle.canonical import canonical_json, sha256_file, sha256_hex
from inferensics.bundle.errors import BundleError, error_line
from inferensics.bundle.keys import SigningKey
from inferensics.bundle.manifest import MANIFEST_FILE, GraphRecord, Manifest, Resource, group_digests
from inferensics.bundle.progress import Progress, shape_line, silent
from inferensics.bundle.qualify import PolicyRun, run_policy, warm_up
from inferensics.bundle.shapes import ShapeDistribution

MEGACACHE = "artifacts/megacache.bin"
CPU_KERNELS = "artifacts/cpu_kernels"
"""Compiled C++ kernel libraries of a CPU bundle, laid out as in Inductor's cache (``<2 chars>/c<hash>.so``)."""
KERNEL_EVIDENCE = "artifacts/kernel_evidence.json"
"""The ``kernels qualify`` evidence file a bundle carries (``--kernel-evidence``), byte for byte: its registry state
is the bundle's ``kernel_registry``, the build compiled with its policy, and hosts apply it on load."""
PROVENANCE_OPTIONS: Final[Mapping[str, Any]] = MappingProxyType({"trace.provenance_tracking_level": 1})
"""Inductor options ``inferensics bundle build`` compiles with unless told otherwise: provenance tracking on, as
the host SDK compiles by default, so the request page maps a bundle's kernels to FX nodes and source lines on
the hosts serving from it (the level is part of the compile-cache key: hosts compile with the bundle's
options)."""


@dataclass(frozen=True)
class LeftOutShape:
    """A shape of the traffic the build was asked for but left out of qualification, recorded in the signed
    report (``left_out_shapes``) so that the bundle says what it was not qualified on and why."""

    shape: tuple[int, ...]
    """The shape left out."""
    reason: str
    """Why, in one line (for example: the model cannot run it eagerly, with the error)."""
    requests: str = ""
    """The recorded requests it came from, as the build printed them (``from 2 requests: a, b``)."""

    def to_json(self) -> dict[str, Any]:
        """The report's entry: shape, reason and (when known) requests."""
        entry: dict[str, Any] = {"shape": list(self.shape), "reason": self.reason}
        return entry | ({"requests": self.requests} if self.requests else {})


@dataclass(frozen=True)
class BuildSpec:
    """What to build.

    Args:
        model: ``module:function`` returning the model (an ``nn.Module`` or a callable).
        shapes: The shape distribution to compile and qualify on.
        model_args: Keyword arguments of the factory (recorded in the identity).
        inputs: ``module:function(shape) -> tuple of inputs``; default: the model's ``example_inputs(shape)``
            method, else one ``torch.randn(shape)``.
        device: ``cpu`` or ``cuda``.
        mode: ``torch.compile`` mode.
        options: Inductor options.
        dynamic: ``torch.compile(dynamic=...)``.
        fullgraph: ``torch.compile(fullgraph=...)``.
        customisations: Compiler customisations to record and install before compiling.
        name: Human label of the bundle.
        advise: Also compare static, dynamic and bucketed shape policies for the report.
        aoti_package: An AOTInductor ``.pt2`` to carry as an artifact.
        registry: Kernel-registry state and selection policy (default: the registry's own, or the
            ``kernel_evidence``'s).
        repeats: Timed runs per shape for steady latency.
        allow_inaccurate: Sign even when a shape's compiled output is outside tolerance against eager and fp64
            (the report still records it); by default such a build is refused.
        kernel_evidence: An evidence file ``inferensics kernels qualify`` wrote on the target device: the build
            compiles with its selection policy, records its registry state and carries the file, and hosts
            that load the bundle follow it (CPU evidence measured in Triton's interpreter: only hosts that run it;
            :func:`~inferensics.bundle.load.kernel_evidence_carried_line` says which).
        left_out_shapes: Shapes of the traffic left out of ``shapes`` before the build (``bundle build
            --skip-unrunnable-shapes``), each with why: the signed report records them.
    """

    model: str
    shapes: ShapeDistribution
    model_args: Mapping[str, Any] = field(default_factory=dict)
    inputs: str | None = None
    device: str = "cpu"
    mode: str | None = None
    options: Mapping[str, Any] = field(default_factory=dict)
    dynamic: bool | None = False
    fullgraph: bool = False
    customisations: Sequence[custom.Customisation] = ()
    name: str = "bundle"
    advise: bool = True
    aoti_package: Path | None = None
    registry: Mapping[str, Any] | None = None
    repeats: int = 3
    allow_inaccurate: bool = False
    kernel_evidence: Path | None = None
    left_out_shapes: Sequence[LeftOutShape] = ()

    def __post_init__(self) -> None:
        unknown = torch_adapter.unknown_inductor_options(self.options)
        if unknown:  # else a 90-line BackendCompilerFailed from inside the first compile
            raise BundleError(
                "bad_input",
                f"--option {unknown[0]}: Inductor (torch {torch.__version__}) has no such option"
                + (f" (did you mean {similar}?)" if (similar := _similar_option(unknown[0])) else "")
                + ": see torch._inductor.config for the names",
            )
        _refuse_shared_places(self.customisations)
        if self.kernel_evidence is not None and self.registry is None:
            # Recorded as the evidence's registry state, so the bundle cache's build key covers the evidence too.
            object.__setattr__(self, "registry", read_kernel_evidence(self.kernel_evidence)[1]["registry"])

    def compile_args(self) -> dict[str, Any]:
        """The torch.compile arguments (identity: ``settings.compile``)."""
        return {
            "mode": self.mode,
            "options": dict(sorted(self.options.items())),
            "dynamic": self.dynamic,
            "fullgraph": self.fullgraph,
        }


def _refuse_shared_places(customisations: Sequence[custom.Customisation]) -> None:
    """Refuse two customisations for one place: Inductor's FX pass slot holds one pass and its table one
    decomposition per op, so the second would replace the first while the identity records both."""
    held: dict[tuple[str, str], str] = {}
    for c in customisations:
        if c.kind == "custom_op":
            continue
        first = held.get((c.kind, c.target))
        held[(c.kind, c.target)] = c.import_path
        if first is None:
            continue
        place = f"FX pass slot {c.target}" if c.kind == "fx_pass" else f"decomposition of {c.target}"
        if first == c.import_path:
            raise BundleError("bad_input", f"{first} is given twice for Inductor's {place}: give it once")
        raise BundleError(
            "bad_input",
            f"two customisations for Inductor's {place} ({first} and {c.import_path}): it holds one; combine "
            "them into one function (or put a pass in another slot)",
        )


def _similar_option(key: str) -> str:
    """The Inductor option name closest to ``key``, or ``""``."""
    import difflib

    close = difflib.get_close_matches(key, torch_adapter.inductor_option_names(), n=1)
    return close[0] if close else ""


def resolve(target: str, what: str) -> Callable[..., Any]:
    """Import ``module:function``.

    Raises:
        BundleError: ``bad_input`` when it is not of that form or cannot be imported.
    """
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise BundleError("bad_input", f"{what} {target!r} must be module:function (e.g. mypkg.models:build)")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except ImportError as exc:
        raise BundleError("bad_input", f"{what} {target!r}: cannot import {module_name} ({exc})") from None
    except AttributeError:
        raise BundleError("bad_input", f"{what} {target!r}: {module_name} has no {attr}") from None
    if not callable(obj):
        raise BundleError("bad_input", f"{what} {target!r} is not callable")
    return obj  # type: ignore[no-any-return]


def make_model(spec: BuildSpec) -> tuple[Any, Callable[[tuple[int, ...]], tuple[Any, ...]]]:
    """Build the model on its device and the inputs function."""
    factory = resolve(spec.model, "--model")
    try:
        model = factory(**spec.model_args)
    except Exception as exc:  # the user's factory, or arguments it does not take: their input, one line
        hint = "; check its --model-arg values" if isinstance(exc, TypeError) and spec.model_args else ""
        raise BundleError("bad_input", f"--model {spec.model} raised {error_line(exc)}{hint}") from None
    if not isinstance(model, torch.nn.Module) and not callable(model):
        raise BundleError(
            "bad_input",
            f"--model {spec.model} returned {type(model).__name__} {str(model)[:40]!r}, not a torch.nn.Module or a "
            "callable: return the model from the factory",
        )
    if isinstance(model, torch.nn.Module):
        model = model.to(spec.device).eval()
    device = spec.device
    if spec.inputs:
        fn = resolve(spec.inputs, "--inputs")

        def make(shape: tuple[int, ...]) -> tuple[Any, ...]:
            out = fn(shape)
            out = out if isinstance(out, tuple) else (out,)
            return tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in out)

        return model, make
    method = getattr(model, "example_inputs", None)
    if callable(method):
        return model, lambda shape: tuple(method(shape))
    gen = torch.Generator().manual_seed(0)
    return model, lambda shape: (torch.randn(shape, generator=gen).to(device),)


def _inputs_source(spec: BuildSpec, model: Any) -> str:
    """Where a shape's example inputs come from, as a message names it."""
    if spec.inputs:
        return f"--inputs {spec.inputs}"
    if callable(getattr(model, "example_inputs", None)):
        return "the model's example_inputs"
    return "torch.randn inputs of that shape (the default; --inputs module:function gives others)"


def _eager_error(model: Any, make_inputs: Callable[[tuple[int, ...]], Any], shape: tuple[int, ...], source: str
                 ) -> str | None:  # fmt: skip
    """Why ``model`` cannot run ``shape`` eagerly (its inputs function raising counts), or None when it runs."""
    try:
        inputs = make_inputs(shape)
    except Exception as exc:
        return f"{source} raised for shape {list(shape)}: {error_line(exc)}"
    try:
        with torch.inference_mode():
            model(*inputs)
    except Exception as exc:
        return f"the model cannot run shape {list(shape)} with {source}, not even eagerly: {error_line(exc)}"
    return None


def refuse_unrunnable_shapes(spec: BuildSpec, model: Any, make_inputs: Callable[[tuple[int, ...]], Any]) -> None:
    """Run each shape's example inputs eagerly, after a build failed: a shape the model cannot take (or an
    inputs function that raises) is the user's input, said in one line, not Dynamo's traceback.

    Raises:
        BundleError: ``bad_input``, naming the first shape that does not run and the error.
    """
    source = _inputs_source(spec, model)
    for s in spec.shapes.shapes:
        why = _eager_error(model, make_inputs, s.shape, source)
        if why is not None:
            fix = "" if why.startswith(source) else "; fix the shapes file or the inputs function"
            raise BundleError("bad_input", why + fix)


def unrunnable_shapes(spec: BuildSpec) -> list[tuple[tuple[int, ...], str]]:
    """Each shape of ``spec`` that its model cannot run eagerly, with why in one line, found before anything is
    compiled: a build learns it only after its compile failed, minutes in.

    The model is made and the build's customisations installed as the build does (and uninstalled after).

    Raises:
        BundleError: ``bad_input`` when the factory or the inputs function cannot be resolved or the factory
            fails.
    """
    with custom.build_scope(spec.customisations):
        custom.install(spec.customisations)
        model, make_inputs = make_model(spec)
        source = _inputs_source(spec, model)
        found = [(s.shape, _eager_error(model, make_inputs, s.shape, source)) for s in spec.shapes.shapes]
    return [(shape, why) for shape, why in found if why is not None]


def _uncarried_graph(spec: BuildSpec, main: PolicyRun) -> str | None:
    """Why the bundle could not carry the graph of a shape ``main`` served compiled, or ``None``.

    A graph is carried as its FX-graph cache entry (in the Mega-Cache blob) and keyed by it; a graph Inductor
    compiled past its cache has neither, and signing the shape as accepted anyway would send every host to
    compile it with whatever compiler it has.
    """
    for r in main.shapes:
        for g in (main.graphs[i] for i in r.graphs):
            if g.fx_key:
                continue
            head = f"cannot sign: shape {list(r.shape)}'s compiled graph is not in Inductor's FX-graph cache"
            tail = "nothing was signed"
            for c in (c for c in spec.customisations if c.kind == "fx_pass"):
                problem = custom.fx_pass_problem(c, custom.resolve_checked(c))
                if problem is not None:
                    return f"{head}: {problem}: {tail}"
            if g.fx_status == "bypass":
                why = f"Inductor bypassed it ({g.fx_bypass_reason or 'no reason given'})"
                fix = "remove what makes Inductor bypass its cache and build again"
            else:
                why = "the cache is off"
                fix = "turn Inductor's FX-graph cache on (fx_graph_cache, not force_disable_caches) and build again"
            return f"{head}: {why}, so the bundle cannot carry the graph; {fix}: {tail}"
    return None


def _aoti_members(path: Path) -> dict[str, str]:
    try:
        with zipfile.ZipFile(path) as z:
            return {i.filename: sha256_hex(z.read(i)) for i in sorted(z.infolist(), key=lambda i: i.filename)}
    except (OSError, zipfile.BadZipFile):
        raise BundleError("bad_input", f"{path} is not an AOTInductor .pt2 package (a zip file)") from None


def resources_of(directory: Path) -> list[Resource]:
    """Every file under ``directory`` but the manifest, with its sha256, in name order."""
    out = []
    for p in sorted(directory.rglob("*")):
        if p.is_file() and p != directory / MANIFEST_FILE:
            name = p.relative_to(directory).as_posix()
            out.append(Resource(name=name, digest=sha256_file(p), size=p.stat().st_size))
    return out


@dataclass
class BuildResult:
    """What :func:`build` made."""

    directory: Path
    manifest: Manifest
    main: PolicyRun
    warm: PolicyRun
    policies: list[PolicyRun]

    @property
    def bundle_id(self) -> str:
        """The bundle id."""
        return self.manifest.bundle_id


def build(
    spec: BuildSpec, key: SigningKey, out: Path, *, now: datetime | None = None, progress: Progress = silent
) -> BuildResult:
    """Build, qualify and sign a bundle into ``out`` (which must not exist or be empty); ``progress`` is told one
    line per stage as the build goes (:mod:`inferensics.bundle.progress`).

    The build compiles with its own customisations only: those a bundle load installed in this process are set
    aside for it, and a pass or decomposition that other code set and the spec does not record refuses the build
    (the signed identity says what compiled). The build's customisations are installed for the build alone:
    afterwards this process's decomposition table, FX pass slots and cache key tag are as before (a later build,
    or the caller's own compiles, would otherwise compile with them while their manifests record none; a serving
    host keeps its loaded bundle's).

    Raises:
        BundleError: bad input (factory, inputs, output folder, AOTI package, a kernel evidence file that is
            damaged, from another device or not this registry's; an FX pass or decomposition set in this process
            that the spec does not record; an FX pass without a ``uuid()``, or any other
            cause that left a shape's graph out of Inductor's cache, so that the bundle could not carry it);
            ``inaccurate`` when a shape's compiled output is outside tolerance (unless ``spec.allow_inaccurate``).
    """
    custom.refuse_uncarried_fx_passes(spec.customisations)  # before minutes of compiling
    with custom.build_scope(spec.customisations):
        return _build_with_evidence(spec, key, out, now=now, progress=progress)


def _build_with_evidence(
    spec: BuildSpec, key: SigningKey, out: Path, *, now: datetime | None, progress: Progress
) -> BuildResult:
    if spec.kernel_evidence is None:
        return _build(spec, key, out, now=now, progress=progress)
    from inferensics.kernels import evidence as kev
    from inferensics.kernels.registry import default_registry

    path = spec.kernel_evidence
    progress(f"checking the kernel evidence {path}")
    data, doc = read_kernel_evidence(path)
    measured, target = kev.measured_device(doc), kev.device_label(spec.device)
    if measured != target:
        raise BundleError(
            "bad_input",
            f"--kernel-evidence {path} was measured on {measured}, and this bundle is built for {target}: hosts "
            "apply only evidence of their own device; run `inferensics kernels qualify --out FILE` there",
        )
    recorded = dict(spec.registry or {})
    if recorded.get("digest") != doc["registry"]["digest"]:
        why = "; ".join(kev.state_differences(recorded, doc["registry"]))
        raise BundleError("bad_input", f"--kernel-evidence {path}: the registry state given is not its ({why})")
    # The model's modules may register providers of their own at import, as the process that qualified them did:
    # imported only when the build made the model, they were missing from the registry checked here.
    resolve(spec.model, "--model")
    if spec.inputs:
        resolve(spec.inputs, "--inputs")
    with kev.following(doc) as (_, refused):
        here = default_registry().state()
        if refused or here["digest"] != doc["registry"]["digest"]:
            raise BundleError("bad_input", _registry_mismatch(spec, path, doc["registry"], here, refused))
        progress(f"kernel evidence {str(doc['digest'])[:16]} checked: measured on {measured}, this registry's state")
        return _build(spec, key, out, now=now, evidence=(data, str(doc["digest"])), progress=progress)


def _registry_mismatch(
    spec: BuildSpec, path: Path, recorded: Mapping[str, Any], here: Mapping[str, Any], refused: Sequence[str]
) -> str:
    """Why this process's registry, following the evidence, is not the one it records, and what to do: register
    the providers it names that this process lacks, else qualify again here."""
    from inferensics.kernels import evidence as kev

    missing = sorted(
        f"{op}: {name}"
        for op, entry in (recorded.get("ops") or {}).items()
        for name in _provider_names(entry) - _provider_names((here.get("ops") or {}).get(op))
    )
    if missing:
        return (
            f"--kernel-evidence {path} names kernel providers this process does not register, even with --model "
            f"{spec.model}'s module imported ({', '.join(missing[:6])}): register them when that module (or one it "
            "imports) is imported, as the process that ran `kernels qualify` did, and build again"
        )
    why = "; ".join(refused[:3] or kev.state_differences(here, recorded))
    return (
        f"--kernel-evidence {path}: this registry, with its policy applied, is not the one it records ({why}); "
        "qualify again with this code and these versions (`inferensics kernels qualify --out FILE` in this "
        "environment, with the same providers registered)"
    )


def _provider_names(op_state: Any) -> set[str]:
    """The provider names of one op of a registry state (:meth:`Registry.state`)."""
    providers = op_state.get("providers") if isinstance(op_state, Mapping) else None
    return {str(p["name"]) for p in providers or [] if isinstance(p, Mapping) and "name" in p}


def _build(
    spec: BuildSpec,
    key: SigningKey,
    out: Path,
    *,
    now: datetime | None,
    evidence: tuple[bytes, str] | None = None,
    progress: Progress,
) -> BuildResult:
    runs: list[PolicyRun] = []
    try:
        return _compile_and_sign(spec, key, out, now=now, evidence=evidence, runs=runs, progress=progress)
    finally:  # each run's compile cache, whether the build was signed or failed on the way
        for run in runs:
            if run.cache_dir:
                shutil.rmtree(run.cache_dir, ignore_errors=True)


def _compile_and_sign(
    spec: BuildSpec,
    key: SigningKey,
    out: Path,
    *,
    now: datetime | None,
    evidence: tuple[bytes, str] | None,
    runs: list[PolicyRun],
    progress: Progress,
) -> BuildResult:
    """The build; every policy run it makes goes into ``runs`` as soon as it exists (the caller removes their
    cache folders)."""
    from inferensics.bundle import advice, report

    if out.exists() and any(out.iterdir()):
        raise BundleError("bad_input", f"{out} exists and is not empty: choose a new --out")
    if spec.device.startswith("cuda") and not torch.cuda.is_available():
        raise BundleError("incompatible", "--device cuda but no CUDA device is visible here")
    t_start = time.perf_counter()
    custom.install(spec.customisations)
    progress(f"importing the model {spec.model}")
    model, make_inputs = make_model(spec)
    custom.refuse_undeclared(spec.customisations)  # once the model's module (which may set one) is imported
    patches = {**torch_adapter.mode_options(spec.mode), **dict(spec.options)}
    compile_args = spec.compile_args()
    shapes = [(s.shape, s.shape) for s in spec.shapes.shapes]
    reference = accuracy.Reference(model)
    n = f"{len(shapes)} shape{'s' if len(shapes) != 1 else ''}"
    progress(f"compiling {n} from an empty cache and checking each against eager and fp64 (as built)")
    try:
        if spec.advise:  # the policies' compile seconds are compared: none of them pays the compiler's start
            progress(f"warming up the compiler on shape {'x'.join(map(str, shapes[0][0]))} (not measured)")
            warm_up(model, make_inputs, shapes[0][0], compile_args=compile_args, config_patches=patches)
        main = run_policy(
            "as built", model, make_inputs, shapes, compile_args=compile_args, config_patches=patches,
            repeats=spec.repeats, check=reference.check, on_shape=lambda r: progress(shape_line("as built", r)),
        )  # fmt: skip
    except Exception:
        refuse_unrunnable_shapes(spec, model, make_inputs)
        raise  # the model runs every shape eagerly: a compiler failure, as torch said it
    finally:
        reference.release()
    runs.append(main)
    uncarried = _uncarried_graph(spec, main)
    if uncarried is not None:
        raise BundleError("bad_input", uncarried)
    inaccurate = accuracy.refusal(
        [(r.shape, r.accuracy) for r in main.shapes], [f"{c.target}={c.import_path}" for c in spec.customisations]
    )
    if inaccurate is not None and not spec.allow_inaccurate:
        raise inaccurate
    progress(f"serving {n} from the bundle's cache (warm start)")
    warm = run_policy(
        "with bundle", model, make_inputs, shapes, compile_args=compile_args, config_patches=patches,
        repeats=1, blob=main.blob, on_shape=lambda r: progress(shape_line("with bundle", r)),
    )  # fmt: skip
    runs.append(warm)
    if spec.advise:
        progress("comparing shape policies (static, dynamic, bucketed), each from an empty cache, then timed "
                 "interleaved")  # fmt: skip
    policies = (
        advice.compare_policies(
            model,
            make_inputs,
            spec.shapes,
            compile_args,
            patches,
            main,
            spec.repeats,
            on_shape=lambda name, r: progress(shape_line(name, r)),
        )
        if spec.advise
        else [main]
    )
    runs.extend(p for p in policies if p is not main)
    identity, extra = factors.collect(
        model,
        factory=spec.model,
        factory_args=spec.model_args,
        device=spec.device,
        compile_args=compile_args,
        customisations=spec.customisations,
        registry=spec.registry,
    )
    if spec.inputs:
        identity["model"]["inputs"] = spec.inputs
    out.parent.mkdir(parents=True, exist_ok=True)  # the bundle is made beside ``out``, then moved into place
    tmp = Path(tempfile.mkdtemp(prefix=".bundle-", dir=out.parent))
    try:
        graphs: list[GraphRecord] = []
        (tmp / "artifacts").mkdir()
        (tmp / MEGACACHE).write_bytes(main.blob)
        for lib in sorted(Path(main.cache_dir).glob("*/c*.so")):  # CPU kernels: not in the Mega-Cache
            dst = tmp / CPU_KERNELS / lib.parent.name / lib.name
            dst.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(lib, dst)
        for g in main.graphs:
            if not g.fx_key:
                continue
            gdir = tmp / "artifacts" / "graphs" / g.fx_key
            gdir.mkdir(parents=True, exist_ok=True)
            (gdir / "output_code.py").write_text(g.output_code)
            (gdir / "guards.txt").write_text(g.guards)
            graphs.append(
                GraphRecord(
                    signature=g.signature,
                    fx_key=g.fx_key,
                    aot_key=g.aot_key,
                    output_code_sha256=sha256_hex(g.output_code.encode()),
                    inputs=g.inputs,
                    graph_code=g.graph_code,
                    code_location=g.code_location,
                    qualified_shapes=sorted(g.served_shapes),
                )
            )
        artifacts: dict[str, Any] = {"graphs": [g.model_dump() for g in sorted(graphs, key=lambda g: g.fx_key)]}
        if spec.aoti_package is not None:
            members = _aoti_members(spec.aoti_package)
            (tmp / "artifacts" / "aoti").mkdir()
            shutil.copyfile(spec.aoti_package, tmp / "artifacts" / "aoti" / spec.aoti_package.name)
            artifacts["aoti"] = {"package": f"artifacts/aoti/{spec.aoti_package.name}", "members": members}
        qualified = [list(r.shape) for r in main.shapes if r.graphs]
        identity["artifacts"] = artifacts
        identity["accepted_shapes"] = {"shapes": sorted(qualified), "dynamic": spec.dynamic}
        when = (now or datetime.now(UTC)).isoformat(timespec="seconds")
        qual = report.qualification(spec, main, warm, policies, identity, name=spec.name)
        report.write(qual, tmp / "report")
        if evidence is not None:  # the checked bytes, not the file again: it may have changed since
            (tmp / KERNEL_EVIDENCE).write_bytes(evidence[0])
        progress(f"signing the manifest with key {key.keyid[:16]}")
        manifest = Manifest(
            name=spec.name,
            identity=identity,
            factor_digests={**group_digests(identity), **extra},
            resources=resources_of(tmp),
            build={
                "built_at": when,
                "builder_keyid": key.keyid,
                "builder_host": platform.node(),
                "build_seconds": round(time.perf_counter() - t_start, 3),
                "torch": torch.__version__,
                **({"kernel_evidence": evidence[1]} if evidence is not None else {}),
            },
        )
        (tmp / MANIFEST_FILE).write_bytes(manifest.sign(key))
        if out.exists():
            out.rmdir()
        os.replace(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return BuildResult(out, manifest, main, warm, policies)


def read_kernel_evidence(path: Path) -> tuple[bytes, dict[str, Any]]:
    """The evidence file at ``path``: its bytes (what the bundle carries) and its contents, checked by
    ``kernels.qualify.evidence_problem``.

    Raises:
        BundleError: ``bad_input``, one line naming what is wrong with it.
    """
    from inferensics.kernels.evidence import EvidenceError, parse_evidence

    try:
        data = path.read_bytes()
        return data, parse_evidence(data, str(path))
    except OSError as exc:
        raise BundleError("bad_input", f"--kernel-evidence {path}: cannot read it ({exc.strerror or exc})") from None
    except EvidenceError as exc:
        raise BundleError("bad_input", f"--kernel-evidence {exc}") from None


def canonical_identity(manifest: Manifest) -> bytes:
    """The identity's canonical bytes (what the bundle id digests)."""
    return canonical_json(manifest.identity)
