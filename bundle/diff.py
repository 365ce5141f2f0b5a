"""``diff``: which identity factors differ between two bundles, grouped.

Groups in report order: model, code, weights, compiler versions, settings, customisations, compatibility,
kernel registry, artifacts, accepted shapes. Within a group each differing factor is named by its path
(``settings.changed.inductor.max_fusion_size``) with both values. The digest of *every* compiler setting
(defaults included) is compared only when the raw settings show no difference, so a changed default
(a new torch with the same explicit settings) still shows, and a changed explicit setting shows once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from inferensics.bundle.manifest import FACTOR_GROUPS, Manifest


@dataclass(frozen=True)
class FactorChange:
    """One differing factor."""

    group: str
    path: str
    before: Any
    after: Any

    def line(self) -> str:
        """``path: before → after`` (long values shortened)."""
        return f"{self.path}: {_short(self.before)} → {_short(self.after)}"


def _short(v: Any, n: int = 60) -> str:
    s = "(absent)" if v is _ABSENT else repr(v)
    return s if len(s) <= n else s[: n - 1] + "…"


_ABSENT: Any = object()


def _flatten(value: Any, prefix: str, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        for k, v in value.items():  # an empty mapping has no factor of its own: its keys are the factors
            _flatten(v, f"{prefix}.{k}", out)
    elif isinstance(value, list) and all(isinstance(v, dict) for v in value):
        # A list of records (graphs, customisations): one factor per record, named by its key.
        for i, v in enumerate(value):
            key = v.get("fx_key") or v.get("target") or v.get("import_path") or str(i)
            out[f"{prefix}[{key}]"] = v
    else:
        out[prefix] = value


def diff(a: Manifest, b: Manifest) -> list[FactorChange]:
    """Every differing factor of ``a`` → ``b``, in group order (empty for the same identity)."""
    changes: list[FactorChange] = []
    for group in FACTOR_GROUPS:
        fa: dict[str, Any] = {}
        fb: dict[str, Any] = {}
        _flatten(a.identity.get(group), group, fa)
        _flatten(b.identity.get(group), group, fb)
        for path in sorted(set(fa) | set(fb)):
            va, vb = fa.get(path, _ABSENT), fb.get(path, _ABSENT)
            if va != vb:
                changes.append(FactorChange(group, path, va, vb))
        if group == "settings" and not any(c.group == "settings" for c in changes):
            da, db = a.factor_digests.get("settings_all"), b.factor_digests.get("settings_all")
            if da and db and da != db:
                changes.append(FactorChange("settings", "settings.all_settings_digest", da, db))
    return changes


def grouped(changes: list[FactorChange]) -> dict[str, list[FactorChange]]:
    """Changes by group, in group order, groups without changes left out."""
    out: dict[str, list[FactorChange]] = {}
    for c in changes:
        out.setdefault(c.group, []).append(c)
    return out


def render(a: Manifest, b: Manifest, changes: list[FactorChange]) -> str:
    """The diff as text: one heading per group, one line per factor."""
    head = f"{a.name} {a.bundle_id[:12]} → {b.name} {b.bundle_id[:12]}"
    if not changes:
        return f"{head}: same identity (no factor differs)"
    lines = [f"{head}: {len(changes)} factor(s) differ"]
    for group, items in grouped(changes).items():
        lines.append(f"[{group}]")
        lines += [f"  {c.line()}" for c in items]
    return "\n".join(lines)
