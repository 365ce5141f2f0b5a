"""A content-addressed cache of built bundles: an unchanged build is reused, verified, instead of rebuilt.

A bundle's id digests its identity: the build's inputs (model factory and arguments, model code, weights,
compiler versions, settings, customisations, target, kernel registry) and what the build made of them
(graphs, accepted shapes). The outputs follow from the inputs, so the cache is keyed by the inputs, known
before compiling: :func:`build_key` digests the identity's input groups as :func:`~inferensics.bundle.build`
records them, the build spec's own choices (shapes and weights, inputs function, policy advice, repeats,
name, AOTInductor package, whether an inaccurate build may be signed), the signer, and every source file of
the packages the factory, the inputs function, the model's classes, the customisations and the builder come
from: the identity's ``code`` group digests only the files the model's classes come from, and serving glue
beside the model (padding, dynamic marks) shapes the graphs as much. Other installed packages are not keyed
(the compiler's are, by version and source-tree key).

A reused bundle is verified as a host would (signature by a trusted builder, per-file hashes, state,
compatibility, customisations) and its recorded input groups must equal this process's; a cached bundle
that fails either is dropped from the cache and rebuilt, and the result says why.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import shutil
import sys
import sysconfig
import tempfile
import types
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import torch

from inferensics.bundle import customisations as custom
from inferensics.bundle import factors
from inferensics.bundle.build import BuildSpec, build, make_model
from inferensics.bundle.canonical import canonical_json, digest_json, sha256_file
from inferensics.bundle.errors import BundleError
from inferensics.bundle.keys import Keyring, SigningKey
from inferensics.bundle.manifest import Manifest
from inferensics.bundle.progress import Progress, silent
from inferensics.bundle.verify import verify

CACHE_ENV: Final = "INFERENSICS_BUNDLE_CACHE"
"""Environment variable: the bundle cache's folder (default ``$XDG_CACHE_HOME/inferensics/bundles``, else
``~/.cache/inferensics/bundles``)."""
KEY_FILE: Final = "build-key.json"
"""The build key's inputs, beside each cached bundle (what ``key`` digests)."""
BUNDLE_DIR: Final = "bundle"
OUTPUT_GROUPS: Final = ("artifacts", "accepted_shapes")
"""Identity groups the build makes; every other group is an input and part of the build key."""
MAX_ENTRIES: Final = 16
"""Cached bundles kept by default (a few MB each for the demo's)."""
_COMPILER_PACKAGES: Final = ("torch", "triton", "functorch", "torchgen")


def default_cache_dir() -> Path:
    """``$INFERENSICS_BUNDLE_CACHE``, else ``$XDG_CACHE_HOME/inferensics/bundles``, else ``~/.cache/...``."""
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "inferensics" / "bundles"


@dataclass(frozen=True)
class BuildKey:
    """What a build depends on, and its digest."""

    digest: str
    inputs: dict[str, Any]


@dataclass(frozen=True)
class CachedBuild:
    """A bundle in ``directory``, built now or reused from the cache.

    ``reused`` says which; ``rejected`` says why a cached bundle for the same key was not reused (empty when
    there was none, or it was).
    """

    directory: Path
    manifest: Manifest
    key: BuildKey
    reused: bool
    rejected: str = ""
    not_stored: str = ""
    """Why a bundle built now could not be cached (empty: it was, or it was reused)."""

    @property
    def bundle_id(self) -> str:
        """The bundle id."""
        return self.manifest.bundle_id


def _package(module_name: str) -> Any:
    """The package a module belongs to: its top-level package, or the one below a namespace package
    (``inferensics.demo`` for ``inferensics.demo.models.decoder``), or the module itself when it is none."""
    parts = module_name.split(".")
    for depth in range(1, len(parts) + 1):
        try:
            found = importlib.import_module(".".join(parts[:depth]))
        except ImportError:
            return None
        if getattr(found, "__file__", None):  # not a namespace package
            return found
    return None


def source_digests(module_names: Iterable[str]) -> dict[str, str]:
    """``file → sha256`` of every Python source file of the packages ``module_names`` belong to (a plain
    module: its own file), relative to each package's folder and prefixed with the package's name."""
    out: dict[str, str] = {}
    for name in sorted(set(module_names)):
        package = _package(name)
        if package is None or package.__name__.split(".")[0] in _COMPILER_PACKAGES:
            continue
        folders = [Path(p) for p in getattr(package, "__path__", [])]
        if not folders:
            out[package.__name__] = sha256_file(Path(package.__file__))
            continue
        for folder in folders:
            for path in sorted(folder.rglob("*.py")):
                rel = path.relative_to(folder).as_posix()
                with contextlib.suppress(OSError):
                    out[f"{package.__name__}/{rel}"] = sha256_file(path)
    return dict(sorted(out.items()))


