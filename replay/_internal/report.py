"""What people read: the printed verdict, the Markdown report and the standalone repro script."""

from __future__ import annotations

import hashlib
import io
import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

import torch

from inferensics.replay._internal.graph_probe import GraphCall
from inferensics.replay._internal.pack import uncreatable
from inferensics.replay._internal.verdict import Verdict

REPRO_FILES: Final = ("repro.py", "repro_inputs.pt")
REPORT_FILES: Final = ("verdict.json", "verdict.md", *REPRO_FILES)
"""Every file a replay writes into its ``--out`` folder (the repro's only where a graph diverged)."""


def _figure(value: Any) -> str:
    """A ratio as people read it: 4 significant figures (the JSON evidence keeps full precision)."""
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _rung_error(rung: Mapping[str, Any], tolerance: Mapping[str, Any]) -> str:
    """A rung's figure with its unit and its own limit: an eager rung is measured in rounding units of its dtype
    from fp64 (limit :data:`EAGER_LIMIT`), a compiled one as a multiple of eager's own error against fp64 (limit
    :data:`RATIO_LIMIT`), so that "pass" beside a number is read against that rung's own limit."""
    from inferensics.replay._internal.tolerance import EAGER_LIMIT, RATIO_LIMIT

    if "rounding_units" in rung:
        limit = tolerance.get("eager_limit_rounding_units", EAGER_LIMIT)
        figure = f"{_figure(rung['rounding_units'])} rounding units from fp64, limit {_figure(limit)}"
    elif "ratio" in rung:
        limit = tolerance.get("ratio_limit", RATIO_LIMIT)
        unit = tolerance.get("ratio_unit", "eager's error")
        figure = f"{_figure(rung['ratio'])} × {unit}, limit {_figure(limit)}"
    else:  # a reference that could not run (fp64 without a float64 path): its error is all there is
        return f"raised {rung.get('error', '')}"
    new = rung.get("nonfinite_new") or 0
    alike = rung.get("nonfinite_as_fp64") or 0
    if alike:
        figure = f"{alike} non-finite value{'s' if alike != 1 else ''}, only where fp64 has them too; {figure}"
    if new:
        figure = f"{new} new non-finite value{'s' if new != 1 else ''}; {figure}"
    if rung.get("error"):
        figure = f"raised {rung['error']}; {figure}"
    return figure


def render_text(verdict: Verdict) -> str:
    """The verdict as printed by the CLI."""
    lines = [f"verdict: {verdict.headline()}", f"  {verdict.summary}"]
    if verdict.source_text:
        lines.append(f"  source: {verdict.location}: {verdict.source_text}")
    if verdict.culprit:
        lines.append(f"  culprit: {verdict.culprit}")
    if verdict.kernel:
        line = verdict.evidence.get("output_code_line") or 0
        lines.append(f"  kernel: {verdict.kernel}" + (f" (output code line {line})" if line else ""))
    note = verdict.evidence.get("captured_inputs", {}).get("note")
    if note:
        lines.append(f"  inputs: {note}")
    history = verdict.evidence.get("build_history_not_replayed")
    if history:
        lines.append(f"  build history: not replayed: {history}")
    served = verdict.evidence.get("provider")
    if served:
        lines.append(
            f"  provider: {served['provider']} ({served['kind']}) of {served['op']}, bucket {served['bucket']}, "
            f"{served['provider_function']} at {served['provider_file']}:{served['provider_line']}"
        )
    for step in verdict.evidence.get("next_steps", []):
        lines.append(f"  next: {step}")
    tolerance = verdict.evidence.get("tolerance", {})
    for rung in verdict.evidence.get("rungs", []):
        lines.append(
            f"  rung {rung['rung']}: {'pass' if rung.get('passed') else 'FAIL'} "
            f"({_rung_error(rung, tolerance)}; {rung.get('seconds', 0)} s)"
        )
    return "\n".join(lines)


def render_markdown(verdict: Verdict, *, request_id: str = "", bundle_id: str = "") -> str:
    """The Markdown report."""
    from inferensics.replay._internal.tolerance import EAGER_LIMIT, RATIO_LIMIT

    out = [f"# Replay of request `{request_id}`" if request_id else "# Replay verdict", ""]
    if bundle_id:
        out += [f"Bundle `{bundle_id}`", ""]
    out += [
        "| field | value |",
        "|---|---|",
        f"| category | `{verdict.category}` |",
        f"| op | `{verdict.op}` |",
        f"| FX node | `{verdict.fx_node}` |",
        f"| source | `{verdict.location}` |",
        f"| line | `{verdict.source_text}` |",
        f"| kernel | `{verdict.kernel}` |",
        f"| culprit | {verdict.culprit} |",
        *_provider_rows(verdict),
        "",
        verdict.summary,
        "",
        *_next_steps(verdict),
        *_notes(verdict),
        "## Rungs",
        "",
        "| rung | passed | error (limit) | seconds |",
        "|---|---|---|---|",
    ]
    tol = verdict.evidence.get("tolerance", {})
    for rung in verdict.evidence.get("rungs", []):
        error = _rung_error(rung, tol).replace("|", "\\|")
        out.append(f"| {rung['rung']} | {rung.get('passed')} | {error} | {rung.get('seconds', '')} |")
    if tol.get("ratio_unit"):  # no fp64 reference: the rungs were judged against eager in the serving dtype
        out += [
            "",
            f"Tolerance: {tol.get('rule', '')}; a compiled rung passes at most "
            f"{_figure(tol.get('ratio_limit', RATIO_LIMIT))} × {tol['ratio_unit']}.",
        ]
    elif tol:
        out += [
            "",
            f"Tolerance: {tol.get('rule', '')}; a compiled rung passes at most "
            f"{_figure(tol.get('ratio_limit', RATIO_LIMIT))} "
            "× eager's error against fp64, eager at most "
            f"{_figure(tol.get('eager_limit_rounding_units', EAGER_LIMIT))} rounding units of its dtype from fp64.",
        ]
    return "\n".join(out) + "\n"


