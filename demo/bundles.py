"""The two release bundles of the demo: what each compiles with, and its content-addressed id.

A bundle here is the compiler configuration a serving worker compiles with. Its id is
``<name>-<first 12 hex of sha256(manifest)>`` (ARCHITECTURE.md decision 3: a digest of the manifest), with
the name in front so people can read it in the dashboard and type it into ``inferensics canary compare``.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

import torch

from inferensics.demo import incidents
from inferensics.demo.workload import BASELINE, CANDIDATE, RECOMPILE_LIMIT


@dataclass(frozen=True)
class Bundle:
    """A compiler configuration under a name."""

    name: str
    """``baseline`` or ``candidate``."""
    mode: str | None = None
    """``torch.compile`` mode."""
    options: dict[str, Any] = field(default_factory=dict)
    """Inductor options passed to ``torch.compile``."""
    decompositions: dict[str, str] = field(default_factory=dict)
    """Decomposition overrides registered in Inductor: operator → replacement."""
    cache_key_tag: str = ""
    """Salt of the compile-cache keys (``torch.compiler.config.cache_key_tag``)."""
    description: str = ""
    """What changed, in words."""

    def manifest(self) -> dict[str, Any]:
        """Everything that determines the compiled programs, as JSON-ready data."""
        return {
            "name": self.name,
            "torch": torch.__version__.split("+")[0],
            "mode": self.mode,
            "options": self.options,
            "decompositions": self.decompositions,
            "cache_key_tag": self.cache_key_tag,
            "dynamo": {"automatic_dynamic_shapes": False, "recompile_limit": RECOMPILE_LIMIT},
        }

    @property
    def bundle_id(self) -> str:
        """``<name>-<12 hex digits of the manifest's sha256>``."""
        digest = hashlib.sha256(json.dumps(self.manifest(), sort_keys=True).encode()).hexdigest()
        return f"{self.name}-{digest[:12]}"

    def activate(self) -> None:
        """Apply the process-wide parts of the bundle (Dynamo settings, decomposition overrides, salt).

        Call once, at the start of a serving worker, before anything compiles.
        """
        torch._dynamo.config.automatic_dynamic_shapes = False
        torch._dynamo.config.recompile_limit = RECOMPILE_LIMIT
        if self.decompositions:
            incidents.install_decomposition_fault()


BASELINE_BUNDLE = Bundle(name=BASELINE, description="production compiler configuration")
"""The bundle in production."""

CANDIDATE_BUNDLE = Bundle(
    name=CANDIDATE,
    decompositions={incidents.FAULT_OP: "inferensics.demo.incidents.fast_silu"},
    cache_key_tag=incidents.CANARY_CACHE_SALT,
    description="compiler upgrade with a 'fast SiLU' decomposition (faulty: sigmoid(1.702 x))",
)
"""The canary: the baseline plus a faulty decomposition, with its compile caches salted."""

BUNDLES: dict[str, Bundle] = {b.name: b for b in (BASELINE_BUNDLE, CANDIDATE_BUNDLE)}
"""Bundles by name."""


def decoder(seed: int = 0) -> torch.nn.Module:
    """The demo decoder as a plain ``tokens → logits`` module: the factory release bundles name."""
    from inferensics.demo.models.decoder import TinyDecoder

    return TinyDecoder(seed=seed)


def decoder_inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    """Token ids of ``shape`` (batch × sequence), the same for every process."""
    from inferensics.demo.models.decoder import DecoderConfig

    generator = torch.Generator().manual_seed(sum(shape))
    return (torch.randint(0, DecoderConfig().vocab_size, shape, generator=generator),)


DEMO_SHAPES: tuple[tuple[int, int], ...] = ((1, 16), (2, 32))
"""Prompt shapes (batch × padded sequence) the demo's release bundles are qualified on."""
DEMO_WEIGHTS: tuple[float, ...] = (3.0, 1.0)
"""Traffic weights of :data:`DEMO_SHAPES`."""


def release_spec(name: str, *, device: str = "cpu", advise: bool = False) -> Any:
    """The release-bundle build spec of ``baseline`` or ``candidate`` (the candidate records its faulty SiLU
    decomposition by import path and code digest, so a fresh process, and replay, reinstalls it)."""
    from inferensics import bundle

    customs = ()
    if name == CANDIDATE:
        customs = (bundle.describe_customisation("decomposition", "aten.silu.default", incidents.fast_silu),)
    return bundle.BuildSpec(
        model="inferensics.demo.bundles:decoder",
        inputs="inferensics.demo.bundles:decoder_inputs",
        shapes=bundle.ShapeDistribution.of(DEMO_SHAPES, DEMO_WEIGHTS),
        device=device,
        customisations=customs,
        name=name,
        advise=advise,
        repeats=1,
    )


def build_release_bundles(out: Any, key: Any, *, device: str = "cpu", advise: bool = False) -> dict[str, Any]:
    """Build and sign the demo's two release bundles into ``out/baseline`` and ``out/candidate``.

    The baseline is built first: building the candidate installs its decomposition in this process for good.

    Returns:
        Bundle name → :class:`inferensics.bundle.BuildResult`.
    """
    from pathlib import Path

    from inferensics import bundle

    root = Path(out)
    return {
        name: bundle.build(release_spec(name, device=device, advise=advise), key, root / name)
        for name in (BASELINE, CANDIDATE)
    }


def main() -> None:
    """``python -m inferensics.demo.bundles --out DIR [--key KEY]``: build the two release bundles."""
    import argparse
    from pathlib import Path

    from inferensics import bundle

    p = argparse.ArgumentParser(description="Build the demo's baseline and candidate release bundles.")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--key", type=Path, help="builder's private key (a new one is made under --out if omitted)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--advise", action="store_true", help="compare shape policies in the reports")
    args = p.parse_args()
    try:
        key_path = args.key or bundle.generate_key(args.out / "builder-key")[0]
        built = build_release_bundles(args.out, bundle.load_signing_key(key_path), device=args.device,
                                      advise=args.advise)  # fmt: skip
    except bundle.BundleError as exc:
        raise SystemExit(f"error: {exc}") from None
    for name, result in built.items():
        print(f"{name}: {result.bundle_id} in {result.directory}")


if __name__ == "__main__":
    main()