def input_groups(identity: Mapping[str, Any]) -> dict[str, Any]:
    """The identity's input groups (every group but :data:`OUTPUT_GROUPS`)."""
    return {k: v for k, v in identity.items() if k not in OUTPUT_GROUPS}


def build_key(spec: BuildSpec, signer: str) -> BuildKey:
    """The cache key of building ``spec`` signed by key id ``signer``, in this process.

    Installs the spec's customisations and makes the model, as :func:`~inferensics.bundle.build` does first (in its
    :func:`~inferensics.bundle.customisations.build_scope`: afterwards the process's compiler is as before).

    Raises:
        BundleError: bad input (factory, inputs function, AOTInductor package, a pass or decomposition set in this
            process that the spec does not record).
    """
    with custom.build_scope(spec.customisations):  # the process's compiler as the build compiles with it
        custom.install(spec.customisations)
        model, _ = make_model(spec)
        custom.refuse_undeclared(spec.customisations)
        identity, extra = factors.collect(
            model,
            factory=spec.model,
            factory_args=spec.model_args,
            device=spec.device,
            compile_args=spec.compile_args(),
            customisations=spec.customisations,
            registry=spec.registry,
        )
    if spec.inputs:
        identity["model"]["inputs"] = spec.inputs
    aoti = ""
    if spec.aoti_package is not None:
        try:
            aoti = sha256_file(spec.aoti_package)
        except OSError as exc:
            raise BundleError("bad_input", f"--aoti {spec.aoti_package}: cannot read it ({exc.strerror})") from None
    inputs = {
        "identity": input_groups(identity),
        "extra": extra,
        "spec": {
            "shapes": [[list(s.shape), s.weight] for s in spec.shapes.shapes],
            "advise": spec.advise,
            "repeats": spec.repeats,
            "name": spec.name,
            "aoti_package": aoti,
            "allow_inaccurate": spec.allow_inaccurate,
            # only when there are some: the keys of every other build stay what they were
            **({"left_out_shapes": [s.to_json() for s in spec.left_out_shapes]} if spec.left_out_shapes else {}),
        },
        "signer": signer,
        "source": source_digests(_code_modules(spec, model)),
    }
    return BuildKey(digest_json(inputs), inputs)


def _code_modules(spec: BuildSpec, model: Any) -> list[str]:
    """Modules whose packages' source a build depends on: the factory's, the inputs function's, the model
    classes', the customisations', the builder's own (its report and capture shape the bundle), and the
    modules they use (:func:`module_closure`: a model module calling a kernel library pulls that library in)."""
    names = [spec.model.partition(":")[0], __name__]
    if spec.inputs:
        names.append(spec.inputs.partition(":")[0])
    modules = model.modules() if isinstance(model, torch.nn.Module) else [model]
    names += [type(m).__module__ for m in modules]
    names += [c.import_path.partition(":")[0] for c in spec.customisations if c.import_path]
    return module_closure(n for n in names if n)


def _outside_environment(module: Any) -> bool:
    """A module that is neither the standard library nor an installed distribution (the user's own code)."""
    path = getattr(module, "__file__", None)
    if not path:
        return False
    parts = Path(path).resolve().parts
    if "site-packages" in parts or "dist-packages" in parts:
        return False
    stdlib = Path(sysconfig.get_paths()["stdlib"]).resolve().parts
    return parts[: len(stdlib)] != stdlib


def module_closure(start: Iterable[str]) -> list[str]:
    """``start`` and, transitively, the modules their globals name (module objects, and the modules of
    functions and classes imported from them), followed into the same top-level packages as ``start`` and
    into code outside the standard library and installed distributions; never into the compiler."""
    names = [n for n in start if n in sys.modules and n.split(".")[0] not in _COMPILER_PACKAGES]
    tops = {n.split(".")[0] for n in names}
    seen: set[str] = set(names)
    todo = list(names)
    while todo:
        module = sys.modules.get(todo.pop())
        for value in list(vars(module).values()) if module is not None else ():
            target = (
                value
                if isinstance(value, types.ModuleType)
                else sys.modules.get(getattr(value, "__module__", "") or "")
            )
            if target is None:
                continue
            name = target.__name__
            if name in seen or name.split(".")[0] in _COMPILER_PACKAGES:
                continue
            if name.split(".")[0] in tops or _outside_environment(target):
                seen.add(name)
                todo.append(name)
    return sorted(seen)


