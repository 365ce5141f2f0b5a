-- Generated from the inferensics event models for the 'cluster' backend.
-- Do not edit: run `python -m inferensics.schema.ddl` after changing schema/events.py.

CREATE DATABASE IF NOT EXISTS inferensics ON CLUSTER '{cluster}';

CREATE TABLE IF NOT EXISTS inferensics.requests_local ON CLUSTER '{cluster}'
(
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Caller-given request id, unique per request; the drill-down and replay key.',
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the request started (UTC).',
    `host` LowCardinality(String) COMMENT 'Serving host name.',
    `model` LowCardinality(String) COMMENT 'Model name as the serving process labels it.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool label of the serving worker (for example ``h200-a``).',
    `traffic_class` LowCardinality(String) COMMENT 'Traffic class (for example ``interactive``, ``batch``, ``shadow``).',
    `tenant` LowCardinality(String) COMMENT 'Tenant the request belongs to; empty when the service is single-tenant.',
    `bundle_id` LowCardinality(String) COMMENT 'Digest of the release bundle manifest that served it; empty when no bundle is registered.',
    `shape` String CODEC(ZSTD(1)) COMMENT 'Input shape signature, e.g. ``2x128`` (batch × sequence) or ``decode:8x1@512``.',
    `shape_bucket` LowCardinality(String) COMMENT 'Bucket of ``shape`` under the host\'s bucketing policy, e.g. ``b<=4,s<=256``.',
    `latency_ms` Float32 CODEC(ZSTD(1)) COMMENT 'Wall time of the request in milliseconds, compile time included.',
    `status` LowCardinality(String) COMMENT '``ok`` or ``error``.',
    `error` String CODEC(ZSTD(1)) COMMENT 'Exception type and message when ``status`` is ``error``.',
    `outcome` LowCardinality(String) COMMENT 'How it was served: ``hit`` (existing graphs), ``compile`` (first compile), ``recompile``, ``fallback`` (ran eagerly after a graph break, the recompile limit or an error), ``eager`` (never compiled by policy) or ``error``.',
    `guard_outcome` LowCardinality(String) COMMENT 'Guard evaluation over the request\'s frame entries: ``hit``, ``miss``, ``first`` (no entry yet), ``mixed`` (hits and misses), ``none`` (no compiled frame was entered) or ``unknown`` (a request recovered from the crash journal of a process that died in it).',
    `cache_status` LowCardinality(String) COMMENT 'Compile-cache status of compiles this request triggered: ``none`` (no compile), ``hit``, ``miss``, ``bypass`` or ``mixed``.',
    `fallback_reason` LowCardinality(String) COMMENT 'Why it ran eagerly (``graph_break:GB0170``, ``recompile_limit``, ``compile_error``, ``policy``).',
    `compile_ms` Float32 CODEC(ZSTD(1)) COMMENT 'Compile time spent inside this request, in milliseconds.',
    `recompiles` UInt8 COMMENT 'Number of recompiles this request triggered.',
    `graph_keys` Array(LowCardinality(String)) COMMENT 'Stable keys of the compiled graphs executed, in first-call order.',
    `graph_artifacts` Array(String) CODEC(ZSTD(1)) COMMENT 'Artifact id (sha256 of output code) of each executed graph, parallel to ``graph_keys``.',
    `graph_calls` Array(UInt32) CODEC(ZSTD(1)) COMMENT 'Number of calls of each executed graph, parallel to ``graph_keys``.',
    `graph_us` Array(UInt32) CODEC(ZSTD(1)) COMMENT 'Host-side wall time in microseconds spent in each executed graph, parallel to ``graph_keys`` (the host SDK times a graph\'s first 4 calls in a request and every 16th after them, and scales the sum to all calls).',
    `input_digest` String CODEC(ZSTD(1)) COMMENT 'Digest of the request\'s inputs; equal digests across bundles allow output comparison.',
    `fp_argmax_digest` String CODEC(ZSTD(1)) COMMENT 'Digest of the argmax token ids of the output (canary agreement).',
    `fp_argmax_head` Array(UInt32) CODEC(ZSTD(1)) COMMENT 'The first argmax token ids of the output (at most 16), for partial agreement.',
    `fp_nan` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Number of NaN values in the output.',
    `fp_inf` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Number of ±inf values in the output.',
    `fp_mean` Float32 CODEC(ZSTD(1)) COMMENT 'Mean of the finite output values.',
    `fp_std` Float32 CODEC(ZSTD(1)) COMMENT 'Standard deviation of the finite output values.',
    `fp_absmax` Float32 CODEC(ZSTD(1)) COMMENT 'Largest absolute finite output value.',
    `fp_status` LowCardinality(String) COMMENT 'Whether the ``fp_*`` columns hold the output\'s fingerprint: ``ok``; ``unsampled`` (the sampling rule of ``fp_rate`` skipped this request: the columns are empty, not measured zeros); ``failed`` (the output could not be read, for example it was changed in place; counted by the SDK); ``none`` (no output was given to ``set_output``). Empty in rows written before the column existed. Compare only ``ok`` rows (and, of those, rows of the same ``fp_rate`` when comparing sampled sets).',
    `fp_rate` Float32 CODEC(ZSTD(1)) COMMENT 'The fingerprint sampling rule in force for this request: the fraction of request ids fingerprinted, chosen by a hash of the request id (the same id is chosen on every host and bundle); 1 means every request; 0 when no output was given.',
    `sampled` Bool COMMENT 'Whether kernel timings were sampled for this request (rows in ``kernel_timings``).',
    `capture_blob` String CODEC(ZSTD(1)) COMMENT 'sha256 of the captured inputs blob, empty when inputs were not captured.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.',
    INDEX idx_request_id request_id TYPE bloom_filter(0.001) GRANULARITY 4
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/requests_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, traffic_class, hw_pool, ts)
TTL toDateTime(ts) + toIntervalDay(30)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'One served request: which compiled graphs and artifacts served it and how dispatch went.';

CREATE TABLE IF NOT EXISTS inferensics.requests ON CLUSTER '{cluster}' AS inferensics.requests_local
ENGINE = Distributed('{cluster}', inferensics, requests_local, cityHash64(request_id));