def _next_steps(verdict: Verdict) -> list[str]:
    """The verdict's next steps as a list, first the one to take first (none when it has none)."""
    steps = verdict.evidence.get("next_steps", [])
    return ["## Next steps", "", *(f"{i}. {step}" for i, step in enumerate(steps, start=1)), ""] if steps else []


def _notes(verdict: Verdict) -> list[str]:
    """What the captured inputs were not checked against, and why the bundle's build history was not replayed,
    as paragraphs (none when neither applies)."""
    out = []
    note = verdict.evidence.get("captured_inputs", {}).get("note")
    if note:
        out += [f"Inputs: {note}.", ""]
    history = verdict.evidence.get("build_history_not_replayed")
    if history:
        out += [f"Build history: not replayed: {history}.", ""]
    return out


_REPRO = '''"""Standalone repro of request {request_id!r}: {headline}

Generated by `inferensics replay` from pack {pack_digest}. Runs with torch (+ triton) only: the
request's Dynamo graph below, its arguments from repro_inputs.pt, eager fp64 as the reference, eager in
the serving dtype as the anchor, and torch.compile. Exit status 1 when the compiled output diverges
(error ratio against eager's own error > {limit}).
{customisations_note}
"""

import pathlib
import sys

import torch
from torch import device  # noqa: F401  (the graph code may name devices)

HERE = pathlib.Path(__file__).resolve().parent


class Repro(torch.nn.Module):
{graph_code}
{install_code}

def error_ratio(candidate, reference, anchor):
    eps = torch.finfo(candidate.dtype).eps
    c, r, a = candidate.double(), reference.double(), anchor.double()
    ok = torch.isfinite(r) & torch.isfinite(a)
    if bool((ok & ~torch.isfinite(c)).any()):
        return float("inf")
    rms = lambda t: float(t[ok].pow(2).mean().sqrt()) if bool(ok.any()) else 0.0
    floor = eps * rms(r) + 1e-300
    worst = float((c - r)[ok].abs().max())
    anchor = max(float((a - r)[ok].abs().max()), eps * float(r[ok].abs().max()) + 1e-300)
    return max(rms(c - r) / max(rms(a - r), floor), worst / anchor)


def main():
{install_call}    args = torch.load(HERE / "repro_inputs.pt")
    to64 = [a.double() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    with torch.no_grad():
        reference = Repro()(*to64)
        eager = Repro()(*args)
        compiled = torch.compile(Repro(), **{compile_kwargs})(*args)
    worst = 0.0
    for c, r, a in zip(compiled, reference, eager):
        if isinstance(c, torch.Tensor) and c.is_floating_point():
            worst = max(worst, error_ratio(c, r, a))
    print(f"compiled error ratio against eager: {{worst:.3g}} (limit {limit})")
    sys.exit(1 if worst > {limit} else 0)


if __name__ == "__main__":
    main()
'''

_INSTALL = '''

CUSTOMISATIONS = {customisations!r}
"""The bundle's compiler customisations, as its manifest records them: (kind, target, module:function)."""


def install_customisations():
    """Install them as the serving process did, imported from the folder this runs in (as `bundle build` did)."""
    import importlib

    import torch._inductor.config as inductor_config
    from torch._inductor import decomposition

    sys.path.append(str(pathlib.Path.cwd()))
    for kind, target, path in CUSTOMISATIONS:
        module, _, name = path.partition(":")
        try:
            obj = importlib.import_module(module)
        except ImportError as exc:
            print(f"error: customisation {{path}} cannot be imported ({{exc}}): run this from the folder the "
                  "bundle was built in", file=sys.stderr)
            sys.exit(2)
        for part in filter(None, name.split(".")):
            obj = getattr(obj, part)
        if kind == "decomposition":
            op = torch.ops
            for part in target.split("."):
                op = getattr(op, part)
            decomposition.decompositions[op] = obj
        elif kind == "fx_pass":
            setattr(inductor_config, target, obj)
    inductor_config.fx_graph_cache = False  # its key does not cover decompositions or passes
'''


