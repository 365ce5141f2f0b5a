"""The event models: one frozen pydantic model per record kind, one ClickHouse table each.

Identity rules (ARCHITECTURE.md decision 3): joins across hosts use content hashes and stable names, never
Dynamo's process-local compile ids. ``graph_key`` is the FX-graph-cache key joined with the code location
(``sha256(fx_cache_key + "@" + code_location)`` when the cache key is known, else a digest of the Dynamo
graph); ``artifact_id`` is the sha256 of the generated output code; ``bundle_id`` the digest of a bundle
manifest. ``compile_id`` is kept for reading a host's own logs, not for joining.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import ClassVar, Final, Literal

from pydantic import Field, model_validator

from inferensics.schema import columns as col
from inferensics.schema.table import Event, Index, TableSpec
from inferensics.schema.types import (
    F32,
    F64,
    U8,
    U16,
    U32,
    U64,
    Attrs,
    Bytes,
    Digest,
    Dim,
    DimList,
    Flag,
    Text,
    TextList,
    Timestamp,
    U32List,
)

# Request outcomes: how the compiled program served a request (decision 4).
Outcome = Literal["hit", "compile", "recompile", "fallback", "eager", "error"]
OUTCOMES: tuple[str, ...] = ("hit", "compile", "recompile", "fallback", "eager", "error")
GUARD_OUTCOMES: tuple[str, ...] = ("hit", "miss", "first", "none", "mixed", "unknown")
CACHE_STATUSES: tuple[str, ...] = ("none", "hit", "miss", "bypass", "mixed")
CACHES: tuple[str, ...] = ("fx_graph", "aot_autograd", "triton", "autotune", "dynamo")
CACHE_RESULTS: tuple[str, ...] = ("hit", "miss", "bypass")
FP_OK: Final = "ok"
"""``fp_status`` of a request whose ``fp_*`` columns hold its output's fingerprint."""
FP_UNSAMPLED: Final = "unsampled"
"""``fp_status`` of a request the fingerprint sampling rule (``fp_rate``) skipped."""
FP_FAILED: Final = "failed"
"""``fp_status`` of a request whose output could not be fingerprinted (counted by the SDK)."""
FP_NONE: Final = "none"
"""``fp_status`` of a request that gave ``set_output`` no output."""
FP_STATUSES: tuple[str, ...] = (FP_OK, FP_UNSAMPLED, FP_FAILED, FP_NONE)
FP_COMPARABLE: tuple[str, ...] = (FP_OK, "")
"""``fp_status`` values whose ``fp_*`` columns may be compared: fingerprinted, or written before the column
existed (every request with an output was fingerprinted then)."""
NO_TS: Final = datetime(1970, 1, 1, tzinfo=UTC)
"""What a timestamp column that was not recorded holds (the engine's default: rows stored before it existed)."""
KERNEL_DECISIONS_ARTIFACT = "inferensics_kernel_providers"
"""Structured-trace artifact in which the kernel registry writes a compile's provider decisions (a JSON list
of ``{op, provider, signature, bucket, skipped: [{provider, reason}], compiled, fallback, compile_id}``); the
compile assembler turns it into ``CompileEvent.kernel_providers`` and ``KernelDecisionEvent`` rows."""


