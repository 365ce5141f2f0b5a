"""``inferensics kernels list`` and ``inferensics kernels qualify``: the kernel registry from the shell."""

from __future__ import annotations

import importlib
import json
import os
import socket
import sys
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import urlsplit

import typer
from rich.markup import escape

from inferensics.cli.console import console, err_console
from inferensics.cli.errors import fail
from inferensics.cli.extras import missing_modules, require_extra
from inferensics.cli.help_format import command_app
from inferensics.cli.options import DataDirOption, DsnOption, dsn_from
from inferensics.cli.service_commands import ServiceOption, TokenOption
from inferensics.collector.service_url import service_url_problem

app = command_app("The kernel registry: ops, providers, evidence.")

SHAPES_HELP = (
    '{"rms_norm": [{"tokens": 8, "hidden": 4096}, ...], ...}, each shape with exactly its op\'s fields: '
    "tokens, hidden (rms_norm, fused_add_rms_norm, silu_mul); tokens, heads, head_dim (rotary_embedding); "
    "batch, context, q_heads, kv_heads, head_dim, page (paged_decode_attention)"
)
"""Written out, not built from ``kernels.samples.SHAPE_FIELDS``: importing that loads torch for every ``--help``
(a test holds the two equal)."""

DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16", "float32": "float32"}

TIMING = ("auto", "events")
"""What ``--timing`` takes (``kernels.qualify.TIMING_OPTIONS``; written out so ``--help`` does not load torch)."""
TIMED_AS = {
    "cuda_graph": "CUDA-graph replay (device time)",
    "events": "CUDA events around back-to-back eager calls (host overhead included)",
    "wall": "wall time of back-to-back eager calls",
    "": "not recorded (evidence written before qualify recorded its timing method)",
}
"""How each timing method reads (``kernels.qualify.TIMING_METHODS``, with the empty one of older files)."""


OWN_OPS_HINT = "; an op or provider of your own is known once the module that registers it is imported: --import MODULE"
"""Said after an unknown op or provider: the likeliest cause is a module of the user's not imported."""

ImportOption = Annotated[
    list[str] | None,
    typer.Option(
        "--import",
        metavar="MODULE",
        help="Import MODULE first (repeatable; the current folder is searched too): a module of your own that "
        "registers providers or ops (`kernels.registry().op(NAME).register(...)`, `kernels.registry().add(...)`), "
        "so they are listed and qualified with the built-in ones.",
    ),
]


def _import_modules(modules: list[str] | None) -> None:
    """Import the ``--import`` modules (which register providers and ops at import), each failure one line."""
    if not modules:
        return
    if os.getcwd() not in sys.path:
        sys.path.append(os.getcwd())  # as `python -m` would: a module next to the user, after every installed one
    for name in modules:
        try:
            importlib.import_module(name)
        except Exception as exc:  # the user's module: whatever it raises is said, not a traceback
            first = (str(exc).strip().splitlines() or [""])[0][:300]
            missing = isinstance(exc, ModuleNotFoundError) and exc.name is not None and _names_a_part(name, exc.name)
            fail(
                f"--import {name}: cannot import it ({type(exc).__name__}: {first}); "
                + (
                    "run from the folder that holds it, or put that folder on PYTHONPATH"
                    if missing
                    else f"{name} was found, and importing it raised: fix the module (run `python -c 'import {name}'` "
                    "to see where)"
                )
            )


def _names_a_part(module: str, missing: str) -> bool:
    """Whether ``missing`` (a module that could not be found) is ``module`` or a package above it, not something
    ``module`` imports."""
    return module == missing or module.startswith(missing + ".")


def _requirements(req: dict[str, Any]) -> str:
    parts = [",".join(req["platforms"])]
    if req["min_capability"]:
        parts.append("sm>=" + "".join(map(str, req["min_capability"])))
    if req["dtypes"]:
        parts.append("/".join(d.replace("float", "f").replace("bf16", "bf16") for d in req["dtypes"]))
    if req["compiled"] != "any":
        parts.append(req["compiled"] + " only")
    parts.extend(req["checks"])
    return "; ".join(parts)


