"""``inferensics kernels list`` and ``inferensics kernels qualify``: the kernel registry from the shell."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from inferensics.cli.console import console
from inferensics.cli.errors import fail
from inferensics.cli.extras import require_extra
from inferensics.cli.help_format import command_app
from inferensics.cli.options import DsnOption

app = command_app("The kernel registry: ops, providers, evidence.")

DTYPES = {"bfloat16": "bfloat16", "bf16": "bfloat16", "float16": "float16", "fp16": "float16", "float32": "float32"}


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


@app.command("list")
def list_ops(
    as_json: Annotated[bool, typer.Option("--json", help="Print the registry state as JSON instead.")] = False,
) -> None:
    """Show every op with its providers, their requirements, status, priority and evidence."""
    from inferensics import kernels

    state = kernels.registry_state()
    if as_json:
        console.print_json(json.dumps(state))
        return
    stats = kernels.registry().log.stats()
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
        tol = op["tolerance"]
        rule = "exact for exact providers" if tol["exact_when_exact"] else "dtype table"
        rule += f", fp64-anchored RMSE ratio k={tol['rmse_k']} for tolerant ones" if tol["rmse_k"] else ""
        console.print(f"  tolerance: {rule}")
        for bucket, order in op["bucket_priority"].items():
            console.print(f"  evidence: bucket {bucket} -> {' > '.join(order)}")
        for r in op["refused"]:
            console.print(f"  refused: {r['provider']} in {r['bucket']}: {r['reason']}")
        calls = {k.split("/", 1)[1]: v for k, v in stats["calls"].items() if k.startswith(name + "/")}
        if calls:
            console.print("  calls this process: " + ", ".join(f"{p}={n}" for p, n in sorted(calls.items())))
    console.print(f"registry digest {state['digest']} · {state['environment']}")


def _load_shapes(path: Path, known: list[str]) -> dict[str, list[dict[str, int]]]:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        fail(f'--shapes {path}: cannot read it as JSON ({exc}); expected {{"op": [{{"tokens": 8, ...}}]}}')
    if not isinstance(data, dict):
        fail(f"--shapes {path}: expected an object mapping op names to lists of shapes")
    shapes: dict[str, list[dict[str, int]]] = {}
    for op, items in data.items():
        if op not in known:
            fail(f"--shapes {path}: unknown op {op!r}; known: {', '.join(known)}")
        if not isinstance(items, list) or not all(
            isinstance(s, dict) and all(isinstance(v, int) and v >= 0 for v in s.values()) for s in items
        ):
            fail(f"--shapes {path}: {op} must map to a list of objects of non-negative integers")
        shapes[op] = items
    return shapes


@app.command("qualify")
def qualify(  # noqa: PLR0917 (typer options)
    op: Annotated[list[str] | None, typer.Option("--op", help="Op to qualify (repeatable; default all).")] = None,
    shapes: Annotated[
        Path | None, typer.Option("--shapes", help='JSON file: {"op": [{"tokens": 8, "hidden": 4096}, ...]}.')
    ] = None,
    dtype: Annotated[str, typer.Option("--dtype", help="bfloat16, float16 or float32.")] = "bfloat16",
    trials: Annotated[int, typer.Option("--trials", min=2, help="Timed rounds, shuffled each.")] = 15,
    warmup: Annotated[int, typer.Option("--warmup", min=0)] = 3,
    iters: Annotated[int, typer.Option("--iters", min=1, help="Calls timed together per round.")] = 10,
    margin: Annotated[float, typer.Option("--margin", min=0.0, max=0.9, help="Promotion margin.")] = 0.05,
    out: Annotated[Path, typer.Option("--out", help="Evidence file to write.")] = Path("kernel-evidence.json"),
    dry_run: Annotated[
        bool,
        typer.Option(
            "--dry-run", help="Report what would change; write and change nothing (no evidence file, no store rows)."
        ),
    ] = False,
    dsn: DsnOption = None,
    store_events: Annotated[
        bool, typer.Option("--store/--no-store", help="Also insert the records into the store (--dsn).")
    ] = False,
) -> None:
    """Measure every provider per shape bucket here, gate on accuracy, promote only on evidence."""
    import torch

    from inferensics import kernels

    reg = kernels.registry()
    known = sorted(reg.ops)
    for name in op or []:
        if name not in known:
            fail(f"--op {name}: unknown op; known: {', '.join(known)}")
    if dtype not in DTYPES:
        fail(f"--dtype {dtype}: expected one of {', '.join(sorted(DTYPES))}")
    opts = kernels.QualifyOptions(
        ops=tuple(op) if op else None,
        shapes=_load_shapes(shapes, known) if shapes else None,
        dtype=getattr(torch, DTYPES[dtype]),
        warmup=warmup,
        trials=trials,
        iters=iters,
        margin=margin,
        apply=not dry_run,
    )
    try:
        result = kernels.qualify(reg, opts)
    except ValueError as exc:
        fail(str(exc))
    console.print(f"qualification on {result.environment.get('device')} · torch {result.environment.get('torch')}")
    console.print(f"{'op':<24} {'shape':<34} {'provider':<10} {'median us':>11} {'95% CI':>24} {'TB/s':>6}  verdict")
    for r in result.records:
        if r.trials:
            ci = f"[{r.ci_low_us:.2f}, {r.ci_high_us:.2f}]"
            verdict = f"{r.decision} · {r.rule}, max err {r.max_abs_err:.3g}"
            console.print(
                f"{r.op:<24} {r.shape:<34} {r.provider:<10} {r.median_us:>11.2f} {ci:>24} {r.tb_s:>6.2f}  {verdict}"
            )
        else:
            console.print(
                f"{r.op:<24} {r.shape:<34} {r.provider:<10} {'':>11} {'':>24} {'':>6}  {r.status}: {r.detail}"
            )
    for c in result.changes:
        verb = "would change" if dry_run else "changed"
        console.print(f"{c.op} {c.bucket}: {verb} {' > '.join(c.before)} -> {' > '.join(c.after)} ({c.reason})")
    if not result.changes:
        console.print("no priority changed: no provider's evidence cleared the margin")
    if dry_run:
        # --dry-run promises to change nothing: no evidence file, no store rows (the registry was left as is).
        console.print(f"dry run: would write evidence {result.digest()} to {out}")
        if store_events:
            console.print(f"dry run: would store {len(result.records)} qualification records")
        console.print("nothing written; run again without --dry-run to apply")
        return
    out.write_text(json.dumps(result.to_json(), indent=1, sort_keys=True))
    console.print(f"evidence {result.digest()} written to {out}")
    if store_events:
        require_extra("service", "kernels qualify --store")
        from inferensics.schema.store import Store, StoreError

        try:
            with Store.open(dsn) as store:
                store.migrate()
                n = store.insert_events(result.events(socket.gethostname()))
        except StoreError as exc:
            fail(str(exc))
        console.print(f"{n} qualification records stored in {store.dsn}")


def register(root: typer.Typer) -> None:
    """Add ``kernels list`` and ``kernels qualify`` to the app."""
    root.add_typer(app, name="kernels")