class BundleCache:
    """Built bundles under ``root/<build key>/bundle``, each with its key's inputs (:data:`KEY_FILE`).

    Args:
        root: The cache folder (created on first store).
        max_entries: Bundles kept; storing one more removes the least recently stored or reused.
    """

    def __init__(self, root: Path | str | None = None, *, max_entries: int = MAX_ENTRIES) -> None:
        self.root = Path(root) if root is not None else default_cache_dir()
        self.max_entries = max_entries

    def entry(self, key: BuildKey) -> Path:
        """The folder of ``key``'s cached bundle."""
        return self.root / key.digest / BUNDLE_DIR

    def lookup(self, key: BuildKey, keyring: Keyring) -> tuple[Path | None, str]:
        """The verified cached bundle of ``key`` and ``""``, or ``None`` and why there is none usable (``""``:
        nothing cached). A cached bundle that fails verification is removed."""
        directory = self.entry(key)
        if not directory.is_dir():
            return None, ""
        try:
            verified = verify(directory, keyring)
        except BundleError as exc:
            self.evict(key)
            return None, f"cached bundle failed verification ({exc.cause}): {exc}"
        if input_groups(verified.manifest.identity) != key.inputs["identity"]:
            self.evict(key)
            return None, f"cached bundle {verified.manifest.bundle_id[:12]} records other build inputs"
        return directory, ""

    def store(self, key: BuildKey, directory: Path) -> Path:
        """Copy a built bundle into the cache under ``key`` (atomically; a concurrent store of the same key
        keeps the first)."""
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=".store-", dir=self.root))
        try:
            shutil.copytree(directory, tmp / BUNDLE_DIR)
            (tmp / KEY_FILE).write_bytes(canonical_json(key.inputs))
            final = self.root / key.digest
            shutil.rmtree(final, ignore_errors=True)
            with contextlib.suppress(OSError):
                os.replace(tmp, final)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        self.prune()
        return self.entry(key)

    def entries(self) -> list[Path]:
        """Cached bundles' key folders, most recently stored or reused first."""
        if not self.root.is_dir():
            return []
        found = [p for p in self.root.iterdir() if p.is_dir() and (p / KEY_FILE).is_file()]
        return sorted(found, key=lambda p: (p / KEY_FILE).stat().st_mtime, reverse=True)

    def prune(self) -> list[Path]:
        """Remove the cached bundles past :attr:`max_entries` (least recently used first); returns them."""
        removed = self.entries()[self.max_entries :]
        for p in removed:
            shutil.rmtree(p, ignore_errors=True)
        return removed

    def evict(self, key: BuildKey) -> None:
        """Remove ``key``'s cached bundle."""
        shutil.rmtree(self.root / key.digest, ignore_errors=True)

    def build(
        self,
        spec: BuildSpec,
        key: SigningKey,
        out: Path,
        *,
        keyring: Keyring | None = None,
        rebuild: bool = False,
        progress: Progress = silent,
    ) -> CachedBuild:
        """Copy the verified cached bundle of this build into ``out``, or build it there and cache it.

        Args:
            spec: What to build.
            key: The builder's signing key (part of the build key: a bundle is reused only as its signer's).
            keyring: Keys a cached bundle's signature is verified against (default: the signer's public key).
            out: The bundle's folder (must not exist or be empty).
            rebuild: Build even when a cached bundle exists (and replace it).
            progress: Told one line per stage of a build (:func:`~inferensics.bundle.build.build`).

        Raises:
            BundleError: bad input, or the build failed.
        """
        if out.exists() and any(out.iterdir()):
            raise BundleError("bad_input", f"{out} exists and is not empty: choose a new --out")
        bkey = build_key(spec, key.keyid)
        keyring = keyring or Keyring.of(key.private.public_key())
        cached, rejected = (None, "") if rebuild else self.lookup(bkey, keyring)
        if cached is not None:
            if out.exists():
                out.rmdir()
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(cached, out)
            with contextlib.suppress(OSError):
                (cached.parent / KEY_FILE).touch()  # recently used: kept longest
            # The copy is what hosts load: verify it too (a file changed between the check and the copy).
            return CachedBuild(out, verify(out, keyring).manifest, bkey, reused=True)
        result = build(spec, key, out, progress=progress)
        not_stored = ""
        try:
            self.store(bkey, out)
        except OSError as exc:  # the bundle is built and good; only the next build will not find it
            not_stored = f"cannot store it in the bundle cache {self.root}: {exc.strerror or exc}"
        return CachedBuild(out, result.manifest, bkey, reused=False, rejected=rejected, not_stored=not_stored)
