"""The registry: every semantic op, the decision log, and the selection policy as data.

The policy (each op's default and per-bucket priority lists, the accuracy gate's refusals, the promotion
margin) is what a release bundle records: :meth:`Registry.state` returns it as JSON-ready data with a
digest, and :meth:`Registry.apply_policy` sets it from such data on another host
(:func:`inferensics.kernels.apply_evidence` from an evidence file, with the rule for another device).
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any, Final

import torch

from inferensics.kernels.decisions import Decision, DecisionLog
from inferensics.kernels.op import SemanticOp
from inferensics.kernels.requirements import interpreter_enabled

STATE_VERSION = 1
"""Version of the :meth:`Registry.state` layout."""
STATE_BODY: Final = ("version", "ops", "policy", "evidence")
"""The keys of :meth:`Registry.state` its ``digest`` covers."""


def canonical_digest(data: Any) -> str:
    """sha256 of ``data`` as canonical JSON (sorted keys, no spaces)."""
    text = json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def state_problem(state: Any) -> str | None:
    """Why ``state`` is not what :meth:`Registry.state` returns (its digest over the rest included), or ``None``."""
    if not isinstance(state, dict):
        return "not a JSON object"
    if canonical_digest({k: state.get(k) for k in STATE_BODY}) != state.get("digest"):
        return "its contents do not match its digest: damaged or edited"
    if not isinstance(state.get("policy"), dict) or not isinstance(state.get("evidence"), list):
        return "policy is not an object, or evidence not an array"
    return None


class Registry:
    """The semantic ops of one process."""

    def __init__(self, ops: list[SemanticOp], log: DecisionLog) -> None:
        self.ops: dict[str, SemanticOp] = {op.name: op for op in ops}
        self.log = log
        self.evidence: list[str] = []
        """Digests of the qualification evidence that changed the policy, in order (each the ``digest`` of its
        evidence file and the ``evidence_digest`` of its stored records)."""

    def add(self, op: SemanticOp) -> SemanticOp:
        """Add an op of your own (made with this registry's :attr:`log`, so its decisions are recorded with the
        others'); returns it. ``ValueError`` when an op of that name is here already."""
        if op.name in self.ops:
            raise ValueError(f"kernel op {op.name!r} is already in the registry")
        self.ops[op.name] = op
        return op

    def op(self, name: str) -> SemanticOp:
        """The op called ``name``; ``KeyError`` names the known ones."""
        try:
            return self.ops[name]
        except KeyError:
            raise KeyError(f"no kernel op {name!r}; known: {', '.join(sorted(self.ops))}") from None

    def decisions(self) -> list[Decision]:
        """Every recorded decision."""
        return self.log.snapshot()

    def policy(self) -> dict[str, Any]:
        """The selection policy: priorities and refusals per op (what a bundle pins)."""
        return {
            name: {
                "priority": list(op.priority),
                "bucket_priority": {b: list(v) for b, v in sorted(op.bucket_priority.items())},
                "refused": [{"bucket": b, "provider": p, "reason": r} for (b, p), r in sorted(op.refused.items())],
            }
            for name, op in sorted(self.ops.items())
        }

    def apply_policy(self, policy: dict[str, Any]) -> list[str]:
        """Set priorities and refusals from :meth:`policy` data; returns one line per entry it could not apply
        (unknown op or provider, malformed data), applying the rest: each op's default list, each bucket's list
        and each refusal stands or falls alone."""
        problems: list[str] = []
        for name, entry in policy.items():
            if name not in self.ops:
                problems.append(f"unknown op {name!r}")
                continue
            op = self.ops[name]
            if not isinstance(entry, dict):
                problems.append(f"{name}: malformed policy (not an object: {entry!r})")
                continue
            orders: list[tuple[str, Any, str | None]] = []  # (where, priority list, bucket or None)
            if "priority" in entry:
                orders.append(("", entry["priority"], None))
            buckets = entry.get("bucket_priority", {})
            if isinstance(buckets, dict):
                orders += [(f"bucket {bucket}: ", order, str(bucket)) for bucket, order in buckets.items()]
            else:
                problems.append(f"{name}: malformed policy (bucket_priority is not an object: {buckets!r})")
            refused = entry.get("refused", [])
            if not isinstance(refused, list):
                problems.append(f"{name}: malformed policy (refused is not an array: {refused!r})")
                refused = []
            for where, order, bucket in orders:
                try:
                    op.set_priority(_names(order), bucket)
                except ValueError as exc:
                    problems.append(f"{name}: {where}{str(exc).removeprefix(f'{name}: ')}")
            for i, r in enumerate(refused):
                try:
                    op.refuse(str(r["bucket"]), str(r["provider"]), str(r["reason"]))
                except (TypeError, KeyError, AttributeError) as exc:  # data from a file: said, not raised
                    problems.append(f"{name}: refusal {i}: malformed policy ({exc!r})")
        return problems

    def state(self) -> dict[str, Any]:
        """Registry state and selection policy as JSON-ready data, with ``digest`` over the rest.

        The digest covers the ops, their providers and requirements, tolerances, priorities, refusals and
        evidence digests; the environment (torch and Triton versions) is recorded beside it.
        """
        ops = {name: op.describe() for name, op in sorted(self.ops.items())}
        body: dict[str, Any] = dict(
            zip(STATE_BODY, (STATE_VERSION, ops, self.policy(), list(self.evidence)), strict=True)
        )
        for op in body["ops"].values():
            op.pop("quarantined")  # runtime state of this process, not policy
            op.pop("untraceable")
        digest = canonical_digest(body)
        return {**body, "environment": environment(), "digest": digest}


INTERPRETED_CPU: Final = "cpu (Triton interpreter)"
"""The ``device`` of :func:`environment` where CPU tensors reach Triton providers through Triton's interpreter
(:func:`~inferensics.kernels.requirements.interpreter_enabled`): timings and accuracy verdicts measured there hold
for the interpreter, not for a CPU that serves without it."""


def environment() -> dict[str, str]:
    """Versions and device that evidence is valid for (``device``: the GPU, ``cpu``, or :data:`INTERPRETED_CPU`)."""
    device = INTERPRETED_CPU if interpreter_enabled() else "cpu"
    env = {"torch": torch.__version__, "triton": "", "cuda": str(torch.version.cuda or ""), "device": device}
    try:
        import triton

        env["triton"] = str(triton.__version__)
    except ImportError:
        pass
    if torch.cuda.is_available():
        major, minor = torch.cuda.get_device_capability()
        env["device"] = f"{torch.cuda.get_device_name()} (sm_{major}{minor})"
    return env


_DEFAULT: list[Registry] = []
_DEFAULT_LOCK = threading.Lock()


def default_registry() -> Registry:
    """The process's registry, built on first use (defines the ``torch.ops.inferensics`` operators)."""
    if _DEFAULT:
        return _DEFAULT[0]
    with _DEFAULT_LOCK:
        if not _DEFAULT:
            from inferensics.kernels.ops import activation, attention, norm, rotary

            log = DecisionLog()
            ops = [*norm.register(log), *activation.register(log), *rotary.register(log), *attention.register(log)]
            _DEFAULT.append(Registry(ops, log))
    return _DEFAULT[0]


def built_registry() -> Registry | None:
    """The process's registry if something has built it, else ``None`` (never builds it: a reader of its
    counters, such as the host SDK's health record, must not define the operators or import Triton)."""
    return _DEFAULT[0] if _DEFAULT else None


def _names(order: Any) -> list[str]:
    if not isinstance(order, list) or not all(isinstance(p, str) for p in order):
        raise ValueError(f"a priority list must be an array of provider names, not {order!r}")
    return order
