"""Store DSNs: ``chdb:///<data dir>`` (embedded, the default) or ``http(s)://user:password@host:port/db``.

A server DSN may name a ClickHouse cluster, ``http://host:8123/db?cluster=NAME``: the store then renders the
cluster DDL (``ON CLUSTER``, ``Replicated*`` shard tables, ``Distributed`` tables under the plain names).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal
from urllib.parse import unquote, urlsplit

DSN_ENV: Final = "INFERENSICS_DSN"
"""Environment variable naming the store when ``--dsn`` is not given."""
DATA_DIR_ENV: Final = "INFERENSICS_DATA_DIR"
"""Environment variable naming the data directory: the folder that holds the embedded store in ``store/``, as
``--data-dir`` (and ``inferensics demo --data-dir``) names it. Never the store's own folder: chDB keeps its table
parts in a ``store/`` of its own there, and a store opened in that would write its files into the engine's."""
STORE_FOLDER: Final = "store"
"""The folder of a data directory that holds the embedded store: ``<data dir>/store``."""
REPORT_DIR_ENV: Final = "INFERENSICS_REPORT_DIR"
"""Environment variable naming the folder of the weekly reports (``report weekly`` and the dashboard's page)."""


class DsnError(ValueError):
    """A DSN that cannot be parsed, or a data directory that is a store itself; the message names it and says
    what form is expected."""


def default_data_dir() -> Path:
    """Where the embedded store lives by default (its own folder, the one a ``chdb:///`` DSN names).

    ``$INFERENSICS_DATA_DIR/store`` if the variable is set, else ``$XDG_DATA_HOME/inferensics/store``, else
    ``~/.local/share/inferensics/store``. :func:`resolve_dsn` refuses a variable that names a store itself.
    """
    if env := os.environ.get(DATA_DIR_ENV):
        return Path(env).expanduser() / STORE_FOLDER
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "inferensics" / STORE_FOLDER


def is_store_folder(path: Path) -> bool:
    """Whether ``path`` is an embedded store's own folder: chDB writes its catalogue, ``metadata/``, there the
    first time it opens the folder (``inferensics init`` does), and nothing else of ours has one."""
    return (path / "metadata").is_dir()


def check_data_dir(data_dir: Path, *, named_by: str) -> Path:
    """``data_dir`` (``--data-dir`` or ``$INFERENSICS_DATA_DIR``, as ``named_by`` says) made absolute, refused
    when it is a store itself: its ``store/`` is then the engine's own folder of table parts.

    >>> check_data_dir(Path("/nonexistent/demo"), named_by="--data-dir")
    PosixPath('/nonexistent/demo')

    Raises:
        DsnError: ``data_dir`` is a store's own folder; the message names the flag or setting that reaches it.
    """
    where = data_dir.expanduser().absolute()
    if not is_store_folder(where):
        return where
    if named_by.startswith("--"):
        shown, dsn, parent = f"{named_by} {where}", f"pass --dsn chdb://{where}", f"--data-dir {where.parent}"
    else:
        shown, dsn, parent = f"{named_by}={where}", f"set {DSN_ENV}=chdb://{where}", f"{DATA_DIR_ENV}={where.parent}"
    fix = f"{dsn}, or {parent}" if where.name == STORE_FOLDER else dsn
    raise DsnError(f"{shown} is a store itself, not the folder that holds one in {STORE_FOLDER}/: {fix}")


def default_report_dir() -> Path:
    """Where weekly reports are written and read by default: ``$INFERENSICS_REPORT_DIR`` if set, else
    ``reports`` in the data directory, beside its store (``$INFERENSICS_DATA_DIR/reports``, by default
    ``~/.local/share/inferensics/reports``). ``inferensics
    report weekly`` writes there and the dashboard's Weekly report page lists it, so a report made by either
    shows in both."""
    if env := os.environ.get(REPORT_DIR_ENV):
        return Path(env).expanduser()
    return default_data_dir().parent / "reports"


@dataclass(frozen=True, slots=True)
class Dsn:
    """A parsed store address. ``str(dsn)`` never shows the password."""

    kind: Literal["chdb", "http", "https"]
    path: Path | None = None
    host: str = ""
    port: int = 0
    user: str = "default"
    password: str = ""
    database: str = "inferensics"
    cluster: str = ""
    """ClickHouse cluster (``remote_servers`` name or ``{cluster}`` macro) of a server DSN; empty: one node."""

    def __str__(self) -> str:
        if self.kind == "chdb":
            suffix = "" if self.database == "inferensics" else f"?database={self.database}"
            return f"chdb://{self.path}{suffix}"
        auth = f"{self.user}:***@" if self.password else f"{self.user}@"
        suffix = f"?cluster={self.cluster}" if self.cluster else ""
        return f"{self.kind}://{auth}{self.host}:{self.port}/{self.database}{suffix}"