def _tolerance(tol: dict[str, Any]) -> str:
    exact = "exact for exact providers; " if tol["exact_when_exact"] else ""
    if tol["rmse_k"]:
        return exact + f"fp64-anchored RMSE ratio k={tol['rmse_k']} for the others"
    table = ", ".join(f"{d} atol={a:g} rtol={r:g}" for d, (a, r) in tol["table"].items())
    return exact + f"close for the others ({table})"


def _availability(reg: Any) -> dict[str, dict[str, str]]:
    """Per op and provider, what keeps it from serving calls on this host ("" when nothing does)."""
    from inferensics.kernels.requirements import CallContext

    eager_ctx = CallContext.here()
    compiled_ctx = replace(eager_ctx, compiling=True)
    out: dict[str, dict[str, str]] = {}
    for name, op in sorted(reg.ops.items()):
        out[name] = {}
        for p in op.providers.values():
            eager = p.requirements.platform_problem(eager_ctx)
            compiled = p.requirements.platform_problem(compiled_ctx)
            if p.kind == "inductor" and eager:  # while compiling, the op is always left to Inductor
                out[name][p.name] = f"compiled graphs only here (eager calls: {eager})"
            elif eager and compiled:
                out[name][p.name] = f"unavailable on this host: {eager}"
            elif compiled:
                out[name][p.name] = f"eager calls only here (compiled graphs: {compiled})"
            else:
                out[name][p.name] = ""
    return out


def _load_evidence(path: Path) -> dict[str, Any]:
    from inferensics.kernels.evidence import EvidenceError, read_evidence

    try:
        return read_evidence(path)
    except EvidenceError as exc:
        fail(f"--evidence {exc}")


def _timed_as(methods: list[str]) -> str:
    """One line naming how the medians of ``methods`` (one per measured record) were timed, with counts when
    they differ."""
    counts = Counter(methods)
    if len(counts) == 1:
        return f"timed as: {TIMED_AS.get(methods[0], methods[0])}"
    return "timed as: " + "; ".join(f"{TIMED_AS.get(m, m)} ({n} records)" for m, n in sorted(counts.items()))


def _print_evidence(records: list[dict[str, Any]]) -> None:
    width = max(len(r["shape"]) for r in records)
    if measured := [str(r.get("timing", "")) for r in records if r["trials"]]:
        console.print(f"    {_timed_as(measured)}")
    for r in records:
        if r["trials"]:
            ci = f"[{r['ci_low_us']:.2f}, {r['ci_high_us']:.2f}]"
            what = f"{r['median_us']:.2f} us {ci} {r['decision']} ({r.get('timing') or 'timing not recorded'})"
        else:
            what = f"{r['status']}: {r['detail']}"
        console.print(f"    {r['shape']:<{width}}  {r['provider']:<10} {what}")


def _entries(n: int) -> str:
    return f"{n} entry" if n == 1 else f"{n} entries"


def _policy_lines(policy: dict[str, Any], priority: list[str]) -> list[str]:
    """What one op's policy in an evidence file sets, as ``kernels list`` shows an applied one (its default list
    only where it differs from ``priority``, the op's here)."""
    lines = [f"priority: {' > '.join(policy['priority'])}"] if policy.get("priority", priority) != priority else []
    lines += [f"bucket {bucket} -> {' > '.join(order)}" for bucket, order in policy.get("bucket_priority", {}).items()]
    return lines + [f"refused: {r['provider']} in {r['bucket']}: {r['reason']}" for r in policy.get("refused", [])]


