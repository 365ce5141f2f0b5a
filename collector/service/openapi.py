"""The service's OpenAPI 3.0 document (``GET /openapi.json``), written out by hand next to the routes."""

from __future__ import annotations

from typing import Any

_ERROR = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
_OTLP_ERROR = {
    "application/x-protobuf": {
        "schema": {"type": "string", "format": "binary", "description": "google.rpc.Status (for a protobuf request)"}
    },
    "application/json": {"schema": {"$ref": "#/components/schemas/Status"}},
}
"""``/v1/traces``'s refusals: a ``google.rpc.Status`` encoded as the request was (OTLP/HTTP); JSON for a request
of another Content-Type."""
_ARROW = {"application/vnd.apache.arrow.stream": {"schema": {"type": "string", "format": "binary"}}}
_SHA = {
    "name": "sha256",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
}


def _r(code: str, text: str, content: dict[str, Any] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"description": text}
    if content:
        out["content"] = content
    return out


_AUTH_ERRORS = {"401": _r("401", "missing or unknown bearer token", _ERROR), "403": _r("403", "role missing", _ERROR)}


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of every public route."""
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "inferensics collector service",
            "version": "1",
            "description": "OTLP/HTTP trace receiver, query API and blob API of inferensics.",
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
            "schemas": {
                "Error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
                "Status": {
                    "type": "object",
                    "description": "google.rpc.Status in protobuf's JSON mapping",
                    "properties": {"code": {"type": "integer"}, "message": {"type": "string"}},
                    "required": ["message"],
                },
            },
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/traces": {
                "post": {
                    "summary": "OTLP/HTTP trace export (role ingest)",
                    "requestBody": {
                        "required": False,  # an empty body is an empty ExportTraceServiceRequest
                        "content": {
                            "application/x-protobuf": {"schema": {"type": "string", "format": "binary"}},
                            "application/json": {"schema": {"type": "object"}},
                        },
                    },
                    "responses": {
                        "200": _r(
                            "200",
                            "ExportTraceServiceResponse (rows are validated later, when the engine decodes the "
                            "spooled batch: rejections are counted in /metrics, not reported here)",
                        ),
                        "400": _r("400", "malformed body", _OTLP_ERROR),
                        "413": _r("413", "body too large", _OTLP_ERROR),
                        "415": _r("415", "unsupported media type or encoding", _OTLP_ERROR),
                        "429": _r("429", "spool at its cap while the store catches up; see Retry-After", _OTLP_ERROR),
                        "503": _r(
                            "503",
                            "spool at its cap and the store is down, or the spool's filesystem is full or failing; "
                            "see Retry-After",
                            _OTLP_ERROR,
                        ),
                        "401": _r("401", "missing or unknown bearer token", _OTLP_ERROR),
                        "403": _r("403", "role missing", _OTLP_ERROR),
                    },
                }
            },
            "/api/v1/blobs/{sha256}": {
                "put": {
                    "summary": "Store a content-addressed blob (role ingest)",
                    "parameters": [
                        _SHA,
                        {"name": "kind", "in": "query", "required": False, "schema": {"type": "string"}},
                        {"name": "media_type", "in": "query", "required": False, "schema": {"type": "string"}},
                    ],
                    "requestBody": {
                        "required": False,  # the empty blob is a blob
                        "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
                    },
                    "responses": {
                        "201": _r("201", "stored (or already present)"),
                        "400": _r("400", "the body does not hash to the digest, or the path is not a digest", _ERROR),
                        "414": _r("414", "the path is too long to be a digest", _ERROR),
                        "413": _r("413", "body too large", _ERROR),
                        "503": _r("503", "the store is unavailable; see Retry-After", _ERROR),
                        **_AUTH_ERRORS,
                    },
                },
                "get": {
                    "summary": "Read a blob, verified against its digest (role read; a request's captured inputs, kind "
                    "inputs: role replay)",
                    "parameters": [_SHA],
                    "responses": {
                        "200": _r("200", "the bytes", {"application/octet-stream": {"schema": {"type": "string"}}}),
                        "400": _r("400", "the path is not a sha256 digest", _ERROR),
                        "404": _r("404", "no such blob", _ERROR),
                        "414": _r("414", "the path is too long to be a digest", _ERROR),
                        "503": _r("503", "the store is unavailable; see Retry-After", _ERROR),
                        **_AUTH_ERRORS,
                    },
                },
            },
            "/api/v1/queries": {
                "get": {
                    "summary": "Named queries and their parameter schemas (role read)",
                    "responses": {
                        "200": _r("200", "queries", {"application/json": {"schema": {"type": "object"}}}),
                        **_AUTH_ERRORS,
                    },
                }
            },
            "/api/v1/query/{name}": {
                "post": {
                    "summary": "Run a named analytics query (role read)",
                    "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
                    "responses": {
                        "200": _r("200", "result rows", _ARROW),
                        "400": _r("400", "bad or unknown parameters", _ERROR),
                        "404": _r("404", "unknown query", _ERROR),
                        "503": _r("503", "the store is unavailable; see Retry-After", _ERROR),
                        **_AUTH_ERRORS,
                    },
                }
            },
            "/api/v1/sql": {
                "post": {
                    "summary": "Read-only SQL with row, time and memory limits (role admin)",
                    "requestBody": {"required": True, "content": {"text/plain": {"schema": {"type": "string"}}}},
                    "responses": {
                        "200": _r("200", "result rows", _ARROW),
                        "400": _r(
                            "400",
                            "not one read statement (INTO OUTFILE, KILL, writes, several statements, blocked "
                            "system tables are refused), or the engine refused or failed the query",
                            _ERROR,
                        ),
                        "503": _r("503", "the store is unavailable; see Retry-After", _ERROR),
                        **_AUTH_ERRORS,
                    },
                }
            },
            "/api/v1/status": {
                "get": {
                    "summary": "Store, schema version, row counts, spool and counters (role read)",
                    "responses": {
                        "200": _r("200", "status", {"application/json": {"schema": {"type": "object"}}}),
                        **_AUTH_ERRORS,
                    },
                }
            },
            "/metrics": {
                "get": {
                    "summary": "Prometheus metrics (role metrics; read and admin hold it)",
                    "responses": {
                        "200": _r("200", "text exposition", {"text/plain": {"schema": {"type": "string"}}}),
                        **_AUTH_ERRORS,
                    },
                }
            },
            "/healthz": {"get": {"summary": "Liveness", "security": [], "responses": {"200": _r("200", "alive")}}},
            "/readyz": {
                "get": {
                    "summary": "Readiness: the store is reachable",
                    "security": [],
                    "responses": {"200": _r("200", "ready"), "503": _r("503", "store unavailable")},
                }
            },
            "/openapi.json": {
                "get": {"summary": "This document", "security": [], "responses": {"200": _r("200", "document")}}
            },
        },
    }
