"""Where an embedded store lives, checked before a command opens it: ``existing_store`` for the commands that only
read one, ``writable_store`` for those that may make one (``init``, ``import-trace``, ``serve``); ``folder_kind`` names
what a store's path holds, so that no command writes the engine's files among a user's own or beside a data
directory's store.
"""

from __future__ import annotations

import os
from pathlib import Path

from inferensics.cli.errors import fail
from inferensics.schema.dsn import DSN_ENV, STORE_FOLDER, Dsn, DsnError, is_store_folder, resolve_dsn


def refuse_empty(dsn: str | None) -> None:
    """An empty ``--dsn`` (what an unset ``--dsn ${VAR}`` in a unit becomes) would mean the embedded default
    directory: `init` would create a stray store there and report success while the real one stays behind."""
    if dsn is not None and not dsn.strip():
        fail("--dsn: empty; give the store's DSN (chdb:///<data dir> or http(s)://user:password@host:port/database), "
             "or leave --dsn out for $INFERENSICS_DSN, then the embedded default directory")  # fmt: skip


def existing_store(dsn: str | None, data_dir: Path | None, *, code: int = 2) -> Dsn:
    """The store a read-only command opens, refused in one line when it is an embedded one whose folder does not
    exist or is not a store (chDB's ``metadata/`` is not in it): opening it would write an engine's files there
    (``metadata/``, ``tmp/``), and a mistyped path, or a folder of the user's, must not become a store.

    ``code`` is the exit status of the refusal (``status`` exits 1: a monitoring check's "not fine").
    """
    refuse_empty(dsn)
    try:
        parsed = resolve_dsn(dsn)
    except DsnError as exc:
        fail(str(exc))
    if parsed.kind != "chdb" or parsed.path is None:
        return parsed
    flag = "--data-dir" if data_dir else "--dsn"
    kind = folder_kind(parsed.path)
    if kind == "data dir":
        fail(data_dir_refusal(parsed.path), code=code)
    if kind == "missing":
        default = dsn is None and data_dir is None and not os.environ.get(DSN_ENV)
        if default:  # nothing named a store: the likelier mistake is a store another command reaches
            fail(f"no store at {parsed.path} (the default place: no --dsn, --data-dir or ${DSN_ENV} given): "
                 "while `inferensics serve` holds your store, pass --service URL (and a token); else pass its "
                 "--dsn or --data-dir, or create one here with `inferensics init`", code=code)  # fmt: skip
        fail(f"no store at {parsed.path}: the directory does not exist; create it with `inferensics init` "
             f"(same {flag}), or pass the --dsn of an existing store", code=code)  # fmt: skip
    if kind != "store":
        looks = "a store's folder holds the engine's metadata/ and store/, which `inferensics init` makes"
        if kind == "empty":
            fail(f"no store at {parsed.path}: the folder is empty ({looks}); create it with `inferensics init` "
                 f"(same {flag}), or pass the --dsn of an existing store", code=code)  # fmt: skip
        fail(f"no store at {parsed.path}: it is {FOLDER_KINDS[kind]}, not a store ({looks} in a new or empty "
             "folder); pass the --dsn of an existing store", code=code)  # fmt: skip
    return parsed


FOLDER_KINDS = {"file": "a file", "other files": "a folder of other files", "data dir": "a data directory"}
"""How a refusal names what an embedded store's path holds when it is neither a store nor new or empty."""


def folder_kind(path: Path) -> str:
    """What an embedded store's path holds: ``missing``, ``store`` (chDB's ``metadata/`` is there), ``empty``,
    ``file``, ``data dir`` (a folder whose ``store/`` is a store: ``--data-dir``'s kind of folder) or ``other
    files``: the read commands, ``init``, ``import-trace``, ``serve`` and the bundle state commands refuse by it."""
    if not path.exists():
        return "missing"
    if is_store_folder(path):
        return "store"
    if not path.is_dir():
        return "file"
    if is_store_folder(path / STORE_FOLDER):
        return "data dir"
    try:
        return "empty" if next(path.iterdir(), None) is None else "other files"
    except OSError:  # unreadable: not known to be empty, and no store this process could open either
        return "other files"


def writable_store(dsn: str | None, what: str) -> Dsn:
    """The store a command that may create one writes to, refused in one line when it is an embedded one whose
    path is a file or a folder of other files: chDB would write its ``metadata/``, ``store/`` and ``tmp/``
    among them. ``what`` says what the command makes there (``"`inferensics init` makes a store"``)."""
    refuse_empty(dsn)
    try:
        parsed = resolve_dsn(dsn)
    except DsnError as exc:
        fail(str(exc))
    path = parsed.path if parsed.kind == "chdb" else None
    kind = folder_kind(path) if path is not None else "store"
    if path is not None and kind == "data dir":
        fail(data_dir_refusal(path))
    if path is not None and kind in FOLDER_KINDS:
        fail(f"{path} is {FOLDER_KINDS[kind]}, not a store: {what} in a new or empty folder (the engine writes "
             "its metadata/, store/ and tmp/ there); name one with --dsn or --data-dir")  # fmt: skip
    return parsed


def data_dir_refusal(path: Path) -> str:
    """The refusal of a data directory named where a store's own folder belongs (``--dsn chdb://DIR``): opening it
    would make a second, empty store beside ``DIR/store``."""
    return (
        f"{path} is a data directory, not a store: its store is {path / STORE_FOLDER}; pass --data-dir {path} "
        f"(or --dsn chdb://{path / STORE_FOLDER})"
    )