CREATE TABLE IF NOT EXISTS inferensics.compiles_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the compile started (UTC).',
    `host` LowCardinality(String) COMMENT 'Host that compiled.',
    `model` LowCardinality(String) COMMENT 'Model label of the process that compiled.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool of the host.',
    `bundle_id` LowCardinality(String) COMMENT 'Bundle the compile belongs to, when known.',
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Request that triggered the compile (from the recompile user context), if any.',
    `graph_key` String CODEC(ZSTD(1)) COMMENT 'Stable graph identity (see module docstring); empty when the compile failed before a graph existed.',
    `code_location` String CODEC(ZSTD(1)) COMMENT '``co_filename:co_firstlineno:co_name`` of the compiled frame.',
    `compile_id` LowCardinality(String) COMMENT 'Process-local Dynamo compile id such as ``0/1``: for reading the host\'s logs only, never a join key.',
    `attempt` UInt8 COMMENT 'Restart attempt of the analysis (``0/1_2`` has attempt 2).',
    `trigger` LowCardinality(String) COMMENT 'What started it: ``first`` (new frame), ``recompile``, ``import`` (from a trace log).',
    `entire_frame_s` Float32 CODEC(ZSTD(1)) COMMENT 'Whole-frame compile time in seconds (Dynamo + backend).',
    `backend_s` Float32 CODEC(ZSTD(1)) COMMENT 'Backend (AOTAutograd + Inductor) compile time in seconds.',
    `inductor_s` Float32 CODEC(ZSTD(1)) COMMENT 'Inductor compile time in seconds.',
    `codegen_s` Float32 CODEC(ZSTD(1)) COMMENT 'Inductor code generation time in seconds.',
    `outcome` LowCardinality(String) COMMENT '``ok``, ``failed``, ``recompile_limit``, or ``incomplete``: its log ended before the compile did (cut off, or still being written); a later import of the longer log with ``--dsn`` replaces the row.',
    `fail_type` LowCardinality(String) COMMENT 'Exception type of a failed compile (``BackendCompilerFailed``, ``Unsupported``...).',
    `fail_reason` String CODEC(ZSTD(1)) COMMENT 'Failure message of a failed compile.',
    `recompile_reason` String CODEC(ZSTD(1)) COMMENT 'First recompile reason when the compile was a recompile.',
    `guard_count` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Number of guards installed.',
    `graph_op_count` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Number of ops in the captured graph.',
    `graph_node_count` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Number of FX nodes in the captured graph.',
    `graph_break_count` UInt16 COMMENT 'Graph breaks met while compiling this frame.',
    `artifact_id` String CODEC(ZSTD(1)) COMMENT 'sha256 of the generated output code (its blob\'s key).',
    `fx_cache_key` String CODEC(ZSTD(1)) COMMENT 'Inductor FX-graph-cache key of the compiled graph.',
    `cache_status` LowCardinality(String) COMMENT 'FX-graph-cache status of this compile: ``hit``, ``miss``, ``bypass``, ``mixed`` (an imported trace\'s compile whose lookups gave different results) or ``none``.',
    `guard_tree_digest` String CODEC(ZSTD(1)) COMMENT 'sha256 of the C++ guard tree text.',
    `dynamo_config_digest` String CODEC(ZSTD(1)) COMMENT 'sha256 of the Dynamo config snapshot.',
    `inductor_config_digest` String CODEC(ZSTD(1)) COMMENT 'sha256 of the Inductor config snapshot.',
    `torch_version` LowCardinality(String) COMMENT 'torch version string.',
    `triton_version` LowCardinality(String) COMMENT 'triton version string (empty without triton).',
    `cuda_version` LowCardinality(String) COMMENT 'CUDA runtime version (empty on CPU).',
    `source` LowCardinality(String) COMMENT '``live`` (host SDK) or ``trace`` (imported TORCH_TRACE log; ``attrs[\'file\']`` names it).',
    `kernel_providers` Array(String) CODEC(ZSTD(1)) COMMENT 'Kernel-registry decisions of this graph, one ``op=provider`` per op signature traced into it (rows in ``kernel_decisions`` say why the other providers were skipped).',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/compiles_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, hw_pool, ts)
TTL toDateTime(ts) + toIntervalDay(180)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'One compile of one frame (a Dynamo compile id and attempt), with its metrics and outcome.';

CREATE TABLE IF NOT EXISTS inferensics.compiles ON CLUSTER '{cluster}' AS inferensics.compiles_local
ENGINE = Distributed('{cluster}', inferensics, compiles_local, cityHash64(graph_key));

CREATE TABLE IF NOT EXISTS inferensics.recompiles_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the recompile started (UTC).',
    `host` LowCardinality(String) COMMENT 'Host that recompiled.',
    `model` LowCardinality(String) COMMENT 'Model label.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool.',
    `traffic_class` LowCardinality(String) COMMENT 'Traffic class of the triggering request.',
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Request that triggered it.',
    `code_location` String CODEC(ZSTD(1)) COMMENT 'Frame that recompiled (``file:line:name``).',
    `compile_id` LowCardinality(String) COMMENT 'Process-local compile id of the new entry.',
    `reason` String CODEC(ZSTD(1)) COMMENT 'First (primary) guard failure reason, e.g. ``tensor \'x\' size mismatch at index 0``.',
    `reasons` Array(String) CODEC(ZSTD(1)) COMMENT 'All failing reasons, one per failing cache entry.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/recompiles_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, hw_pool, ts)
TTL toDateTime(ts) + toIntervalDay(180)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'A recompile of a frame whose cached entries all failed their guards.';

CREATE TABLE IF NOT EXISTS inferensics.recompiles ON CLUSTER '{cluster}' AS inferensics.recompiles_local
ENGINE = Distributed('{cluster}', inferensics, recompiles_local, cityHash64(request_id));

CREATE TABLE IF NOT EXISTS inferensics.guard_failures_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the guard failed (UTC).',
    `host` LowCardinality(String) COMMENT 'Host.',
    `model` LowCardinality(String) COMMENT 'Model label.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool.',
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Request whose frame entry failed the guard.',
    `code_location` String CODEC(ZSTD(1)) COMMENT 'Frame whose guard failed.',
    `compile_id` LowCardinality(String) COMMENT 'Compile id of the cache entry whose guard failed.',
    `reason` String CODEC(ZSTD(1)) COMMENT 'The guard failure text.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/guard_failures_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, hw_pool, ts)
TTL toDateTime(ts) + toIntervalDay(90)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'A guard that failed at frame entry (one per failing guard reason).';

CREATE TABLE IF NOT EXISTS inferensics.guard_failures ON CLUSTER '{cluster}' AS inferensics.guard_failures_local
ENGINE = Distributed('{cluster}', inferensics, guard_failures_local, cityHash64(request_id));

