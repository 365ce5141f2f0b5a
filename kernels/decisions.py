"""Which provider served each call signature, why the others were skipped, and what went wrong.

Dispatch decides once per signature (dtypes, shapes, strides, device, whether compiling) and reuses the
decision, so the log holds one :class:`Decision` per signature with a call count, not one per call. It is
bounded: past :data:`MAX_SIGNATURES` signatures new ones are counted, not kept. It also keeps what the
process did with qualification evidence it was asked to follow (:class:`EvidenceApplication`).
"""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

MAX_SIGNATURES = 4096
"""Signatures the log keeps per op before it only counts."""


@dataclass(frozen=True, slots=True)
class Decision:
    """The provider chosen for one call signature of one op.

    Attributes:
        op: Semantic op name.
        provider: Provider that serves the signature.
        signature: Argument signature (``bfloat16[8,4096]@cuda, ...``).
        bucket: Shape bucket the priority list was taken from.
        skipped: ``(provider, reason)`` for each provider tried before it, in priority order.
        compiled: Whether the decision was made while a compiler traced the op into a graph.
        fallback: Whether it fell through to the reference because no other provider could serve it.
        compile_id: The compile (Dynamo's ``0/1``) that made it; empty for eager decisions.
    """

    op: str
    provider: str
    signature: str
    bucket: str
    skipped: tuple[tuple[str, str], ...] = ()
    compiled: bool = False
    fallback: bool = False
    compile_id: str = ""

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form (``skipped`` as a list of ``{provider, reason}``)."""
        d = asdict(self)
        d["skipped"] = [{"provider": p, "reason": r} for p, r in self.skipped]
        return d

    def summary(self) -> str:
        """``op=provider`` with the skipped providers and reasons, one line."""
        why = "; ".join(f"{p}: {r}" for p, r in self.skipped)
        return f"{self.op}={self.provider}" + (f" ({why})" if why else "")


@dataclass(frozen=True, slots=True)
class EvidenceApplication:
    """Qualification evidence this process was asked to follow, and what of it took effect.

    Attributes:
        digest: The evidence file's digest (the ``evidence_digest`` of its stored records).
        origin: Where it came from (a file path, or the bundle that carried it).
        measured_on: The device it was measured on.
        device: This process's device it was compared with.
        applied: One line per policy entry set (``op bucket: provider > ... > reference``, a refusal).
        refused: One line per entry not applied, each with why.
        reason: Why nothing was applied (another device, another registry state); empty when it was.
        follows: Whether the registry's state digest now equals the one the evidence records.
        interpreter: Whether it was measured on CPU tensors in Triton's interpreter (``measured_on`` is ``cpu``).
    """

    digest: str
    origin: str
    measured_on: str
    device: str
    applied: tuple[str, ...] = ()
    refused: tuple[str, ...] = ()
    reason: str = ""
    follows: bool = False
    interpreter: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON-ready form."""
        d = asdict(self)
        d["applied"], d["refused"] = list(self.applied), list(self.refused)
        return d

    def summary(self) -> str:
        """One line: the evidence, where it came from, what was applied and refused (and why none was)."""
        where = f"{self.measured_on} (Triton interpreter)" if self.interpreter else self.measured_on
        head = f"evidence {self.digest[:12]} ({self.origin}) measured on {where}"
        why = f": not applied, {self.reason}" if self.reason else ""
        return f"{head}: {len(self.applied)} applied, {len(self.refused)} refused{why}"


MAX_APPLICATIONS = 64
"""Evidence applications the log keeps (each is also counted)."""


