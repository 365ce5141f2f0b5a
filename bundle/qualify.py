"""Qualification: compile a model under one shape policy, serve every shape of the distribution, measure.

One :func:`run_policy` call starts from an empty compile cache (its own cache directory, Dynamo reset), so
its figures are cold-start figures: time to first served request per shape, compile seconds, steady
latency, the graphs that served, graph breaks, guard failures, and the Mega-Cache blob it leaves.
With ``blob`` it starts from that blob instead (the bundle's warm start) and records each graph's cache hit.
With ``check`` it also judges each shape's compiled output against eager (:mod:`inferensics.bundle.accuracy`).
"""

from __future__ import annotations

import functools
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from inferensics.bundle import graph_breaks, torch_adapter
from inferensics.bundle.accuracy import ShapeAccuracy, copy_tensors
from inferensics.bundle.capture import GraphCapture, RecordingBackend
from inferensics.bundle.latency import LatencyEstimate, synchronised
from inferensics.schema.locations import entry_codes

MakeInputs = Callable[[tuple[int, ...]], tuple[Any, ...]]
CheckOutput = Callable[[Any, tuple[Any, ...]], ShapeAccuracy]
"""Judges a compiled output given the inputs that produced it (:meth:`inferensics.bundle.accuracy.Reference.check`)."""


@dataclass
class ShapeRun:
    """One shape served under a policy."""

    shape: tuple[int, ...]
    """The request's shape."""
    served_as: tuple[int, ...]
    """The shape it was served at (padded to its bucket under a bucketed policy)."""
    first_s: float = 0.0
    """Time to the first served request of this shape (compile included, if any)."""
    compile_s: float = 0.0
    """Compile seconds spent during that first request."""
    latency_s: float = 0.0
    """Median steady-state latency (calls that compiled left out)."""
    graphs: list[int] = field(default_factory=list)
    """Indices of the graphs that served it (empty: it ran eagerly)."""
    new_graphs: int = 0
    """Graphs compiled for it (specializations it added)."""
    accuracy: ShapeAccuracy | None = None
    """Its compiled output against eager and fp64 (``None``: the run did not check)."""


@dataclass
class PolicyRun:
    """A whole policy run."""

    name: str
    shapes: list[ShapeRun]
    graphs: list[GraphCapture]
    blob: bytes
    graph_breaks: list[dict[str, str]]
    guard_failures: list[str]
    cache_dir: str
    latency: LatencyEstimate | None = None
    """Traffic-weighted steady latency measured interleaved with the other policies (``None``: not compared)."""
    same_as: str = ""
    """The policy this one is identical to (bucketed where every shape sits on an edge: static)."""

    @property
    def compile_s(self) -> float:
        """Total compile seconds."""
        return sum(g.compile_s for g in self.graphs)


def _median_latency(fn: Callable[[], Any], repeats: int, output: Any) -> tuple[float, Any]:
    """The median of ``repeats`` timed calls that compiled nothing (a call that did is repeated, up to ``repeats``
    more times), and the last call's output (``output`` when none ran)."""
    times: list[float] = []
    for _ in range(2 * repeats):
        if len(times) >= repeats:
            break
        before = torch_adapter.frames_compiled()
        t0 = time.perf_counter()
        output = fn()
        elapsed = time.perf_counter() - t0
        if torch_adapter.frames_compiled() == before:
            times.append(elapsed)
    return (statistics.median(times) if times else 0.0), output


def warm_up(
    model: Any,
    make_inputs: MakeInputs,
    shape: tuple[int, ...],
    *,
    compile_args: Mapping[str, Any],
    config_patches: Mapping[str, Any],
) -> None:
    """Compile and call ``model`` once at ``shape`` into a scratch cache that is then dropped, Dynamo reset after.

    The first compile in a process also pays the compiler's one-time start (its imports, the compile worker pool,
    the C++ or Triton toolchain): run before the policy runs, it charges that to none of them, so the first policy
    measured (the as-built one, which the advice reuses) compiles in the same state as the others.
    """
    scratch = tempfile.mkdtemp(prefix="inferensics-bundle-warmup-")
    try:
        with torch_adapter.temporary_cache_dir(scratch):
            torch_adapter.reset_compiler()
            backend = functools.partial(torch_adapter.compile_fx, config_patches=config_patches)
            compiled: Callable[..., Any] = torch.compile(
                model,
                backend=backend,
                dynamic=compile_args.get("dynamic"),
                fullgraph=bool(compile_args.get("fullgraph")),
            )
            with torch.inference_mode():
                compiled(*make_inputs(shape))
    finally:
        torch_adapter.reset_compiler()
        shutil.rmtree(scratch, ignore_errors=True)


