"""The demo's serving workload: who sends what, where it is served, and how shapes are compiled.

Everything here is a pure function of a seed, so a run can be reproduced request by request.

Traffic classes (tenants in brackets):

- ``interactive`` (acme, globex, initech): chat; 1–4 sequences, prompts around 48 tokens with a long tail,
  4–12 generated tokens; both models; both hardware pools.
- ``batch`` (umbrella): offline summarisation; 4–8 sequences, prompts around 160 tokens with a tail past the
  compiled range; 2–4 generated tokens; both models; pool ``cpu-b`` only.
- ``agent`` (hooli): tool-using agents; 1–2 sequences, 6–12 generated tokens; the project's decoder only;
  pool ``cpu-a`` only. Partway through the run this tenant turns on speculative decoding (see
  :mod:`inferensics.demo.incidents`).

Hardware pools are labels of serving workers: ``cpu-a`` runs the decoder, ``cpu-b`` runs the decoder and
the Hugging Face model. Two bundles: ``baseline`` serves both pools; the ``candidate`` bundle (a shadow
canary on pool ``cpu-b``) receives a mirrored copy of pool ``cpu-b``'s traffic (incidents aside), so the two
bundles can be compared on identical inputs.

Dynamic-shape policy (:data:`POLICY_TEXT`, printed by ``inferensics demo``):

- batch is padded up to the next power of two, at least 2 (PyTorch specialises size-1 dimensions, so a
  batch of 1 would compile a graph of its own), and marked dynamic;
- prompt length is padded up to a multiple of 16 and marked dynamic;
- KV-cache capacity is padded up to a multiple of 64 and marked dynamic;
- the number of tokens per decode step is static: 1 for ordinary decoding, so every other value is a new
  specialisation (a recompile);
- automatic dynamic shapes are off: a dimension is dynamic only when the policy marks it;
- prompts longer than 512 tokens bypass compilation and run eagerly;
- the recompile limit is 4 cache entries per frame, after which a frame runs eagerly.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from typing import Literal

DECODER_MODEL = "tiny-decoder"
"""Model label of the project's own decoder (:mod:`inferensics.demo.models.decoder`)."""
HF_MODEL = "hf-llama-tiny"
"""Model label of the Hugging Face causal LM (:mod:`inferensics.demo.models.hf`)."""
POOL_A = "cpu-a"
"""Hardware pool serving the decoder only."""
POOL_B = "cpu-b"
"""Hardware pool serving both models, and hosting the canary."""
BASELINE = "baseline"
"""Name of the bundle in production."""
CANDIDATE = "candidate"
"""Name of the canary bundle."""
TRAFFIC_CLASSES: tuple[str, ...] = ("interactive", "batch", "agent")
"""The three traffic classes."""

MIN_BATCH = 2
"""Smallest compiled batch (see the policy)."""
SEQ_MULTIPLE = 16
"""Prompt lengths are padded to a multiple of this."""
CAPACITY_MULTIPLE = 64
"""KV-cache capacities are padded to a multiple of this."""
MAX_COMPILED_SEQ = 512
"""Longest padded prompt that runs compiled; longer prompts run eagerly."""
RECOMPILE_LIMIT = 4
"""Cache entries per frame before Dynamo falls back to eager (PyTorch's default is 8)."""
STORM_RECOMPILES = RECOMPILE_LIMIT - 1
"""Recompiles of one frame in one worker before the limit stops them: the most the demo's storm can have in
one hour of one model and pool, so the floor of the storm rule the demo's dashboard starts with (a fleet's
default floor, 10, would hide it)."""

POLICY_TEXT = f"""\
dynamic-shape policy
  batch          padded to the next power of two (>= {MIN_BATCH}), dynamic
  prompt length  padded to a multiple of {SEQ_MULTIPLE}, dynamic
  KV capacity    padded to a multiple of {CAPACITY_MULTIPLE}, dynamic
  decode step    tokens per step static (1); any other value is a new specialisation
  automatic dynamic shapes off; recompile limit {RECOMPILE_LIMIT} entries per frame
  bypass         prompts longer than {MAX_COMPILED_SEQ} tokens run eagerly (never compiled)"""
"""The policy as printed by the demo."""

Incident = Literal["", "storm", "invalid", "nan"]
Kind = Literal["generate", "score"]


