"""Following qualification evidence in a process that did not measure it.

``inferensics kernels qualify`` changes priorities in its own process and writes the evidence file; a serving
host follows that evidence when its bundle carries it (``bundle build --kernel-evidence``, applied on load) or
through :func:`apply_evidence`. The registry then holds the evidence's whole selection policy (default and
per-bucket priority lists, the accuracy gate's refusals) and its evidence digests, so its state digest equals
the one the file records.

The rule for another device: timings and accuracy verdicts hold for the device they were measured on, and
every record of one file shares that device (its ``environment``, or ``cpu`` when ``options.device`` was the
CPU). Evidence measured elsewhere applies nothing: each entry it would have set is refused, counted and named,
with the two devices. CPU evidence measured in Triton's interpreter (its ``environment`` says
:data:`~inferensics.kernels.registry.INTERPRETED_CPU`) holds only where the interpreter runs: a CPU host without
it applies none of it, refused the same way. Versions are not compared here: a bundle's verification already
refuses another torch, Triton or CUDA.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from inferensics.kernels.decisions import EvidenceApplication
from inferensics.kernels.qualify import UNSUPPORTED
from inferensics.kernels.registry import INTERPRETED_CPU, STATE_BODY, Registry, default_registry, environment
from inferensics.kernels.requirements import INTERPRETER_ENV, interpreter_enabled


class EvidenceError(ValueError):
    """An evidence file that cannot be read or is not one ``kernels qualify`` wrote (one line, naming why)."""


def read_evidence(path: Path | str) -> dict[str, Any]:
    """The parsed evidence file at ``path``, checked by :func:`~inferensics.kernels.qualify.evidence_problem`.

    Raises:
        EvidenceError: unreadable, not JSON, or not an evidence file (damaged or edited), one line.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise EvidenceError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    return parse_evidence(data, str(path))


def parse_evidence(data: bytes | str, origin: str) -> dict[str, Any]:
    """An evidence file's parsed contents, checked as :func:`read_evidence` does (``origin`` names it).

    Raises:
        EvidenceError: not JSON, or not an evidence file (damaged or edited), one line.
    """
    from inferensics.kernels.qualify import evidence_problem

    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise EvidenceError(
            f"{origin}: not JSON ({exc}); expected the file `inferensics kernels qualify --out` writes"
        ) from None
    problem = evidence_problem(doc)
    if problem is not None:
        raise EvidenceError(f"{origin}: {problem} (`inferensics kernels qualify --out` writes one)")
    result: dict[str, Any] = doc
    return result


def measured_device(doc: Mapping[str, Any]) -> str:
    """The device an evidence file was measured on: ``cpu``, or the GPU as :func:`environment` names it."""
    env_device = doc.get("environment", {}).get("device")
    if str(doc.get("options", {}).get("device", "")).startswith("cpu") or env_device == INTERPRETED_CPU:
        return "cpu"
    return str(env_device or "")


def device_label(device: str | None = None) -> str:
    """How :func:`measured_device` names ``device`` (``cpu``, ``cuda``) of this process (default: the GPU when
    there is one, else ``cpu``)."""
    here = environment()["device"]
    if (device is not None and device.startswith("cpu")) or here == INTERPRETED_CPU:
        return "cpu"
    return here


def measured_in_interpreter(doc: Mapping[str, Any]) -> bool:
    """Whether ``doc`` was measured on CPU tensors in Triton's interpreter: its ``environment`` says so, or (a file
    written before it did) one of its CPU records ran a provider that a CPU runs only in the interpreter."""
    if measured_device(doc) != "cpu":
        return False
    if doc.get("environment", {}).get("device") == INTERPRETED_CPU:
        return True
    ops = doc.get("registry", {}).get("ops")
    for r in doc.get("records", []):
        op = ops.get(r.get("op")) if isinstance(ops, dict) else None
        providers = op.get("providers") if isinstance(op, dict) else None
        for p in providers if isinstance(providers, list) else []:
            platforms = p.get("requirements", {}).get("platforms", []) if isinstance(p, dict) else []
            ran = r.get("status") != UNSUPPORTED and p.get("name") == r.get("provider")
            if ran and isinstance(platforms, list) and "interpreter" in platforms and "cpu" not in platforms:
                return True
    return False


