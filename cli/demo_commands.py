"""``inferensics demo``: real compiled models, real incidents, the whole pipeline on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from inferensics.cli.errors import fail
from inferensics.cli.extras import needs_extra
from inferensics.cli.service_commands import TokenOption


@needs_extra("demo", "demo")
def demo(  # noqa: PLR0917 (typer options)
    duration: Annotated[float, typer.Option("--duration", help="Seconds of traffic to replay.")] = 120.0,
    rate: Annotated[float, typer.Option("--rate", help="Requests per second (Poisson arrivals).")] = 3.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the workload and the incidents.")] = 0,
    no_dashboard: Annotated[bool, typer.Option("--no-dashboard", help="Do not start the dashboard.")] = False,
    port: Annotated[
        int, typer.Option("--port", help="Port of the embedded collector service (next free).", min=1, max=65535)
    ] = 4318,
    dashboard_port: Annotated[
        int, typer.Option("--dashboard-port", help="Port of the dashboard (next free).", min=1, max=65535)
    ] = 8501,
    data_dir: Annotated[
        Path | None,
        typer.Option("--data-dir", help="Directory for the store, spool and logs [default: a new temporary one]."),
    ] = None,
    service: Annotated[
        str | None,
        typer.Option("--service", help="Send to this running collector service instead of starting one."),
    ] = None,
    token: TokenOption = None,
    exit_when_done: Annotated[
        bool, typer.Option("--exit-when-done", help="Exit after the summary instead of serving until Ctrl-C.")
    ] = False,
    summary_json: Annotated[
        Path | None, typer.Option("--summary-json", help="Also write the summary (every request's account) here.")
    ] = None,
    bundle_cache: Annotated[
        Path | None,
        typer.Option(
            "--bundle-cache",
            help="Reuse the verified release bundles of an unchanged build from here "
            "[default: $INFERENSICS_BUNDLE_CACHE, else ~/.cache/inferensics/bundles].",
        ),
    ] = None,
    rebuild: Annotated[
        bool, typer.Option("--rebuild", help="Build the release bundles anew even when the bundle cache holds them.")
    ] = False,
) -> None:
    """Serve two compiled models with injected incidents through the SDK, the service and the dashboard.

    Three workers (pools cpu-a and cpu-b on the baseline bundle, a candidate canary on cpu-b) replay a
    seeded, long-tailed workload: a recompilation storm, eager fallback after the recompile limit, a numeric
    fault only in the candidate, and failing requests whose inputs are captured. The defaults take a few
    minutes on 2 CPU cores (most of it compiling); CUDA is used where present.
    """
    from inferensics.demo.runner import DemoError, DemoOptions, run_demo

    if duration <= 0 or rate <= 0:
        fail("--duration and --rate must be positive")
    opts = DemoOptions(
        duration_s=duration,
        rate=rate,
        seed=seed,
        dashboard=not no_dashboard,
        port=port,
        dashboard_port=dashboard_port,
        data_dir=data_dir,
        service_url=service,
        token=token,
        exit_when_done=exit_when_done,
        summary_json=summary_json,
        bundle_cache=bundle_cache,
        rebuild=rebuild,
    )
    try:
        run_demo(opts)
    except (DemoError, RuntimeError) as exc:
        fail(str(exc))


def register(app: typer.Typer) -> None:
    """Add ``demo`` to the app."""
    app.command("demo")(demo)
