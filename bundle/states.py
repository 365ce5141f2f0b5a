"""Revoked and quarantined bundles, as a host sees them: a small JSON file the host reads before loading.

The store keeps state changes as events (``inferensics bundle promote|revoke|quarantine``); a host reads the
current list from ``$INFERENSICS_BUNDLE_STATES`` (or an argument), which the CLI writes with
``inferensics bundle states --out FILE`` from the service. The file is ``{"revoked": [ids],
"quarantined": [ids]}``.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from inferensics.bundle.errors import BundleError, unwritable

STATES_ENV: Final = "INFERENSICS_BUNDLE_STATES"
"""Environment variable naming the states file."""
_KEYS: Final = ("revoked", "quarantined")
_SHAPE: Final = '{"revoked": [ids], "quarantined": [ids]}'


def _shape_problem(data: object) -> str:
    """What makes ``data`` not a states file's contents, or ``""``: every key known, every value a list of id
    strings (a missing key is an empty list)."""
    if not isinstance(data, dict):
        kind = {list: "array", str: "string", int: "number", float: "number", bool: "boolean"}.get(type(data), "null")
        return f"its top level is a JSON {kind}, not an object {_SHAPE}"
    unknown = sorted(str(k) for k in data if k not in _KEYS)
    if unknown:
        return f"unknown key{'s' if len(unknown) > 1 else ''} {', '.join(map(repr, unknown))} (expected {_SHAPE})"
    for key in _KEYS:
        value = data.get(key, [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            return f"{key!r} is not a list of bundle id strings (expected {_SHAPE})"
    return ""


@dataclass(frozen=True)
class BundleStates:
    """Bundle ids a host must refuse."""

    revoked: frozenset[str] = field(default_factory=frozenset)
    quarantined: frozenset[str] = field(default_factory=frozenset)

    @classmethod
    def load(cls, path: Path | str | None = None) -> BundleStates:
        """Read ``path`` (else ``$INFERENSICS_BUNDLE_STATES``); no file named means nothing is refused.

        Raises:
            BundleError: the named file is missing or is not a states file.
        """
        chosen = path if path is not None else os.environ.get(STATES_ENV)
        if not chosen:
            return cls()
        p = Path(chosen)
        try:
            data = json.loads(p.read_text())
        except OSError as exc:
            raise BundleError("missing", f"cannot read bundle states file {p}: {exc.strerror}") from None
        except ValueError:
            raise BundleError("damaged", f"{p} is not a bundle states file: it is not JSON ({_SHAPE})") from None
        problem = _shape_problem(data)
        if problem:
            # A typo'd key or a string where a list belongs read as "nothing refused": a revoked bundle loaded.
            raise BundleError(
                "damaged", f"{p} is not a bundle states file: {problem}; write it with `inferensics bundle states`"
            )
        return cls(frozenset(data.get("revoked", [])), frozenset(data.get("quarantined", [])))

    def write(self, path: Path) -> None:
        """Write the states file.

        Raises:
            BundleError: ``bad_input`` when ``path`` cannot be written (no such folder, a directory, no permission).
        """
        text = json.dumps({"revoked": sorted(self.revoked), "quarantined": sorted(self.quarantined)}, indent=1)
        try:
            path.write_text(text)
        except OSError as exc:
            raise unwritable(path, exc) from None

    def refusal(self, bundle_id: str) -> BundleError | None:
        """The refusal for ``bundle_id``, if it is revoked or quarantined."""
        if bundle_id in self.revoked:
            return BundleError("revoked", f"bundle {bundle_id[:12]} is revoked: load the promoted bundle instead")
        if bundle_id in self.quarantined:
            return BundleError(
                "quarantined", f"bundle {bundle_id[:12]} is quarantined: it may not serve until released"
            )
        return None