def refusal_reason(doc: Mapping[str, Any], device: str | None = None, expect_registry: str | None = None) -> str:
    """Why :func:`apply_evidence` would apply nothing of ``doc`` in this process (``""`` when it would follow it):
    measured on another device than ``device`` (as :func:`device_label` names it), or its registry state is not
    ``expect_registry``. A bundle's verification and ``kernels list --evidence`` say it with the same words."""
    measured, here = measured_device(doc), device_label(device)
    if measured != here:
        return f"measured on {measured or 'an unnamed device'}, not on this host's {here}"
    if here == "cpu" and not interpreter_enabled() and measured_in_interpreter(doc):
        return (
            "measured in Triton's interpreter, which this host does not run: its timings and accuracy verdicts "
            f"hold only with TRITON_INTERPRET=1 {INTERPRETER_ENV}=1"
        )
    if expect_registry is not None and doc["registry"].get("digest") != expect_registry:
        return "its registry state is not the one the bundle records"
    return ""


def state_differences(here: Mapping[str, Any], recorded: Mapping[str, Any], limit: int = 6) -> list[str]:
    """Where two registry states (:meth:`Registry.state`) differ, as ``path: here … recorded …`` lines."""
    out: list[str] = []

    def walk(a: Any, b: Any, path: str) -> None:
        if len(out) >= limit or a == b:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b), key=str):
                if key not in a or key not in b:
                    out.append(f"{path}{key}: {'only in the evidence' if key not in a else 'only here'}")
                else:
                    walk(a[key], b[key], f"{path}{key}.")
            return
        if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
            for i, (x, y) in enumerate(zip(a, b, strict=True)):
                walk(x, y, f"{path}{i}.")
            return
        out.append(f"{path.rstrip('.')}: here {_short(a)}, evidence {_short(b)}")

    walk({k: here.get(k) for k in STATE_BODY}, {k: recorded.get(k) for k in STATE_BODY}, "")
    return out


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _entries(name: str, entry: Any, current: Mapping[str, Any]) -> list[str]:
    """One line per thing ``entry`` (one op's policy) sets: its default list when it differs from the current
    one, each bucket's list, each refusal."""
    try:
        lines = []
        if "priority" in entry and list(entry["priority"]) != list(current.get("priority", [])):
            lines.append(f"{name}: {' > '.join(map(str, entry['priority']))}")
        buckets = sorted(dict(entry.get("bucket_priority", {})).items())
        lines += [f"{name} {b}: {' > '.join(map(str, o))}" for b, o in buckets]
        lines += [f"{name} {r['bucket']}: {r['provider']} refused ({r['reason']})" for r in entry.get("refused", [])]
    except (TypeError, KeyError, AttributeError, ValueError):
        return [f"{name}: malformed policy entry"]
    return lines


def _snapshot(registry: Registry) -> tuple[dict[str, Any], list[str]]:
    saved = {n: (list(op.priority), dict(op.bucket_priority), dict(op.refused)) for n, op in registry.ops.items()}
    return saved, list(registry.evidence)


def _restore(registry: Registry, saved: dict[str, Any], names: Any = None) -> None:
    for n in names if names is not None else saved:
        op = registry.ops[n]
        op.priority, op.bucket_priority, op.refused = list(saved[n][0]), dict(saved[n][1]), dict(saved[n][2])
        op._invalidate()  # its cached decisions were taken under the other policy