CREATE TABLE IF NOT EXISTS inferensics.graph_breaks_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When it was recorded (UTC).',
    `host` LowCardinality(String) COMMENT 'Host.',
    `model` LowCardinality(String) COMMENT 'Model label.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool.',
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Request during which the break was compiled, if any.',
    `compile_id` LowCardinality(String) COMMENT 'Process-local compile id of the frame being compiled.',
    `code_location` String CODEC(ZSTD(1)) COMMENT 'Frame being compiled.',
    `registry_id` LowCardinality(String) COMMENT 'Graph-break registry id such as ``GB0170``; empty when the message names none.',
    `break_type` LowCardinality(String) COMMENT 'Graph-break type (the registry\'s ``Gb_type``), e.g. ``Data-dependent branching``.',
    `reason` String CODEC(ZSTD(1)) COMMENT 'The break\'s explanation.',
    `user_frame` String CODEC(ZSTD(1)) COMMENT 'Innermost user frame at the break: ``file:line in function``.',
    `source` LowCardinality(String) COMMENT '``live`` or ``trace``.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/graph_breaks_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, registry_id, ts)
TTL toDateTime(ts) + toIntervalDay(180)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'A graph break met while compiling a frame.';

CREATE TABLE IF NOT EXISTS inferensics.graph_breaks ON CLUSTER '{cluster}' AS inferensics.graph_breaks_local
ENGINE = Distributed('{cluster}', inferensics, graph_breaks_local, rand());

CREATE TABLE IF NOT EXISTS inferensics.cache_events_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the lookup happened (UTC).',
    `host` LowCardinality(String) COMMENT 'Host.',
    `model` LowCardinality(String) COMMENT 'Model label.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool.',
    `bundle_id` LowCardinality(String) COMMENT 'Bundle, when known.',
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Request whose compile looked up the cache, if any.',
    `compile_id` LowCardinality(String) COMMENT 'Process-local compile id.',
    `cache` LowCardinality(String) COMMENT '``fx_graph``, ``aot_autograd``, ``triton``, ``autotune`` or ``dynamo``.',
    `result` LowCardinality(String) COMMENT '``hit``, ``miss`` or ``bypass``.',
    `cache_key` String CODEC(ZSTD(1)) COMMENT 'The cache key looked up.',
    `reason` String CODEC(ZSTD(1)) COMMENT 'Bypass or miss reason when known.',
    `time_saved_ms` Float32 CODEC(ZSTD(1)) COMMENT 'Compile time the hit saved, in milliseconds (0 for misses).',
    `entry_bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Size of the cache entry written or read, when known.',
    `source` LowCardinality(String) COMMENT '``live`` or ``trace``.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/cache_events_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, hw_pool, cache, ts)
TTL toDateTime(ts) + toIntervalDay(180)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'One compile-cache lookup: FX graph, AOTAutograd, Triton, autotune or Dynamo cache.';

CREATE TABLE IF NOT EXISTS inferensics.cache_events ON CLUSTER '{cluster}' AS inferensics.cache_events_local
ENGINE = Distributed('{cluster}', inferensics, cache_events_local, rand());

CREATE TABLE IF NOT EXISTS inferensics.kernels_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the artifact was first seen (UTC).',
    `artifact_id` String CODEC(ZSTD(1)) COMMENT 'sha256 of the output code holding the kernel.',
    `kernel_name` String CODEC(ZSTD(1)) COMMENT 'Kernel name (``triton_poi_fused_add_0``, ``cpp_fused_mul_0``, ``extern_kernels.mm``).',
    `kernel_backend` LowCardinality(String) COMMENT '``triton``, ``cpp`` or ``extern``.',
    `graph_key` String CODEC(ZSTD(1)) COMMENT 'Graph the artifact was compiled from.',
    `post_grad_nodes` Array(String) CODEC(ZSTD(1)) COMMENT 'Post-grad FX nodes fused into this kernel.',
    `source_lines` Array(String) CODEC(ZSTD(1)) COMMENT 'User source lines the nodes came from (``file:line``).',
    `host` LowCardinality(String) COMMENT 'Host that first reported it.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/inferensics/kernels_local', '{replica}', ts)
PARTITION BY toDate(ts)
ORDER BY (artifact_id, kernel_name)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'One kernel of a compiled artifact with its provenance: post-grad nodes and user source lines.';

CREATE TABLE IF NOT EXISTS inferensics.kernels ON CLUSTER '{cluster}' AS inferensics.kernels_local
ENGINE = Distributed('{cluster}', inferensics, kernels_local, cityHash64(artifact_id));

CREATE TABLE IF NOT EXISTS inferensics.kernel_timings_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'Start of the sampled request (UTC).',
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Sampled request.',
    `host` LowCardinality(String) COMMENT 'Host.',
    `model` LowCardinality(String) COMMENT 'Model label.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool.',
    `artifact_id` String CODEC(ZSTD(1)) COMMENT 'Artifact the kernel belongs to (empty when the profiler event could not be tied to one).',
    `kernel_name` String CODEC(ZSTD(1)) COMMENT 'Kernel name as the profiler reports it.',
    `device` LowCardinality(String) COMMENT '``cpu`` or ``cuda:N``.',
    `calls` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Launches during the request.',
    `total_us` Float64 CODEC(ZSTD(1)) COMMENT 'Total kernel time in microseconds.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/kernel_timings_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, artifact_id, ts)
TTL toDateTime(ts) + toIntervalDay(30)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'Profiler-measured time of one kernel over one sampled request.';

CREATE TABLE IF NOT EXISTS inferensics.kernel_timings ON CLUSTER '{cluster}' AS inferensics.kernel_timings_local
ENGINE = Distributed('{cluster}', inferensics, kernel_timings_local, cityHash64(request_id));

CREATE TABLE IF NOT EXISTS inferensics.bundles_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the host registered the bundle (UTC).',
    `bundle_id` LowCardinality(String) COMMENT 'Digest of the manifest.',
    `bundle_name` LowCardinality(String) COMMENT 'Human label (``baseline``, ``canary-2026-11-30``).',
    `model` LowCardinality(String) COMMENT 'Model the bundle serves.',
    `host` LowCardinality(String) COMMENT 'Host that registered it.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool of the host.',
    `manifest_digest` String CODEC(ZSTD(1)) COMMENT 'sha256 of the manifest blob.',
    `compiler_config` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Compiler options that distinguish this bundle (mode, Inductor options).',
    `torch_version` LowCardinality(String) COMMENT 'torch version.',
    `triton_version` LowCardinality(String) COMMENT 'triton version.',
    `cuda_version` LowCardinality(String) COMMENT 'CUDA version (empty on CPU).',
    `device_name` LowCardinality(String) COMMENT 'Device name (``NVIDIA H200``, ``cpu``).',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.',
    `builder_keyid` LowCardinality(String) COMMENT 'Key id of the builder that signed the manifest (sha256 of its ed25519 public key).',
    `signature_state` LowCardinality(String) COMMENT '``verified`` (signature, keyring, hashes and compatibility checked on the host), ``unverified``, or the refusal cause (``tampered``, ``signature``, ``untrusted_builder``, ``revoked``, ...).',
    `graph_keys` Array(LowCardinality(String)) COMMENT 'FX-graph-cache keys of the graphs the bundle holds.'
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/inferensics/bundles_local', '{replica}', ts)
PARTITION BY toDate(ts)
ORDER BY (bundle_id, host)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'Registration of a release bundle (compiled artifacts + manifest) on a host.';

CREATE TABLE IF NOT EXISTS inferensics.bundles ON CLUSTER '{cluster}' AS inferensics.bundles_local
ENGINE = Distributed('{cluster}', inferensics, bundles_local, cityHash64(bundle_id));

CREATE TABLE IF NOT EXISTS inferensics.bundle_states_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the state changed (UTC).',
    `bundle_id` LowCardinality(String) COMMENT 'The bundle.',
    `state` LowCardinality(String) COMMENT '``promoted``, ``demoted``, ``revoked``, ``quarantined``, ``released`` or ``pushed`` (its files packed and uploaded as a blob, named in ``attrs[\'pack_blob\']``).',
    `channel` LowCardinality(String) COMMENT 'Release channel of a promotion (``production``, ``canary``).',
    `previous_bundle_id` LowCardinality(String) COMMENT 'The bundle the promotion replaced on the channel (kept for rollback).',
    `model` LowCardinality(String) COMMENT 'Model the bundle serves.',
    `actor` LowCardinality(String) COMMENT 'Who changed it.',
    `reason` String CODEC(ZSTD(1)) COMMENT 'Why.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/bundle_states_local', '{replica}')
PARTITION BY tuple()
ORDER BY (bundle_id, ts)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'A change of a bundle\'s release state: promoted to a channel, demoted, revoked, quarantined, released, or pushed to the service.';

CREATE TABLE IF NOT EXISTS inferensics.bundle_states ON CLUSTER '{cluster}' AS inferensics.bundle_states_local
ENGINE = Distributed('{cluster}', inferensics, bundle_states_local, cityHash64(bundle_id));

CREATE TABLE IF NOT EXISTS inferensics.bundle_misses_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the miss happened (UTC).',
    `bundle_id` LowCardinality(String) COMMENT 'The bundle the host serves.',
    `host` LowCardinality(String) COMMENT 'Host.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool of the host.',
    `model` LowCardinality(String) COMMENT 'Model served.',
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Request that triggered the compile (empty outside a request).',
    `graph_signature` String CODEC(ZSTD(1)) COMMENT 'sha256 of the traced graph\'s code and input metadata.',
    `graph_key` LowCardinality(String) COMMENT 'FX-graph-cache key, when it compiled.',
    `inputs` String CODEC(ZSTD(1)) COMMENT 'The graph\'s input metadata (dtypes, shapes, strides).',
    `action` LowCardinality(String) COMMENT '``compiled``, ``eager`` or ``refused``.',
    `factors` Array(String) CODEC(ZSTD(1)) COMMENT 'The factors that differ from the bundle (``accepted_shapes: ...``, ``settings.inductor.x: a → b``).',
    `reason` String CODEC(ZSTD(1)) COMMENT 'Why the action (``on_bundle_miss=eager``, ``compile budget spent: 4 of 4 compiles in 600 s``).',
    `compile_s` Float64 CODEC(ZSTD(1)) COMMENT 'Compile seconds spent (0 unless it compiled).',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/bundle_misses_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (bundle_id, ts)
TTL toDateTime(ts) + toIntervalDay(90)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'A compile on a host outside its bundle: a graph the bundle does not hold, and what the host did.';

CREATE TABLE IF NOT EXISTS inferensics.bundle_misses ON CLUSTER '{cluster}' AS inferensics.bundle_misses_local
ENGINE = Distributed('{cluster}', inferensics, bundle_misses_local, cityHash64(bundle_id));

CREATE TABLE IF NOT EXISTS inferensics.blobs_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the blob was first stored (UTC).',
    `sha256` String CODEC(ZSTD(1)) COMMENT 'Hex sha256 of the blob\'s bytes: its only key.',
    `size_bytes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Size of the blob in bytes.',
    `kind` LowCardinality(String) COMMENT 'What the blob is, as its uploader named it (lower case): ``output_code``, ``guard_tree``, ``inputs`` (a request\'s captured inputs), ``manifest``, ``graph``, ``config``, ``bundle``. ``inputs_ref`` is a capture marker, not a blob: the collector\'s row saying a request names the blob ``attrs[\'capture_of\']`` as its captured inputs, under a key derived from that digest, never under the blob\'s own.',
    `media_type` LowCardinality(String) COMMENT 'Media type of the content.',
    `host` LowCardinality(String) COMMENT 'Host that stored it first.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own (e.g. ``artifact_id``).'
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/inferensics/blobs_local', '{replica}', ts)
PARTITION BY tuple()
ORDER BY (sha256)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'A content-addressed blob: output code, guard tree, captured inputs, manifest.';