class DecisionLog:
    """Thread-safe record of decisions, call counts, provider failures, quarantines and evidence applied."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.decisions: dict[tuple[str, str, bool], Decision] = {}
        self.calls: Counter[tuple[str, str]] = Counter()
        """Eager calls served per ``(op, provider)``. A compiled graph runs its provider's code without the
        dispatcher, so its calls are not counted here; its decisions (``compiled``) say what it holds."""
        self.failures: Counter[tuple[str, str]] = Counter()
        """Exceptions raised per ``(op, provider)``; each took the provider out for that signature. The provider
        ``<bucket>`` (``op.UNBUCKETED``) counts the op's own ``bucket`` function raising: the reference served."""
        self.untraceable: Counter[tuple[str, str]] = Counter()
        """Providers per ``(op, provider)`` that raised while a compiler traced them (or their requirement check did):
        each left compiled graphs for that signature, not eager calls, and is not counted in ``failures``."""
        self.unproven: Counter[tuple[str, str]] = Counter()
        """Compile-time probes per ``(op, provider)`` that could not be made (no memory for a copy of the arguments,
        a data-dependent size): the provider went into the graph without a run on real tensors."""
        self.fallbacks: Counter[str] = Counter()
        """Decisions per op that fell through to the reference."""
        self.unrecorded: Counter[str] = Counter()
        """Decisions per op not kept because the log was full."""
        self.evidence_applied: Counter[str] = Counter()
        """Policy entries per op set from qualification evidence (:class:`EvidenceApplication`)."""
        self.evidence_refused: Counter[str] = Counter()
        """Policy entries per op of qualification evidence not applied (another device, unknown provider)."""
        self._applications: list[EvidenceApplication] = []
        self.listeners: tuple[Callable[[Decision], None], ...] = ()
        """Called with each decision kept that differs from the one its signature held (on the deciding thread,
        outside the lock; an exception is swallowed): the host SDK exports eager decisions this way."""

    def record(self, decision: Decision) -> None:
        """Keep ``decision`` (the latest for its signature) and tell the listeners when it is new."""
        key = (decision.op, decision.signature, decision.compiled)
        with self._lock:
            if key not in self.decisions and len(self.decisions) >= MAX_SIGNATURES:
                self.unrecorded[decision.op] += 1
                return
            if key not in self.decisions and decision.fallback:
                self.fallbacks[decision.op] += 1
            changed = self.decisions.get(key) != decision
            self.decisions[key] = decision
        if changed:
            for listener in self.listeners:
                with contextlib.suppress(Exception):  # a listener must never fail a serving call
                    listener(decision)

    def count_call(self, op: str, provider: str) -> None:
        """Count one call served (unlocked: a lost increment under a race is harmless for a counter)."""
        self.calls[(op, provider)] += 1

    def count_failure(self, op: str, provider: str) -> None:
        """Count one exception raised by a provider."""
        with self._lock:
            self.failures[(op, provider)] += 1

    def count_untraceable(self, op: str, provider: str) -> None:
        """Count one provider (or its check) that raised while a compiler traced it."""
        with self._lock:
            self.untraceable[(op, provider)] += 1

    def count_unproven(self, op: str, provider: str) -> None:
        """Count one compile-time probe of ``provider`` that could not be made."""
        with self._lock:
            self.unproven[(op, provider)] += 1

    def record_evidence(self, application: EvidenceApplication) -> None:
        """Keep ``application`` and count its entries per op."""
        with self._lock:
            self._applications = [*self._applications, application][-MAX_APPLICATIONS:]
            self.evidence_applied.update(line.split(" ", 1)[0].rstrip(":") for line in application.applied)
            self.evidence_refused.update(line.split(" ", 1)[0].rstrip(":") for line in application.refused)

    def applications(self) -> list[EvidenceApplication]:
        """Every evidence application kept, oldest first."""
        with self._lock:
            return list(self._applications)

    def snapshot(self) -> list[Decision]:
        """Every kept decision, ordered by op and signature."""
        with self._lock:
            return sorted(self.decisions.values(), key=lambda d: (d.op, d.signature, d.compiled))

    def stats(self) -> dict[str, Any]:
        """Counters as plain data."""
        with self._lock:
            return {
                "calls": {f"{o}/{p}": n for (o, p), n in sorted(self.calls.items())},
                "failures": {f"{o}/{p}": n for (o, p), n in sorted(self.failures.items())},
                "untraceable": {f"{o}/{p}": n for (o, p), n in sorted(self.untraceable.items())},
                "unproven": {f"{o}/{p}": n for (o, p), n in sorted(self.unproven.items())},
                "fallbacks": dict(sorted(self.fallbacks.items())),
                "unrecorded": dict(sorted(self.unrecorded.items())),
                "evidence_applied": dict(sorted(self.evidence_applied.items())),
                "evidence_refused": dict(sorted(self.evidence_refused.items())),
            }

    def clear(self) -> None:
        """Forget everything (tests, and a registry reset)."""
        with self._lock:
            self.decisions.clear()
            self.calls.clear()
            self.failures.clear()
            self.untraceable.clear()
            self.unproven.clear()
            self.fallbacks.clear()
            self.unrecorded.clear()
            self.evidence_applied.clear()
            self.evidence_refused.clear()
            self._applications = []