def _follow(registry: Registry, doc: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """Set each op of the evidence's policy to exactly that policy, op by op (all of an op or none of it)."""
    policy = doc["registry"]["policy"]
    current = registry.policy()
    saved, _ = _snapshot(registry)
    applied: list[str] = []
    refused: list[str] = []
    for name, entry in sorted(policy.items()):
        lines = _entries(name, entry, current.get(name, {}))
        if name not in registry.ops:
            refused += [f"{line} (no op {name!r} here)" for line in lines] or [f"{name}: no such op here"]
            continue
        op = registry.ops[name]
        op.bucket_priority.clear()
        op.refused.clear()
        problems = registry.apply_policy({name: entry})
        if problems:
            _restore(registry, saved, [name])
            refused += [f"{line} ({'; '.join(problems)})" for line in lines] or problems
        else:
            applied += lines
    registry.evidence[:] = [str(d) for d in doc["registry"].get("evidence", [])]
    return applied, refused


def apply_evidence(
    source: Path | str | Mapping[str, Any],
    *,
    registry: Registry | None = None,
    device: str | None = None,
    origin: str = "",
    expect_registry: str | None = None,
) -> EvidenceApplication:
    """Make the registry follow an evidence file's selection policy in this process, and record what it did.

    Each op the evidence's policy names gets exactly that policy (its default list, bucket lists and refusals),
    or, when this process cannot take it (an unknown provider), keeps its own and the op's entries are refused.
    Nothing is applied when the evidence was measured on another device than ``device`` (see the module's
    rule), or when its registry digest is not ``expect_registry``. The result is also kept in the registry's
    log (:meth:`~inferensics.kernels.decisions.DecisionLog.applications`, counted in ``log.stats()``). Call it
    before the process serves, as a bundle's load does: a graph compiled earlier keeps the providers it was
    traced with.

    Args:
        source: An evidence file (path) or its parsed contents.
        registry: The registry (default: the process's).
        device: ``cpu`` or ``cuda``: what this process serves on (default: the GPU when there is one).
        origin: Where the evidence came from, for the record (default: the path).
        expect_registry: A registry-state digest the evidence must carry (a bundle's recorded one).

    Raises:
        EvidenceError: ``source`` is not a readable, intact evidence file.

    Example:
        >>> from inferensics import kernels
        >>> kernels.apply_evidence("kernel-evidence.json").summary()  # doctest: +SKIP
        'evidence 3f2a… (kernel-evidence.json) measured on cpu: 2 applied, 0 refused'
    """
    from inferensics.kernels.qualify import evidence_problem

    if isinstance(source, Mapping):
        doc = dict(source)
        problem = evidence_problem(doc)
        if problem is not None:
            raise EvidenceError(f"{origin or 'evidence'}: {problem}")
    else:
        doc = read_evidence(source)
        origin = origin or str(source)
    reg = registry or default_registry()
    measured, here = measured_device(doc), device_label(device)
    reason = refusal_reason(doc, device, expect_registry)
    if reason:
        current, policy = reg.policy(), doc["registry"]["policy"]
        lines = [line for n, e in sorted(policy.items()) for line in _entries(n, e, current.get(n, {}))]
        applied: list[str] = []
        refused = [f"{line} ({reason})" for line in lines]
    else:
        applied, refused = _follow(reg, doc)
    result = EvidenceApplication(
        digest=str(doc["digest"]),
        origin=origin,
        measured_on=measured,
        device=here,
        applied=tuple(applied),
        refused=tuple(refused),
        reason=reason,
        follows=not reason and reg.state()["digest"] == doc["registry"]["digest"],
        interpreter=measured_in_interpreter(doc),
    )
    reg.log.record_evidence(result)
    return result


@contextlib.contextmanager
def following(doc: Mapping[str, Any], registry: Registry | None = None) -> Iterator[tuple[list[str], list[str]]]:
    """Within the block the registry follows ``doc``'s policy whatever its device (a bundle build compiling
    with it); priorities, refusals and evidence digests are put back on exit. Yields (applied, refused)."""
    reg = registry or default_registry()
    saved, evidence = _snapshot(reg)
    try:
        yield _follow(reg, doc)
    finally:
        _restore(reg, saved)
        reg.evidence[:] = evidence
