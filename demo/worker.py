"""One serving worker of the demo: a process that serves one pool's share of the workload with one bundle.

Run by :mod:`inferensics.demo.runner` as ``python -m inferensics.demo.worker ...``. Each worker rebuilds the
seeded workload, keeps the requests that are its own, and serves them at their arrival times through the
host SDK (``instrument`` + ``tracker.compile`` + ``tracker.request``), exporting OTLP to the service.

The SDK's hooks are process-global (one tracker per process), and the candidate bundle patches Inductor's
decomposition table for the whole process, so every (pool, bundle) pair is a process of its own.

It reports on stdout, one JSON object per line: ``{"event": "start", ...}`` once, ``{"event": "served",
...}`` per request (with the outcome :class:`~inferensics.demo.serving.DispatchModel` expects), and
``{"event": "begin", ...}`` as each request starts (so the runner can show a long compile as it happens),
and ``{"event": "done", ...}`` with the SDK's counters once everything is exported.
"""

from __future__ import annotations

import argparse
import json
import os
import time
import warnings
from typing import Any

from inferensics.demo.workload import DECODER_MODEL, HF_MODEL, POOL_A, POOL_B, RequestSpec, Workload, build_workload

WORKER_MODELS: dict[str, tuple[str, ...]] = {POOL_A: (DECODER_MODEL,), POOL_B: (DECODER_MODEL, HF_MODEL)}
"""The models each pool serves."""


def worker_requests(workload: Workload, pool: str, bundle: str) -> list[RequestSpec]:
    """The requests one worker serves: its pool's, or the mirrored copies for the candidate."""
    from inferensics.demo.workload import CANDIDATE

    return workload.for_canary() if bundle == CANDIDATE else workload.for_pool(pool)


def host_name(pool: str, bundle: str) -> str:
    """The worker's host label, e.g. ``cpu-b-candidate-0``."""
    return f"{pool}-{bundle}-0"


def _emit(event: str, **fields: Any) -> None:
    print(json.dumps({"event": event, **fields}), flush=True)


def _shape(spec: RequestSpec) -> tuple[int, ...]:
    if spec.kind == "score":
        return (spec.batch, spec.prompt_len)
    return (spec.batch, spec.prompt_len, spec.spec_tokens + 1)


def serve(args: argparse.Namespace) -> None:
    """Serve this worker's requests (see the module docstring)."""
    import torch

    from inferensics.collector.host import CaptureRules, SdkConfig, instrument
    from inferensics.demo.bundles import BUNDLES
    from inferensics.demo.serving import ModelServer, request_tokens

    bundle = BUNDLES[args.bundle]
    bundle.activate()
    if not torch.cuda.is_available():
        # Three workers share the CPU cores: one intra-op thread each avoids OpenMP spin-waiting on busy cores.
        torch.set_num_threads(1)
    workload = build_workload(args.seed, args.duration, args.rate)
    specs = worker_requests(workload, args.pool, args.bundle)
    config = SdkConfig(sample_rate=args.sample_rate, capture=CaptureRules(enabled=True))
    tracker = instrument(
        service_url=args.service,
        host=host_name(args.pool, args.bundle),
        hw_pool=args.pool,
        model=DECODER_MODEL,
        bundle_id=bundle.bundle_id,
        token=args.token,
        config=config,
    )

    def compile_fn(fn: Any) -> Any:
        return tracker.compile(fn, mode=bundle.mode, options=dict(bundle.options) or None)

    server = ModelServer(compile_fn, models=WORKER_MODELS[args.pool])
    _emit("start", total=len(specs), bundle_id=bundle.bundle_id, device=str(server.device), pid=os.getpid())
    for spec in specs:
        delay = args.start_at + spec.at_s - time.time()
        if delay > 0:
            time.sleep(delay)
        expected = server.dispatch.expect(spec)
        _emit("begin", request_id=spec.request_id, model=spec.model, expected=expected)
        tokens = request_tokens(spec, server.vocab_size)
        t0, error, nan = time.perf_counter(), "", 0
        try:
            with tracker.request(
                spec.request_id,
                model=spec.model,
                traffic_class=spec.traffic_class,
                tenant=spec.tenant,
                shape=_shape(spec),
                inputs={"tokens": tokens},
            ) as req:
                out = server.serve(spec, tokens)
                req.set_output(out)
            nan = int(torch.isnan(out).sum())
        except Exception as exc:  # the request failed; the SDK has recorded it
            error = f"{type(exc).__name__}: {exc}"
        _emit(
            "served",
            request_id=spec.request_id,
            pool=args.pool,
            bundle=args.bundle,
            model=spec.model,
            traffic_class=spec.traffic_class,
            incident=spec.incident,
            expected=expected,
            error=error,
            nan=nan,
            ms=round((time.perf_counter() - t0) * 1000, 1),
        )
    tracker.flush()
    stats = tracker.stats()
    tracker.shutdown()
    _emit("done", stats=stats)


def main(argv: list[str] | None = None) -> None:
    """Parse the worker's arguments and serve."""
    parser = argparse.ArgumentParser(prog="python -m inferensics.demo.worker", description=__doc__)
    parser.add_argument("--pool", required=True, choices=sorted(WORKER_MODELS))
    parser.add_argument("--bundle", required=True)
    parser.add_argument("--service", required=True, help="collector service URL")
    parser.add_argument("--token", default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--duration", type=float, default=120.0)
    parser.add_argument("--rate", type=float, default=2.0)
    parser.add_argument("--start-at", type=float, default=0.0, help="wall-clock time of the run's t=0")
    parser.add_argument("--sample-rate", type=float, default=0.05, help="fraction of requests profiled")
    args = parser.parse_args(argv)
    if not args.start_at:
        args.start_at = time.time()
    # Raised inside Inductor's own imports on torch 2.13; noise on the demo's console.
    warnings.filterwarnings("ignore", message="`torch.jit.script", category=DeprecationWarning)
    serve(args)


if __name__ == "__main__":
    main()
