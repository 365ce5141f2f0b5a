"""Which TORCH_TRACE records make compile records: those an assembler reads (``CONSUMED``), those it passes
over without a count (``NOISE``), and those whose header alone is a fact (``HEADER_FACTS``). Every other sound
record is counted as unused, so a record kind a new torch adds shows up in the import's summary.
"""

from __future__ import annotations

from typing import Final

from inferensics.collector.trace.artifacts import CACHE_ARTIFACTS, NODE_TRACES_ARTIFACT, PROCESS_ARTIFACT
from inferensics.schema.events import KERNEL_DECISIONS_ARTIFACT

NOISE: Final = frozenset(
    {
        "chromium_event",
        "str",
        "describe_tensor",
        "describe_storage",
        "describe_source",
        "create_symbol",
        "create_unbacked_symbol",
        "symbolic_shape_specialization",
        "compilation_metrics_runtime",
        "bwd_compilation_metrics_runtime",
        "propagate_real_tensors",
        PROCESS_ARTIFACT,  # read by the importer, before the assembler
    }
)
"""Record kinds that never open or change a compile record (timing, interning, fake-tensor detail)."""
CONSUMED: Final = frozenset(
    {
        "dynamo_start",
        "compilation_metrics",
        "dynamo_output_graph",
        "inductor_output_code",
        "dynamo_cpp_guards_str",
        "recompile_reasons",
        "dynamo_graph_break_reason",
        "dynamo_error",
        "inductor_provenance_tracking_node_mappings",
        "inductor_triton_kernel_to_post_grad_nodes",
        "inductor_provenance_tracking_kernel_stack_traces",
        "inductor_aot_wrapper_code",
        KERNEL_DECISIONS_ARTIFACT,
        NODE_TRACES_ARTIFACT,
        *CACHE_ARTIFACTS,
    }
)
"""Record names that feed a compile record; every other sound record is counted in ``AssemblyStats.unused``."""
HEADER_FACTS: Final = frozenset({*CACHE_ARTIFACTS, "dynamo_graph_break_reason"})
"""Records whose header alone is the fact (a cache lookup, a graph break): kept, without the payload's
details, when the payload is damaged, so the counts still equal what the log contains."""
