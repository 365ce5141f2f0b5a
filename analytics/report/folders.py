"""Where a store's weekly reports are kept: one folder per store inside a report folder.

Two stores reported into one folder both wrote ``weekly-<week>.html``, and the dashboard's Weekly report page over
one store listed the other's. ``inferensics report weekly`` (without ``--out``) and the page both write into
:func:`store_folder`, and the page lists only its own store's folder.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Final

STORE_FILE: Final = "store.txt"
"""In a store's report folder: the DSN of the store its reports describe, for people looking at the folder."""


def store_folder(report_dir: Path, dsn: str) -> Path:
    """The folder under ``report_dir`` of the reports of the store at ``dsn`` (as the service's status names it:
    :class:`~inferensics.schema.dsn.Dsn`'s text, a password masked): ``store-`` and the first 12 hex digits of
    the DSN's sha256.

    >>> store_folder(Path("/r"), "chdb:///var/lib/inferensics/store").name
    'store-1dedf78c4ea7'
    """
    return report_dir / f"store-{hashlib.sha256(dsn.encode()).hexdigest()[:12]}"


def name_store(folder: Path, dsn: str) -> None:
    """Write the store's DSN into ``folder``'s :data:`STORE_FILE` (the folder exists)."""
    (folder / STORE_FILE).write_text(dsn + "\n", encoding="utf-8")