def write_repro(
    out: Path,
    verdict: Verdict,
    graph: GraphCall | None,
    *,
    request_id: str,
    pack_digest: str,
    compile_kwargs: dict[str, Any],
    customisations: Sequence[Mapping[str, Any]] = (),
) -> Path | None:
    """Write ``repro.py`` and ``repro_inputs.pt`` into ``out``; the same pack gives the same bytes. Without a
    diverging graph none is written, and those of an earlier report in ``out`` are removed (:func:`out_problem`
    keeps ``out`` to this request's own reports).

    ``customisations`` are the bundle's recorded ones (its manifest's): the repro reinstalls them before it
    compiles, or a fault of one of them would not reproduce."""
    if graph is None:  # an earlier replay of this request may have left one that no longer tells the truth
        for name in REPRO_FILES:
            (out / name).unlink(missing_ok=True)
        return None
    from inferensics.replay._internal.tolerance import RATIO_LIMIT

    code = graph.gm.code.strip("\n")
    body = "\n".join(("    " + line) if line.strip() else "" for line in code.splitlines())
    kwargs = {k: v for k, v in sorted(compile_kwargs.items()) if isinstance(v, bool | int | str | type(None))}
    recorded = [(str(c["kind"]), str(c["target"]), str(c["import_path"])) for c in customisations]
    text = _REPRO.format(
        request_id=request_id,
        headline=verdict.headline(),
        pack_digest=pack_digest[:16],
        graph_code=body,
        compile_kwargs=repr(kwargs),
        limit=RATIO_LIMIT,
        customisations_note=(
            "The bundle's compiler customisations (CUSTOMISATIONS) are reinstalled first, imported from the folder "
            "this runs in."
            if recorded
            else "The bundle records no compiler customisations."
        ),
        install_code=_INSTALL.format(customisations=recorded) if recorded else "",
        install_call="    install_customisations()\n" if recorded else "",
    )
    out.mkdir(parents=True, exist_ok=True)
    (out / "repro.py").write_text(text)
    args = [a.detach().cpu() if isinstance(a, torch.Tensor) else a for a in graph.args]
    buffer = io.BytesIO()
    torch.save(args, buffer)
    (out / "repro_inputs.pt").write_bytes(buffer.getvalue())
    return out / "repro.py"


def out_problem(out: Path, request_id: str | None) -> str:
    """Why the reports of ``request_id`` cannot be written to ``out``, or ``""``.

    ``out`` must be a folder or creatable. It may hold other files, and this request's earlier report (which
    is replaced), but no report of another request, or one of unknown origin: a repro of another request
    would be read as this verdict's, and its report would be lost. ``request_id=None`` (not known yet) checks
    the folder alone."""
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file, not a folder: pass a folder for the reports"
    if not out.exists():
        why = uncreatable(out)
        if not why:
            return ""
        fix = "pass a folder you can write" if why.endswith("not writable") else "pass a folder for the reports"
        return f"--out {out} cannot be created ({why}): {fix}"
    if not os.access(out, os.W_OK | os.X_OK):
        return f"--out {out} is not writable: pass a folder you can write"
    present = [name for name in REPORT_FILES if (out / name).exists()]
    if not present or request_id is None:
        return ""
    owner = _report_owner(out / "verdict.json")
    if owner == (request_id or None):  # this request's own earlier report (or, both unnamed, a pack's)
        return ""
    whose = f"the report of request {owner}" if owner else f"{present[0]} of another replay"
    return f"--out {out} holds {whose}: pass a new folder for the report of request {request_id}"


def _report_owner(path: Path) -> str | None:
    """The request id a ``verdict.json`` names, or ``None`` (absent, unreadable, none named)."""
    try:
        found = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return None
    evidence = found.get("evidence") if isinstance(found, dict) else None
    rid = evidence.get("request_id") if isinstance(evidence, dict) else None
    return str(rid) if isinstance(rid, str) and rid else None


def write_reports(out: Path, verdict: Verdict, *, request_id: str = "", bundle_id: str = "") -> None:
    """``verdict.json`` and ``verdict.md``."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "verdict.json").write_text(verdict.to_json() + "\n")
    (out / "verdict.md").write_text(render_markdown(verdict, request_id=request_id, bundle_id=bundle_id))


def digest_of(meta: dict[str, Any]) -> str:
    """sha256 of a pack's metadata (names the pack in reports)."""
    return hashlib.sha256(json.dumps(meta, sort_keys=True, default=str).encode()).hexdigest()


def _provider_rows(verdict: Verdict) -> list[str]:
    served = verdict.evidence.get("provider")
    if not served:
        return []
    return [
        f"| provider | `{served['provider']}` ({served['kind']}), bucket `{served['bucket']}` |",
        f"| provider source | `{served['provider_file']}:{served['provider_line']}` `{served['provider_text']}` |",
    ]
