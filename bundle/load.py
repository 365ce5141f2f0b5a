"""``load``: verify, then install the recorded compiler and the bundle's compile-cache artifacts.

Nothing of the bundle is loaded before :func:`~inferensics.bundle.verify.verify` has passed. Then, in order:
the recorded customisations are installed for the process in place of an earlier load's (a later load replaces
them and a build sets them aside, :func:`~inferensics.bundle.customisations.build_scope`), the recorded non-default
compiler settings (and, for a CPU bundle, the intra-op thread count its kernels were generated for) are applied, the
compiled CPU kernels and the Mega-Cache blob are installed into the local caches, and an AOTInductor
package is loaded, if the bundle has one. A bundle built with ``--kernel-evidence`` carries its qualification
evidence (checked before anything loads): the kernel registry then follows that evidence's selection policy
in this process, unless it was measured on another device than this host's (reported, never applied).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from inferensics.bundle import customisations as custom
from inferensics.bundle import torch_adapter
from inferensics.bundle.build import CPU_KERNELS, KERNEL_EVIDENCE, MEGACACHE
from inferensics.bundle.errors import BundleError
from inferensics.bundle.keys import Keyring
from inferensics.bundle.manifest import Manifest
from inferensics.bundle.session import BundleSession, CompileBudget, MissPolicy
from inferensics.bundle.states import BundleStates
from inferensics.bundle.verify import VerifiedBundle, verify

if TYPE_CHECKING:
    from inferensics.kernels import EvidenceApplication


@dataclass
class LoadedBundle:
    """A verified bundle whose artifacts are installed in this process."""

    directory: Path
    manifest: Manifest
    builder_keyid: str
    cache_keys: dict[str, list[str]] = field(default_factory=dict)
    """Cache kind → keys the Mega-Cache blob installed."""
    skipped_settings: list[str] = field(default_factory=list)
    """Recorded settings that could not be applied here (not plain values)."""
    aoti: Any = None
    """The loaded AOTInductor package, when the bundle carries one."""
    kernel_evidence: EvidenceApplication | None = None
    """What following the bundle's kernel qualification evidence did here (applied and refused entries), when
    it carries one."""

    @property
    def bundle_id(self) -> str:
        """The bundle id."""
        return self.manifest.bundle_id

    @property
    def compile_args(self) -> dict[str, Any]:
        """The recorded torch.compile arguments (mode, options, dynamic, fullgraph)."""
        return dict(self.manifest.identity.get("settings", {}).get("compile", {}))

    @property
    def config_patches(self) -> dict[str, Any]:
        """Inductor options the bundle compiled with (its mode's options merged with explicit ones)."""
        args = self.compile_args
        return {**torch_adapter.mode_options(args.get("mode")), **dict(args.get("options") or {})}

    def session(
        self,
        *,
        on_bundle_miss: MissPolicy = "compile",
        budget: CompileBudget | None = None,
        listener: Any = None,
        on_unqualified_shape: Any = None,
    ) -> BundleSession:
        """A :class:`BundleSession` gating compiles through this bundle (``on_unqualified_shape``: told of each call
        a hit serves at sizes the bundle never qualified)."""
        return BundleSession(
            self, on_bundle_miss=on_bundle_miss, budget=budget, listener=listener,
            on_unqualified_shape=on_unqualified_shape,
        )  # fmt: skip

    def compile(self, model: Any, session: BundleSession | None = None) -> Any:
        """``torch.compile`` the model the way the bundle was built, gated by ``session`` (default: compile
        misses within the default budget)."""
        s = session or self.session()
        args = self.compile_args
        return torch.compile(
            model, backend=s.backend(), dynamic=args.get("dynamic"), fullgraph=bool(args.get("fullgraph"))
        )


def load(
    directory: Path | str,
    keyring: Keyring,
    *,
    states: BundleStates | None = None,
    device: str | None = None,
    apply_settings: bool = True,
) -> LoadedBundle:
    """Verify a bundle and install it in this process (the kernel registry follows the qualification evidence
    the bundle carries; :attr:`LoadedBundle.kernel_evidence` says what it applied).

    Raises:
        BundleError: any verification failure (nothing is loaded then).
    """
    verified = verify(directory, keyring, states=states, device=device)
    manifest = verified.manifest
    evidence = kernel_evidence_of(verified)
    custom.install_loaded(custom.Customisation(**c) for c in manifest.identity.get("customisations", []))
    skipped: list[str] = []
    if apply_settings:
        changed: Mapping[str, Any] = manifest.identity.get("settings", {}).get("changed", {})
        skipped = torch_adapter.apply_settings(changed)
    threads = manifest.identity.get("settings", {}).get("cpu_threads")
    if apply_settings and isinstance(threads, int) and threads > 0 and torch.get_num_threads() != threads:
        torch.set_num_threads(threads)  # the CPU kernels were generated (and keyed) for this many threads
    torch_adapter.install_cache_files(verified.directory / CPU_KERNELS)
    blob = (verified.directory / MEGACACHE).read_bytes()
    keys = torch_adapter.load_cache_artifacts(blob) if blob else {}
    aoti = None
    aoti_rec = manifest.identity.get("artifacts", {}).get("aoti")
    if aoti_rec:
        aoti = torch_adapter.aoti_load_package(str(verified.directory / aoti_rec["package"]))
    applied: EvidenceApplication | None = None
    if evidence is not None:
        from inferensics.kernels import apply_evidence

        applied = apply_evidence(
            evidence,
            device=_evidence_device(manifest, device),
            origin=f"bundle {manifest.bundle_id[:12]}",
            expect_registry=_recorded_registry(manifest),
        )
    return LoadedBundle(verified.directory, manifest, verified.builder_keyid, keys, skipped, aoti, applied)


def kernel_evidence_of(verified: VerifiedBundle) -> dict[str, Any] | None:
    """The bundle's kernel evidence, parsed and checked, if it carries one: the bytes :func:`verify` hashed
    against the signed sha256 (the file is not read again, so what applies is what was verified).

    Raises:
        BundleError: ``damaged`` when it is not an intact evidence file.
    """
    if verified.kernel_evidence is None:
        return None
    from inferensics.kernels import EvidenceError
    from inferensics.kernels.evidence import parse_evidence

    try:
        return parse_evidence(verified.kernel_evidence, f"{verified.directory}: {KERNEL_EVIDENCE}")
    except EvidenceError as exc:
        raise BundleError("damaged", f"{exc}: rebuild the bundle") from None


def kernel_evidence_line(manifest: Manifest, evidence: Mapping[str, Any] | None, device: str | None = None) -> str:
    """One line for an operator: the kernel evidence a bundle carries (``evidence``, parsed), the device it was
    measured on, and whether a :func:`load` on this host (as ``device``, default the bundle's device type) follows
    it or applies none of it, decided as the load decides."""
    if evidence is None:
        return "kernel evidence: none (hosts keep their own kernel priorities)"
    from inferensics.kernels.evidence import measured_device, refusal_reason

    head = f"kernel evidence {str(evidence.get('digest', ''))[:16]}"
    reason = refusal_reason(evidence, _evidence_device(manifest, device), _recorded_registry(manifest))
    if reason:
        return f"{head}: {reason}: a load here applies none of it (the bundle still loads)"
    return f"{head}: measured on {measured_device(evidence)}, this host's device: a load here follows its priorities"


def kernel_evidence_carried_line(evidence: Mapping[str, Any], origin: str) -> str:
    """What ``bundle build`` says of the evidence it carried (``evidence``, parsed; ``origin``, where it came from):
    which hosts that load the bundle follow it, decided as :func:`load` decides there. The build has refused
    evidence of another device than the bundle's, so what is left to say is the interpreter's rule: CPU evidence
    measured in Triton's interpreter holds only where the interpreter runs."""
    from inferensics.kernels.evidence import measured_device, measured_in_interpreter
    from inferensics.kernels.requirements import INTERPRETER_ENV, interpreter_enabled

    head = f"kernel evidence {str(evidence.get('digest', ''))[:16]} from {origin} carried"
    if not measured_in_interpreter(evidence):
        return f"{head}: measured on {measured_device(evidence)}: hosts that load the bundle follow its priorities"
    here = "as this one does" if interpreter_enabled() else "this one does not: `bundle verify` here says so"
    return (
        f"{head}, but measured in Triton's interpreter: only hosts that run it (TRITON_INTERPRET=1 "
        f"{INTERPRETER_ENV}=1) follow its kernel priorities; a CPU host without it applies none of it and the bundle "
        f"still loads ({here})"
    )


def _evidence_device(manifest: Manifest, device: str | None) -> str:
    """What a load applies evidence for: ``device``, else the device type the bundle was built for."""
    compatibility = manifest.identity.get("compatibility")  # a dict once verified; `bundle show` reads unverified
    return device or str(compatibility.get("device_type", "cpu") if isinstance(compatibility, dict) else "cpu")


def _recorded_registry(manifest: Manifest) -> str:
    recorded = manifest.identity.get("kernel_registry")
    return str(recorded.get("digest", "") if isinstance(recorded, dict) else "")
