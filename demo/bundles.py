"""The demo's two release bundles, built, signed and qualified with :mod:`inferensics.bundle`.

The ``baseline`` bundle is the production compiler; the ``candidate`` adds a "fast SiLU" decomposition
(faulty: ``x * sigmoid(1.702 x)``), recorded in its manifest by import path and code digest so a serving
host, and replay, reinstall exactly that compiler. Both are built from :class:`ServingDecoder`: the decoder
served the way the demo's workers serve it, so the graphs a bundle holds are the graphs a worker compiles
(the decoder's ``prefill`` and its one-token ``decode_step``, with the policy's dynamic marks) and a worker
that loads the bundle serves those from it (bundle hits). What the bundles do not hold is a counted bundle
miss on the workers: the Hugging Face model, and decode steps of other widths (speculative decoding).

``python -m inferensics.demo.bundles --out DIR`` builds both (``inferensics demo`` builds them in parallel,
one process each, with ``--only``); with ``--cache DIR`` an unchanged build reuses its verified bundle
(:class:`inferensics.bundle.BundleCache`) and ``--rebuild`` builds anew.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from inferensics.demo import incidents
from inferensics.demo.serving import ModelServer, apply_dynamo_policy, calls_traced
from inferensics.demo.workload import BASELINE, CANDIDATE, DECODER_MODEL, RequestSpec

RELEASE_NAMES: tuple[str, ...] = (BASELINE, CANDIDATE)
"""The two release bundles, in build order."""
QUALIFY_NEW_TOKENS = 4
"""Tokens generated per qualification request (one-token decode steps)."""


class ServingDecoder(torch.nn.Module):
    """The demo decoder as the workers serve it: ``tokens → logits`` through :meth:`ModelServer.generate`
    (padding, dynamic marks, prefill, then :data:`QUALIFY_NEW_TOKENS` one-token decode steps).

    ``forward`` itself is never traced: compiling this module compiles the frames it calls, the decoder's
    ``prefill`` and ``decode_step``, exactly as a worker's ``tracker.compile`` compiles them. Its arguments
    are the names the workers capture a request's inputs under (``tokens``, and ``k_cache`` for a request
    resumed from a cache page), so replay calls it with a captured request as it was served. The decode
    steps continue from the prompt's last token (not from each step's argmax), so two compilers' outputs
    compare position by position.
    """

    def __init__(self, seed: int = 0, new_tokens: int = QUALIFY_NEW_TOKENS) -> None:
        super().__init__()
        self.server = ModelServer(_as_is, models=(DECODER_MODEL,), device=torch.device("cpu"), seed=seed)
        self.decoder = self.server.decoder
        self.new_tokens = new_tokens

    @calls_traced
    def forward(self, tokens: torch.Tensor, k_cache: torch.Tensor | None = None) -> torch.Tensor:
        """The logits of the prompt's last position and of each decode step, from ``batch × prompt`` token
        ids (and a resumed key cache, see :meth:`ModelServer.generate`)."""
        self.server.device = tokens.device
        b, s = tokens.shape
        spec = RequestSpec(
            request_id="bundle-qualification",
            at_s=0.0,
            model=DECODER_MODEL,
            traffic_class="",
            tenant="",
            pool="",
            kind="generate",
            batch=b,
            prompt_len=s,
            new_tokens=self.new_tokens,
        )
        return self.server.generate(spec, tokens, k_cache, greedy=False)


def _as_is(fn: Any, _model: str) -> Any:
    return fn


def serving_decoder(seed: int = 0) -> ServingDecoder:
    """The factory the release bundles name."""
    return ServingDecoder(seed=seed)


def decoder(seed: int = 0) -> torch.nn.Module:
    """The demo decoder as a plain ``tokens → logits`` module: the factory release bundles name."""
    from inferensics.demo.models.decoder import TinyDecoder

    return TinyDecoder(seed=seed)


def decoder_inputs(shape: tuple[int, ...]) -> tuple[torch.Tensor]:
    """Token ids of ``shape`` (batch × sequence), the same for every process."""
    from inferensics.demo.models.decoder import DecoderConfig

    generator = torch.Generator().manual_seed(sum(shape))
    return (torch.randint(0, DecoderConfig().vocab_size, shape, generator=generator),)


DEMO_SHAPES: tuple[tuple[int, int], ...] = ((2, 48), (1, 20), (6, 160))
"""Prompt shapes (batch × prompt tokens) the release bundles are qualified on: the workload's interactive
and batch prompts (padded by the policy, and all served by the same dynamic graphs)."""
DEMO_WEIGHTS: tuple[float, ...] = (3.0, 2.0, 1.0)
"""Traffic weights of :data:`DEMO_SHAPES`."""


def release_spec(name: str, *, device: str = "cpu", advise: bool = False) -> Any:
    """The release-bundle build spec of ``baseline`` or ``candidate`` (the candidate records its faulty SiLU
    decomposition by import path and code digest, so a fresh process, and replay, reinstalls it)."""
    from inferensics import bundle

    customs: tuple[Any, ...] = ()
    if name == CANDIDATE:
        customs = (bundle.describe_customisation("decomposition", "aten.silu.default", incidents.fast_silu),)
    return bundle.BuildSpec(
        model="inferensics.demo.bundles:serving_decoder",
        inputs="inferensics.demo.bundles:decoder_inputs",
        shapes=bundle.ShapeDistribution.of(DEMO_SHAPES, DEMO_WEIGHTS),
        device=device,
        options=dict(bundle.PROVENANCE_OPTIONS),  # the request page maps kernels to source lines
        dynamic=None,
        customisations=customs,
        name=name,
        advise=advise,
        repeats=1,
        # The candidate is the demo's planted numeric fault, signed on purpose so that the canary serves it and
        # replay names it; qualification would refuse it otherwise (its report still records the figures).
        allow_inaccurate=name == CANDIDATE,
    )


def build_release_bundle(
    name: str,
    out: Path,
    key: Any,
    *,
    device: str = "cpu",
    advise: bool = False,
    cache: Path | None = None,
    rebuild: bool = False,
) -> Any:
    """Build and sign one release bundle into ``out`` under the serving policy's Dynamo settings; with
    ``cache``, an unchanged build's verified bundle is copied from there instead (``rebuild``: build anew).

    Building the candidate installs its decomposition in this process for good: build it last, or alone.

    Returns:
        The :class:`inferensics.bundle.BuildResult`, or with ``cache`` the :class:`inferensics.bundle.CachedBuild`.
    """
    from inferensics import bundle

    apply_dynamo_policy()
    spec = release_spec(name, device=device, advise=advise)
    if cache is None:
        return bundle.build(spec, key, out)
    return bundle.BundleCache(cache).build(spec, key, out, rebuild=rebuild)


def build_release_bundles(out: Any, key: Any, *, device: str = "cpu", advise: bool = False) -> dict[str, Any]:
    """Build and sign the demo's two release bundles into ``out/baseline`` and ``out/candidate``.

    Returns:
        Bundle name → :class:`inferensics.bundle.BuildResult`.
    """
    root = Path(out)
    return {name: build_release_bundle(name, root / name, key, device=device, advise=advise) for name in RELEASE_NAMES}


BUILD_STATUS_SUFFIX = ".build.json"
"""Beside each bundle folder ``NAME``, ``NAME.build.json`` says how :func:`main` made it (``bundle_id``,
``reused``, ``rejected``, ``build_key``): the demo's release step reads it."""


