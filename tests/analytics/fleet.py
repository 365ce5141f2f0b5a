"""A small, seeded fleet of events for the analytics tests, kept as Polars frames.

Tests insert these frames into a real embedded store and compute their expected answers from the same
frames with Polars. Two ISO weeks (2026-W09 and 2026-W10) of traffic: 3 models × 2 pools × 2 traffic
classes, two bundles of ``llama`` (a baseline and a slower, drifting candidate), a recompile storm on
2026-03-04 09:00 in pool ``h200-a``, and rows with missing values (empty bundle, digest, reason...).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta

import numpy as np
import polars as pl

from inferensics.schema import columns as col
from inferensics.schema.arrow import conform
from inferensics.schema.events import (
    BlobIndexEvent,
    BundleEvent,
    CacheEvent,
    CompileEvent,
    GraphBreakEvent,
    GuardFailureEvent,
    KernelInventoryEvent,
    KernelTimingEvent,
    RecompileEvent,
    RequestEvent,
)
from inferensics.schema.store import Store
from inferensics.schema.table import Event
from tests.seeding import seed

T0 = datetime(2026, 2, 23, tzinfo=UTC)
"""Monday of 2026-W09; the fleet covers T0 .. T0 + 14 days."""
W10 = datetime(2026, 3, 2, tzinfo=UTC)
STORM_HOUR = datetime(2026, 3, 4, 9, tzinfo=UTC)
MODELS = ("llama", "mistral", "qwen")
POOLS = ("h200-a", "h200-b")
CLASSES = ("interactive", "batch")
BASELINE, CANDIDATE = "bundle-base", "bundle-cand"


@dataclass(frozen=True)
class Fleet:
    """Frames of every table the analytics read, named as the tables."""

    requests: pl.DataFrame
    compiles: pl.DataFrame
    recompiles: pl.DataFrame
    guard_failures: pl.DataFrame
    graph_breaks: pl.DataFrame
    cache_events: pl.DataFrame
    kernels: pl.DataFrame
    kernel_timings: pl.DataFrame
    bundles: pl.DataFrame
    blobs: pl.DataFrame


MODELS_BY_FIELD: dict[str, type[Event]] = {
    "requests": RequestEvent,
    "compiles": CompileEvent,
    "recompiles": RecompileEvent,
    "guard_failures": GuardFailureEvent,
    "graph_breaks": GraphBreakEvent,
    "cache_events": CacheEvent,
    "kernels": KernelInventoryEvent,
    "kernel_timings": KernelTimingEvent,
    "bundles": BundleEvent,
    "blobs": BlobIndexEvent,
}


def _ts(rng: np.random.Generator, n: int, start: datetime, seconds: float) -> list[datetime]:
    offs = np.sort(rng.uniform(0, seconds, n))
    return [start + timedelta(microseconds=int(o * 1e6)) for o in offs]


def make_fleet(seed: int = 7, n_requests: int = 6000) -> Fleet:
    """The seeded fleet (see the module docstring)."""
    rng = np.random.default_rng(seed)
    span = 14 * 86400.0
    n = n_requests
    ts = _ts(rng, n, T0, span)
    model = rng.choice(MODELS, n)
    pool = rng.choice(POOLS, n)
    tclass = rng.choice(CLASSES, n, p=[0.7, 0.3])
    bundle = np.where(
        model == "llama", rng.choice([BASELINE, CANDIDATE], n), np.where(rng.random(n) < 0.1, "", "bundle-" + model)
    )
    cand = bundle == CANDIDATE
    latency = rng.lognormal(np.log(20), 0.4, n) * np.where(cand, 1.3, 1.0)
    outcome = rng.choice(["hit", "compile", "recompile", "fallback", "eager"], n, p=[0.85, 0.03, 0.05, 0.05, 0.02])
    status = np.where(rng.random(n) < np.where(cand, 0.06, 0.02), "error", "ok")
    recompiles = np.where(outcome == "recompile", rng.integers(1, 3, n), 0).astype(np.uint8)
    cache_status = np.where(
        np.isin(outcome, ["compile", "recompile"]), rng.choice(["hit", "miss", "mixed", "bypass"], n), "none"
    )
    fallback_reason = np.where(
        outcome == "fallback", rng.choice(["graph_break:GB0170", "recompile_limit", "compile_error", ""], n), ""
    )
    compile_ms = np.where(np.isin(outcome, ["compile", "recompile"]), rng.uniform(500, 5000, n), 0.0)
    digest = np.where(rng.random(n) < 0.8, np.char.add("in-", rng.integers(0, 300, n).astype(str)), "")
    agree = rng.random(n) < np.where(cand, 0.9, 1.0)
    argmax = np.where(agree, np.char.add("out-", digest), np.char.add("bad-", rng.integers(0, 9, n).astype(str)))
    fp_nan = np.where(cand & (rng.random(n) < 0.03), 2, 0).astype(np.uint32)
    ids = [f"req-{i:05d}" for i in range(n)]
    host = [f"host-{p[-1]}{i % 2}" for i, p in enumerate(pool)]
    graph_keys = [
        [f"gk-{m}-{i % 4}"] if o != "eager" else [] for i, (m, o) in enumerate(zip(model, outcome, strict=True))
    ]
    requests = pl.DataFrame(
        {
            col.REQUEST_ID: ids,
            col.TS: ts,
            col.HOST: host,
            col.MODEL: model,
            col.HW_POOL: pool,
            col.TRAFFIC_CLASS: tclass,
            col.BUNDLE_ID: bundle,
            col.LATENCY_MS: latency.astype(np.float32),
            col.STATUS: status,
            col.OUTCOME: outcome,
            col.CACHE_STATUS: cache_status,
            col.FALLBACK_REASON: fallback_reason,
            col.COMPILE_MS: compile_ms.astype(np.float32),
            col.RECOMPILES: recompiles,
            col.GRAPH_KEYS: graph_keys,
            col.GRAPH_ARTIFACTS: [[f"art-{k[0]}"] if k else [] for k in graph_keys],
            col.GRAPH_CALLS: [[3] if k else [] for k in graph_keys],
            col.GRAPH_US: [[1500] if k else [] for k in graph_keys],
            col.INPUT_DIGEST: digest,
            col.FP_ARGMAX_DIGEST: np.where(digest == "", "", argmax),
            col.FP_NAN: fp_nan,
            col.FP_MEAN: (rng.normal(0, 1, n) + np.where(cand, 0.8, 0.0)).astype(np.float32),
            col.FP_STD: rng.uniform(1, 2, n).astype(np.float32),
            col.SAMPLED: [i % 500 == 0 for i in range(n)],
            col.CAPTURE_BLOB: ["blob-inputs-0" if i == 0 else "" for i in range(n)],
        },
        schema_overrides={col.GRAPH_CALLS: pl.List(pl.UInt32), col.GRAPH_US: pl.List(pl.UInt32)},
    )
    # A storm: 40 recompiling requests in one hour of one pool.
    storm_ids = [f"storm-{i:02d}" for i in range(40)]
    storm = pl.DataFrame(
        {
            col.REQUEST_ID: storm_ids,
            col.TS: _ts(rng, 40, STORM_HOUR, 3000),
            col.HOST: "host-a0",
            col.MODEL: "qwen",
            col.HW_POOL: "h200-a",
            col.TRAFFIC_CLASS: "interactive",
            col.BUNDLE_ID: "bundle-qwen",
            col.LATENCY_MS: np.float32(900.0),
            col.STATUS: "ok",
            col.OUTCOME: "recompile",
            col.CACHE_STATUS: "miss",
            col.COMPILE_MS: np.float32(4000.0),
            col.RECOMPILES: np.uint8(1),
        }
    )
    requests = pl.concat([requests, storm], how="diagonal_relaxed").sort(col.TS)
    rec = requests.filter(pl.col(col.RECOMPILES) > 0)
    reasons = ["tensor 'x' size mismatch at index 0", "___check_obj_id(self.cfg)", "tensor 'mask' dtype mismatch"]
    recompiles_frame = rec.select(
        col.TS,
        col.HOST,
        col.MODEL,
        col.HW_POOL,
        col.TRAFFIC_CLASS,
        col.REQUEST_ID,
        pl.lit("model.py:10:forward").alias(col.CODE_LOCATION),
        pl.when(pl.col(col.REQUEST_ID).str.starts_with("storm"))
        .then(pl.lit(reasons[0]))
        .otherwise(pl.lit(reasons[1]) if seed % 2 else pl.lit(reasons[2]))
        .alias(col.REASON),
    ).with_columns(
        pl.when(pl.int_range(pl.len()) % 3 == 0)
        .then(pl.lit(reasons[1]))
        .otherwise(pl.col(col.REASON))
        .alias(col.REASON)
    )
    guards = rec.select(
        col.TS,
        col.HOST,
        col.MODEL,
        col.HW_POOL,
        col.REQUEST_ID,
        pl.lit("model.py:10:forward").alias(col.CODE_LOCATION),
        pl.when(pl.int_range(pl.len()) % 2 == 0)
        .then(pl.lit("tensor 'x' size mismatch at index 0"))
        .otherwise(pl.lit("___check_obj_id(self.cfg)"))
        .alias(col.REASON),
    )
    # Compiles: one per compiling request; graph keys gk-<model>-0..3 first seen over the two weeks, plus
    # new keys in W10 for mistral on pool b only, and one failed compile without a graph key.
    comp = requests.filter(
        pl.col(col.OUTCOME).is_in(["compile", "recompile"]) & (pl.col(col.GRAPH_KEYS).list.len() > 0)
    )
    compiles = comp.select(
        col.TS,
        col.HOST,
        col.MODEL,
        col.HW_POOL,
        col.BUNDLE_ID,
        col.REQUEST_ID,
        pl.col(col.GRAPH_KEYS).list.first().alias(col.GRAPH_KEY),
        pl.col(col.GRAPH_ARTIFACTS).list.first().alias(col.ARTIFACT_ID),
        pl.lit("model.py:10:forward").alias(col.CODE_LOCATION),
        (pl.col(col.COMPILE_MS) / 1000).alias(col.ENTIRE_FRAME_S),
        pl.when(pl.col(col.OUTCOME) == "recompile")
        .then(pl.lit("recompile"))
        .otherwise(pl.lit("first"))
        .alias(col.TRIGGER),
        pl.col(col.CACHE_STATUS),
        pl.lit("0/1").alias(col.COMPILE_ID),
    )
    novel = pl.DataFrame(
        {
            col.TS: [W10 + timedelta(days=2, hours=h) for h in range(3)],
            col.HOST: "host-b0",
            col.MODEL: "mistral",
            col.HW_POOL: "h200-b",
            col.GRAPH_KEY: [f"gk-mistral-new-{i}" for i in range(3)],
            col.CODE_LOCATION: "mistral.py:5:forward",
            col.ENTIRE_FRAME_S: np.float32(12.5),
            col.TRIGGER: "first",
        }
    )
    failed = pl.DataFrame(
        {
            col.TS: [W10 + timedelta(hours=5)],
            col.HOST: ["host-a1"],
            col.MODEL: ["llama"],
            col.HW_POOL: ["h200-a"],
            col.OUTCOME: ["failed"],
            col.FAIL_TYPE: ["Unsupported"],
        }
    )
    compiles = pl.concat([compiles, novel, failed], how="diagonal_relaxed")
    breaks = pl.DataFrame(
        {
            col.TS: _ts(rng, 60, T0, span),
            col.HOST: "host-a0",
            col.MODEL: rng.choice(MODELS, 60),
            col.HW_POOL: rng.choice(POOLS, 60),
            col.REQUEST_ID: [f"req-{i:05d}" if i % 4 else "" for i in range(60)],
            col.REGISTRY_ID: rng.choice(["GB0170", "GB0042", ""], 60, p=[0.6, 0.3, 0.1]),
            col.USER_FRAME: rng.choice(["model.py:33 in forward", "attn.py:12 in attend"], 60),
            col.CODE_LOCATION: "model.py:10:forward",
            col.REASON: "data-dependent branching",
        }
    ).with_columns(
        pl.col(col.REGISTRY_ID)
        .replace_strict({"GB0170": "Data-dependent branching", "GB0042": "Unsupported call", "": ""})
        .alias(col.BREAK_TYPE)
    )
    m = 400
    caches = rng.choice(["fx_graph", "triton", "autotune"], m)
    result = rng.choice(["hit", "miss", "bypass"], m, p=[0.6, 0.3, 0.1])
    cache_events = pl.DataFrame(
        {
            col.TS: _ts(rng, m, T0, span),
            col.HOST: rng.choice(["host-a0", "host-b1"], m),
            col.MODEL: rng.choice(MODELS, m),
            col.HW_POOL: rng.choice(POOLS, m),
            col.BUNDLE_ID: rng.choice(["bundle-llama", "bundle-qwen", ""], m),
            col.CACHE: caches,
            col.RESULT: result,
            col.REASON: np.where(result == "hit", "", rng.choice(["cold", "key changed", ""], m)),
            col.TIME_SAVED_MS: np.where(result == "hit", rng.uniform(100, 2000, m), 0.0).astype(np.float32),
            col.ENTRY_BYTES: np.where(result == "miss", rng.integers(1000, 100000, m), 0).astype(np.uint64),
        }
    )
    # Only llama's triton cache never hits: its cold-miss cost is unknown (null).
    cache_events = cache_events.filter(
        ~((pl.col(col.MODEL) == "llama") & (pl.col(col.CACHE) == "triton") & (pl.col(col.RESULT) == "hit"))
    )
    kernels = pl.DataFrame(
        {
            col.TS: [T0] * 3,
            col.ARTIFACT_ID: ["art-gk-llama-0"] * 2 + ["art-gk-qwen-1"],
            col.KERNEL_NAME: ["triton_poi_fused_add_0", "triton_red_fused_sum_1", "cpp_fused_mul_0"],
            col.KERNEL_BACKEND: ["triton", "triton", "cpp"],
            col.GRAPH_KEY: ["gk-llama-0", "gk-llama-0", "gk-qwen-1"],
            col.POST_GRAD_NODES: [["add"], ["sum_1", "mul"], ["mul"]],
            col.SOURCE_LINES: [["model.py:20"], ["model.py:21", "model.py:22"], []],
        }
    )
    first_llama = requests.filter((pl.col(col.MODEL) == "llama") & (pl.col(col.GRAPH_KEYS) == ["gk-llama-0"])).row(
        0, named=True
    )
    timings = pl.DataFrame(
        {
            col.TS: [first_llama[col.TS]] * 3,
            col.REQUEST_ID: [first_llama[col.REQUEST_ID]] * 3,
            col.HOST: first_llama[col.HOST],
            col.MODEL: "llama",
            col.HW_POOL: first_llama[col.HW_POOL],
            col.ARTIFACT_ID: ["art-gk-llama-0", "art-gk-llama-0", ""],
            col.KERNEL_NAME: ["triton_poi_fused_add_0", "triton_poi_fused_add_0", "aten::copy_"],
            col.DEVICE: "cuda:0",
            col.CALLS: np.array([2, 1, 4], dtype=np.uint32),
            col.TOTAL_US: [10.5, 4.0, 7.0],
        }
    )
    bundles = pl.DataFrame(
        {
            col.TS: [T0] * 3,
            col.BUNDLE_ID: [BASELINE, CANDIDATE, "bundle-qwen"],
            col.BUNDLE_NAME: ["baseline", "canary", "qwen"],
            col.MODEL: ["llama", "llama", "qwen"],
            col.TORCH_VERSION: "2.11.0",
            col.DEVICE_NAME: "NVIDIA H200",
        }
    )
    blobs = pl.DataFrame(
        {
            col.TS: [T0],
            col.SHA256: ["blob-inputs-0"],
            col.SIZE_BYTES: np.array([4096], dtype=np.uint64),
            col.KIND: ["inputs"],
        }
    )
    frames = (requests, compiles, recompiles_frame, guards, breaks, cache_events, kernels, timings, bundles, blobs)
    return Fleet(*(_complete(MODELS_BY_FIELD[f.name], x) for f, x in zip(fields(Fleet), frames, strict=True)))


def _complete(model: type[Event], frame: pl.DataFrame) -> pl.DataFrame:
    """The frame as stored: nulls (from concatenating frames of different columns) and absent columns
    filled with the model's defaults, dictionary columns read back as strings."""
    fills = []
    for name in frame.columns:
        default = model.model_fields[name].get_default(call_default_factory=True)
        if frame.get_column(name).null_count():
            value = list(default) if isinstance(default, tuple) else default
            fills.append(pl.col(name).fill_null(pl.lit(value, frame.schema[name])))
    filled = frame.with_columns(fills) if fills else frame
    stored = pl.from_arrow(conform(model, filled.to_arrow()))
    assert isinstance(stored, pl.DataFrame)
    return stored.with_columns(
        pl.col(pl.Categorical).cast(pl.String), pl.col(pl.List(pl.Categorical)).cast(pl.List(pl.String))
    )


def load_fleet(store: Store, fleet: Fleet) -> None:
    """Insert every frame of ``fleet`` (TTL merges stopped: the fleet lies in the past)."""
    seed(store, frames={MODELS_BY_FIELD[f.name]: getattr(fleet, f.name) for f in fields(fleet)})