@dataclass(frozen=True)
class RequestSpec:
    """One request of the workload; its inputs are a pure function of ``input_seed``."""

    request_id: str
    """Unique id (mirrored copies served by the canary add ``-c``)."""
    at_s: float
    """Arrival time in seconds from the start of the run."""
    model: str
    """:data:`DECODER_MODEL` or :data:`HF_MODEL`."""
    traffic_class: str
    """One of :data:`TRAFFIC_CLASSES`."""
    tenant: str
    """Tenant sending the request."""
    pool: str
    """Hardware pool that serves it."""
    kind: Kind
    """``generate`` (prefill then decode steps, decoder only) or ``score`` (one forward pass)."""
    batch: int
    """Number of sequences."""
    prompt_len: int
    """Prompt tokens per sequence."""
    new_tokens: int = 0
    """Tokens to generate per sequence (``generate`` only)."""
    spec_tokens: int = 0
    """Draft tokens verified per decode step (speculative decoding); 0 for ordinary decoding."""
    incident: Incident = ""
    """The injected incident this request carries, if any."""
    mirror: bool = False
    """Whether the canary bundle also serves a copy of it."""
    input_seed: int = 0
    """Seed of the request's token ids."""

    @property
    def shape(self) -> str:
        """Shape signature, e.g. ``2x48+8`` (batch × prompt + new tokens) or ``2x48+8/q3`` with drafts."""
        sig = f"{self.batch}x{self.prompt_len}"
        if self.kind == "generate":
            sig += f"+{self.new_tokens}"
        if self.spec_tokens:
            sig += f"/q{self.spec_tokens + 1}"
        return sig

    def as_canary(self) -> RequestSpec:
        """The mirrored copy served by the canary: same inputs, its own id."""
        return replace(self, request_id=f"{self.request_id}-c", mirror=False)


@dataclass(frozen=True)
class Workload:
    """A seeded request stream and the times of its incidents."""

    seed: int
    """Seed the stream was drawn from."""
    duration_s: float
    """Length of the arrival schedule in seconds."""
    requests: tuple[RequestSpec, ...]
    """All baseline requests, in arrival order."""
    storm_onset_s: float
    """When the agent tenant turns speculative decoding on."""

    def for_pool(self, pool: str) -> list[RequestSpec]:
        """Requests served by the baseline workers of ``pool``."""
        return [r for r in self.requests if r.pool == pool]

    def for_canary(self) -> list[RequestSpec]:
        """Mirrored copies served by the candidate bundle."""
        return [r.as_canary() for r in self.requests if r.mirror]


def padded_batch(batch: int) -> int:
    """Batch size after padding under the policy."""
    return max(MIN_BATCH, 1 << (batch - 1).bit_length())


def padded_seq(length: int) -> int:
    """Prompt length after padding under the policy."""
    return max(SEQ_MULTIPLE, math.ceil(length / SEQ_MULTIPLE) * SEQ_MULTIPLE)


def padded_capacity(positions: int) -> int:
    """KV-cache capacity after padding under the policy."""
    return max(CAPACITY_MULTIPLE, math.ceil(positions / CAPACITY_MULTIPLE) * CAPACITY_MULTIPLE)


def bypasses_compile(spec: RequestSpec) -> bool:
    """Whether the policy runs this request eagerly."""
    return padded_seq(spec.prompt_len) > MAX_COMPILED_SEQ


def shape_bucket(spec: RequestSpec) -> str:
    """The bucket a request falls in under the policy, e.g. ``b4:s64`` or ``eager:s>512``."""
    if bypasses_compile(spec):
        return f"eager:s>{MAX_COMPILED_SEQ}"
    bucket = f"b{padded_batch(spec.batch)}:s{padded_seq(spec.prompt_len)}"
    return bucket + (f":q{spec.spec_tokens + 1}" if spec.spec_tokens else "")


def _lognormal_len(rng: random.Random, median: float, sigma: float, low: int, high: int) -> int:
    return int(min(high, max(low, round(rng.lognormvariate(math.log(median), sigma)))))