def parse_dsn(text: str) -> Dsn:
    """Parse a DSN string.

    >>> parse_dsn("chdb:///var/lib/inferensics").path
    PosixPath('/var/lib/inferensics')
    >>> str(parse_dsn("https://reader:s3cret@ch.example:8443/obs"))
    'https://reader:***@ch.example:8443/obs'
    """
    hint = "expected chdb:///<data dir> or http(s)://user:password@host:port/database[?cluster=NAME]"
    raw = text.strip()
    if not raw:
        raise DsnError(f"empty store DSN; {hint}")
    try:
        parts = urlsplit(raw)
    except ValueError as exc:  # e.g. an unbalanced '[' reads as a broken IPv6 literal
        raise DsnError(f"store DSN {raw!r} is not a valid URL ({exc}); {hint}") from None
    if parts.scheme == "chdb":
        path = unquote(parts.netloc + parts.path)
        if not path or path == "/":
            raise DsnError(f"store DSN {raw!r} names no data directory; {hint}")
        if path in {":memory:", "memory"}:
            raise DsnError(f"store DSN {raw!r}: an in-memory store loses everything on exit; give a directory")
        database = _query_option(raw, parts.query, "database") or "inferensics"
        try:
            where = Path(path).expanduser()
        except RuntimeError as exc:  # '~name' of a user this machine does not know
            raise DsnError(f"store DSN {raw!r}: cannot expand {path!r} ({exc}); give an absolute directory") from None
        return Dsn("chdb", path=where.absolute(), database=database)
    if parts.scheme in ("http", "https"):
        if not parts.hostname:
            raise DsnError(f"store DSN {raw!r} names no host; {hint}")
        try:
            port = parts.port or (8443 if parts.scheme == "https" else 8123)
        except ValueError as exc:
            raise DsnError(f"store DSN {raw!r} has a bad port ({exc}); {hint}") from None
        database = _check_database(raw, parts.path.strip("/") or "inferensics")
        cluster = _query_option(raw, parts.query, "cluster")
        return Dsn(
            "https" if parts.scheme == "https" else "http",
            host=parts.hostname,
            port=port,
            user=unquote(parts.username or "default"),
            password=unquote(parts.password or ""),
            database=database,
            cluster=cluster,
        )
    raise DsnError(f"store DSN {raw!r} has unknown scheme {parts.scheme!r}; {hint}")


def _check_database(raw: str, database: str) -> str:
    if "/" in database or not database.replace("_", "").isalnum():
        raise DsnError(f"store DSN {raw!r}: database name {database!r} must be letters, digits and _")
    return database


def _query_option(raw: str, query: str, accepted: str) -> str:
    # chdb:///dir?database=name selects a database inside one embedded directory (tests use this: one
    # process can open only one chDB directory); http://host/db?cluster=name names a server's cluster.
    value = ""
    for item in filter(None, query.split("&")):
        key, _, value = item.partition("=")
        if key != accepted:
            raise DsnError(f"store DSN {raw!r}: unknown option {key!r}; only ?{accepted}=<name> is accepted here")
        value = _check_database(raw, value) if accepted == "database" else _check_cluster(raw, value)
    return value


def _check_cluster(raw: str, cluster: str) -> str:
    name = unquote(cluster)
    macro = name.startswith("{") and name.endswith("}")
    if not (name[1:-1] if macro else name).replace("_", "").replace("-", "").isalnum():
        raise DsnError(
            f"store DSN {raw!r}: cluster {name!r} must be a remote_servers name (letters, digits, - and _) "
            "or a macro such as {cluster}"
        )
    return name


def resolve_dsn(explicit: str | None) -> Dsn:
    """``--dsn`` if given, else ``$INFERENSICS_DSN``, else the embedded default directory (:func:`default_data_dir`).

    Raises:
        DsnError: the DSN cannot be parsed, or ``$INFERENSICS_DATA_DIR`` names a store itself.
    """
    if explicit:
        return parse_dsn(explicit)
    if env := os.environ.get(DSN_ENV):
        return parse_dsn(env)
    if env := os.environ.get(DATA_DIR_ENV):
        check_data_dir(Path(env), named_by=f"${DATA_DIR_ENV}")
    return Dsn("chdb", path=default_data_dir().absolute())
