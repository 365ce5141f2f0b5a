"""Release bundles: build, sign, verify, load and diff the identity of what a host executes.

A bundle is a directory (or one tar file, :func:`pack`) holding a DSSE-signed in-toto statement
(``manifest.json``) and the files it lists with their sha256: the Mega-Cache blob, each graph's generated
code and guards, an optional AOTInductor package, and the qualification report. The bundle id is the
sha256 of the identity (raw factors by group, graphs, accepted shapes). Needs only torch, triton, pydantic
and cryptography.

API (stable; replay builds on it):

- :func:`generate_key`, :func:`load_signing_key`, :class:`Keyring` (``$INFERENSICS_BUNDLE_KEYRING``).
- :class:`BuildSpec`, :class:`ShapeDistribution`, :func:`build` → :class:`BuildResult` (``.directory``,
  ``.manifest``, ``.bundle_id``); ``progress=`` a :data:`Progress` is told each stage as it goes.
- :class:`BundleCache` (``$INFERENSICS_BUNDLE_CACHE``): ``.build(spec, key, out, rebuild=False)``
  → :class:`CachedBuild` reuses the verified bundle of an unchanged build (``.reused``) or builds it.
- :func:`verify` → :class:`VerifiedBundle`; :func:`load` → :class:`LoadedBundle` (``.compile(model)``,
  ``.session(on_bundle_miss=..., budget=...)``, ``.compile_args``, ``.config_patches``).
- :class:`BundleSession` (``.stats()``), :class:`CompileBudget`, :class:`BundleMatch`,
  :class:`BundleMissRefusedError`, :class:`UnqualifiedShape` (a hit served at sizes the bundle never qualified).
- :func:`read_manifest` (unverified, for show/diff), :class:`Manifest`, :class:`GraphRecord`,
  :func:`diff` → list of :class:`FactorChange`, :func:`render_diff`.
- :func:`pack` / :func:`unpack`; :class:`BundleStates` (``$INFERENSICS_BUNDLE_STATES``).
- :class:`Customisation`, :func:`describe_customisation`.
- :class:`BundleError` (``.cause``): every refusal and bad input, one line.

Directory layout: ``manifest.json``, ``artifacts/megacache.bin``, ``artifacts/graphs/<fx_key>/output_code.py``
and ``guards.txt``, ``artifacts/aoti/<name>.pt2`` (optional), ``report/qualification.{json,md,html}``.
"""

from __future__ import annotations

from pathlib import Path

from inferensics.bundle.build import PROVENANCE_OPTIONS, BuildResult, BuildSpec, build
from inferensics.bundle.cache import BundleCache, CachedBuild
from inferensics.bundle.customisations import Customisation
from inferensics.bundle.customisations import describe as describe_customisation
from inferensics.bundle.diff import FactorChange, diff
from inferensics.bundle.diff import render as render_diff
from inferensics.bundle.errors import BundleError
from inferensics.bundle.keys import Keyring, SigningKey, generate_key, load_signing_key
from inferensics.bundle.load import LoadedBundle, load
from inferensics.bundle.manifest import FACTOR_GROUPS, GraphRecord, Manifest, read_manifest_unverified
from inferensics.bundle.pack import pack, unpack
from inferensics.bundle.progress import Progress
from inferensics.bundle.session import (
    BundleMatch,
    BundleMissRefusedError,
    BundleSession,
    CompileBudget,
    UnqualifiedShape,
)
from inferensics.bundle.shapes import ShapeDistribution
from inferensics.bundle.states import BundleStates
from inferensics.bundle.verify import VerifiedBundle, verify


def read_manifest(directory: Path | str) -> Manifest:
    """A bundle directory's manifest, parsed but not verified (``show``, ``diff``).

    Raises:
        BundleError: missing or damaged manifest.
    """
    return read_manifest_unverified(Path(directory))[0]


__all__ = [
    "FACTOR_GROUPS",
    "PROVENANCE_OPTIONS",
    "BuildResult",
    "BuildSpec",
    "BundleCache",
    "BundleError",
    "BundleMatch",
    "BundleMissRefusedError",
    "BundleSession",
    "BundleStates",
    "CachedBuild",
    "CompileBudget",
    "Customisation",
    "FactorChange",
    "GraphRecord",
    "Keyring",
    "LoadedBundle",
    "Manifest",
    "Progress",
    "ShapeDistribution",
    "SigningKey",
    "UnqualifiedShape",
    "VerifiedBundle",
    "build",
    "describe_customisation",
    "diff",
    "generate_key",
    "load",
    "load_signing_key",
    "pack",
    "read_manifest",
    "render_diff",
    "unpack",
    "verify",
]