@app.command("list")
def list_ops(
    as_json: Annotated[bool, typer.Option("--json", help="Print the registry state as JSON instead.")] = False,
    modules: ImportOption = None,
    evidence: Annotated[
        Path | None,
        typer.Option(
            "--evidence",
            help="An evidence file `kernels qualify` wrote: show its records per op, with its priorities and "
            "refusals applied (shown, not applied, when it was measured on another device than this host's).",
        ),
    ] = None,
) -> None:
    """Show every op with its providers, their requirements, status on this host, priority and evidence."""
    from inferensics import kernels
    from inferensics.kernels.evidence import device_label, measured_device, refusal_reason
    from inferensics.kernels.requirements import INTERPRETER_ENV

    _import_modules(modules)
    reg = kernels.registry()
    doc = _load_evidence(evidence) if evidence else None
    # The loader's rule: evidence holds only on the device it was measured on; from another one it applies nothing.
    elsewhere = refusal_reason(doc) if doc is not None else ""
    problems: list[str] = []
    if doc is not None and not elsewhere:
        problems = reg.apply_policy(doc["registry"].get("policy", {}))
        reg.evidence[:] = list(doc["registry"].get("evidence", []))
    # stdout carries the report (with --json, nothing but the JSON); what could not be applied is said on stderr
    for problem in problems:
        err_console.print(f"--evidence {evidence}: not applied: {problem}", markup=False)
    if any(p.startswith("unknown op") or "unknown providers" in p for p in problems):
        err_console.print(f"--evidence {evidence}: {OWN_OPS_HINT.removeprefix('; ')}", markup=False)
    state = kernels.registry_state()
    here = _availability(reg)
    if as_json:
        shown: dict[str, Any] = {**state, "available_here": here}
        if doc is not None:
            shown["evidence"] = {
                "digest": doc["digest"],
                "file": str(evidence),
                "measured_on": measured_device(doc),
                "this_host": device_label(),
                # all of its policy, or (false) not all: not_applied says why, one reason per entry left out
                "applied": not elsewhere and not problems,
                "not_applied": elsewhere or "; ".join(problems),
            }
        console.print_json(json.dumps(shown))
        return
    if doc is not None:
        env = doc["environment"]
        console.print(
            f"evidence {doc['digest']} from {evidence}: {doc['ts']} on {env.get('device')}, torch {env.get('torch')}, "
            f"{doc['options'].get('dtype')}; "
            + (
                "it would not apply here"
                if elsewhere
                else "its priorities and refusals are applied below"
                + (f", except {_entries(len(problems))} this host cannot take (said on stderr)" if problems else "")
            ),
            markup=False,
        )
        if elsewhere:
            console.print(
                f"  {elsewhere} (evidence holds only on the device it was measured on): the priorities below are "
                "this host's own; what the evidence would set reads 'evidence (not applied here)'",
                markup=False,
            )
    stats = reg.log.stats()
    for name, op in state["ops"].items():
        console.print(f"[bold]{escape(name)}[/] — {escape(op['doc'])}", markup=True)
        console.print(f"  {op['schema']}")
        console.print(f"  priority: {' > '.join(op['priority'])}")
        console.print(f"  {'provider':<10} {'kind':<10} {'accuracy':<16} {'status':<12} requirements")
        for p in op["providers"]:
            req = _requirements(p["requirements"])
            console.print(
                f"  {p['name']:<10} {p['kind']:<10} {p['requirements']['accuracy']:<16} {p['status']:<12} {req}"
            )
            if here[name][p["name"]]:
                console.print(f"  {'':<10} {here[name][p['name']]}")
            out_of = [b for b, order in op["bucket_priority"].items() if p["name"] not in order]
            if p["name"] in op["priority"] and out_of:
                # Its status is the op's; evidence took it out of these buckets' lists, where it serves no call.
                console.print(f"  {'':<10} not serving bucket{'s' if len(out_of) > 1 else ''} {', '.join(out_of)}")
        console.print(f"  tolerance: {_tolerance(op['tolerance'])}")
        for bucket, order in op["bucket_priority"].items():
            console.print(f"  evidence: bucket {bucket} -> {' > '.join(order)}")
        for r in op["refused"]:
            console.print(f"  refused: {r['provider']} in {r['bucket']}: {r['reason']}")
        if elsewhere:
            for line in _policy_lines((doc or {})["registry"]["policy"].get(name) or {}, op["priority"]):
                console.print(f"  evidence (not applied here): {line}", markup=False)
        records = [r for r in (doc or {}).get("records", []) if r["op"] == name]
        if records:
            console.print("  evidence records:")
            _print_evidence(records)
        calls = {k.split("/", 1)[1]: v for k, v in stats["calls"].items() if k.startswith(name + "/")}
        if calls:
            console.print("  calls this process: " + ", ".join(f"{p}={n}" for p, n in sorted(calls.items())))
    env = state["environment"]
    versions = " · ".join(f"{k} {env[k]}" for k in ("torch", "triton", "cuda") if env.get(k))
    console.print(f"registry digest {state['digest']} · {versions} · device {env['device']}")
    if any("interpreter" in r for by in here.values() for r in by.values()):
        console.print(
            "on a CPU host our Triton kernels run only in Triton's interpreter, for tests: "
            f"TRITON_INTERPRET=1 {INTERPRETER_ENV}=1"
        )
    if doc is None:
        console.print("evidence: `inferensics kernels list --evidence FILE` shows what `kernels qualify` measured")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object's keys and values, refusing a key given twice (``json`` would keep only the last)."""
    keys = [k for k, _ in pairs]
    if twice := sorted({k for k in keys if keys.count(k) > 1}):
        raise _RepeatedKeyError(twice)
    return dict(pairs)