class RequestEvent(Event):
    """One served request: which compiled graphs and artifacts served it and how dispatch went."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="requests",
        # Traffic class before pool: a canary (one model and class, every pool) reads one run of rows per
        # part instead of one per pool (migration 6 has the measurements).
        order_by=(col.MODEL, col.TRAFFIC_CLASS, col.HW_POOL, col.TS),
        ttl_days=30,
        shard_key=f"cityHash64({col.REQUEST_ID})",
        indexes=(Index("idx_request_id", col.REQUEST_ID, "bloom_filter(0.001)", 4),),
    )

    request_id: Text
    """Caller-given request id, unique per request; the drill-down and replay key."""
    ts: Timestamp
    """When the request started (UTC)."""
    host: Dim
    """Serving host name."""
    model: Dim
    """Model name as the serving process labels it."""
    hw_pool: Dim
    """Hardware pool label of the serving worker (for example ``h200-a``)."""
    traffic_class: Dim
    """Traffic class (for example ``interactive``, ``batch``, ``shadow``)."""
    tenant: Dim = ""
    """Tenant the request belongs to; empty when the service is single-tenant."""
    bundle_id: Dim = ""
    """Digest of the release bundle manifest that served it; empty when no bundle is registered."""
    shape: Text = ""
    """Input shape signature, e.g. ``2x128`` (batch × sequence) or ``decode:8x1@512``."""
    shape_bucket: Dim = ""
    """Bucket of ``shape`` under the host's bucketing policy, e.g. ``b<=4,s<=256``."""
    latency_ms: F32 = 0.0
    """Wall time of the request in milliseconds, compile time included."""
    status: Dim = "ok"
    """``ok`` or ``error``."""
    error: Text = ""
    """Exception type and message when ``status`` is ``error``."""
    outcome: Dim = "hit"
    """How it was served: ``hit`` (existing graphs), ``compile`` (first compile), ``recompile``,
    ``fallback`` (ran eagerly after a graph break, the recompile limit or an error), ``eager``
    (never compiled by policy) or ``error``."""
    guard_outcome: Dim = "hit"
    """Guard evaluation over the request's frame entries: ``hit``, ``miss``, ``first`` (no entry yet),
    ``mixed`` (hits and misses), ``none`` (no compiled frame was entered) or ``unknown`` (a request recovered from
    the crash journal of a process that died in it)."""
    cache_status: Dim = "none"
    """Compile-cache status of compiles this request triggered: ``none`` (no compile), ``hit``, ``miss``,
    ``bypass`` or ``mixed``."""
    fallback_reason: Dim = ""
    """Why it ran eagerly (``graph_break:GB0170``, ``recompile_limit``, ``compile_error``, ``policy``)."""
    compile_ms: F32 = 0.0
    """Compile time spent inside this request, in milliseconds."""
    recompiles: U8 = 0
    """Number of recompiles this request triggered."""
    graph_keys: DimList = ()
    """Stable keys of the compiled graphs executed, in first-call order."""
    graph_artifacts: TextList = ()
    """Artifact id (sha256 of output code) of each executed graph, parallel to ``graph_keys``."""
    graph_calls: U32List = ()
    """Number of calls of each executed graph, parallel to ``graph_keys``."""
    graph_us: U32List = ()
    """Host-side wall time in microseconds spent in each executed graph, parallel to ``graph_keys`` (the host
    SDK times a graph's first 4 calls in a request and every 16th after them, and scales the sum to all calls)."""
    input_digest: Digest = ""
    """Digest of the request's inputs; equal digests across bundles allow output comparison."""
    fp_argmax_digest: Digest = ""
    """Digest of the argmax token ids of the output (canary agreement)."""
    fp_argmax_head: U32List = ()
    """The first argmax token ids of the output (at most 16), for partial agreement."""
    fp_nan: U32 = 0
    """Number of NaN values in the output."""
    fp_inf: U32 = 0
    """Number of ±inf values in the output."""
    fp_mean: F32 = 0.0
    """Mean of the finite output values."""
    fp_std: F32 = 0.0
    """Standard deviation of the finite output values."""
    fp_absmax: F32 = 0.0
    """Largest absolute finite output value."""
    fp_status: Dim = ""
    """Whether the ``fp_*`` columns hold the output's fingerprint: ``ok``; ``unsampled`` (the sampling rule of
    ``fp_rate`` skipped this request: the columns are empty, not measured zeros); ``failed`` (the output
    could not be read, for example it was changed in place; counted by the SDK); ``none`` (no output was
    given to ``set_output``). Empty in rows written before the column existed. Compare only ``ok`` rows
    (and, of those, rows of the same ``fp_rate`` when comparing sampled sets)."""
    fp_rate: F32 = 0.0
    """The fingerprint sampling rule in force for this request: the fraction of request ids fingerprinted,
    chosen by a hash of the request id (the same id is chosen on every host and bundle); 1 means every
    request; 0 when no output was given."""
    sampled: Flag = False
    """Whether kernel timings were sampled for this request (rows in ``kernel_timings``)."""
    capture_blob: Digest = ""
    """sha256 of the captured inputs blob, empty when inputs were not captured."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""

    @model_validator(mode="after")
    def _parallel_graph_arrays(self) -> RequestEvent:
        n = len(self.graph_keys)
        if not (len(self.graph_artifacts) == len(self.graph_calls) == len(self.graph_us) == n):
            raise ValueError(
                "graph_keys, graph_artifacts, graph_calls and graph_us must have the same length "
                f"(got {n}, {len(self.graph_artifacts)}, {len(self.graph_calls)}, {len(self.graph_us)})"
            )
        return self


class CompileEvent(Event):
    """One compile of one frame (a Dynamo compile id and attempt), with its metrics and outcome."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="compiles",
        order_by=(col.MODEL, col.HW_POOL, col.TS),
        ttl_days=180,
        shard_key=f"cityHash64({col.GRAPH_KEY})",
    )

    ts: Timestamp
    """When the compile started (UTC)."""
    host: Dim
    """Host that compiled."""
    model: Dim = ""
    """Model label of the process that compiled."""
    hw_pool: Dim = ""
    """Hardware pool of the host."""
    bundle_id: Dim = ""
    """Bundle the compile belongs to, when known."""
    request_id: Text = ""
    """Request that triggered the compile (from the recompile user context), if any."""
    graph_key: Text = ""
    """Stable graph identity (see module docstring); empty when the compile failed before a graph existed."""
    code_location: Text = ""
    """``co_filename:co_firstlineno:co_name`` of the compiled frame."""
    compile_id: Dim = ""
    """Process-local Dynamo compile id such as ``0/1``: for reading the host's logs only, never a join key."""
    attempt: U8 = 0
    """Restart attempt of the analysis (``0/1_2`` has attempt 2)."""
    trigger: Dim = ""
    """What started it: ``first`` (new frame), ``recompile``, ``import`` (from a trace log)."""
    entire_frame_s: F32 = 0.0
    """Whole-frame compile time in seconds (Dynamo + backend)."""
    backend_s: F32 = 0.0
    """Backend (AOTAutograd + Inductor) compile time in seconds."""
    inductor_s: F32 = 0.0
    """Inductor compile time in seconds."""
    codegen_s: F32 = 0.0
    """Inductor code generation time in seconds."""
    outcome: Dim = "ok"
    """``ok``, ``failed``, ``recompile_limit``, or ``incomplete``: its log ended before the compile did (cut off,
    or still being written); a later import of the longer log with ``--dsn`` replaces the row."""
    fail_type: Dim = ""
    """Exception type of a failed compile (``BackendCompilerFailed``, ``Unsupported``...)."""
    fail_reason: Text = ""
    """Failure message of a failed compile."""
    recompile_reason: Text = ""
    """First recompile reason when the compile was a recompile."""
    guard_count: U32 = 0
    """Number of guards installed."""
    graph_op_count: U32 = 0
    """Number of ops in the captured graph."""
    graph_node_count: U32 = 0
    """Number of FX nodes in the captured graph."""
    graph_break_count: U16 = 0
    """Graph breaks met while compiling this frame."""
    artifact_id: Digest = ""
    """sha256 of the generated output code (its blob's key)."""
    fx_cache_key: Text = ""
    """Inductor FX-graph-cache key of the compiled graph."""
    cache_status: Dim = "none"
    """FX-graph-cache status of this compile: ``hit``, ``miss``, ``bypass``, ``mixed`` (an imported trace's compile
    whose lookups gave different results) or ``none``."""
    guard_tree_digest: Digest = ""
    """sha256 of the C++ guard tree text."""
    dynamo_config_digest: Digest = ""
    """sha256 of the Dynamo config snapshot."""
    inductor_config_digest: Digest = ""
    """sha256 of the Inductor config snapshot."""
    torch_version: Dim = ""
    """torch version string."""
    triton_version: Dim = ""
    """triton version string (empty without triton)."""
    cuda_version: Dim = ""
    """CUDA runtime version (empty on CPU)."""
    source: Dim = "live"
    """``live`` (host SDK) or ``trace`` (imported TORCH_TRACE log; ``attrs['file']`` names it)."""
    kernel_providers: TextList = ()
    """Kernel-registry decisions of this graph, one ``op=provider`` per op signature traced into it (rows
    in ``kernel_decisions`` say why the other providers were skipped)."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class RecompileEvent(Event):
    """A recompile of a frame whose cached entries all failed their guards."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="recompiles",
        order_by=(col.MODEL, col.HW_POOL, col.TS),
        ttl_days=180,
        shard_key=f"cityHash64({col.REQUEST_ID})",
    )

    ts: Timestamp
    """When the recompile started (UTC)."""
    host: Dim
    """Host that recompiled."""
    model: Dim = ""
    """Model label."""
    hw_pool: Dim = ""
    """Hardware pool."""
    traffic_class: Dim = ""
    """Traffic class of the triggering request."""
    request_id: Text = ""
    """Request that triggered it."""
    code_location: Text = ""
    """Frame that recompiled (``file:line:name``)."""
    compile_id: Dim = ""
    """Process-local compile id of the new entry."""
    reason: Text = ""
    """First (primary) guard failure reason, e.g. ``tensor 'x' size mismatch at index 0``."""
    reasons: TextList = ()
    """All failing reasons, one per failing cache entry."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class GuardFailureEvent(Event):
    """A guard that failed at frame entry (one per failing guard reason)."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="guard_failures",
        order_by=(col.MODEL, col.HW_POOL, col.TS),
        ttl_days=90,
        shard_key=f"cityHash64({col.REQUEST_ID})",
    )

    ts: Timestamp
    """When the guard failed (UTC)."""
    host: Dim
    """Host."""
    model: Dim = ""
    """Model label."""
    hw_pool: Dim = ""
    """Hardware pool."""
    request_id: Text = ""
    """Request whose frame entry failed the guard."""
    code_location: Text = ""
    """Frame whose guard failed."""
    compile_id: Dim = ""
    """Compile id of the cache entry whose guard failed."""
    reason: Text = ""
    """The guard failure text."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class GraphBreakEvent(Event):
    """A graph break met while compiling a frame."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="graph_breaks",
        order_by=(col.MODEL, col.REGISTRY_ID, col.TS),
        ttl_days=180,
    )

    ts: Timestamp
    """When it was recorded (UTC)."""
    host: Dim
    """Host."""
    model: Dim = ""
    """Model label."""
    hw_pool: Dim = ""
    """Hardware pool."""
    request_id: Text = ""
    """Request during which the break was compiled, if any."""
    compile_id: Dim = ""
    """Process-local compile id of the frame being compiled."""
    code_location: Text = ""
    """Frame being compiled."""
    registry_id: Dim = ""
    """Graph-break registry id such as ``GB0170``; empty when the message names none."""
    break_type: Dim = ""
    """Graph-break type (the registry's ``Gb_type``), e.g. ``Data-dependent branching``."""
    reason: Text = ""
    """The break's explanation."""
    user_frame: Text = ""
    """Innermost user frame at the break: ``file:line in function``."""
    source: Dim = "live"
    """``live`` or ``trace``."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class ShapeGuardEvent(Event):
    """A symbolic-shape guard added while tracing: a condition on input sizes that the exported program or
    compiled graph assumes (the guards ``torch.export`` and Dynamo's dynamic shapes add while tracing). Imported
    from TORCH_TRACE logs (``guard_added`` / ``guard_added_fast`` records). A dimension's declared range alone
    (a non-strict export's ``Dim(min=, max=)``, logged as a ``create_symbol`` record) adds no guard and is not
    stored; a guard that fails at run time is a ``guard_failures`` row instead."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="shape_guards",
        order_by=(col.MODEL, col.HW_POOL, col.TS),
        ttl_days=180,
    )

    ts: Timestamp
    """When the guard was added (UTC)."""
    host: Dim
    """Host that traced."""
    model: Dim = ""
    """Model label."""
    hw_pool: Dim = ""
    """Hardware pool."""
    compile_id: Dim = ""
    """Dynamo compile id of the frame being traced, or ``export/N`` for the log's N-th exported program
    (``torch.export`` outside Dynamo has no compile id)."""
    expr: Text = ""
    """The guard as PyTorch prints it, in shape symbols: ``Eq(s17, s77)``, ``s17 <= s77``."""
    symbol_sources: TextList = ()
    """What each symbol of ``expr`` stands for, one ``symbol=source`` each: ``s77=L['x'].size()[0]``."""
    user_frame: Text = ""
    """Innermost user frame that added the guard: ``file:line in function``; for a guard PyTorch added
    while solving constraints, the user's call into export or compile."""
    source: Dim = "trace"
    """``trace`` (imported TORCH_TRACE log; ``attrs['file']`` names it) or ``live``."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own (``code``: the source line; ``record``: the record kind)."""


class CacheEvent(Event):
    """One compile-cache lookup: FX graph, AOTAutograd, Triton, autotune or Dynamo cache."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="cache_events",
        order_by=(col.MODEL, col.HW_POOL, col.CACHE, col.TS),
        ttl_days=180,
    )

    ts: Timestamp
    """When the lookup happened (UTC)."""
    host: Dim
    """Host."""
    model: Dim = ""
    """Model label."""
    hw_pool: Dim = ""
    """Hardware pool."""
    bundle_id: Dim = ""
    """Bundle, when known."""
    request_id: Text = ""
    """Request whose compile looked up the cache, if any."""
    compile_id: Dim = ""
    """Process-local compile id."""
    cache: Dim
    """``fx_graph``, ``aot_autograd``, ``triton``, ``autotune`` or ``dynamo``."""
    result: Dim
    """``hit``, ``miss`` or ``bypass``."""
    cache_key: Text = ""
    """The cache key looked up."""
    reason: Text = ""
    """Bypass or miss reason when known."""
    time_saved_ms: F32 = 0.0
    """Compile time the hit saved, in milliseconds (0 for misses)."""
    entry_bytes: U64 = 0
    """Size of the cache entry written or read, when known."""
    source: Dim = "live"
    """``live`` or ``trace``."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class KernelInventoryEvent(Event):
    """One kernel of a compiled artifact with its provenance: post-grad nodes and user source lines."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="kernels",
        order_by=(col.ARTIFACT_ID, col.KERNEL_NAME),
        ttl_days=0,
        engine="ReplacingMergeTree",
        shard_key=f"cityHash64({col.ARTIFACT_ID})",
    )

    ts: Timestamp
    """When the artifact was first seen (UTC)."""
    artifact_id: Digest
    """sha256 of the output code holding the kernel."""
    kernel_name: Text
    """Kernel name (``triton_poi_fused_add_0``, ``cpp_fused_mul_0``, ``extern_kernels.mm``)."""
    kernel_backend: Dim = ""
    """``triton``, ``cpp`` or ``extern``."""
    graph_key: Text = ""
    """Graph the artifact was compiled from."""
    post_grad_nodes: TextList = ()
    """Post-grad FX nodes fused into this kernel."""
    source_lines: TextList = ()
    """User source lines the nodes came from (``file:line``)."""
    host: Dim = ""
    """Host that first reported it."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class KernelTimingEvent(Event):
    """Profiler-measured time of one kernel over one sampled request."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="kernel_timings",
        order_by=(col.MODEL, col.ARTIFACT_ID, col.TS),
        ttl_days=30,
        shard_key=f"cityHash64({col.REQUEST_ID})",
    )

    ts: Timestamp
    """Start of the sampled request (UTC)."""
    request_id: Text
    """Sampled request."""
    host: Dim
    """Host."""
    model: Dim = ""
    """Model label."""
    hw_pool: Dim = ""
    """Hardware pool."""
    artifact_id: Digest = ""
    """Artifact the kernel belongs to (empty when the profiler event could not be tied to one)."""
    kernel_name: Text
    """Kernel name as the profiler reports it."""
    device: Dim = ""
    """``cpu`` or ``cuda:N``."""
    calls: U32 = 0
    """Launches during the request."""
    total_us: F64 = 0.0
    """Total kernel time in microseconds."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class BundleEvent(Event):
    """Registration of a release bundle (compiled artifacts + manifest) on a host."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="bundles",
        order_by=(col.BUNDLE_ID, col.HOST),
        ttl_days=0,
        engine="ReplacingMergeTree",
        shard_key=f"cityHash64({col.BUNDLE_ID})",
    )

    ts: Timestamp
    """When the host registered the bundle (UTC)."""
    bundle_id: Dim
    """Digest of the manifest."""
    bundle_name: Dim = ""
    """Human label (``baseline``, ``canary-2026-11-30``)."""
    model: Dim = ""
    """Model the bundle serves."""
    host: Dim = ""
    """Host that registered it."""
    hw_pool: Dim = ""
    """Hardware pool of the host."""
    manifest_digest: Digest = ""
    """sha256 of the manifest blob."""
    compiler_config: Attrs = Field(default_factory=dict)
    """Compiler options that distinguish this bundle (mode, Inductor options)."""
    torch_version: Dim = ""
    """torch version."""
    triton_version: Dim = ""
    """triton version."""
    cuda_version: Dim = ""
    """CUDA version (empty on CPU)."""
    device_name: Dim = ""
    """Device name (``NVIDIA H200``, ``cpu``)."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""
    builder_keyid: Dim = ""
    """Key id of the builder that signed the manifest (sha256 of its ed25519 public key)."""
    signature_state: Dim = ""
    """``verified`` (signature, keyring, hashes and compatibility checked on the host), ``unverified``, or
    the refusal cause (``tampered``, ``signature``, ``untrusted_builder``, ``revoked``, ...)."""
    graph_keys: DimList = ()
    """FX-graph-cache keys of the graphs the bundle holds."""


class BundleStateEvent(Event):
    """A change of a bundle's release state: promoted to a channel, demoted, revoked, quarantined, released, or
    pushed to the service."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="bundle_states",
        order_by=(col.BUNDLE_ID, col.TS),
        ttl_days=0,
        shard_key=f"cityHash64({col.BUNDLE_ID})",
        partition="tuple()",
    )

    ts: Timestamp
    """When the state changed (UTC)."""
    bundle_id: Dim
    """The bundle."""
    state: Dim
    """``promoted``, ``demoted``, ``revoked``, ``quarantined``, ``released`` or ``pushed`` (its files packed and
    uploaded as a blob, named in ``attrs['pack_blob']``)."""
    channel: Dim = ""
    """Release channel of a promotion (``production``, ``canary``)."""
    previous_bundle_id: Dim = ""
    """The bundle the promotion replaced on the channel (kept for rollback)."""
    model: Dim = ""
    """Model the bundle serves."""
    actor: Dim = ""
    """Who changed it."""
    reason: Text = ""
    """Why."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class BundleMissEvent(Event):
    """A compile on a host outside its bundle: a graph the bundle does not hold, and what the host did."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="bundle_misses",
        order_by=(col.BUNDLE_ID, col.TS),
        ttl_days=90,
        shard_key=f"cityHash64({col.BUNDLE_ID})",
    )

    ts: Timestamp
    """When the miss happened (UTC)."""
    bundle_id: Dim
    """The bundle the host serves."""
    host: Dim = ""
    """Host."""
    hw_pool: Dim = ""
    """Hardware pool of the host."""
    model: Dim = ""
    """Model served."""
    request_id: Text = ""
    """Request that triggered the compile (empty outside a request)."""
    graph_signature: Digest = ""
    """sha256 of the traced graph's code and input metadata."""
    graph_key: Dim = ""
    """FX-graph-cache key, when it compiled."""
    inputs: Text = ""
    """The graph's input metadata (dtypes, shapes, strides)."""
    action: Dim = ""
    """``compiled``, ``eager`` or ``refused``."""
    factors: TextList = ()
    """The factors that differ from the bundle (``accepted_shapes: ...``, ``settings.inductor.x: a → b``)."""
    reason: Text = ""
    """Why the action (``on_bundle_miss=eager``, ``compile budget spent: 4 of 4 compiles in 600 s``)."""
    compile_s: F64 = 0.0
    """Compile seconds spent (0 unless it compiled)."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class BlobIndexEvent(Event):
    """A content-addressed blob: output code, guard tree, captured inputs, manifest."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="blobs",
        order_by=(col.SHA256,),
        ttl_days=0,
        engine="ReplacingMergeTree",
        shard_key=f"cityHash64({col.SHA256})",
        partition="tuple()",
    )

    ts: Timestamp
    """When the blob was first stored (UTC)."""
    sha256: Digest
    """Hex sha256 of the blob's bytes: its only key."""
    size_bytes: U64
    """Size of the blob in bytes."""
    kind: Dim
    """What the blob is, as its uploader named it (lower case): ``output_code``, ``guard_tree``, ``inputs`` (a
    request's captured inputs), ``manifest``, ``graph``, ``config``, ``bundle``. ``inputs_ref`` is a capture marker,
    not a blob: the collector's row saying a request names the blob ``attrs['capture_of']`` as its captured inputs,
    under a key derived from that digest, never under the blob's own."""
    media_type: Dim = "application/octet-stream"
    """Media type of the content."""
    host: Dim = ""
    """Host that stored it first."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own (e.g. ``artifact_id``)."""


