"""The OTLP trace request as a ClickHouse Protobuf schema, rendered from opentelemetry-proto's descriptors.

The collector service lets the engine decode OTLP: it spools the raw ``ExportTraceServiceRequest`` bytes
and reads them back with ClickHouse's ``Protobuf`` input format. That format needs a ``.proto`` file
(``format_schema``) and a structure naming the fields to read. Both come from the descriptors of the
installed ``opentelemetry-proto`` package, so field numbers and names are the package's, never typed by
hand. The message names are flattened (``opentelemetry.proto.common.v1.AnyValue`` →
``opentelemetry_proto_common_v1_AnyValue``) so the file has no imports and no package.

``input_format_protobuf_oneof_presence = 1`` makes the engine fill the :data:`KIND` column of every
``AnyValue`` with the name of the oneof member that was set: that is how the SQL checks the exact OTLP
type of each attribute.

A ClickHouse server reads ``format_schema`` from its own ``format_schema_path``; render the file there
with ``python -m inferensics.collector.service --write-proto DIR``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

PROTO_FILE: Final = "inferensics_otlp_trace.proto"
KIND: Final = "value"
"""The AnyValue oneof's name: with oneof presence on, the Enum column that says which member was set."""

_REQUEST: Final = ExportTraceServiceRequest.DESCRIPTOR
_SCALARS: Final = {
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_FIXED64: "fixed64",
    FieldDescriptor.TYPE_FIXED32: "fixed32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_SFIXED32: "sfixed32",
    FieldDescriptor.TYPE_SFIXED64: "sfixed64",
    FieldDescriptor.TYPE_SINT32: "sint32",
    FieldDescriptor.TYPE_SINT64: "sint64",
    FieldDescriptor.TYPE_ENUM: "int32",
}
# The ClickHouse type each scalar field is read as (only the fields the SQL reads).
_CH: Final = {
    FieldDescriptor.TYPE_STRING: "String",
    FieldDescriptor.TYPE_BYTES: "String",
    FieldDescriptor.TYPE_BOOL: "Bool",
    FieldDescriptor.TYPE_INT64: "Int64",
    FieldDescriptor.TYPE_DOUBLE: "Float64",
    FieldDescriptor.TYPE_FIXED64: "UInt64",
    FieldDescriptor.TYPE_UINT32: "UInt32",
}


def message_name(descriptor: Descriptor) -> str:
    """The flattened name a message has in the rendered file."""
    return str(descriptor.full_name).replace(".", "_")


REQUEST_MESSAGE: Final = message_name(_REQUEST)


def render_proto() -> str:
    """The ``.proto`` text of ``ExportTraceServiceRequest`` and every message it reaches."""
    rendered: dict[str, str] = {}

    def field_type(f: FieldDescriptor) -> str:
        if f.type == FieldDescriptor.TYPE_MESSAGE:
            return message_name(f.message_type)
        return _SCALARS[f.type]

    def walk(m: Descriptor) -> None:
        name = message_name(m)
        if name in rendered:
            return
        rendered[name] = ""
        lines = [f"message {name} {{"]
        oneofs: dict[str, list[FieldDescriptor]] = {}
        for f in m.fields:
            oneof = f.containing_oneof
            if oneof is not None and not oneof.name.startswith("_"):  # "_x": proto3 optional, not a real oneof
                oneofs.setdefault(oneof.name, []).append(f)
                continue
            repeated = "repeated " if f.is_repeated else ""
            lines.append(f"  {repeated}{field_type(f)} {f.name} = {f.number};")
        for oneof_name, members in oneofs.items():
            lines.append(f"  oneof {oneof_name} {{")
            lines += [f"    {field_type(f)} {f.name} = {f.number};" for f in members]
            lines.append("  }")
        lines.append("}")
        rendered[name] = "\n".join(lines)
        for f in m.fields:
            if f.type == FieldDescriptor.TYPE_MESSAGE:
                walk(f.message_type)

    walk(_REQUEST)
    header = (
        "// Rendered by inferensics.collector.service.otlp_proto from opentelemetry-proto; do not edit.\n"
        'syntax = "proto3";\n'
    )
    return header + "\n" + "\n\n".join(rendered.values()) + "\n"


def write_proto(directory: Path) -> Path:
    """Write the rendered schema into ``directory`` (only when it changed) and return its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / PROTO_FILE
    text = render_proto()
    if not path.exists() or path.read_text() != text:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(text)
        tmp.replace(path)
    return path


def format_schema(path: Path | str) -> str:
    """The ``format_schema`` setting that names the request message in the rendered file."""
    return f"{path}:{REQUEST_MESSAGE}"


def _field(m: Descriptor, name: str) -> FieldDescriptor:
    f = m.fields_by_name.get(name)
    if f is None:
        raise LookupError(f"opentelemetry-proto's {m.full_name} has no field {name!r}; the installed version differs")
    return f


def _scalar(m: Descriptor, name: str) -> str:
    f = _field(m, name)
    return f"{f.name} {_CH[f.type]}"


def _any_value(m: Descriptor, *, nested: bool) -> str:
    """The AnyValue tuple: scalars, the kind enum and (one level deep) array elements."""
    parts = [_scalar(m, n) for n in ("string_value", "bool_value", "int_value", "double_value", "bytes_value")]
    oneof = m.oneofs_by_name[KIND]
    if nested:
        array = _field(m, "array_value").message_type
        parts.append(f"array_value Tuple({_field(array, 'values').name} Array({_any_value(m, nested=False)}))")
    members = ", ".join(f"'{f.name}' = {i + 1}" for i, f in enumerate(oneof.fields))
    parts.append(f"{KIND} Enum8('none' = 0, {members})")
    return f"Tuple({', '.join(parts)})"


def structure() -> str:
    """The ClickHouse structure of the fields the SQL reads (names and nesting taken from the descriptors)."""
    rs = _field(_REQUEST, "resource_spans").message_type
    resource = _field(rs, "resource").message_type
    kv = _field(resource, "attributes").message_type
    any_value = _field(kv, "value").message_type
    kvs = f"Array(Tuple({_scalar(kv, 'key')}, value {_any_value(any_value, nested=True)}))"
    ss = _field(rs, "scope_spans").message_type
    span = _field(ss, "spans").message_type
    event = _field(span, "events").message_type
    events = (
        f"events Array(Tuple({_scalar(event, 'time_unix_nano')}, {_scalar(event, 'name')}, attributes {kvs}, "
        f"{_scalar(event, 'dropped_attributes_count')}))"
    )
    spans = (
        f"spans Array(Tuple({_scalar(span, 'trace_id')}, {_scalar(span, 'span_id')}, "
        f"{_scalar(span, 'name')}, {_scalar(span, 'start_time_unix_nano')}, "
        f"attributes {kvs}, {events}, {_scalar(span, 'dropped_attributes_count')}, "
        f"{_scalar(span, 'dropped_events_count')}))"
    )
    return f"resource_spans Array(Tuple(resource Tuple(attributes {kvs}), scope_spans Array(Tuple({spans}))))"