class _RepeatedKeyError(ValueError):
    def __init__(self, keys: list[str]) -> None:
        super().__init__(", ".join(keys))
        self.keys = keys


def _load_shapes(path: Path, reg: Any, only: list[str] | None = None) -> dict[str, list[dict[str, int]]]:
    """The shapes file at ``path``, each op's entry checked; with ``only`` (the ``--op`` names), the file's other ops
    are left out unchecked (the caller says so), so one file may serve runs that import different modules."""
    from inferensics.kernels.samples import shape_fields

    known = sorted(reg.ops)

    def takes(op: str) -> str:
        fields = shape_fields(op, reg.ops[op].samples)
        return f"{op} takes {', '.join(fields)}" if fields else f"{op} has no sample arguments"

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        fail(f"--shapes {path}: cannot read it ({exc.strerror or exc})")
    except UnicodeDecodeError as exc:
        fail(f"--shapes {path}: not UTF-8 text ({exc.reason} at byte {exc.start}); expected a JSON file of shapes")
    try:
        data = json.loads(text, object_pairs_hook=_unique_keys)
    except _RepeatedKeyError as exc:
        fail(
            f"--shapes {path}: {', '.join(exc.keys)} given twice in one object (JSON keeps only the last, so the "
            "first would be dropped unmeasured); merge them into one"
        )
    except ValueError as exc:
        fail(f'--shapes {path}: cannot read it as JSON ({exc}); expected {{"op": [{{"tokens": 8, ...}}]}}')
    if not isinstance(data, dict):
        fail(f"--shapes {path}: expected an object mapping op names to lists of shapes")
    if not data:
        fail(
            f'--shapes {path}: names no op; list each op to qualify with its shapes ({{"op": [{{"tokens": 8, ...}}]}})'
        )
    for op, items in data.items():
        if only and op not in only:
            continue
        if op not in known:
            fail(f"--shapes {path}: unknown op {op!r}; known: {', '.join(known)}{OWN_OPS_HINT}")
        if not isinstance(items, list):
            fail(f"--shapes {path}: {op} must map to a list of shapes ({takes(op)})")
        if not items:
            fail(f"--shapes {path}: {op} lists no shapes; list at least one ({takes(op)}), or leave {op} out")
    return data  # each shape's fields are checked by qualify, before anything is measured


def _repeats(path: Path, shape_map: dict[str, list[Any]]) -> list[str]:
    """One line per shape the file lists more than once (qualify measures it once)."""
    from inferensics.kernels.samples import shape_label

    lines = []
    for op, items in shape_map.items():
        first = {json.dumps(s, sort_keys=True): s for s in reversed(items)}  # the first of equal shapes
        for key, n in Counter(json.dumps(s, sort_keys=True) for s in items).items():
            if n > 1 and isinstance(first[key], dict):
                lines.append(f"--shapes {path}: {op} {shape_label(first[key])} listed {n} times; measured once")
    return lines


STORE_FLAGS = (("dsn", "--dsn"), ("data_dir", "--data-dir"), ("service", "--service"), ("token", "--token"))
"""``qualify``'s parameters that say where and how to store its records: meaningful only with ``--store``."""
MEASURE_FLAGS = (
    ("op", "--op"), ("shapes", "--shapes"), ("dtype", "--dtype"), ("trials", "--trials"), ("warmup", "--warmup"),
    ("iters", "--iters"), ("margin", "--margin"), ("timing", "--timing"), ("out", "--out"), ("dry_run", "--dry-run"),
    ("force", "--force"),
)  # fmt: skip
"""``qualify``'s parameters that say what to measure and where to write it: meaningless with ``--from-evidence``."""


def _typed(ctx: typer.Context, flags: tuple[tuple[str, str], ...]) -> list[str]:
    """Those of ``flags`` typed on the command line (not their defaults or environment variables)."""
    return [
        flag
        for name, flag in flags
        if (source := ctx.get_parameter_source(name)) is not None and source.name == "COMMANDLINE"
    ]