class BlobContentEvent(Event):
    """The bytes of a blob, stored once under their sha256 (ARCHITECTURE decision 5)."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="blob_contents",
        order_by=(col.SHA256,),
        ttl_days=0,
        engine="ReplacingMergeTree",
        shard_key=f"cityHash64({col.SHA256})",
        partition="tuple()",
    )

    ts: Timestamp
    """When the content was stored (UTC)."""
    sha256: Digest
    """Hex sha256 of ``data``."""
    data: Bytes
    """The content."""


class ReplayResultEvent(Event):
    """The outcome of re-executing a recorded request against its bundle and the eager path."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="replay_results",
        order_by=(col.REQUEST_ID, col.TS),
        ttl_days=365,
        shard_key=f"cityHash64({col.REQUEST_ID})",
    )

    ts: Timestamp
    """When the replay ran (UTC)."""
    replay_id: Text
    """Id of this replay run."""
    request_id: Text
    """Request replayed."""
    bundle_id: Dim = ""
    """Bundle replayed against."""
    host: Dim = ""
    """Host the replay ran on."""
    device_name: Dim = ""
    """Device the replay ran on."""
    reproduced: Flag = False
    """Whether the recorded fault reproduced."""
    attribution: Dim = ""
    """The verdict category: ``source_op``, ``kernel_provider``, ``decomposition``, ``lowering``,
    ``graph_pass``, ``schedule``, ``shape_specialization``, ``artifact_mismatch``, ``inputs`` or ``none``."""
    error_ratio: F64 = 0.0
    """fp64-anchored error ratio of the compiled output against eager (≤ 10 passes)."""
    detail: Text = ""
    """What decided the attribution (op, decomposition or config that flipped the result)."""
    op: Dim = ""
    """The ATen or custom op at fault (``aten.rsqrt``, ``mylib::rms_norm``)."""
    fx_node: Text = ""
    """The first diverging node of the Dynamo FX graph."""
    kernel: Text = ""
    """The generated kernel that computes it."""
    source_file: Text = ""
    """User source file of that node."""
    source_line: U32 = 0
    """Its line number (0 when unknown)."""
    source_text: Text = ""
    """That line's code, stripped."""
    verdict_json: Text = ""
    """The whole verdict as JSON (evidence included), as ``inferensics replay`` wrote it."""
    request_host: Dim = ""
    """Host that served the replayed request (``host`` is the one the replay ran on); with ``request_ts`` it tells
    apart requests that share ``request_id``. Empty in verdicts stored before it was kept."""
    request_ts: Timestamp = NO_TS
    """When the replayed request started (UTC); the epoch (:data:`NO_TS`) in verdicts stored before it was kept."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class CanaryVerdictEvent(Event):
    """A recorded canary verdict comparing a candidate bundle against a baseline."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="canary_verdicts",
        order_by=(col.MODEL, col.TS),
        ttl_days=365,
    )

    ts: Timestamp
    """When the verdict was made (UTC)."""
    model: Dim
    """Model compared."""
    traffic_class: Dim = ""
    """Traffic class compared (empty for all)."""
    baseline: Dim
    """Baseline bundle id (or window label)."""
    candidate: Dim
    """Candidate bundle id (or window label)."""
    window_start: Timestamp
    """Start of the compared window (UTC)."""
    window_end: Timestamp
    """End of the compared window (UTC)."""
    verdict: Dim
    """``pass``, ``fail`` or ``inconclusive``."""
    rule: Text = ""
    """The rule that decided the verdict."""
    evidence: Text = ""
    """JSON evidence table (metric, baseline, candidate, interval, p-value)."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class SdkHealthEvent(Event):
    """The host SDK's own health, exported by each serving process at a fixed interval: a host whose rows
    stop arriving has gone quiet, and the counters say what it could not deliver. Counters are cumulative
    since the process started (a restart starts them again)."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="sdk_health",
        order_by=(col.HOST, col.TS),
        ttl_days=30,
        shard_key=f"cityHash64({col.HOST})",
    )

    ts: Timestamp
    """When the record was taken (UTC)."""
    host: Dim
    """Host of the serving process."""
    model: Dim = ""
    """The tracker's default model label."""
    hw_pool: Dim = ""
    """Hardware pool."""
    requests_seen: U64 = 0
    """Request records built since the process started."""
    queue_depth: U32 = 0
    """Items waiting in the SDK's hand-off queue when the record was taken."""
    records_dropped: U64 = 0
    """Records dropped before export (hand-off queue full, span queue full)."""
    spans_sent: U64 = 0
    """Spans the collector service accepted."""
    spans_refused: U64 = 0
    """Spans the export could not deliver, every cause."""
    refused_auth: U64 = 0
    """Of those, refused for the token (HTTP 401/403)."""
    refused_down: U64 = 0
    """Of those, not delivered because the service could not be reached."""
    refused_back_pressure: U64 = 0
    """Of those, refused because the service was shedding load (HTTP 429/503)."""
    sdk_errors: U64 = 0
    """Errors the SDK caught and counted (processing, export, fingerprint, capture, trace sink)."""
    last_error: Text = ""
    """The most recent of those errors or refusals, as one line."""
    kernel_failures: U64 = 0
    """Exceptions raised by kernel-registry providers (each took its provider out for that signature)."""
    kernel_fallbacks: U64 = 0
    """Kernel-registry signatures that fell through to the reference because no other provider could serve them."""
    kernel_unproven: U64 = 0
    """Providers a compile put into a graph without the run on real tensors that proves them (no memory for a
    copy of the arguments, a data-dependent size)."""
    stopped: Flag = False
    """The last record of a process that shut down cleanly (``tracker.shutdown()``, at exit): it stopped
    reporting on purpose, where a process that only goes silent has gone quiet."""
    interval_s: F64 = 0.0
    """Seconds between this process's health records (its ``health_interval_s``): it is quiet after three of
    them without one (and never sooner than the reader's threshold). 0 in records stored before it was kept."""
    process: Text = ""
    """The serving process: ``<pid>@<start, ms since the epoch>``. Two processes of one host serving the same
    model in the same pool, or a process and the one that replaced it, differ here; empty in records stored
    before it was kept."""
    kernel_untraceable: U64 = 0
    """Kernel-registry providers (or their requirement checks) that raised while a compiler traced them: each left
    compiled graphs for its signature, not eager calls, and is not counted in ``kernel_failures``. 0 in records
    stored before it was kept."""
    requests_lost: U64 = 0
    """Finished requests of processes that died on this host (SIGKILL, the out-of-memory killer) whose rows were
    never exported, counted by this process from their crash journals when it started (its ``stats()``'s
    ``requests_lost``): the dead processes' loss, not this one's. 0 in records stored before it was kept."""
    dead_processes: U64 = 0
    """Processes that died on this host (a fatal error, SIGKILL, the out-of-memory killer) whose crash journals this
    process read when it started (its ``stats()``'s ``dead_processes``). 0 in records stored before it was kept."""
    requests_recovered: U64 = 0
    """Requests those dead processes had in flight, exported by this process as ``error`` rows from their crash
    journals (its ``stats()``'s ``requests_recovered``). 0 in records stored before it was kept."""


