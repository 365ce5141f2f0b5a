"""The ``inferensics replay`` command the request page offers, built to run as shown.

Replay fetches the request's pack through a service and verifies its bundle against trusted builders' keys
before it runs anything; without them it stops at once ("no keyring of trusted builders"). The page's bare
``inferensics replay ID`` failed so. The command therefore names the service this dashboard reads from, and the
keyring when the dashboard's process has one (``$INFERENSICS_BUNDLE_KEYRING``); what it cannot know stays a
placeholder in capitals, which :attr:`ReplayCommand.fill_in` explains. The flags are replay's own (a test parses
the command with the CLI's parser).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Final

KEYRING_ENV: Final = "INFERENSICS_BUNDLE_KEYRING"
"""The trusted builders' public keys (a ``.pub`` file or a folder of them) replay verifies a request's bundle
with; the dashboard reads them from its environment (``DashboardSettings.keyring``). The bundle part owns the
variable (``inferensics.bundle.keys.KEYRING_ENV``), which the dashboard may not import (nor load torch for):
``tests/dashboard/test_request_replay_command.py`` keeps the two equal. Light, as this module is: the demo
prints it before the dashboard command it gives."""
KEYRING_PLACEHOLDER: Final = "BUILDER.pub"
"""Stands for the builders' public keys when the dashboard was given none (as replay's own hint of a pack)."""
TOKEN_PLACEHOLDER: Final = "TOKEN"
"""Stands for a token of the service when the dashboard reads with one (its own is never shown)."""


@dataclass(frozen=True, slots=True)
class ReplayCommand:
    """A replay command line and, for each placeholder in it, what to put there."""

    command: str
    fill_in: tuple[str, ...] = ()


def replay_command(
    request_id: str, *, service_url: str, keyring: str | None, token: bool, occurrence: int | None = None
) -> ReplayCommand:
    """The command that replays ``request_id`` through the service at ``service_url``.

    Args:
        request_id: The request to replay.
        service_url: The service the dashboard reads from (replay fetches the pack there).
        keyring: The trusted builders' keys the dashboard's process was given, ``None`` for none.
        token: Whether the dashboard reads with a token (the service then asks replay for one too).
        occurrence: Which of the requests sharing the id (1 for the earliest), ``None`` when the id names one:
            replay refuses an id several requests share unless ``--occurrence`` picks one.

    >>> replay_command("req-7", service_url="http://127.0.0.1:4318", keyring="/keys/b.pub", token=False).command
    'inferensics replay req-7 --service http://127.0.0.1:4318 --keyring /keys/b.pub'
    """
    words = ["inferensics", "replay", request_id, "--service", service_url]
    words += ["--occurrence", str(occurrence)] if occurrence is not None else []
    words += ["--keyring", keyring or KEYRING_PLACEHOLDER]
    fill_in: list[str] = []
    if not keyring:
        fill_in.append(
            f"`{KEYRING_PLACEHOLDER}`: the trusted builders' public keys, a `.pub` file or a folder of them (the "
            "one `inferensics bundle keygen` wrote beside the key that signed the bundle); a dashboard started "
            "with `$INFERENSICS_BUNDLE_KEYRING` set names them here."
        )
    if token:
        words += ["--token", TOKEN_PLACEHOLDER]
        fill_in.append(
            f"`{TOKEN_PLACEHOLDER}`: a token of this service with the `admin` role (replay reads the request, pulls "
            "its pushed bundle through the SQL API and records the verdict), or leave `--token` out and set "
            "`$INFERENSICS_TOKEN`."
        )
    return ReplayCommand(shlex.join(words), tuple(fill_in))
