"""The manifest: an in-toto Statement v1 whose subject digest is the bundle id, signed in a DSSE envelope.

The predicate keeps the bundle's **identity** (raw factors by group, the graphs and their keys, the accepted
shapes), which alone determines the bundle id (the sha256 of its canonical JSON), and beside it what is
signed but not identity: per-file sha256 ``resources`` (OpenSSF model-signing's layout), the digests of each
factor group, and the ``build`` record (time, builder, durations). Timestamps and measured figures stay out
of the identity, so an unchanged rebuild has the same id and ``bundle diff`` finds nothing.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path, PurePosixPath
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from inferensics.bundle.canonical import canonical_json, digest_json
from inferensics.bundle.customisations import Customisation
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
    algorithm: Literal["sha256"] = "sha256"
    """Digest algorithm: sha256, the only one verification computes (a manifest naming another is damaged, never
    checked as if it said sha256). Every bundle written so far says sha256."""
    digest: str
    """Hex digest of the file's bytes."""
    size: int
    """Size in bytes."""

    @field_validator("name")
    @classmethod
    def _inside(cls, value: str) -> str:
        return safe_name(value)


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
    qualified_shapes: list[str] = Field(default_factory=list)
    """For a graph with symbolic sizes: the concrete sizes of those inputs in each call qualification served it
    (``[3,8]``, as :func:`~inferensics.bundle.capture.call_shape` writes them), sorted; a host that serves it at
    other sizes serves a shape the bundle never qualified. Empty for a static graph (its guards admit its own
    sizes only) and in bundles built before it was recorded."""


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
    """A :class:`Manifest` from the statement bytes; checks the subject digest equals the identity digest, and
    that every field of the identity anything reads has its type and every file name stays in the bundle.

    Raises:
        BundleError: ``damaged`` (not a bundle statement, or a field of the wrong type, named) or ``tampered``
            (subject and identity disagree).
    """
    damaged = f"{source}: the statement is damaged: rebuild or pull the bundle again"
    try:
        st = json.loads(payload, parse_constant=_no_constant)
        if not isinstance(st, dict) or st.get("_type") != STATEMENT_TYPE or st.get("predicateType") != PREDICATE_TYPE:
            raise BundleError("damaged", f"{source} is not an inferensics bundle statement")
        predicate, subject = st["predicate"], st["subject"][0]["digest"]["sha256"]
        if not isinstance(predicate, dict) or not isinstance(subject, str):
            raise BundleError("damaged", damaged)
        manifest = Manifest(**predicate)
    except BundleError:
        raise
    except ValidationError as exc:
        raise BundleError("damaged", f"{source}: {first_error(exc)}: rebuild or pull the bundle again") from None
    except (ValueError, KeyError, TypeError, IndexError):
        raise BundleError("damaged", damaged) from None
    problem = identity_problem(manifest.identity)
    if problem is None and len({r.name for r in manifest.resources}) < len(manifest.resources):
        problem = "resources: a file is listed twice"
    if problem is not None:
        raise BundleError("damaged", f"{source}: {problem}: rebuild or pull the bundle again")
    if subject != manifest.bundle_id:
        raise BundleError(
            "tampered",
            f"{source}: the subject digest {subject[:12]} is not the identity's digest {manifest.bundle_id[:12]}",
        )
    return manifest


def _no_constant(name: str) -> None:
    raise ValueError(f"{name} is not JSON")  # NaN and Infinity: canonical JSON has neither


def read_manifest_unverified(directory: Path) -> tuple[Manifest, bytes, list[tuple[str, bytes]]]:
    """Parse a bundle directory's manifest without checking its signature (``show``, ``diff``).

    Returns:
        (manifest, payload bytes, signatures).

    Raises:
        BundleError: the directory or manifest is missing or damaged.
    """
    return parse_manifest(read_manifest_bytes(directory), str(manifest_path(directory)))


def read_manifest_bytes(directory: Path) -> bytes:
    """The bytes of a bundle directory's manifest file, read once: a caller that checks them (the signature, the
    files they list) and then hands them on (``bundle push``) parses these with :func:`parse_manifest`, so what it
    hands on is what it checked, whatever the file holds by then.

    Raises:
        BundleError: the directory or manifest is missing.
    """
    require_bundle_directory(directory)
    path = manifest_path(directory)
    try:
        return path.read_bytes()
    except OSError as exc:
        raise BundleError(
            "missing", f"cannot read {path}: {exc.strerror} (is {directory} a bundle directory?)"
        ) from None