def _refuse_store_flags_without_store(ctx: typer.Context) -> None:
    """Refuse store flags typed without ``--store`` (they would write nothing); their environment variables, set
    for other commands, are not refused."""
    given = _typed(ctx, STORE_FLAGS)
    if given:
        one = len(given) == 1
        fail(
            f"{', '.join(given)} only {'says' if one else 'say'} where to store the qualification records, and "
            f"nothing is stored without --store: add --store, or leave {'it' if one else 'them'} out"
        )


@app.command("qualify")
def qualify(  # noqa: PLR0917 (typer options)
    ctx: typer.Context,
    op: Annotated[
        list[str] | None,
        typer.Option(
            "--op", metavar="OP", help="Op to qualify (repeatable; default: the --shapes file's ops, or all)."
        ),
    ] = None,
    shapes: Annotated[
        Path | None,
        typer.Option("--shapes", metavar="FILE", help=f"JSON file of the shapes per op: {SHAPES_HELP}."),
    ] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="bfloat16, float16 or float32.")] = "bfloat16",
    trials: Annotated[int, typer.Option("--trials", min=2, help="Timed rounds, shuffled each.")] = 15,
    warmup: Annotated[int, typer.Option("--warmup", min=0, help="Untimed calls per provider first.")] = 3,
    iters: Annotated[int, typer.Option("--iters", min=1, help="Calls timed together per round.")] = 10,
    margin: Annotated[float, typer.Option("--margin", min=0.0, max=0.9, help="Promotion margin.")] = 0.05,
    timing: Annotated[
        str,
        typer.Option(
            "--timing",
            help="auto: on CUDA, time replays of a CUDA graph of the --iters calls (device time; a shape where a "
            "provider cannot be captured is timed with events throughout); events: CUDA events around eager "
            "calls (includes host overhead). Wall time on the CPU either way.",
        ),
    ] = "auto",
    out: Annotated[
        Path, typer.Option("--out", help="Evidence file to write (`kernels list --evidence FILE` reads it).")
    ] = Path("kernel-evidence.json"),
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Report what would change; write and change nothing (no evidence file, no store rows)."
        ),
    ] = False,
    force: Annotated[bool, typer.Option("--force", help="Overwrite an existing --out file.")] = False,
    dsn: DsnOption = None,
    data_dir: DataDirOption = None,
    store_events: Annotated[
        bool,
        typer.Option(
            "--store/--no-store",
            help="Also record the results in the store: through --service while a service owns it, else at --dsn "
            "(or --data-dir).",
        ),
    ] = False,
    service: ServiceOption = None,
    token: TokenOption = None,
    modules: ImportOption = None,
    from_evidence: Annotated[
        Path | None,
        typer.Option(
            "--from-evidence",
            metavar="FILE",
            help="With --store: store the records of an evidence file qualify already wrote (its --store failed), "
            "measuring nothing; records the store holds already are not stored again. They are stamped with this "
            "host's name.",
        ),
    ] = None,
) -> None:
    """Measure every provider per shape bucket here, gate on accuracy, promote only on evidence."""
    if from_evidence is not None and not store_events:
        fail("--from-evidence stores an evidence file's records: add --store (and --dsn, --data-dir or --service)")
    if not store_events:
        _refuse_store_flags_without_store(ctx)
    dsn = dsn_from(ctx, dsn, data_dir)  # refused before torch is imported
    if from_evidence is not None:
        _store_evidence_file(ctx, from_evidence, dsn, service, token)
        return
    import torch

    from inferensics import kernels

    _import_modules(modules)
    reg = kernels.registry()
    known = sorted(reg.ops)
    for name in op or []:
        if name not in known:
            fail(f"--op {name}: unknown op; known: {', '.join(known)}{OWN_OPS_HINT}")
    if dtype not in DTYPES:
        fail(f"--dtype {dtype}: expected one of {', '.join(sorted(DTYPES))}")
    if timing not in TIMING:
        fail(f"--timing {timing}: expected one of {', '.join(TIMING)}")
    if repeated := [name for name, n in Counter(op or []).items() if n > 1]:
        console.print(f"--op {', '.join(repeated)} given more than once; each op is qualified once")
        op = list(dict.fromkeys(op or []))
    shape_map = _load_shapes(shapes, reg, op) if shapes else None
    if op and shape_map is not None:
        if left_out := sorted(set(shape_map) - set(op)):
            console.print(f"--shapes {shapes}: {', '.join(left_out)} left out (not among --op)")
            shape_map = {name: items for name, items in shape_map.items() if name in op}
        # Measuring shapes nobody listed beside the file's would write evidence for buckets nobody asked about.
        if defaults := [name for name in op if name not in shape_map]:
            fail(
                f"--op {', '.join(defaults)}: the --shapes file {shapes} lists no shapes for "
                f"{'it' if len(defaults) == 1 else 'them'}; add them, or leave --shapes out to measure the defaults"
            )
    for line in _repeats(shapes, shape_map) if shapes and shape_map else []:
        console.print(line)
    # Checked before measuring, not after, and on a dry run too: it previews the run, refusals included.
    previewed = " (the run this --dry-run previews would be refused)" if dry_run else ""
    if out.is_dir() or not out.parent.is_dir():
        where = "a directory" if out.is_dir() else "its folder does not exist"
        fail(f"--out {out}: {where}; name the evidence file{previewed}")
    if out.exists() and not force:  # evidence another run wrote, perhaps the one a bundle carries
        fail(f"--out {out} exists: pass --force to overwrite it, or name another file{previewed}")
    if store_events and not service:
        require_extra("service", "kernels qualify --store")
    store = _store_reached(dsn, service) if store_events and not dry_run else None
    ops = tuple(op) if op else (tuple(shape_map) if shape_map else None)
    opts = kernels.QualifyOptions(
        ops=ops,
        shapes=shape_map,
        dtype=getattr(torch, DTYPES[dtype]),
        warmup=warmup,
        trials=trials,
        iters=iters,
        margin=margin,
        apply=not dry_run,
        timing=timing,
    )
    try:
        try:
            result = kernels.qualify(reg, opts)
        except ValueError as exc:
            fail(f"--shapes {shapes}: {exc}" if shapes else str(exc))
        _print_result(result, dry_run)
        _after_measuring(result, out, dry_run, store_events, store, dsn, service, token)
    finally:
        if store is not None:
            store.close()


