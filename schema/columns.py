"""Every column name of every table, defined once.

Queries, pages and exporters refer to columns through these constants, never through string literals.
``tests/schema/test_columns.py`` checks that each model field has a constant here and each constant names
a field of some model, so a renamed column breaks the build instead of a dashboard.
"""

from typing import Final

# --- identity and dimensions shared by most tables ---------------------------------------------------
TS: Final = "ts"
REQUEST_ID: Final = "request_id"
HOST: Final = "host"
MODEL: Final = "model"
HW_POOL: Final = "hw_pool"
TRAFFIC_CLASS: Final = "traffic_class"
TENANT: Final = "tenant"
BUNDLE_ID: Final = "bundle_id"
ATTRS: Final = "attrs"

# --- request ------------------------------------------------------------------------------------------
SHAPE: Final = "shape"
SHAPE_BUCKET: Final = "shape_bucket"
LATENCY_MS: Final = "latency_ms"
STATUS: Final = "status"
ERROR: Final = "error"
OUTCOME: Final = "outcome"
GUARD_OUTCOME: Final = "guard_outcome"
CACHE_STATUS: Final = "cache_status"
FALLBACK_REASON: Final = "fallback_reason"
COMPILE_MS: Final = "compile_ms"
RECOMPILES: Final = "recompiles"
GRAPH_KEYS: Final = "graph_keys"
GRAPH_ARTIFACTS: Final = "graph_artifacts"
GRAPH_CALLS: Final = "graph_calls"
GRAPH_US: Final = "graph_us"
INPUT_DIGEST: Final = "input_digest"
FP_ARGMAX_DIGEST: Final = "fp_argmax_digest"
FP_ARGMAX_HEAD: Final = "fp_argmax_head"
FP_NAN: Final = "fp_nan"
FP_INF: Final = "fp_inf"
FP_MEAN: Final = "fp_mean"
FP_STD: Final = "fp_std"
FP_ABSMAX: Final = "fp_absmax"
SAMPLED: Final = "sampled"
CAPTURE_BLOB: Final = "capture_blob"

# --- compile ------------------------------------------------------------------------------------------
GRAPH_KEY: Final = "graph_key"
CODE_LOCATION: Final = "code_location"
COMPILE_ID: Final = "compile_id"
ATTEMPT: Final = "attempt"
TRIGGER: Final = "trigger"
ENTIRE_FRAME_S: Final = "entire_frame_s"
BACKEND_S: Final = "backend_s"
INDUCTOR_S: Final = "inductor_s"
CODEGEN_S: Final = "codegen_s"
FAIL_TYPE: Final = "fail_type"
FAIL_REASON: Final = "fail_reason"
GUARD_COUNT: Final = "guard_count"
GRAPH_OP_COUNT: Final = "graph_op_count"
GRAPH_NODE_COUNT: Final = "graph_node_count"
GRAPH_BREAK_COUNT: Final = "graph_break_count"
ARTIFACT_ID: Final = "artifact_id"
FX_CACHE_KEY: Final = "fx_cache_key"
GUARD_TREE_DIGEST: Final = "guard_tree_digest"
DYNAMO_CONFIG_DIGEST: Final = "dynamo_config_digest"
INDUCTOR_CONFIG_DIGEST: Final = "inductor_config_digest"
TORCH_VERSION: Final = "torch_version"
TRITON_VERSION: Final = "triton_version"
CUDA_VERSION: Final = "cuda_version"
DEVICE_NAME: Final = "device_name"
SOURCE: Final = "source"

# --- recompile / guard failure / graph break -------------------------------------------------------------
REASON: Final = "reason"
REASONS: Final = "reasons"
REGISTRY_ID: Final = "registry_id"
BREAK_TYPE: Final = "break_type"
USER_FRAME: Final = "user_frame"

# --- cache event --------------------------------------------------------------------------------------
CACHE: Final = "cache"
RESULT: Final = "result"
CACHE_KEY: Final = "cache_key"
TIME_SAVED_MS: Final = "time_saved_ms"
ENTRY_BYTES: Final = "entry_bytes"

# --- kernels ------------------------------------------------------------------------------------------
KERNEL_NAME: Final = "kernel_name"
KERNEL_BACKEND: Final = "kernel_backend"
POST_GRAD_NODES: Final = "post_grad_nodes"
SOURCE_LINES: Final = "source_lines"
DEVICE: Final = "device"
CALLS: Final = "calls"
TOTAL_US: Final = "total_us"

# --- bundle and blob ----------------------------------------------------------------------------------
BUNDLE_NAME: Final = "bundle_name"
MANIFEST_DIGEST: Final = "manifest_digest"
COMPILER_CONFIG: Final = "compiler_config"
SHA256: Final = "sha256"
SIZE_BYTES: Final = "size_bytes"
KIND: Final = "kind"
MEDIA_TYPE: Final = "media_type"
DATA: Final = "data"

# --- replay and canary --------------------------------------------------------------------------------
REPLAY_ID: Final = "replay_id"
ATTRIBUTION: Final = "attribution"
REPRODUCED: Final = "reproduced"
ERROR_RATIO: Final = "error_ratio"
DETAIL: Final = "detail"
BASELINE: Final = "baseline"
CANDIDATE: Final = "candidate"
VERDICT: Final = "verdict"
RULE: Final = "rule"
EVIDENCE: Final = "evidence"
WINDOW_START: Final = "window_start"
WINDOW_END: Final = "window_end"

# --- schema bookkeeping -------------------------------------------------------------------------------
VERSION: Final = "version"
NAME: Final = "name"
CHECKSUM: Final = "checksum"
APPLIED_AT: Final = "applied_at"

# --- rollups ------------------------------------------------------------------------------------------
BUCKET: Final = "bucket"
REQUESTS: Final = "requests"
ERRORS: Final = "errors"
FALLBACKS: Final = "fallbacks"
COMPILES: Final = "compiles"
COMPILE_SECONDS: Final = "compile_seconds"
CACHE_HITS: Final = "cache_hits"
CACHE_MISSES: Final = "cache_misses"
NONFINITE: Final = "nonfinite"
LATENCY_SUM_MS: Final = "latency_sum_ms"
LATENCY_STATE: Final = "latency_state"
