"""Re-execute a pack in this (fresh) process: verify, reinstall the bundle's compiler, replay, report.

Runs with only torch (+ triton) and pydantic: ``python -m inferensics.replay --pack DIR``. The CLI
starts it as a subprocess, so nothing of the calling process (its compiler patches, its caches) leaks in.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import sys
import time
from pathlib import Path
from typing import Any, Final

import torch

from inferensics.bundle.errors import error_line
from inferensics.replay._internal import providers as pv
from inferensics.replay._internal import report
from inferensics.replay._internal import torch_adapter as ta
from inferensics.replay._internal.investigate import investigate_keeping_graph
from inferensics.replay._internal.next_steps import Replayed, next_steps
from inferensics.replay._internal.pack import ReplayError, ReplayPack, read_pack
from inferensics.replay._internal.verdict import Verdict
from inferensics.replay._internal.verdict_text import HISTORY_MISSING_NOTE, not_reproduced_text, unqualified_shape_text


def _model_call(model: Any, inputs: dict[str, torch.Tensor]) -> tuple[Any, ...]:
    """The captured inputs as positional arguments, in ``forward``'s parameter order when the names are
    its parameters (how the serving code called it), else in stored order."""
    import inspect

    try:
        params = list(inspect.signature(model.forward).parameters)
    except (AttributeError, TypeError, ValueError):
        params = []
    if inputs and set(inputs) <= set(params):
        return tuple(inputs[p] for p in params if p in inputs)
    return tuple(inputs.values())


def _eager_runs(model: Any, call: tuple[Any, ...]) -> bool:
    """Whether the request runs eagerly with its indexing in range, checked before compiled code runs: on a
    GPU an out-of-range token id is a device-side assert that ends the process's CUDA context, and on a CPU
    the compiled kernel's own bounds assertion aborts the process. A request that raises eagerly (an index out
    of range, inputs of the wrong dtype or shape) raises on the served path too: the served run is skipped and
    the investigation names the input or the exception every path raises."""
    try:
        with torch.no_grad(), ta.index_bounds_checked(call):
            model(*call)
    except Exception:  # whatever the model raises on these inputs, the investigation reports
        return False
    return True


def _verified_ignoring_target(directory: Path, ring: Any) -> Any:
    """Signature, keyring, per-file hashes and states checked; only the target's compatibility is waived
    (``--allow-incompatible``: nothing of the bundle's compiled code is loaded then, the model recompiles)."""
    import importlib

    bv = importlib.import_module("inferensics.bundle.verify")  # the package re-exports a function of that name
    from inferensics.bundle.manifest import parse_statement, read_manifest_unverified

    _, payload, sigs = read_manifest_unverified(directory)
    bv.verify_envelope(payload, sigs, ring, str(directory / "manifest.json"))
    manifest = parse_statement(payload, str(directory / "manifest.json"))
    bv.check_files(directory, manifest)
    return manifest


def _release_state(bundle_id: str) -> str:
    """``revoked`` or ``quarantined`` when the host's states file says so, else ``""``. Replay loads such a bundle
    all the same (investigating a revoked bundle is what replay is for) and says its state."""
    from inferensics import bundle as b
    from inferensics.bundle.states import BundleStates

    try:
        refusal = BundleStates.load().refusal(bundle_id)
    except b.BundleError as exc:
        raise ReplayError(str(exc)) from None
    return refusal.cause if refusal is not None else ""


def replay_pack(
    pack: ReplayPack,
    *,
    device: str = "cpu",
    keyring: str | None = None,
    allow_incompatible: bool = False,
    out: Path | None = None,
    what_if: bool = False,
) -> Verdict:
    """Replay one verified pack and write the reports into ``out``.

    A replay that is not of what served the request (a bundle given for a request served without one, or a
    compile the bundle does not cover: the model's code or settings changed since the build) is refused unless
    ``what_if``; then it runs, and its verdict says so in ``evidence["what_if"]`` (never recorded as the
    request's verdict). A revoked or quarantined bundle is replayed, its state in ``evidence["bundle_state"]``.
    The bundle's build history (its qualified shapes, through the build's ``--inputs`` function) runs before every
    fresh compile; when that function cannot be imported or raises, the other rungs run without it and
    ``evidence["build_history_not_replayed"]`` says why and what to do. ``evidence["next_steps"]`` holds what
    on-call does next about the verdict (:mod:`inferensics.replay._internal.next_steps`).

    Raises:
        ReplayError: an ``out`` that is a file or holds another request's report, a bundle that fails
            verification, an incompatible device (without ``allow_incompatible``), a pack without a bundle, a
            bundle other than the one that served the request, a model factory that gives other weights than
            the bundle's.
    """
    from inferensics import bundle as b
    from inferensics.bundle import customisations as custom
    from inferensics.bundle.build import resolve
    from inferensics.bundle.session import CODE_CHANGED
    from inferensics.bundle.states import BundleStates

    start = time.perf_counter()
    if out is not None and (problem := report.out_problem(out, pack.request_id)):
        raise ReplayError(problem)  # before the replay, not after it
    if pack.bundle_dir is None:
        raise ReplayError(
            f"pack {pack.directory} carries no bundle: the request names none; replay needs the bundle that served it"
        )
    not_as_served: list[str] = []
    bundle_miss = ""
    if not str(pack.meta.get("bundle_id") or ""):
        if not what_if:
            raise ReplayError(
                f"request {pack.request_id} was served without a bundle, so no bundle is what served it: a replay "
                "against --bundle would be a what-if; pass --what-if to run it (its verdict is not recorded)"
            )
        not_as_served.append(f"request {pack.request_id} was served without a bundle")
    try:
        ring = b.Keyring.load(keyring)
    except b.BundleError as exc:
        raise ReplayError(str(exc)) from None
    recompiled = ""
    loaded = None
    try:
        # Revoked and quarantined bundles load here (their state is said below): investigating one is replay's job.
        loaded = b.load(pack.bundle_dir, ring, device=device, states=BundleStates())
        manifest = loaded.manifest
    except b.BundleError as exc:
        if exc.cause != "incompatible" or not allow_incompatible:
            hint = (
                " (or pass --allow-incompatible to recompile from the recorded configuration)"
                if exc.cause == "incompatible"
                else _copy_hint(str(exc))
            )
            raise ReplayError(f"{exc}{hint}") from None
        try:
            manifest = _verified_ignoring_target(pack.bundle_dir, ring)
        except b.BundleError as again:
            raise ReplayError(str(again)) from None
        custom.install_loaded(custom.Customisation(**c) for c in manifest.identity.get("customisations", []))
        recompiled = f"recompiled from the recorded configuration (--allow-incompatible): {exc}"
    state = _release_state(manifest.bundle_id)
    served_by = str(pack.meta.get("bundle_id") or "")
    if served_by and served_by != manifest.bundle_id:
        raise ReplayError(
            f"the bundle given is {manifest.bundle_id[:16]} ({manifest.name}), but request {pack.request_id} was "
            f"served by bundle {served_by[:16]}: pass the bundle that served it (--bundle DIR)"
        )
    model_rec = manifest.identity.get("model", {})
    try:
        factory = resolve(model_rec["factory"], "model")
    except b.BundleError as exc:  # the build's import path is not this process's
        module = str(model_rec["factory"]).partition(":")[0]
        raise ReplayError(
            f"{exc}: replay imports the model's factory as the build did; run it from the directory the bundle was "
            f"built in, copy {module.replace('.', '/')}.py here, or put its folder on PYTHONPATH (or pass "
            "--import-path DIR)"
        ) from None
    model = factory(**dict(model_rec.get("args", {})))
    if isinstance(model, torch.nn.Module):
        model = model.to(device).eval()
    _check_weights(model, manifest)
    inputs = {k: v.to(device) for k, v in pack.inputs().items()}
    call = _model_call(model, inputs)
    compile_args = dict(manifest.identity.get("settings", {}).get("compile", {}))
    compile_kwargs: dict[str, Any] = {
        "dynamic": compile_args.get("dynamic"),
        "fullgraph": bool(compile_args.get("fullgraph")),
    }
    if compile_args.get("mode"):
        compile_kwargs["mode"] = compile_args["mode"]
    if compile_args.get("options"):
        compile_kwargs["options"] = dict(compile_args["options"])
    served_output = None
    served_code = None
    # The registry follows the bundle's recorded policy (provider priorities, refusals): the served output
    # and every rung see the provider choice the request was served with.
    registry_state = dict(manifest.identity.get("kernel_registry") or {})
    with pv.pinned_policy(registry_state) as policy_problems:
        hits: list[str] = []
        matches: list[dict[str, Any]] = []
        if loaded is not None and _eager_runs(model, call):
            session = loaded.session(on_bundle_miss="compile")
            compiled = loaded.compile(model, session)
            with torch.inference_mode():  # as the bundle was built and hosts serve
                served_output = compiled(*call)
            served_output = torch.utils._pytree.tree_map(
                lambda t: t.clone() if isinstance(t, torch.Tensor) else t, served_output
            )
            hits = sorted({m.fx_key for m in session.matches if m.status == "hit"})
            matches = [
                {"status": m.status, "fx_key": m.fx_key, "factors": list(m.factors)[:4]} for m in session.matches
            ]
            missed = [m for m in matches if m["status"] != "hit"]
            changed = [m for m in missed if CODE_CHANGED in m["factors"]]
            if changed:
                differing = "; ".join(changed[0]["factors"][:3])
                if not what_if:
                    raise ReplayError(
                        f"the bundle does not cover this replay's compile ({differing}): the model's code or settings "
                        f"here are not what served request {pack.request_id}, so its verdict would not be the "
                        "request's; run from the folder the bundle was built in, or pass --what-if to replay anyway "
                        "(not recorded)"
                    )
                not_as_served.append(f"bundle miss: {differing}")
            elif missed:  # the same graph, compiled anew here (another cache key): the served code, recompiled
                bundle_miss = "; ".join(missed[0]["factors"][:3])
            for g in manifest.graphs:
                code = loaded.directory / "artifacts" / "graphs" / g.fx_key / "output_code.py"
                if code.is_file():
                    served_code = code.read_text()
                    break
            torch._dynamo.reset()
        # The bundle's graphs were compiled by its build, which ran its qualified shapes in order before any
        # request: a dynamic graph's size hints are the first of them, not the request's. Every fresh compile of
        # the ladder runs the same history first, or a fault specialised to those hints does not reproduce.
        history, qualified, history_missing = _build_history(
            manifest, pack.bundle_dir, model, device, compile_kwargs.get("dynamic")
        )
        verified = loaded is not None and bool(matches) and all(m["status"] == "hit" for m in matches)
        verdict, graph = investigate_keeping_graph(
            model,
            call,
            compile_kwargs=compile_kwargs,
            warmup_inputs=history,
            device=device,
            served_output=served_output,
            served_code=served_code,
            served_verified=verified,
            history_missing=history_missing,
        )
    recorded = [k for k in pack.meta.get("graph_keys", []) if k]
    bundle_keys = sorted(g.fx_key for g in manifest.graphs)
    evidence = dict(verdict.evidence)
    evidence.update(
        request_id=pack.request_id,
        bundle_id=manifest.bundle_id,
        device=device,
        bundle_graph_keys=bundle_keys,
        served_graph_keys_hit=hits,
        served_matches=matches,
        served_keys_all_hit=bool(hits) and set(bundle_keys) <= set(hits),
        recorded_graph_keys=recorded,
        recompiled=recompiled,
        captured_inputs=pack.inputs_check.to_dict() if pack.inputs_check is not None else {},
        registry_policy={
            "digest": registry_state.get("digest", ""),
            "pinned": bool(registry_state.get("policy")),
            "problems": policy_problems,
        },
        seconds_to_verdict=round(time.perf_counter() - start, 3),
    )
    summary = verdict.summary + (f" [{recompiled}]" if recompiled else "")
    evidence["bundle_build_history"] = [s for s, _ in qualified]
    if history_missing:
        evidence["build_history_not_replayed"] = history_missing
        summary += f" {HISTORY_MISSING_NOTE}"
    unqualified = _unqualified_shape(call, qualified)
    if unqualified:
        evidence["unqualified_shape"] = {"request": unqualified[0], "qualified": unqualified[1]}
        summary += f" [{unqualified_shape_text(*unqualified)}]"
    if state:
        evidence["bundle_state"] = state
        summary += f" [bundle {manifest.bundle_id[:12]} is {state}: replayed to investigate it]"
    if bundle_miss:
        summary += (
            f" [bundle miss: the served graph keys were not all hit, so the served output came from a new compile; "
            f"differing: {bundle_miss}]"
        )
    if not_as_served:
        evidence["what_if"] = "; ".join(not_as_served)
        summary = f"what-if, not the request as served ({evidence['what_if']}): {summary}"
    reinstalled = _customisation_of(manifest, verdict.category, verdict.op)
    if reinstalled:
        evidence["customisation"] = reinstalled
        summary += (
            f" [the bundle's customisation {reinstalled['import_path']}, reinstalled from its manifest: "
            f"{reinstalled['source_file']}:{reinstalled['source_line']}: {reinstalled['source_text']}]"
        )
    culprit = verdict.culprit
    recorded_outcome = _recorded_outcome(pack.meta.get("request", {}))
    if verdict.category == "none" and recorded_outcome and not not_as_served:
        culprit, summary = _not_reproduced(recorded_outcome, evidence, summary)
    said = Verdict(**{**verdict.to_dict(), "evidence": evidence, "summary": summary, "culprit": culprit})
    replayed = Replayed(
        request_id=pack.request_id,
        request=pack.meta.get("request", {}),
        out=str(out) if out is not None else "",
        repro=graph is not None,
        torch_version=torch.__version__,
        dynamic=compile_kwargs.get("dynamic"),
        customisations=manifest.identity.get("customisations", []),
    )
    final = dataclasses.replace(said, evidence={**evidence, "next_steps": next_steps(said, replayed)})
    if out is not None:
        report.write_reports(out, final, request_id=pack.request_id, bundle_id=manifest.bundle_id)
        report.write_repro(
            out,
            final,
            graph,
            request_id=pack.request_id,
            pack_digest=report.digest_of(pack.meta),
            compile_kwargs=compile_kwargs,
            customisations=manifest.identity.get("customisations", []),
        )
    return final


def _copy_hint(message: str) -> str:
    """For a customisation the bundle records that cannot be imported here, the way out: its module's file beside
    the replay, or its folder on PYTHONPATH (``""`` for any other refusal)."""
    import re

    found = re.search(r"customisation ([\w.]+):\S+ cannot be imported here", message)
    if found is None:
        return ""
    module = found.group(1)
    return f": copy {module.replace('.', '/')}.py here (where you replay it) or put its folder on PYTHONPATH"


RE_EXECUTED: Final = "re-executed bundle"
"""The rung of the bundle's code run again here: what it gives is this replay's output, never the served one."""


def _recorded_outcome(row: dict[str, Any]) -> dict[str, Any]:
    """What the request's row recorded going wrong when it was served: its error, or the NaN and inf its output's
    fingerprint counted (``{}`` when it recorded neither)."""
    from inferensics.schema import columns as col

    error = str(row.get(col.ERROR) or "") if str(row.get(col.STATUS) or "") == "error" else ""
    nan, inf = int(row.get(col.FP_NAN) or 0), int(row.get(col.FP_INF) or 0)
    if not (error or nan or inf):
        return {}
    return {"error": error, "nan": nan, "inf": inf}


def _not_reproduced(recorded: dict[str, Any], evidence: dict[str, Any], summary: str) -> tuple[str, str]:
    """The culprit and summary of a request whose row recorded an error or non-finite output that re-executing the
    bundle on its captured inputs does not give; the bundle's rung relabelled as the re-execution it is."""
    ratio = ""
    for rung in evidence.get("rungs", []):
        if str(rung.get("rung", "")).startswith("served"):
            rung["rung"] = RE_EXECUTED
            if isinstance(rung.get("ratio"), int | float):
                ratio = f" (ratio {rung['ratio']:.4g} against eager's own error)"
    evidence["not_reproduced"] = {"recorded": recorded, "re_executed": "finite and within tolerance"}
    return not_reproduced_text(recorded, ratio)


def _qualified_in_build_order(manifest: Any, directory: Path) -> list[list[int]]:
    """The bundle's accepted shapes in the order its build ran them: its qualification report (a signed file of the
    bundle) lists them so; the manifest's list is sorted. The manifest's list when the report says nothing."""
    accepted = [list(s) for s in manifest.accepted_shapes]
    try:
        report_file = directory / "report" / "qualification.json"
        rows = json.loads(report_file.read_text()).get("shapes", [])
        ordered = [list(r["shape"]) for r in rows if r.get("compiled") and list(r["shape"]) in accepted]
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        ordered = []
    return ordered + [s for s in accepted if s not in ordered]


def _build_history(
    manifest: Any, directory: Path, model: Any, device: str, dynamic: Any
) -> tuple[list[tuple[Any, ...]], list[tuple[list[int], tuple[tuple[int, ...], ...]]], str]:
    """The calls the bundle's build made before serving (its qualified shapes, in build order, through the inputs
    function it recorded), each qualified shape with the tensor shapes of its inputs, and why that history is not
    replayed in full (``""`` when it is, or when none is needed).

    The history is empty for a static bundle (``dynamic=False``: each shape is a graph of its own, which no other
    shape's compile changes). When the inputs cannot be made here (the inputs function cannot be imported, or it
    raises) the shapes are listed without tensors and the reason says what failed and what to do: the other rungs
    run without it, and the verdict says so."""
    shapes = _qualified_in_build_order(manifest, directory)
    make, missing = _inputs_function(manifest, model)
    calls: list[tuple[Any, ...]] = []
    qualified: list[tuple[list[int], tuple[tuple[int, ...], ...]]] = []
    for shape in shapes:
        try:
            made = make(tuple(shape)) if make is not None else None
        except Exception as exc:  # the user's inputs function: said in the verdict, the other rungs go on
            made = None
            missing = missing or (
                f"the build's inputs function {_inputs_name(manifest, model)} raised {error_line(exc)} on shape "
                f"{list(shape)}: fix it so that it makes the inputs it made for the build"
            )
        if made is None:
            qualified.append((shape, ()))
            continue
        made = made if isinstance(made, tuple) else (made,)
        made = tuple(x.to(device) if isinstance(x, torch.Tensor) else x for x in made)
        calls.append(made)
        qualified.append((shape, tuple(tuple(x.shape) for x in made if isinstance(x, torch.Tensor))))
    if dynamic is False or not shapes:
        return [], qualified, ""
    return calls, qualified, missing


def _inputs_name(manifest: Any, model: Any) -> str:
    """The build's inputs function as ``bundle build`` chose it."""
    recorded = str(manifest.identity.get("model", {}).get("inputs", "") or "")
    if recorded:
        return recorded
    return "example_inputs" if callable(getattr(model, "example_inputs", None)) else "torch.randn"


def _inputs_function(manifest: Any, model: Any) -> tuple[Any, str]:
    """The inputs function the build made each shape's inputs with (``bundle build``'s order: ``--inputs``, the
    model's ``example_inputs``, ``torch.randn`` of the shape); ``None`` and why, in one line that says what to do,
    when it cannot be imported here."""
    from inferensics import bundle as b
    from inferensics.bundle.build import resolve

    recorded = str(manifest.identity.get("model", {}).get("inputs", "") or "")
    if recorded:
        try:
            return resolve(recorded, "--inputs"), ""
        except b.BundleError as exc:
            module, why = recorded.partition(":")[0], str(exc).split(": ", 1)[-1]
            if not why.startswith("cannot import"):  # imported, but not the build's module: no path fixes it
                return None, f"the build's --inputs {recorded} is not here ({why}): replay from the build's code"
            return None, (
                f"the build's --inputs {recorded} cannot be imported here ({why}): put the folder that holds "
                f"{module.replace('.', '/')}.py on PYTHONPATH or pass --import-path DIR"
            )
    method = getattr(model, "example_inputs", None)
    if callable(method):
        return (lambda shape: tuple(method(shape))), ""
    gen = torch.Generator().manual_seed(0)
    return (lambda shape: (torch.randn(shape, generator=gen),)), ""


def _unqualified_shape(
    call: tuple[Any, ...], qualified: list[tuple[list[int], tuple[tuple[int, ...], ...]]]
) -> tuple[Any, list[list[int]]] | None:
    """The request's shape (each tensor's, where several) and the bundle's qualified ones when no qualified shape's
    inputs have the request's tensor shapes (the first tensor's shape against the shapes themselves where no inputs
    could be made); ``None`` when one has, or the bundle records no qualified shape."""
    if not qualified:
        return None
    tensors = tuple(tuple(x.shape) for x in call if isinstance(x, torch.Tensor))
    if not tensors:
        return None
    for shape, made in qualified:
        if (made and made == tensors) or (not made and tuple(shape) == tensors[0]):
            return None
    request: Any = list(tensors[0]) if len(tensors) == 1 else [list(t) for t in tensors]
    return request, [s for s, _ in qualified]


def _check_weights(model: Any, manifest: Any) -> None:
    """The factory must give the weights the bundle was built with (and, so, served with): a factory that does
    not seed its random weights, or loads another checkpoint, would replay other arithmetic than served.

    Raises:
        ReplayError: the weights' digest differs from the manifest's.
    """
    from inferensics.bundle.factors import weights

    recorded = str(manifest.identity.get("weights", {}).get("digest", ""))
    here = weights(model)["digest"] if isinstance(model, torch.nn.Module) else ""
    if recorded and here and here != recorded:
        factory = manifest.identity.get("model", {}).get("factory", "")
        raise ReplayError(
            f"{factory} gives other weights than bundle {manifest.bundle_id[:16]} was built with (digest {here[:12]}, "
            f"bundle {recorded[:12]}): replay needs the weights that served; make the factory deterministic "
            "(torch.manual_seed before building the model, or load the same checkpoint)"
        )


def _customisation_of(manifest: Any, category: str, op: str) -> dict[str, Any]:
    """The bundle's recorded customisation of ``op`` behind a ``decomposition`` verdict, with the line of its
    code that computes the result (its last statement), or ``{}``."""
    import inspect

    from inferensics.bundle.build import resolve

    if category != "decomposition" or not op:
        return {}
    for c in manifest.identity.get("customisations", []):
        target = str(c.get("target", ""))
        if c.get("kind") != "decomposition" or (target != op and not target.startswith(f"{op}.")):
            continue
        try:
            lines, start = inspect.getsourcelines(resolve(str(c["import_path"]), "customisation"))
            file = inspect.getsourcefile(resolve(str(c["import_path"]), "customisation")) or ""
        except Exception:  # recorded but not importable here: name it without a line
            return {"import_path": c["import_path"], "target": target, "source_file": "", "source_line": 0,
                    "source_text": ""}  # fmt: skip
        last = max(i for i, line in enumerate(lines) if line.strip())
        return {"import_path": c["import_path"], "target": target, "source_file": file, "source_line": start + last,
                "source_text": lines[last].strip()}  # fmt: skip
    return {}


def main(argv: list[str] | None = None) -> int:
    """``python -m inferensics.replay --pack DIR [--device D] [--out DIR] [--keyring K] [--allow-incompatible]
    [--import-path DIR] [--recorded-inputs SHA256]``."""
    parser = argparse.ArgumentParser(prog="python -m inferensics.replay", description="Replay a pack in this process.")
    parser.add_argument("--pack", required=True, type=Path)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--keyring", default=None)
    parser.add_argument("--allow-incompatible", action="store_true")
    parser.add_argument(
        "--what-if", action="store_true",
        help="replay even when it is not of what served the request (no bundle served it, or a bundle miss)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print the verdict as JSON instead of text")
    parser.add_argument(
        "--recorded-inputs", default=None, metavar="SHA256",
        help="the digest the store recorded for the request's captured inputs (its capture_blob; empty when its "
        "row records none): the pack's inputs must hash to it",
    )  # fmt: skip
    parser.add_argument(
        "--import-path", action="append", default=[], type=Path,
        help="a folder the model's factory may be imported from (after the installed packages; repeatable)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    sys.path.extend(str(p) for p in args.import_path if str(p) not in sys.path)
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        print(f"error: --device {args.device} but this machine has no CUDA device: pass --device cpu", file=sys.stderr)
        return 2
    try:
        pack = read_pack(args.pack, recorded_inputs=args.recorded_inputs)
        quiet = io.StringIO()
        with contextlib.redirect_stdout(quiet):
            verdict = replay_pack(
                pack,
                device=args.device,
                keyring=args.keyring,
                allow_incompatible=args.allow_incompatible,
                out=args.out,
                what_if=args.what_if,
            )
    except ReplayError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(verdict.to_dict(), sort_keys=True, default=str) if args.json else report.render_text(verdict))
    return 0
