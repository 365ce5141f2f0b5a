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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Final

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
BUNDLE_PLACEHOLDER: Final = "DIR"
"""Stands for the folder of the request's bundle when the service holds no push of it (replay then cannot pull it:
"bundle ... is not available here (not pushed to the service)")."""
RELEASE_QUERY: Final = "bundle_release"
"""The named query whose ``pack_blob`` tells a pushed bundle (the latest ``pushed`` state's blob, what replay pulls;
empty when never pushed). It needs only the ``read`` role, as the lists that print a replay command do; its range
only bounds the misses and traffic it also counts, so :func:`release_window` keeps that to a second."""


@dataclass(frozen=True, slots=True)
class UnpushedBundle:
    """The bundle a request was served from, of which the service holds no push: replay needs its folder."""

    bundle_id: str
    name: str = ""


def release_window(now: datetime) -> dict[str, datetime]:
    """The parameters of :data:`RELEASE_QUERY` for the push state as of ``now``: a one-second range (pushes are read
    up to its end; the misses and traffic counted in it are not wanted here)."""
    return {"start": now - timedelta(seconds=1), "end": now + timedelta(seconds=1)}


def unpushed_bundle(
    release: Iterable[Mapping[str, Any]] | None, bundle_id: str, name: str = ""
) -> UnpushedBundle | None:
    """The request's bundle when the service holds no push of it (no :data:`RELEASE_QUERY` row of it with a
    ``pack_blob``); ``None`` when it was pushed, when the request was served without a bundle, or when the push state
    is not known (``release`` ``None``: the query failed). ``name`` is the bundle's name where the caller has it.

    >>> unpushed_bundle([{"bundle_id": "ab12", "bundle_name": "llama-v2", "pack_blob": ""}], "ab12")
    UnpushedBundle(bundle_id='ab12', name='llama-v2')
    >>> unpushed_bundle([{"bundle_id": "ab12", "bundle_name": "llama-v2", "pack_blob": "9f"}], "ab12") is None
    True
    """
    if not bundle_id or release is None:
        return None
    rows = [r for r in release if str(r.get("bundle_id") or "") == bundle_id]
    if any(str(r.get("pack_blob") or "") for r in rows):
        return None
    known = next((str(r.get("bundle_name") or "") for r in rows if r.get("bundle_name")), "")
    return UnpushedBundle(bundle_id, name or known)


def bundle_folder_text(bundle: UnpushedBundle, service_url: str, code: str = "`") -> str:
    """What to put for :data:`BUNDLE_PLACEHOLDER`, ``code`` quoting the commands (a backtick on a page, none in a
    terminal).

    >>> bundle_folder_text(UnpushedBundle("892c094a2fddae2c77", "scorer-v1"), "http://h:4318", code="")[:63]
    'the folder of bundle scorer-v1 892c094a2fddae2c (the one infere'
    """
    named = f"{bundle.name} {bundle.bundle_id[:16]}" if bundle.name else bundle.bundle_id[:16]
    push = shlex.join(["inferensics", "bundle", "push", BUNDLE_PLACEHOLDER, "--service", service_url])
    return (
        f"the folder of bundle {named} (the one {code}inferensics bundle build{code} wrote), which this service holds "
        f"no push of; or push it first with {code}{push}{code} and leave {code}--bundle {BUNDLE_PLACEHOLDER}{code} out"
    )


@dataclass(frozen=True, slots=True)
class ReplayCommand:
    """A replay command line and, for each placeholder in it, what to put there."""

    command: str
    fill_in: tuple[str, ...] = ()


def replay_command(
    request_id: str,
    *,
    service_url: str,
    keyring: str | None,
    token: bool,
    occurrence: int | None = None,
    unpushed: UnpushedBundle | None = None,
) -> ReplayCommand:
    """The command that replays ``request_id`` through the service at ``service_url``.

    Args:
        request_id: The request to replay.
        service_url: The service the dashboard reads from (replay fetches the pack there).
        keyring: The trusted builders' keys the dashboard's process was given, ``None`` for none.
        token: Whether the dashboard reads with a token (the service then asks replay for one too).
        occurrence: Which of the requests sharing the id (1 for the earliest), ``None`` when the id names one:
            replay refuses an id several requests share unless ``--occurrence`` picks one.
        unpushed: The request's bundle when the service holds no push of it (:func:`unpushed_bundle`): replay
            cannot pull it, so the command takes ``--bundle DIR``, explained with the push that makes it needless.

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
            "its bundle where it was pushed, through the SQL API, and records the verdict), or leave `--token` out "
            "and set `$INFERENSICS_TOKEN`."
        )
    if unpushed is not None:  # last: each placeholder is explained in the order the command names them
        words += ["--bundle", BUNDLE_PLACEHOLDER]
        fill_in.append(f"`{BUNDLE_PLACEHOLDER}`: {bundle_folder_text(unpushed, service_url)}.")
    return ReplayCommand(shlex.join(words), tuple(fill_in))