def _organic(rng: random.Random, at_s: float, storm_on: bool) -> RequestSpec:
    """One request drawn from the traffic mix (id and seed filled in by the caller)."""
    u = rng.random()
    if u < 0.6:
        pool = rng.choice((POOL_A, POOL_B))
        model = DECODER_MODEL if pool == POOL_A or rng.random() < 0.6 else HF_MODEL
        return RequestSpec(
            request_id="",
            at_s=at_s,
            model=model,
            traffic_class="interactive",
            tenant=rng.choice(("acme", "globex", "initech")),
            pool=pool,
            kind="generate" if model == DECODER_MODEL else "score",
            batch=rng.choice((1, 1, 1, 2, 2, 3, 4)),
            prompt_len=_lognormal_len(rng, 48, 0.8, 4, 1000),
            new_tokens=rng.randint(4, 12) if model == DECODER_MODEL else 0,
        )
    if u < 0.85:
        model = rng.choice((DECODER_MODEL, HF_MODEL))
        return RequestSpec(
            request_id="",
            at_s=at_s,
            model=model,
            traffic_class="batch",
            tenant="umbrella",
            pool=POOL_B,
            kind="generate" if model == DECODER_MODEL else "score",
            batch=rng.randint(4, 8),
            prompt_len=_lognormal_len(rng, 160, 0.7, 16, 1000),
            new_tokens=rng.randint(2, 4) if model == DECODER_MODEL else 0,
        )
    return RequestSpec(
        request_id="",
        at_s=at_s,
        model=DECODER_MODEL,
        traffic_class="agent",
        tenant="hooli",
        pool=POOL_A,
        kind="generate",
        batch=rng.choice((1, 2)),
        prompt_len=_lognormal_len(rng, 96, 0.6, 8, 480),
        new_tokens=rng.randint(6, 12),
        spec_tokens=rng.randint(2, 6) if storm_on and rng.random() < 0.7 else 0,
    )


STORM_BURST: tuple[int, ...] = (2, 3, 4, 5, 6, 2, 6, 3)
"""Draft tokens per step of the burst that opens the storm: three new step sizes fill the recompile limit,
the next two new ones fall back to eager, and the repeats hit."""


def _agent(at_s: float, spec_tokens: int, incident: Incident) -> RequestSpec:
    return RequestSpec(
        request_id="",
        at_s=at_s,
        model=DECODER_MODEL,
        traffic_class="agent",
        tenant="hooli",
        pool=POOL_A,
        kind="generate",
        batch=2,
        prompt_len=72,
        new_tokens=8,
        spec_tokens=spec_tokens,
        incident=incident,
    )


def _scripted(duration_s: float, storm_onset_s: float) -> list[RequestSpec]:
    """The injected incidents at fixed fractions of the run (see :mod:`inferensics.demo.incidents`)."""
    specs = [_agent(storm_onset_s + 0.2 * i, k, "storm") for i, k in enumerate(STORM_BURST)]
    for frac, pool in ((0.55, POOL_A), (0.8, POOL_B)):
        specs.append(
            RequestSpec(
                request_id="",
                at_s=frac * duration_s,
                model=DECODER_MODEL,
                traffic_class="interactive",
                tenant="initech",
                pool=pool,
                kind="generate",
                batch=1,
                prompt_len=40,
                new_tokens=6,
                incident="invalid",
            )
        )
    specs.append(
        RequestSpec(
            request_id="",
            at_s=0.65 * duration_s,
            model=DECODER_MODEL,
            traffic_class="batch",
            tenant="umbrella",
            pool=POOL_B,
            kind="generate",
            batch=4,
            prompt_len=120,
            new_tokens=3,
            incident="nan",
        )
    )
    return specs


def build_workload(seed: int = 0, duration_s: float = 120.0, rate: float = 3.0) -> Workload:
    """Draw a request stream: Poisson arrivals at ``rate`` per second for ``duration_s``, plus incidents.

    Every request of pool ``cpu-b`` that carries no incident is mirrored to the canary (shadow traffic), so
    the canary comparison has input-matched pairs even on a short run.
    """
    if duration_s <= 0 or rate <= 0:
        raise ValueError(f"duration ({duration_s}) and rate ({rate}) must be positive")
    rng = random.Random(seed)
    storm_onset_s = 0.4 * duration_s
    specs: list[RequestSpec] = []
    t = rng.expovariate(rate)
    while t < duration_s:
        specs.append(_organic(rng, t, storm_on=t >= storm_onset_s))
        t += rng.expovariate(rate)
    specs = [replace(s, incident="storm") if s.spec_tokens else s for s in specs]
    specs += _scripted(duration_s, storm_onset_s)
    specs.sort(key=lambda s: s.at_s)
    final = [
        replace(
            s,
            request_id=f"req-{seed:02d}-{i:05d}",
            input_seed=seed * 1_000_003 + i,
            mirror=s.pool == POOL_B and not s.incident,
        )
        for i, s in enumerate(specs)
    ]
    return Workload(seed=seed, duration_s=duration_s, requests=tuple(final), storm_onset_s=storm_onset_s)
