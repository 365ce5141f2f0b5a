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

from inferensics.bundle.errors import BundleError

STATES_ENV: Final = "INFERENSICS_BUNDLE_STATES"
"""Environment variable naming the states file."""


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
            return cls(frozenset(map(str, data.get("revoked", []))), frozenset(map(str, data.get("quarantined", []))))
        except OSError as exc:
            raise BundleError("missing", f"cannot read bundle states file {p}: {exc.strerror}") from None
        except (ValueError, AttributeError, TypeError):
            raise BundleError(
                "damaged", f"{p} is not a bundle states file ({{'revoked': [...], 'quarantined': [...]}})"
            ) from None

    def write(self, path: Path) -> None:
        """Write the states file."""
        path.write_text(
            json.dumps({"revoked": sorted(self.revoked), "quarantined": sorted(self.quarantined)}, indent=1)
        )

    def refusal(self, bundle_id: str) -> BundleError | None:
        """The refusal for ``bundle_id``, if it is revoked or quarantined."""
        if bundle_id in self.revoked:
            return BundleError("revoked", f"bundle {bundle_id[:12]} is revoked: load the promoted bundle instead")
        if bundle_id in self.quarantined:
            return BundleError(
                "quarantined", f"bundle {bundle_id[:12]} is quarantined: it may not serve until released"
            )
        return None
