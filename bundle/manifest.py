"""The manifest: an in-toto Statement v1 whose subject digest is the bundle id, signed in a DSSE envelope.

The predicate keeps the bundle's **identity** (raw factors by group, the graphs and their keys, the accepted
shapes), which alone determines the bundle id (the sha256 of its canonical JSON), and beside it what is
signed but not identity: per-file sha256 ``resources`` (OpenSSF model-signing's layout), the digests of each
factor group, and the ``build`` record (time, builder, durations). Timestamps and measured figures stay out
of the identity, so an unchanged rebuild has the same id and ``bundle diff`` finds nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from inferensics.bundle.canonical import canonical_json, digest_json
from inferensics.bundle.dsse import parse_envelope, sign_envelope
from inferensics.bundle.errors import BundleError
from inferensics.bundle.keys import SigningKey

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PREDICATE_TYPE: Final = "https://inferensics.dev/bundle/v1"
MANIFEST_FILE: Final = "manifest.json"
"""The DSSE envelope's file name in a bundle directory; every other file is a resource."""

FACTOR_GROUPS: Final = (
    "model",
    "code",
    "weights",
    "compiler_versions",
    "settings",
    "customisations",
    "compatibility",
    "kernel_registry",
    "artifacts",
    "accepted_shapes",
)
"""The identity's groups, in the order ``bundle diff`` reports them."""


class Resource(BaseModel):
    """One file of the bundle, by path relative to its directory."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Path relative to the bundle directory, ``/``-separated."""
    algorithm: str = "sha256"
    """Digest algorithm."""
    digest: str
    """Hex digest of the file's bytes."""
    size: int
    """Size in bytes."""


class GraphRecord(BaseModel):
    """One compiled graph the bundle holds (identity part: no process-local or timing data)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    signature: str
    """sha256 of the Dynamo FX graph's code and its input metadata: matched before any compile."""
    fx_key: str
    """Inductor's FX-graph-cache key (its cache hit is the proof the bundle's code served)."""
    aot_key: str = ""
    """AOTAutograd cache key."""
    output_code_sha256: str = ""
    """sha256 of the generated output code (cache paths normalised): the artifact id."""
    inputs: str = ""
    """The graph's input metadata as text (dtypes, shapes with symbols, strides)."""
    graph_code: str = ""
    """sha256 of the Dynamo FX graph's code alone: a miss with the same code differs only in its inputs."""
    code_location: str = ""
    """``file:line:function`` of the traced frame, file relative to its package."""


class Manifest(BaseModel):
    """The parsed statement: name, identity, resources and build record."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    """Human label (``baseline``)."""
    identity: dict[str, Any]
    """Raw identity factors by group (:data:`FACTOR_GROUPS`)."""
    factor_digests: dict[str, str] = Field(default_factory=dict)
    """sha256 of each group's canonical JSON, plus ``settings_all`` (every compiler setting, defaults too)."""
    resources: list[Resource] = Field(default_factory=list)
    """Every file of the bundle but the manifest."""
    build: dict[str, Any] = Field(default_factory=dict)
    """Build record, signed but not identity: time, builder key id, durations, host."""

    @property
    def bundle_id(self) -> str:
        """sha256 of the identity's canonical JSON."""
        return digest_json(self.identity)

    @property
    def graphs(self) -> list[GraphRecord]:
        """The graphs in the identity's ``artifacts`` group."""
        return [GraphRecord(**g) for g in self.identity.get("artifacts", {}).get("graphs", [])]

    @property
    def accepted_shapes(self) -> list[list[int]]:
        """Input shapes the bundle was qualified on."""
        return [list(s) for s in self.identity.get("accepted_shapes", {}).get("shapes", [])]

    def statement(self) -> dict[str, Any]:
        """The in-toto Statement v1."""
        return {
            "_type": STATEMENT_TYPE,
            "subject": [{"name": self.name, "digest": {"sha256": self.bundle_id}}],
            "predicateType": PREDICATE_TYPE,
            "predicate": {
                "name": self.name,
                "identity": self.identity,
                "factor_digests": self.factor_digests,
                "resources": [r.model_dump() for r in self.resources],
                "build": self.build,
            },
        }

    def sign(self, key: SigningKey) -> bytes:
        """The DSSE envelope of the canonical statement, as file bytes."""
        return canonical_json(sign_envelope(canonical_json(self.statement()), key)) + b"\n"


def group_digests(identity: dict[str, Any]) -> dict[str, str]:
    """sha256 of each identity group."""
    return {g: digest_json(identity.get(g)) for g in FACTOR_GROUPS}


def parse_statement(payload: bytes, source: str) -> Manifest:
    """A :class:`Manifest` from the statement bytes; checks the subject digest equals the identity digest.

    Raises:
        BundleError: ``damaged`` (not a bundle statement) or ``tampered`` (subject and identity disagree).
    """
    try:
        st = json.loads(payload)
        if st.get("_type") != STATEMENT_TYPE or st.get("predicateType") != PREDICATE_TYPE:
            raise BundleError("damaged", f"{source} is not an inferensics bundle statement")
        manifest = Manifest(**st["predicate"])
        subject = st["subject"][0]["digest"]["sha256"]
    except BundleError:
        raise
    except (ValueError, KeyError, TypeError, IndexError, ValidationError):
        raise BundleError("damaged", f"{source}: the statement is damaged: rebuild or pull the bundle again") from None
    if subject != manifest.bundle_id:
        raise BundleError(
            "tampered",
            f"{source}: the subject digest {subject[:12]} is not the identity's digest {manifest.bundle_id[:12]}",
        )
    return manifest


def read_manifest_unverified(directory: Path) -> tuple[Manifest, bytes, list[tuple[str, bytes]]]:
    """Parse a bundle directory's manifest without checking its signature (``show``, ``diff``).

    Returns:
        (manifest, payload bytes, signatures).

    Raises:
        BundleError: the directory or manifest is missing or damaged.
    """
    path = manifest_path(directory)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise BundleError(
            "missing", f"cannot read {path}: {exc.strerror} (is {directory} a bundle directory?)"
        ) from None
    payload, sigs = parse_envelope(data, str(path))
    return parse_statement(payload, str(path)), payload, sigs


def manifest_path(directory: Path) -> Path:
    """The manifest file of a bundle directory."""
    return directory / MANIFEST_FILE
