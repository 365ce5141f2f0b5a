"""TORCH_TRACE decoding shared by the live trace sink and the log importer.

``envelope`` (stdlib only) decodes records; ``assembler`` turns them into event records; ``importer``
writes log files into a store.
"""

from inferensics.collector.trace.assembler import (
    AssemblyContext,
    AssemblyStats,
    CompileAssembler,
    CompileSummary,
    graph_key_for,
)
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
