"""TORCH_TRACE decoding shared by the live trace sink and the log importer.

``envelope`` (stdlib only) decodes records; ``assembler`` turns them into event records (``record_kinds``
says which it reads, ``kernel_rows`` builds their kernel rows, ``assembly_stats`` counts what it saw);
``importer`` writes log files into a store, dated by ``log_clock`` and kept within ``retention``.
"""

from inferensics.collector.trace.assembler import AssemblyContext, CompileAssembler, CompileSummary, graph_key_for
from inferensics.collector.trace.assembly_stats import AssemblyStats
from inferensics.collector.trace.envelope import Damaged, Envelope, decode_record, iter_file_envelopes
from inferensics.collector.trace.importer import FileReport, import_trace, read_trace_file, trace_files

__all__ = [
    "AssemblyContext",
    "AssemblyStats",
    "CompileAssembler",
    "CompileSummary",
    "Damaged",
    "Envelope",
    "FileReport",
    "decode_record",
    "graph_key_for",
    "import_trace",
    "iter_file_envelopes",
    "read_trace_file",
    "trace_files",
]