CREATE TABLE IF NOT EXISTS inferensics.blobs ON CLUSTER '{cluster}' AS inferensics.blobs_local
ENGINE = Distributed('{cluster}', inferensics, blobs_local, cityHash64(sha256));

CREATE TABLE IF NOT EXISTS inferensics.blob_contents_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the content was stored (UTC).',
    `sha256` String CODEC(ZSTD(1)) COMMENT 'Hex sha256 of ``data``.',
    `data` String CODEC(ZSTD(3)) COMMENT 'The content.'
)
ENGINE = ReplicatedReplacingMergeTree('/clickhouse/tables/{shard}/inferensics/blob_contents_local', '{replica}', ts)
PARTITION BY tuple()
ORDER BY (sha256)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'The bytes of a blob, stored once under their sha256 (ARCHITECTURE decision 5).';

CREATE TABLE IF NOT EXISTS inferensics.blob_contents ON CLUSTER '{cluster}' AS inferensics.blob_contents_local
ENGINE = Distributed('{cluster}', inferensics, blob_contents_local, cityHash64(sha256));

CREATE TABLE IF NOT EXISTS inferensics.replay_results_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the replay ran (UTC).',
    `replay_id` String CODEC(ZSTD(1)) COMMENT 'Id of this replay run.',
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Request replayed.',
    `bundle_id` LowCardinality(String) COMMENT 'Bundle replayed against.',
    `host` LowCardinality(String) COMMENT 'Host the replay ran on.',
    `device_name` LowCardinality(String) COMMENT 'Device the replay ran on.',
    `reproduced` Bool COMMENT 'Whether the recorded fault reproduced.',
    `attribution` LowCardinality(String) COMMENT 'The verdict category: ``source_op``, ``kernel_provider``, ``decomposition``, ``lowering``, ``graph_pass``, ``schedule``, ``shape_specialization``, ``artifact_mismatch``, ``inputs`` or ``none``.',
    `error_ratio` Float64 CODEC(ZSTD(1)) COMMENT 'fp64-anchored error ratio of the compiled output against eager (≤ 10 passes).',
    `detail` String CODEC(ZSTD(1)) COMMENT 'What decided the attribution (op, decomposition or config that flipped the result).',
    `op` LowCardinality(String) COMMENT 'The ATen or custom op at fault (``aten.rsqrt``, ``mylib::rms_norm``).',
    `fx_node` String CODEC(ZSTD(1)) COMMENT 'The first diverging node of the Dynamo FX graph.',
    `kernel` String CODEC(ZSTD(1)) COMMENT 'The generated kernel that computes it.',
    `source_file` String CODEC(ZSTD(1)) COMMENT 'User source file of that node.',
    `source_line` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Its line number (0 when unknown).',
    `source_text` String CODEC(ZSTD(1)) COMMENT 'That line\'s code, stripped.',
    `verdict_json` String CODEC(ZSTD(1)) COMMENT 'The whole verdict as JSON (evidence included), as ``inferensics replay`` wrote it.',
    `request_host` LowCardinality(String) COMMENT 'Host that served the replayed request (``host`` is the one the replay ran on); with ``request_ts`` it tells apart requests that share ``request_id``. Empty in verdicts stored before it was kept.',
    `request_ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the replayed request started (UTC); the epoch (:data:`NO_TS`) in verdicts stored before it was kept.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/replay_results_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (request_id, ts)
TTL toDateTime(ts) + toIntervalDay(365)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'The outcome of re-executing a recorded request against its bundle and the eager path.';

CREATE TABLE IF NOT EXISTS inferensics.replay_results ON CLUSTER '{cluster}' AS inferensics.replay_results_local
ENGINE = Distributed('{cluster}', inferensics, replay_results_local, cityHash64(request_id));

CREATE TABLE IF NOT EXISTS inferensics.canary_verdicts_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the verdict was made (UTC).',
    `model` LowCardinality(String) COMMENT 'Model compared.',
    `traffic_class` LowCardinality(String) COMMENT 'Traffic class compared (empty for all).',
    `baseline` LowCardinality(String) COMMENT 'Baseline bundle id (or window label).',
    `candidate` LowCardinality(String) COMMENT 'Candidate bundle id (or window label).',
    `window_start` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'Start of the compared window (UTC).',
    `window_end` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'End of the compared window (UTC).',
    `verdict` LowCardinality(String) COMMENT '``pass``, ``fail`` or ``inconclusive``.',
    `rule` String CODEC(ZSTD(1)) COMMENT 'The rule that decided the verdict.',
    `evidence` String CODEC(ZSTD(1)) COMMENT 'JSON evidence table (metric, baseline, candidate, interval, p-value).',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/canary_verdicts_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, ts)
TTL toDateTime(ts) + toIntervalDay(365)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'A recorded canary verdict comparing a candidate bundle against a baseline.';

CREATE TABLE IF NOT EXISTS inferensics.canary_verdicts ON CLUSTER '{cluster}' AS inferensics.canary_verdicts_local
ENGINE = Distributed('{cluster}', inferensics, canary_verdicts_local, rand());

CREATE TABLE IF NOT EXISTS inferensics.sdk_health_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the record was taken (UTC).',
    `host` LowCardinality(String) COMMENT 'Host of the serving process.',
    `model` LowCardinality(String) COMMENT 'The tracker\'s default model label.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool.',
    `requests_seen` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Request records built since the process started.',
    `queue_depth` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Items waiting in the SDK\'s hand-off queue when the record was taken.',
    `records_dropped` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Records dropped before export (hand-off queue full, span queue full).',
    `spans_sent` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Spans the collector service accepted.',
    `spans_refused` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Spans the export could not deliver, every cause.',
    `refused_auth` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Of those, refused for the token (HTTP 401/403).',
    `refused_down` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Of those, not delivered because the service could not be reached.',
    `refused_back_pressure` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Of those, refused because the service was shedding load (HTTP 429/503).',
    `sdk_errors` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Errors the SDK caught and counted (processing, export, fingerprint, capture, trace sink).',
    `last_error` String CODEC(ZSTD(1)) COMMENT 'The most recent of those errors or refusals, as one line.',
    `kernel_failures` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Exceptions raised by kernel-registry providers (each took its provider out for that signature).',
    `kernel_fallbacks` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Kernel-registry signatures that fell through to the reference because no other provider could serve them.',
    `kernel_unproven` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Providers a compile put into a graph without the run on real tensors that proves them (no memory for a copy of the arguments, a data-dependent size).',
    `stopped` Bool COMMENT 'The last record of a process that shut down cleanly (``tracker.shutdown()``, at exit): it stopped reporting on purpose, where a process that only goes silent has gone quiet.',
    `interval_s` Float64 CODEC(ZSTD(1)) COMMENT 'Seconds between this process\'s health records (its ``health_interval_s``): it is quiet after three of them without one (and never sooner than the reader\'s threshold). 0 in records stored before it was kept.',
    `process` String CODEC(ZSTD(1)) COMMENT 'The serving process: ``<pid>@<start, ms since the epoch>``. Two processes of one host serving the same model in the same pool, or a process and the one that replaced it, differ here; empty in records stored before it was kept.',
    `kernel_untraceable` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Kernel-registry providers (or their requirement checks) that raised while a compiler traced them: each left compiled graphs for its signature, not eager calls, and is not counted in ``kernel_failures``. 0 in records stored before it was kept.',
    `requests_lost` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Finished requests of processes that died on this host (SIGKILL, the out-of-memory killer) whose rows were never exported, counted by this process from their crash journals when it started (its ``stats()``\'s ``requests_lost``): the dead processes\' loss, not this one\'s. 0 in records stored before it was kept.',
    `dead_processes` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Processes that died on this host (a fatal error, SIGKILL, the out-of-memory killer) whose crash journals this process read when it started (its ``stats()``\'s ``dead_processes``). 0 in records stored before it was kept.',
    `requests_recovered` UInt64 CODEC(T64, ZSTD(1)) COMMENT 'Requests those dead processes had in flight, exported by this process as ``error`` rows from their crash journals (its ``stats()``\'s ``requests_recovered``). 0 in records stored before it was kept.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/sdk_health_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (host, ts)
TTL toDateTime(ts) + toIntervalDay(30)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'The host SDK\'s own health, exported by each serving process at a fixed interval: a host whose rows stop arriving has gone quiet, and the counters say what it could not deliver. Counters are cumulative since the process started (a restart starts them again).';

CREATE TABLE IF NOT EXISTS inferensics.sdk_health ON CLUSTER '{cluster}' AS inferensics.sdk_health_local
ENGINE = Distributed('{cluster}', inferensics, sdk_health_local, cityHash64(host));

CREATE TABLE IF NOT EXISTS inferensics.kernel_decisions_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the decision was made (UTC).',
    `host` LowCardinality(String) COMMENT 'Host that made it.',
    `model` LowCardinality(String) COMMENT 'Model label of the process.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool of the host.',
    `request_id` String CODEC(ZSTD(1)) COMMENT 'Request whose compile made it, if any.',
    `graph_key` String CODEC(ZSTD(1)) COMMENT 'Compiled graph the op was traced into; empty for an eager decision.',
    `compile_id` LowCardinality(String) COMMENT 'Process-local compile id (for reading the host\'s logs only).',
    `op` LowCardinality(String) COMMENT 'Semantic op (``rms_norm``, ``paged_decode_attention`` ...).',
    `provider` LowCardinality(String) COMMENT 'Provider chosen (``triton``, ``inductor``, ``sdpa``, ``reference`` ...).',
    `signature` String CODEC(ZSTD(1)) COMMENT 'Argument signature: dtype, shape, strides and device of each tensor.',
    `bucket` LowCardinality(String) COMMENT 'Shape bucket whose priority list applied.',
    `skipped` Array(String) CODEC(ZSTD(1)) COMMENT 'Providers tried before it, each ``provider: reason``, in priority order.',
    `compiled` Bool COMMENT 'Whether the decision was made while compiling a graph.',
    `fallback` Bool COMMENT 'Whether no provider but the reference (or, compiled, Inductor) could serve the call.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/kernel_decisions_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, op, ts)
TTL toDateTime(ts) + toIntervalDay(180)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'A kernel-registry decision: which provider serves one op signature, and why the others were skipped.';

CREATE TABLE IF NOT EXISTS inferensics.kernel_decisions ON CLUSTER '{cluster}' AS inferensics.kernel_decisions_local
ENGINE = Distributed('{cluster}', inferensics, kernel_decisions_local, cityHash64(graph_key));

CREATE TABLE IF NOT EXISTS inferensics.kernel_qualifications_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the qualification ran (UTC).',
    `host` LowCardinality(String) COMMENT 'Host it ran on.',
    `device_name` LowCardinality(String) COMMENT 'Device, with its compute capability.',
    `op` LowCardinality(String) COMMENT 'Semantic op.',
    `provider` LowCardinality(String) COMMENT 'Provider measured.',
    `bucket` LowCardinality(String) COMMENT 'Shape bucket the evidence is for.',
    `shape` String CODEC(ZSTD(1)) COMMENT 'The shape measured (``tokens=8192,hidden=4096``).',
    `dtype` LowCardinality(String) COMMENT 'Dtype of the floating arguments.',
    `status` LowCardinality(String) COMMENT '``measured``, ``unsupported``, ``refused`` (accuracy gate) or ``error``.',
    `accuracy_passed` Bool COMMENT 'Whether the provider met the op\'s tolerance rule on every checked input.',
    `rule` String CODEC(ZSTD(1)) COMMENT 'The tolerance rule applied (``exact``, ``close atol=.. rtol=..``, ``rmse <= k x ...``).',
    `max_abs_err` Float64 CODEC(ZSTD(1)) COMMENT 'Largest absolute difference from the reference over the checked inputs.',
    `detail` String CODEC(ZSTD(1)) COMMENT 'Why unsupported, refused or failed.',
    `median_us` Float64 CODEC(ZSTD(1)) COMMENT 'Median device time per call in microseconds.',
    `ci_low_us` Float64 CODEC(ZSTD(1)) COMMENT 'Lower end of the bootstrap 95 % interval of the median.',
    `ci_high_us` Float64 CODEC(ZSTD(1)) COMMENT 'Upper end of that interval.',
    `trials` UInt32 CODEC(T64, ZSTD(1)) COMMENT 'Timed rounds (random order each).',
    `timing` LowCardinality(String) COMMENT 'How the median was measured: ``cuda_graph`` (CUDA-graph replays, device time), ``events`` (CUDA events around back-to-back eager calls, host overhead included), ``wall`` (CPU wall time); empty before it was recorded.',
    `tb_s` Float64 CODEC(ZSTD(1)) COMMENT 'Bandwidth over the bytes the op must move, TB/s.',
    `decision` LowCardinality(String) COMMENT '``incumbent`` (served the bucket and still does), ``promoted`` (serves it now, did not before), ``demoted`` (served it and no longer does), ``kept`` (neither before nor after) or ``refused``; empty when not measured.',
    `evidence_digest` String CODEC(ZSTD(1)) COMMENT 'Digest of the whole qualification run\'s evidence file.',
    `torch_version` LowCardinality(String) COMMENT 'torch version.',
    `triton_version` LowCardinality(String) COMMENT 'triton version.',
    `cuda_version` LowCardinality(String) COMMENT 'CUDA version (empty on CPU).',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own.'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/kernel_qualifications_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (op, bucket, ts)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'One provider measured at one shape by ``inferensics kernels qualify``: accuracy, speed, verdict.';

CREATE TABLE IF NOT EXISTS inferensics.kernel_qualifications ON CLUSTER '{cluster}' AS inferensics.kernel_qualifications_local
ENGINE = Distributed('{cluster}', inferensics, kernel_qualifications_local, rand());

CREATE TABLE IF NOT EXISTS inferensics.shape_guards_local ON CLUSTER '{cluster}'
(
    `ts` DateTime64(6, 'UTC') CODEC(Delta(8), ZSTD(1)) COMMENT 'When the guard was added (UTC).',
    `host` LowCardinality(String) COMMENT 'Host that traced.',
    `model` LowCardinality(String) COMMENT 'Model label.',
    `hw_pool` LowCardinality(String) COMMENT 'Hardware pool.',
    `compile_id` LowCardinality(String) COMMENT 'Dynamo compile id of the frame being traced, or ``export/N`` for the log\'s N-th exported program (``torch.export`` outside Dynamo has no compile id).',
    `expr` String CODEC(ZSTD(1)) COMMENT 'The guard as PyTorch prints it, in shape symbols: ``Eq(s17, s77)``, ``s17 <= s77``.',
    `symbol_sources` Array(String) CODEC(ZSTD(1)) COMMENT 'What each symbol of ``expr`` stands for, one ``symbol=source`` each: ``s77=L[\'x\'].size()[0]``.',
    `user_frame` String CODEC(ZSTD(1)) COMMENT 'Innermost user frame that added the guard: ``file:line in function``; for a guard PyTorch added while solving constraints, the user\'s call into export or compile.',
    `source` LowCardinality(String) COMMENT '``trace`` (imported TORCH_TRACE log; ``attrs[\'file\']`` names it) or ``live``.',
    `attrs` Map(LowCardinality(String), String) CODEC(ZSTD(1)) COMMENT 'Attributes with no column of their own (``code``: the source line; ``record``: the record kind).'
)
ENGINE = ReplicatedMergeTree('/clickhouse/tables/{shard}/inferensics/shape_guards_local', '{replica}')
PARTITION BY toDate(ts)
ORDER BY (model, hw_pool, ts)
TTL toDateTime(ts) + toIntervalDay(180)
SETTINGS index_granularity = 8192, ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000
COMMENT 'A symbolic-shape guard added while tracing: a condition on input sizes that the exported program or compiled graph assumes (the guards ``torch.export`` and Dynamo\'s dynamic shapes add while tracing). Imported from TORCH_TRACE logs (``guard_added`` / ``guard_added_fast`` records). A dimension\'s declared range alone (a non-strict export\'s ``Dim(min=, max=)``, logged as a ``create_symbol`` record) adds no guard and is not stored; a guard that fails at run time is a ``guard_failures`` row instead.';

CREATE TABLE IF NOT EXISTS inferensics.shape_guards ON CLUSTER '{cluster}' AS inferensics.shape_guards_local
ENGINE = Distributed('{cluster}', inferensics, shape_guards_local, rand());

CREATE TABLE IF NOT EXISTS inferensics.requests_1m_local ON CLUSTER '{cluster}'
(
    `bucket` DateTime64(0, 'UTC') CODEC(Delta(8), ZSTD(1)),
    `model` LowCardinality(String),
    `hw_pool` LowCardinality(String),
    `traffic_class` LowCardinality(String),
    `bundle_id` LowCardinality(String),
    `requests` SimpleAggregateFunction(sum, UInt64),
    `errors` SimpleAggregateFunction(sum, UInt64),
    `fallbacks` SimpleAggregateFunction(sum, UInt64),
    `recompiles` SimpleAggregateFunction(sum, UInt64),
    `compiles` SimpleAggregateFunction(sum, UInt64),
    `compile_seconds` SimpleAggregateFunction(sum, Float64),
    `cache_hits` SimpleAggregateFunction(sum, UInt64),
    `cache_misses` SimpleAggregateFunction(sum, UInt64),
    `nonfinite` SimpleAggregateFunction(sum, UInt64),
    `fingerprinted` SimpleAggregateFunction(sum, UInt64) DEFAULT requests,
    `latency_sum_ms` SimpleAggregateFunction(sum, Float64),
    `latency_hist` SimpleAggregateFunction(sumMap, Map(UInt16, UInt64))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/inferensics/requests_1m_local', '{replica}')
PARTITION BY toYYYYMM(bucket)
ORDER BY (toStartOfHour(bucket), model, hw_pool, traffic_class, bundle_id, bucket)
TTL toDateTime(bucket) + toIntervalDay(32)
SETTINGS ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS inferensics.requests_1m_mv ON CLUSTER '{cluster}'
TO inferensics.requests_1m_local
AS SELECT
    toStartOfMinute(ts) AS bucket,
    model,
    hw_pool,
    traffic_class,
    bundle_id,
    sum(toUInt64(1)) AS requests,
    sum(toUInt64(status = 'error')) AS errors,
    sum(toUInt64(outcome = 'fallback')) AS fallbacks,
    sum(toUInt64(recompiles)) AS recompiles,
    sum(toUInt64(outcome IN ('compile', 'recompile'))) AS compiles,
    sum(toFloat64(compile_ms) / 1000) AS compile_seconds,
    sum(toUInt64(cache_status = 'hit')) AS cache_hits,
    sum(toUInt64(cache_status IN ('miss', 'mixed'))) AS cache_misses,
    sum(toUInt64((fp_nan + fp_inf) > 0)) AS nonfinite,
    sum(toUInt64(fp_status IN ('ok', ''))) AS fingerprinted,
    sum(toFloat64(latency_ms)) AS latency_sum_ms,
    CAST((groupArray(toUInt16(greatest(0, least(1023, round((ln(greatest(latency_ms, 1e-9)) - ln(0.01)) / 0.018))))), groupArray(toUInt64(1))), 'Map(UInt16, UInt64)') AS latency_hist
FROM inferensics.requests_local
GROUP BY bucket, model, hw_pool, traffic_class, bundle_id;

CREATE TABLE IF NOT EXISTS inferensics.requests_1m ON CLUSTER '{cluster}' AS inferensics.requests_1m_local
ENGINE = Distributed('{cluster}', inferensics, requests_1m_local, rand());

CREATE TABLE IF NOT EXISTS inferensics.requests_1h_local ON CLUSTER '{cluster}'
(
    `bucket` DateTime64(0, 'UTC') CODEC(Delta(8), ZSTD(1)),
    `model` LowCardinality(String),
    `hw_pool` LowCardinality(String),
    `traffic_class` LowCardinality(String),
    `bundle_id` LowCardinality(String),
    `requests` SimpleAggregateFunction(sum, UInt64),
    `errors` SimpleAggregateFunction(sum, UInt64),
    `fallbacks` SimpleAggregateFunction(sum, UInt64),
    `recompiles` SimpleAggregateFunction(sum, UInt64),
    `compiles` SimpleAggregateFunction(sum, UInt64),
    `compile_seconds` SimpleAggregateFunction(sum, Float64),
    `cache_hits` SimpleAggregateFunction(sum, UInt64),
    `cache_misses` SimpleAggregateFunction(sum, UInt64),
    `nonfinite` SimpleAggregateFunction(sum, UInt64),
    `fingerprinted` SimpleAggregateFunction(sum, UInt64) DEFAULT requests,
    `latency_sum_ms` SimpleAggregateFunction(sum, Float64),
    `latency_hist` SimpleAggregateFunction(sumMap, Map(UInt16, UInt64))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/inferensics/requests_1h_local', '{replica}')
PARTITION BY toYYYYMM(bucket)
ORDER BY (toStartOfDay(bucket), model, hw_pool, traffic_class, bundle_id, bucket)
TTL toDateTime(bucket) + toIntervalDay(400)
SETTINGS ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS inferensics.requests_1h_mv ON CLUSTER '{cluster}'
TO inferensics.requests_1h_local
AS SELECT
    toStartOfHour(bucket) AS bucket,
    model,
    hw_pool,
    traffic_class,
    bundle_id,
    sum(requests) AS requests,
    sum(errors) AS errors,
    sum(fallbacks) AS fallbacks,
    sum(recompiles) AS recompiles,
    sum(compiles) AS compiles,
    sum(compile_seconds) AS compile_seconds,
    sum(cache_hits) AS cache_hits,
    sum(cache_misses) AS cache_misses,
    sum(nonfinite) AS nonfinite,
    sum(fingerprinted) AS fingerprinted,
    sum(latency_sum_ms) AS latency_sum_ms,
    CAST((groupArrayArray(mapKeys(latency_hist)), groupArrayArray(mapValues(latency_hist))), 'Map(UInt16, UInt64)') AS latency_hist
FROM inferensics.requests_1m_local
GROUP BY bucket, model, hw_pool, traffic_class, bundle_id;

CREATE TABLE IF NOT EXISTS inferensics.requests_1h ON CLUSTER '{cluster}' AS inferensics.requests_1h_local
ENGINE = Distributed('{cluster}', inferensics, requests_1h_local, rand());

CREATE TABLE IF NOT EXISTS inferensics.requests_1d_local ON CLUSTER '{cluster}'
(
    `bucket` DateTime64(0, 'UTC') CODEC(Delta(8), ZSTD(1)),
    `model` LowCardinality(String),
    `hw_pool` LowCardinality(String),
    `traffic_class` LowCardinality(String),
    `requests` SimpleAggregateFunction(sum, UInt64),
    `errors` SimpleAggregateFunction(sum, UInt64),
    `fallbacks` SimpleAggregateFunction(sum, UInt64),
    `recompiles` SimpleAggregateFunction(sum, UInt64),
    `compiles` SimpleAggregateFunction(sum, UInt64),
    `compile_seconds` SimpleAggregateFunction(sum, Float64),
    `cache_hits` SimpleAggregateFunction(sum, UInt64),
    `cache_misses` SimpleAggregateFunction(sum, UInt64),
    `nonfinite` SimpleAggregateFunction(sum, UInt64),
    `fingerprinted` SimpleAggregateFunction(sum, UInt64) DEFAULT requests,
    `latency_sum_ms` SimpleAggregateFunction(sum, Float64),
    `latency_hist` SimpleAggregateFunction(sumMap, Map(UInt16, UInt64))
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/inferensics/requests_1d_local', '{replica}')
PARTITION BY toYYYYMM(bucket)
ORDER BY (model, hw_pool, traffic_class, bucket)
TTL toDateTime(bucket) + toIntervalDay(800)
SETTINGS ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS inferensics.requests_1d_mv ON CLUSTER '{cluster}'
TO inferensics.requests_1d_local
AS SELECT
    toStartOfDay(bucket) AS bucket,
    model,
    hw_pool,
    traffic_class,
    sum(requests) AS requests,
    sum(errors) AS errors,
    sum(fallbacks) AS fallbacks,
    sum(recompiles) AS recompiles,
    sum(compiles) AS compiles,
    sum(compile_seconds) AS compile_seconds,
    sum(cache_hits) AS cache_hits,
    sum(cache_misses) AS cache_misses,
    sum(nonfinite) AS nonfinite,
    sum(fingerprinted) AS fingerprinted,
    sum(latency_sum_ms) AS latency_sum_ms,
    CAST((groupArrayArray(mapKeys(latency_hist)), groupArrayArray(mapValues(latency_hist))), 'Map(UInt16, UInt64)') AS latency_hist
FROM inferensics.requests_1h_local
GROUP BY bucket, model, hw_pool, traffic_class;

CREATE TABLE IF NOT EXISTS inferensics.requests_1d ON CLUSTER '{cluster}' AS inferensics.requests_1d_local
ENGINE = Distributed('{cluster}', inferensics, requests_1d_local, rand());

CREATE TABLE IF NOT EXISTS inferensics.compiles_1h_local ON CLUSTER '{cluster}'
(
    `bucket` DateTime64(0, 'UTC') CODEC(Delta(8), ZSTD(1)),
    `model` LowCardinality(String),
    `hw_pool` LowCardinality(String),
    `outcome` LowCardinality(String),
    `trigger` LowCardinality(String),
    `compiles` SimpleAggregateFunction(sum, UInt64),
    `compile_seconds` SimpleAggregateFunction(sum, Float64)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/inferensics/compiles_1h_local', '{replica}')
PARTITION BY toYYYYMM(bucket)
ORDER BY (toStartOfDay(bucket), model, hw_pool, outcome, trigger, bucket)
TTL toDateTime(bucket) + toIntervalDay(400)
SETTINGS ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS inferensics.compiles_1h_mv ON CLUSTER '{cluster}'
TO inferensics.compiles_1h_local
AS SELECT
    toStartOfHour(ts) AS bucket,
    model,
    hw_pool,
    outcome,
    trigger,
    sum(toUInt64(1)) AS compiles,
    sum(toFloat64(entire_frame_s)) AS compile_seconds
FROM inferensics.compiles_local
GROUP BY bucket, model, hw_pool, outcome, trigger;

CREATE TABLE IF NOT EXISTS inferensics.compiles_1h ON CLUSTER '{cluster}' AS inferensics.compiles_1h_local
ENGINE = Distributed('{cluster}', inferensics, compiles_1h_local, rand());

CREATE TABLE IF NOT EXISTS inferensics.cache_events_1h_local ON CLUSTER '{cluster}'
(
    `bucket` DateTime64(0, 'UTC') CODEC(Delta(8), ZSTD(1)),
    `model` LowCardinality(String),
    `hw_pool` LowCardinality(String),
    `bundle_id` LowCardinality(String),
    `cache` LowCardinality(String),
    `result` LowCardinality(String),
    `requests` SimpleAggregateFunction(sum, UInt64),
    `time_saved_ms` SimpleAggregateFunction(sum, Float64),
    `entry_bytes` SimpleAggregateFunction(sum, UInt64)
)
ENGINE = ReplicatedAggregatingMergeTree('/clickhouse/tables/{shard}/inferensics/cache_events_1h_local', '{replica}')
PARTITION BY toYYYYMM(bucket)
ORDER BY (toStartOfDay(bucket), model, hw_pool, bundle_id, cache, result, bucket)
TTL toDateTime(bucket) + toIntervalDay(400)
SETTINGS ttl_only_drop_parts = 1, min_bytes_for_wide_part = 134217728, replicated_deduplication_window = 10000;

CREATE MATERIALIZED VIEW IF NOT EXISTS inferensics.cache_events_1h_mv ON CLUSTER '{cluster}'
TO inferensics.cache_events_1h_local
AS SELECT
    toStartOfHour(ts) AS bucket,
    model,
    hw_pool,
    bundle_id,
    cache,
    result,
    sum(toUInt64(1)) AS requests,
    sum(toFloat64(time_saved_ms)) AS time_saved_ms,
    sum(toUInt64(entry_bytes)) AS entry_bytes
FROM inferensics.cache_events_local
GROUP BY bucket, model, hw_pool, bundle_id, cache, result;

CREATE TABLE IF NOT EXISTS inferensics.cache_events_1h ON CLUSTER '{cluster}' AS inferensics.cache_events_1h_local
ENGINE = Distributed('{cluster}', inferensics, cache_events_1h_local, rand());