def _after_measuring(  # noqa: PLR0917 (the command's options)
    result: Any,
    out: Path,
    dry_run: bool,
    store_events: bool,
    store: Any,
    dsn: str | None,
    service: str | None,
    token: str | None,
) -> None:
    from inferensics import kernels
    from inferensics.kernels.qualify import ERROR

    rejected = sorted(
        {(r.op, r.shape) for r in result.records if r.provider == kernels.REFERENCE and r.status == ERROR}
    )
    if rejected:
        total = len({(r.op, r.shape) for r in result.records})
        console.print(
            f"{len(rejected)} of {total} shapes rejected: the op's reference cannot take them, or their arguments "
            f"could not be allocated here ({', '.join(f'{o} {s}' for o, s in rejected)}); their rows say why, and the "
            "evidence keeps them"
        )
    if dry_run:
        # --dry-run promises to change nothing: no evidence file, no store rows (the registry was left as is).
        console.print(f"dry run: would write evidence {result.digest()} to {out}")
        if store_events:
            console.print(f"dry run: would store {len(result.records)} qualification records")
        console.print("nothing written; run again without --dry-run to apply")
    else:
        _write_evidence(result, out, store_events, dsn, service, token, store)
    if rejected:
        raise typer.Exit(1)


def _service_unreachable(service: str, timeout_s: float = 3.0) -> str:
    """Why nothing answers at ``service``'s host and port (connection refused, no answer in time, no such host), or
    ``""`` when a connection opens."""
    parts = urlsplit(service)
    host, port = parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return ""
    except ConnectionRefusedError:
        return f"connection refused at {host}:{port}: nothing listens there (is `inferensics serve` running?)"
    except TimeoutError:
        return f"no answer from {host}:{port} within {timeout_s:g} s (timed out: a firewall, or the wrong host?)"
    except OSError as exc:  # no such host, network unreachable
        return f"cannot connect to {host}:{port} ({exc.strerror or exc})"