class KernelDecisionEvent(Event):
    """A kernel-registry decision: which provider serves one op signature, and why the others were skipped."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="kernel_decisions",
        order_by=(col.MODEL, col.OP, col.TS),
        ttl_days=180,
        shard_key=f"cityHash64({col.GRAPH_KEY})",
    )

    ts: Timestamp
    """When the decision was made (UTC)."""
    host: Dim
    """Host that made it."""
    model: Dim = ""
    """Model label of the process."""
    hw_pool: Dim = ""
    """Hardware pool of the host."""
    request_id: Text = ""
    """Request whose compile made it, if any."""
    graph_key: Text = ""
    """Compiled graph the op was traced into; empty for an eager decision."""
    compile_id: Dim = ""
    """Process-local compile id (for reading the host's logs only)."""
    op: Dim
    """Semantic op (``rms_norm``, ``paged_decode_attention`` ...)."""
    provider: Dim
    """Provider chosen (``triton``, ``inductor``, ``sdpa``, ``reference`` ...)."""
    signature: Text = ""
    """Argument signature: dtype, shape, strides and device of each tensor."""
    bucket: Dim = ""
    """Shape bucket whose priority list applied."""
    skipped: TextList = ()
    """Providers tried before it, each ``provider: reason``, in priority order."""
    compiled: Flag = False
    """Whether the decision was made while compiling a graph."""
    fallback: Flag = False
    """Whether no provider but the reference (or, compiled, Inductor) could serve the call."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


class KernelQualificationEvent(Event):
    """One provider measured at one shape by ``inferensics kernels qualify``: accuracy, speed, verdict."""

    TABLE: ClassVar[TableSpec] = TableSpec(
        name="kernel_qualifications",
        order_by=(col.OP, col.BUCKET, col.TS),
        ttl_days=0,
    )

    ts: Timestamp
    """When the qualification ran (UTC)."""
    host: Dim
    """Host it ran on."""
    device_name: Dim = ""
    """Device, with its compute capability."""
    op: Dim
    """Semantic op."""
    provider: Dim
    """Provider measured."""
    bucket: Dim = ""
    """Shape bucket the evidence is for."""
    shape: Text = ""
    """The shape measured (``tokens=8192,hidden=4096``)."""
    dtype: Dim = ""
    """Dtype of the floating arguments."""
    status: Dim = ""
    """``measured``, ``unsupported``, ``refused`` (accuracy gate) or ``error``."""
    accuracy_passed: Flag = False
    """Whether the provider met the op's tolerance rule on every checked input."""
    rule: Text = ""
    """The tolerance rule applied (``exact``, ``close atol=.. rtol=..``, ``rmse <= k x ...``)."""
    max_abs_err: F64 = 0.0
    """Largest absolute difference from the reference over the checked inputs."""
    detail: Text = ""
    """Why unsupported, refused or failed."""
    median_us: F64 = 0.0
    """Median device time per call in microseconds."""
    ci_low_us: F64 = 0.0
    """Lower end of the bootstrap 95 % interval of the median."""
    ci_high_us: F64 = 0.0
    """Upper end of that interval."""
    trials: U32 = 0
    """Timed rounds (random order each)."""
    timing: Dim = ""
    """How the median was measured: ``cuda_graph`` (CUDA-graph replays, device time), ``events`` (CUDA events
    around back-to-back eager calls, host overhead included), ``wall`` (CPU wall time); empty before it was
    recorded."""
    tb_s: F64 = 0.0
    """Bandwidth over the bytes the op must move, TB/s."""
    decision: Dim = ""
    """``incumbent`` (served the bucket and still does), ``promoted`` (serves it now, did not before), ``demoted``
    (served it and no longer does), ``kept`` (neither before nor after) or ``refused``; empty when not measured."""
    evidence_digest: Digest = ""
    """Digest of the whole qualification run's evidence file."""
    torch_version: Dim = ""
    """torch version."""
    triton_version: Dim = ""
    """triton version."""
    cuda_version: Dim = ""
    """CUDA version (empty on CPU)."""
    attrs: Attrs = Field(default_factory=dict)
    """Attributes with no column of their own."""


EVENT_MODELS: tuple[type[Event], ...] = (
    RequestEvent,
    CompileEvent,
    RecompileEvent,
    GuardFailureEvent,
    GraphBreakEvent,
    CacheEvent,
    KernelInventoryEvent,
    KernelTimingEvent,
    BundleEvent,
    BundleStateEvent,
    BundleMissEvent,
    BlobIndexEvent,
    BlobContentEvent,
    ReplayResultEvent,
    CanaryVerdictEvent,
    SdkHealthEvent,
    KernelDecisionEvent,
    KernelQualificationEvent,
    ShapeGuardEvent,
)
"""Every stored event model, in table-creation order."""

MODELS_BY_TABLE: dict[str, type[Event]] = {m.TABLE.name: m for m in EVENT_MODELS}