def parse_manifest(data: bytes, source: str) -> tuple[Manifest, bytes, list[tuple[str, bytes]]]:
    """Parse a manifest file's bytes (the DSSE envelope) without checking its signature.

    Returns:
        (manifest, payload bytes, signatures).

    Raises:
        BundleError: the manifest is damaged (named as ``source``).
    """
    payload, sigs = parse_envelope(data, source)
    return parse_statement(payload, source), payload, sigs


def require_bundle_directory(directory: Path) -> None:
    """Refuse a path that is not a bundle directory, saying what it is instead.

    A packed bundle (``bundle pack``'s tar file) is the usual mix-up: the refusal names the unpack command.

    Raises:
        BundleError: ``bad_input`` for a file, ``missing`` for no such folder.
    """
    if directory.is_dir():
        return
    if directory.is_file():
        if tarfile.is_tarfile(directory):
            raise BundleError(
                "bad_input",
                f"{directory} is a packed bundle, not a bundle directory: unpack it first "
                f"(`inferensics bundle unpack {directory} --out DIR`) and pass DIR",
            )
        raise BundleError(
            "bad_input",
            f"{directory} is a file, not a bundle directory: pass the folder `inferensics bundle build` wrote",
        )
    raise BundleError("missing", f"{directory} is not a bundle directory (no such folder)")


def manifest_path(directory: Path) -> Path:
    """The manifest file of a bundle directory."""
    return directory / MANIFEST_FILE


# --- the identity's shape where anything reads it --------------------------------------------------------


def safe_name(name: str) -> str:
    """``name`` if it is a relative ``/``-separated path inside its folder (a bundle's or a replay pack's: no
    ``..``, ``.``, empty or absolute parts, no backslash); else ``ValueError``."""
    parts = name.split("/")
    if not name or "\\" in name or PurePosixPath(name).is_absolute() or any(p in {"", ".", ".."} for p in parts):
        raise ValueError(f"{name!r} is not a relative path inside its folder (absolute, '..', '.', empty or '\\' part)")
    return name


class _Open(BaseModel):
    """A group whose read fields are typed (strictly: no coercion) and whose other fields are left open."""

    model_config = ConfigDict(extra="allow", strict=True)


class _Model(_Open):
    factory: str = ""
    args: dict[str, Any] = Field(default_factory=dict)
    inputs: str | None = None


class _Weights(_Open):
    digest: str = ""


class _Settings(_Open):
    compile: dict[str, Any] = Field(default_factory=dict)
    changed: dict[str, Any] = Field(default_factory=dict)
    cpu_threads: int | None = None


class _Aoti(_Open):
    package: str
    members: dict[str, str]

    @field_validator("package")
    @classmethod
    def _inside(cls, value: str) -> str:
        return safe_name(value)


class _Artifacts(_Open):
    graphs: list[GraphRecord] = Field(default_factory=list)
    aoti: _Aoti | None = None


class _Shapes(_Open):
    shapes: list[list[int]] = Field(default_factory=list)
    dynamic: bool | None = False


class _Policy(_Open):
    priority: list[str] = Field(default_factory=list)
    bucket_priority: dict[str, list[str]] = Field(default_factory=dict)
    refused: list[dict[str, Any]] = Field(default_factory=list)


class _Registry(_Open):
    policy: dict[str, _Policy] = Field(default_factory=dict)
    ops: dict[str, Any] = Field(default_factory=dict)
    evidence: list[Any] = Field(default_factory=list)


class _Identity(_Open):
    model: _Model = Field(default_factory=_Model)
    code: dict[str, Any] = Field(default_factory=dict)
    weights: _Weights = Field(default_factory=_Weights)
    compiler_versions: dict[str, Any] = Field(default_factory=dict)
    settings: _Settings = Field(default_factory=_Settings)
    customisations: list[Customisation] = Field(default_factory=list)
    compatibility: dict[str, Any] = Field(default_factory=dict)
    kernel_registry: _Registry | None = None
    artifacts: _Artifacts = Field(default_factory=_Artifacts)
    accepted_shapes: _Shapes = Field(default_factory=_Shapes)


def identity_problem(identity: Any) -> str | None:
    """``identity.<field>: <what is wrong>`` for the first field of ``identity`` not of the type its readers
    take, or ``None``."""
    try:
        _Identity.model_validate(identity)
    except ValidationError as exc:
        return f"identity.{first_error(exc)}"
    return None


def first_error(exc: ValidationError) -> str:
    """``field.path: message`` of a validation error's first error, on one line."""
    first = exc.errors()[0]
    where = ".".join(p if isinstance(p, str) and p.isprintable() else repr(p) for p in first["loc"])
    return f"{where}: {first['msg']}".replace("\n", " ")