def _store_reached(dsn: str | None, service: str | None) -> Any:
    """Checked before measuring, not after: the store ``--store`` writes to opens (the open store, kept for the
    records), or the service's port answers (``None``); else one line, nothing measured and nothing written."""
    before = "checked before measuring: nothing measured, no evidence written"
    if service:
        if problem := service_url_problem(service):
            fail(f"--service {service}: {problem} ({before})")
        if problem := _service_unreachable(service):
            fail(f"--service {service}: {problem} ({before}); start the service, or leave --store out")
        return None
    from inferensics.schema.store import Store, StoreError

    try:
        store = Store.open(dsn)
        store.migrate()
    except StoreError as exc:
        fail(f"{exc} ({before}); or leave --store out and store the evidence file later with --from-evidence")
    return store


def _print_result(result: Any, dry_run: bool) -> None:
    from inferensics.kernels.qualify import MEASURED

    console.print(f"qualification on {result.environment.get('device')} · torch {result.environment.get('torch')}")
    if timed := [r.timing for r in result.records if r.trials]:
        console.print(_timed_as(timed))
    w = max([34, *(len(r.shape) for r in result.records)])
    console.print(
        f"{'op':<24} {'shape':<{w}} {'provider':<10} {'median us':>11} {'95% CI':>24} {'TB/s':>6} {'timed':<10}  "
        "verdict"
    )
    for r in result.records:
        if r.trials:
            ci = f"[{r.ci_low_us:.2f}, {r.ci_high_us:.2f}]"
            verdict = f"{r.decision} · {r.rule}, max err {r.max_abs_err:.3g}" + (f" · {r.detail}" if r.detail else "")
            console.print(
                f"{r.op:<24} {r.shape:<{w}} {r.provider:<10} {r.median_us:>11.2f} {ci:>24} {r.tb_s:>6.2f} "
                f"{r.timing:<10}  {verdict}"
            )
        else:
            console.print(
                f"{r.op:<24} {r.shape:<{w}} {r.provider:<10} {'':>11} {'':>24} {'':>6} {'':<10}  {r.status}: {r.detail}"
            )
    for c in result.changes:
        verb = "would change" if dry_run else "changed"
        console.print(f"{c.op} {c.bucket}: {verb} {' > '.join(c.before)} -> {' > '.join(c.after)} ({c.reason})")
    disagree = {(r.op, r.bucket, r.provider): r.detail.split("shapes disagree: ", 1)[1] for r in result.records
                if "shapes disagree: " in r.detail}  # fmt: skip
    for (o, bucket, provider), note in disagree.items():
        console.print(f"{o} {bucket}: shapes disagree for {provider}: {note}")
    if not result.changes:
        measured = Counter((r.op, r.shape) for r in result.records if r.status == MEASURED)
        if any(n > 1 for n in measured.values()):
            console.print("no priority changed: no provider's evidence cleared the margin")
        else:
            console.print("no priority changed: at no shape could two providers run here to be compared (see above)")


def _write_evidence(  # noqa: PLR0917 (the command's options)
    result: Any,
    out: Path,
    store_events: bool,
    dsn: str | None,
    service: str | None,
    token: str | None,
    store: Any = None,
) -> None:
    try:
        out.write_text(json.dumps(result.to_json(), indent=1, sort_keys=True))
    except OSError as exc:
        fail(f"--out {out}: cannot write the evidence ({exc.strerror or exc})")
    console.print(f"evidence {result.digest()} written to {out}; `inferensics kernels list --evidence {out}` shows it")
    if store_events:
        _store_records(result, out, dsn, service, token, retry=False, opened=store)


def _store_evidence_file(
    ctx: typer.Context, path: Path, dsn: str | None, service: str | None, token: str | None
) -> None:
    """``--store --from-evidence FILE``: store the records of an evidence file qualify wrote, measuring nothing."""
    if given := _typed(ctx, MEASURE_FLAGS):
        fail(
            f"{', '.join(given)} would measure again, and --from-evidence stores the records of {path}, already "
            f"measured: leave {'it' if len(given) == 1 else 'them'} out"
        )
    if not service:
        require_extra("service", "kernels qualify --store")
    from inferensics.kernels.evidence import EvidenceError, read_evidence
    from inferensics.kernels.qualify import QualifyResult

    try:
        doc = read_evidence(path)
    except EvidenceError as exc:
        fail(f"--from-evidence {exc}")
    try:
        result = QualifyResult.from_json(doc)
    except ValueError as exc:
        fail(f"--from-evidence {path}: {exc}")
    _store_records(result, path, dsn, service, token, retry=True)


