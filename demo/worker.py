"""One serving worker of the demo: a process that serves one pool's share of the workload with one bundle.

Run by :mod:`inferensics.demo.runner` as ``python -m inferensics.demo.worker ...``. Each worker rebuilds the
seeded workload, keeps the requests that are its own, verifies and loads its release bundle (built by
:mod:`inferensics.demo.bundles`; signature, builder, hashes and compatibility checked before anything of it
loads), and serves the requests at their arrival times through the host SDK (``instrument`` +
``tracker.compile(..., bundle=...)`` + ``tracker.request``), exporting OTLP to the service. Every compile is
a bundle hit (a graph the bundle holds, served from its artifacts) or a recorded bundle miss naming the
differing factors, compiled within :data:`MISS_BUDGET_COMPILES`.

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

from inferensics.demo.workload import (
    CANDIDATE,
    DECODER_MODEL,
    HF_MODEL,
    POOL_A,
    POOL_B,
    RequestSpec,
    Workload,
    build_workload,
)

WORKER_MODELS: dict[str, tuple[str, ...]] = {POOL_A: (DECODER_MODEL,), POOL_B: (DECODER_MODEL, HF_MODEL)}
"""The models each pool serves."""


MISS_BUDGET_COMPILES = 64
"""Compiles allowed outside the bundle per :data:`MISS_BUDGET_S`: the policy's recompile limit already bounds
the compiles per frame, so the budget never turns a predicted compile into an eager run (the dispatch the
demo is checked against)."""
MISS_BUDGET_S = 3600.0
"""Compile-seconds allowed outside the bundle, and the budget's window."""


def worker_requests(workload: Workload, pool: str, bundle: str) -> list[RequestSpec]:
    """The requests one worker serves: its pool's, or the mirrored copies for the candidate."""
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

    from inferensics import bundle as release
    from inferensics.collector.host import CaptureRules, SdkConfig, instrument
    from inferensics.demo.serving import ModelServer, apply_dynamo_policy, request_tokens

    apply_dynamo_policy()
    if not torch.cuda.is_available():
        # Three workers share the CPU cores: one intra-op thread each avoids OpenMP spin-waiting on busy cores.
        torch.set_num_threads(1)
    try:
        loaded = release.load(args.bundle_dir, release.Keyring.load(args.keyring))
    except release.BundleError as exc:
        raise SystemExit(f"error: the {args.bundle} bundle was refused: {exc}") from None
    workload = build_workload(args.seed, args.duration, args.rate)
    specs = worker_requests(workload, args.pool, args.bundle)
    # Failing requests' inputs are captured everywhere; the canary captures all of its (mirrored) traffic, so
    # any request it serves differently can be replayed against its bundle.
    capture = CaptureRules(enabled=True, rate=1.0 if args.bundle == CANDIDATE else 0.0)
    # The demo's pools stand in for GPU hosts, where every output is fingerprinted (a CPU host's default is
    # one request in 32): every NaN request is seen, and the canary pairs every mirrored request.
    config = SdkConfig(sample_rate=args.sample_rate, capture=capture, fingerprint_rate=1.0)
    tracker = instrument(
        service_url=args.service,
        host=host_name(args.pool, args.bundle),
        hw_pool=args.pool,
        model=DECODER_MODEL,
        bundle_id=loaded.bundle_id,
        token=args.token,
        config=config,
    )
    budget = release.CompileBudget(MISS_BUDGET_COMPILES, MISS_BUDGET_S, MISS_BUDGET_S)

    def compile_fn(fn: Any, model: str) -> Any:
        # name=: the HF scorer's compile, cache and graph-break rows are its own, not the decoder's
        return tracker.compile(fn, name=model, bundle=loaded, on_bundle_miss="compile", compile_budget=budget)

    server = ModelServer(compile_fn, models=WORKER_MODELS[args.pool])
    _emit("start", total=len(specs), bundle_id=loaded.bundle_id, device=str(server.device), pid=os.getpid())
    for spec in specs:
        delay = args.start_at + spec.at_s - time.time()
        if delay > 0:
            time.sleep(delay)
        expected = server.dispatch.expect(spec)
        _emit("begin", request_id=spec.request_id, model=spec.model, expected=expected)
        tokens = request_tokens(spec, server.vocab_size)
        inputs, page = {"tokens": tokens}, None
        if spec.incident == "nan":  # it resumes from a corrupt cache page: an input of the request
            page = inputs["k_cache"] = server.corrupt_page(spec, tokens)
        t0, error, nan = time.perf_counter(), "", 0
        try:
            with tracker.request(
                spec.request_id,
                model=spec.model,
                traffic_class=spec.traffic_class,
                tenant=spec.tenant,
                shape=_shape(spec),
                inputs=inputs,
            ) as req:
                out = server.serve(spec, tokens, page)
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
    parser.add_argument("--bundle", required=True, help="bundle name (baseline or candidate)")
    parser.add_argument("--bundle-dir", required=True, help="the release bundle's folder")
    parser.add_argument("--keyring", required=True, help="trusted builders' public keys (file or folder)")
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