def main(argv: list[str] | None = None) -> None:
    """``python -m inferensics.demo.bundles --out DIR [--key KEY] [--only NAME] [--cache DIR] [--rebuild]``:
    build the release bundles, or reuse the verified bundles of an unchanged build from ``--cache``."""
    import argparse
    import json
    import warnings

    from inferensics import bundle

    p = argparse.ArgumentParser(description="Build the demo's baseline and candidate release bundles.")
    p.add_argument("--out", type=Path, required=True, help="folder for the bundles (one sub-folder each)")
    p.add_argument("--key", type=Path, help="builder's private key (a new one is made under --out if omitted)")
    p.add_argument("--only", choices=RELEASE_NAMES, help="build this bundle only (into --out/NAME)")
    p.add_argument("--device", default="auto", help="cpu, cuda or auto (cuda when visible: where workers serve)")
    p.add_argument("--threads", type=int, default=0, help="intra-op threads (0: torch's default)")
    p.add_argument("--advise", action="store_true", help="compare shape policies in the reports")
    p.add_argument("--cache", type=Path, help="bundle cache: reuse the verified bundle of an unchanged build")
    p.add_argument("--rebuild", action="store_true", help="with --cache: build anew and replace the cached bundle")
    args = p.parse_args(argv)
    warnings.filterwarnings("ignore", message="`torch.jit.script", category=DeprecationWarning)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.device == "auto":
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    names = [args.only] if args.only else list(RELEASE_NAMES)
    try:
        key_path = args.key or bundle.generate_key(args.out / "builder-key")[0]
        key = bundle.load_signing_key(key_path)
        for name in names:
            out = args.out / name
            result = build_release_bundle(
                name, out, key, device=args.device, advise=args.advise, cache=args.cache, rebuild=args.rebuild
            )
            cached = result if isinstance(result, bundle.CachedBuild) else None
            if cached is not None and cached.rejected:
                print(f"{name}: not reusing the cached bundle: {cached.rejected}", flush=True)
            if cached is not None and cached.not_stored:
                print(f"{name}: {cached.not_stored}", flush=True)
            how = "reused bundle" if cached is not None and cached.reused else "built"
            build_key = cached.key.digest if cached is not None else ""
            keyed = f" (build key {build_key[:12]})" if build_key else ""
            print(f"{name}: {how} {result.bundle_id} in {out}{keyed}", flush=True)
            status = {"bundle_id": result.bundle_id, "reused": how != "built",
                      "rejected": cached.rejected if cached is not None else "", "build_key": build_key}  # fmt: skip
            out.with_name(name + BUILD_STATUS_SUFFIX).write_text(json.dumps(status), encoding="utf-8")
    except bundle.BundleError as exc:
        raise SystemExit(f"error: {exc}") from None


if __name__ == "__main__":
    main()