_KEY = ("op", "provider", "bucket", "shape", "dtype")
"""What tells one qualification record from another of the same evidence (its ``evidence_digest``)."""


def _store_records(
    result: Any, out: Path, dsn: str | None, service: str | None, token: str | None, *, retry: bool, opened: Any = None
) -> None:
    """Store ``result``'s records (written to ``out``); on a retry, only those the store does not hold yet; in
    ``opened`` when that store is open already.

    A failure is one line that says how to store the evidence file later without measuring again (running the
    command again would be refused: its ``--out`` exists)."""
    from inferensics.schema.events import KernelQualificationEvent

    rows, table, digest = result.events(socket.gethostname()), KernelQualificationEvent.TABLE.name, result.digest()
    later = (
        f"store it later without measuring again: `inferensics kernels qualify --store --from-evidence {out}` with "
        "the same --dsn, --data-dir or --service"
    )
    held = f"SELECT {', '.join(_KEY)} FROM {{table}} WHERE evidence_digest = '{digest}'"
    if service:
        from inferensics.cli.service_records import record_through_service

        if retry and not (rows := _unstored(rows, _held_by_service(service, token, held.format(table=table)), digest)):
            return
        ok, line = record_through_service(service, token, rows, table)
        if not ok:
            if line.endswith("the service did not answer in time; run the command again"):
                # Said of any silence, a refused connection too; and running again would be refused (--out exists).
                silent = _service_unreachable(service) or "the service did not answer in time"
                line = f"{line.split(':', 1)[0]}: {silent}"
            fail(f"{len(rows)} qualification records {line} (the evidence file {out} is written): {later}")
        console.print(f"{len(rows)} qualification records {line} through {service} (evidence_digest {digest})")
        return
    from inferensics.schema.store import Store, StoreError

    try:
        with opened or Store.open(dsn) as store:
            store.migrate()
            if retry:
                keys = {tuple(r) for r in store.query_rows(held.format(table=f"{store.database}.{table}"))}
                if not (rows := _unstored(rows, keys, digest)):
                    return
            n = store.insert_events(rows)
    except StoreError as exc:
        fail(f"{exc} (the evidence file {out} is written; nothing was stored): {later}")
    console.print(
        f"{n} qualification records stored in {store.dsn} (table {store.database}.{table}, evidence_digest {digest})"
    )


def _held_by_service(service: str, token: str | None, sql: str) -> set[tuple[Any, ...]] | None:
    """The record keys of one evidence the service's store holds, or ``None`` (said) when it cannot be asked."""
    if missing := missing_modules("service"):  # a slim serving host records through OTLP, but has no SQL client
        console.print(
            f"cannot ask {service} which of these records it holds already (its SQL client needs the service "
            f"extra; {', '.join(missing)} not installed): storing them all",
            markup=False,
        )
        return None
    from inferensics.collector.client import ServiceClient, ServiceError

    try:
        with ServiceClient(service, token=token) as client:
            return {tuple(r) for r in client.sql(sql).iter_rows()}
    except ServiceError as exc:
        if exc.status is not None:  # unreachable: storing says so next, in its one line
            admin = "; its SQL API takes an admin token" if exc.status in {401, 403} else ""
            console.print(
                f"cannot ask {service} which of these records it holds already ({exc.detail}{admin}): storing them all",
                markup=False,
            )
        return None


def _unstored(rows: list[Any], held: set[tuple[Any, ...]] | None, digest: str) -> list[Any]:
    """``rows`` the store does not hold yet (``held``: their keys there; ``None``: unknown, so all); says when the
    store holds some or all of them already."""
    if held is None:
        return rows
    left = [r for r in rows if tuple(getattr(r, k) for k in _KEY) not in held]
    if not left:
        console.print(
            f"all {len(rows)} qualification records of evidence {digest} are stored already; none stored again"
        )
    elif len(left) < len(rows):
        console.print(
            f"{len(rows) - len(left)} of the {len(rows)} records are stored already; storing the other {len(left)}"
        )
    return left


def register(root: typer.Typer) -> None:
    """Add ``kernels list`` and ``kernels qualify`` to the app."""
    root.add_typer(app, name="kernels")