def run_policy(
    name: str,
    model: Any,
    make_inputs: MakeInputs,
    shapes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
    *,
    compile_args: Mapping[str, Any],
    config_patches: Mapping[str, Any],
    repeats: int = 3,
    blob: bytes | None = None,
    check: CheckOutput | None = None,
    on_shape: Callable[[ShapeRun], None] | None = None,
) -> PolicyRun:
    """Compile ``model`` from an empty cache (or from ``blob``) and serve each ``(shape, served_as)``; with
    ``check``, judge each shape's last compiled output on the same inputs (outside the timed calls); ``on_shape``
    is told of each shape once it is served."""
    cache_dir = tempfile.mkdtemp(prefix="inferensics-bundle-cache-")
    try:
        return _run_policy(
            name, model, make_inputs, shapes, compile_args=compile_args, config_patches=config_patches,
            repeats=repeats, blob=blob, check=check, cache_dir=cache_dir, on_shape=on_shape,
        )  # fmt: skip
    except BaseException:  # a failed run returns no PolicyRun to clean up after: its cache goes here
        shutil.rmtree(cache_dir, ignore_errors=True)
        raise


def _run_policy(
    name: str,
    model: Any,
    make_inputs: MakeInputs,
    shapes: Sequence[tuple[tuple[int, ...], tuple[int, ...]]],
    *,
    compile_args: Mapping[str, Any],
    config_patches: Mapping[str, Any],
    repeats: int,
    blob: bytes | None,
    check: CheckOutput | None,
    cache_dir: str,
    on_shape: Callable[[ShapeRun], None] | None,
) -> PolicyRun:
    with torch_adapter.temporary_cache_dir(cache_dir):
        torch_adapter.reset_compiler()
        torch_adapter.clear_cache_artifact_record()
        if blob is not None:
            torch_adapter.load_cache_artifacts(blob)
        entries = entry_codes(model, torch_adapter.inline_wrapper_code())
        backend = RecordingBackend(config_patches=config_patches, cache_dir=cache_dir, entries=entries,
                                   record_shapes=True)  # fmt: skip
        compiled: Callable[..., Any] = torch.compile(
            model, backend=backend, dynamic=compile_args.get("dynamic"), fullgraph=bool(compile_args.get("fullgraph"))
        )
        runs: list[ShapeRun] = []
        breaks: list[dict[str, str]] = []
        failures: list[str] = []
        with torch_adapter.capture_compiles() as cap, torch.inference_mode():
            for shape, served in shapes:
                inputs = make_inputs(served)
                calls_before = [g.calls for g in backend.graphs]
                n_before = len(backend.graphs)
                t0 = time.perf_counter()
                output = compiled(*inputs)
                first = time.perf_counter() - t0
                new = backend.graphs[n_before:]
                used = [
                    g.index
                    for g in backend.graphs
                    if g.calls > (calls_before[g.index] if g.index < len(calls_before) else 0)
                ]
                call = synchronised(functools.partial(compiled, *inputs), inputs)
                latency, output = _median_latency(call, repeats, output)
                accuracy = None
                if check is not None:
                    # A steady call's output, judged before the next compiled call can reuse its buffers (CUDA
                    # graphs), against the inputs as they were before it: a model that changes its inputs in place
                    # gave the references inputs changed once more than the judged call's, a "wrong" output.
                    before = copy_tensors(inputs)
                    output = compiled(*inputs)
                    accuracy = check(output, before)
                del output
                runs.append(
                    run := ShapeRun(
                        shape=shape,
                        served_as=served,
                        first_s=first,
                        compile_s=sum(g.compile_s for g in new),
                        latency_s=latency,
                        graphs=used,
                        new_graphs=len(new),
                        accuracy=accuracy,
                    )
                )
                if on_shape is not None:
                    on_shape(run)
            saved = torch_adapter.save_cache_artifacts()
        for event, md, payload in cap.events:
            if event == "dynamo_graph_break_reason":
                breaks.append(graph_breaks.break_record(payload))
            elif event == "recompile_reasons":
                failures.extend(str(r) for r in (torch_adapter.payload_json(payload) or {}).get("reasons", []) or [])
                if not torch_adapter.payload_json(payload):
                    failures.append(payload.strip()[:300])
            elif event == "dynamo_cpp_guards_str":
                cid = torch_adapter.frame_compile_id(md)
                for g in backend.graphs:
                    if g.compile_id == cid and not g.guards:
                        g.guards = payload
    return PolicyRun(name, runs, backend.graphs, saved, graph_breaks.distinct(breaks), failures, cache_dir)
