"""``inferensics import-trace``: TORCH_TRACE logs into the store."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferensics.cli.console import console
from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.options import DsnOption


@needs_extra("service", "import-trace")
def import_trace_command(
    path: Annotated[
        list[Path], typer.Argument(help="TORCH_TRACE log files or directories of them (several: a shell glob works).")
    ],
    dsn: DsnOption = None,
    host: Annotated[str, typer.Option(help="Host label for the imported records (default: this host).")] = "",
    model: Annotated[str, typer.Option(help="Model label for the imported records.")] = "",
    hw_pool: Annotated[str, typer.Option(help="Hardware pool label for the imported records.")] = "",
) -> None:
    """Import TORCH_TRACE logs: one compile record per compile, with cache events, graph breaks and blobs.

    Importing a file again adds nothing (each file content is imported once per store). Files that are not
    TORCH_TRACE logs are refused: exit 2 when PATH itself is one (the other paths given are imported first),
    skipped and listed inside a directory.
    """
    from inferensics.collector.trace.importer import import_trace, not_trace_reason
    from inferensics.schema.store import Store, StoreError

    refused, given = [], []
    for p in path:
        if not p.exists():
            refused.append(f"{p} does not exist")
        elif p.is_file() and (reason := not_trace_reason(p)):
            refused.append(f"{p} is not a TORCH_TRACE log ({reason})")
        else:
            given.append(p)
    what_to_pass = "pass TORCH_TRACE log files (written under TORCH_TRACE=<dir>) or directories of them"
    if not given:
        fail("; ".join(refused) + f": {what_to_pass}")
    reports = []
    try:
        with Store.open(dsn) as store:
            store.create_if_empty()
            for p in given:
                reports += import_trace(p, store, host=host, model=model, hw_pool=hw_pool)
    except StoreError as exc:
        fail(str(exc))
    skipped = [r for r in reports if r.not_trace]
    imported = [r for r in reports if not r.not_trace]
    for r in imported:
        if r.already_imported:
            console.print(f"{r.path}: already imported (same content, sha256 {r.sha256[:12]}); nothing added")
            continue
        s = r.stats
        cache = ", ".join(f"{k}={v}" for k, v in sorted(s.cache.items())) or "none"
        console.print(
            f"{r.path}: {s.compiles} compiles, {s.failures} failed, {s.graph_breaks} graph breaks, "
            f"cache {cache}, {s.kernels} kernels, {s.shape_guards} shape guards, {s.blobs} blobs, "
            f"{r.damaged_lines + s.damaged_payloads} damaged records skipped, "
            f"{sum(s.unused.values())} records of kinds no compile record uses"
        )
        if r.first_damage:
            console.print(f"  first damaged record: {r.first_damage} (skipped; the rest of the file was imported)")
    if skipped:
        names = ", ".join(Path(r.path).name for r in skipped)
        console.print(f"skipped {len(skipped)} files that are not TORCH_TRACE logs: {names}")
    if refused:
        done = f" ({len(imported)} logs imported)" if imported else ""
        fail("; ".join(refused) + f": {what_to_pass}{done}")
    if not imported:
        where = ", ".join(str(p) for p in given)
        fail(f"no TORCH_TRACE logs under {where}" + (f" ({len(skipped)} other files skipped)" if skipped else ""))


def register(app: typer.Typer) -> None:
    """Add ``import-trace`` to the app."""
    app.command("import-trace")(import_trace_command)
