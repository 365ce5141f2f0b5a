"""The service's settings, declared once: name, environment variable, default, type and meaning.

Precedence is fixed: argument > environment variable > config file (TOML) > default. The config file has
one table per concern only in the reader's mind: keys are the setting names at top level, plus a
``[tokens]`` table mapping a bearer token to its roles::

    port = 4318
    spool_dir = "/var/lib/inferensics/spool"
    [tokens]
    "s3cret-ingest" = ["ingest"]
    "s3cret-scrape" = ["metrics"]
    "s3cret-admin" = ["admin"]

Tokens also come from ``$INFERENSICS_TOKENS`` as ``token=role+role,token=role``. The roles are
:data:`~inferensics.collector.service.auth.ROLES` (``metrics`` scrapes ``/metrics`` only: a Prometheus token). A
running service reads the config file's ``[tokens]`` again on SIGHUP (:func:`reload_tokens`); its environment is
fixed at its start.
"""

from __future__ import annotations

import math
import os
import re
import ssl
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from inferensics.collector.errors import ConfigError
from inferensics.collector.service.auth import ROLES
from inferensics.collector.service.spool import holds_segments
from inferensics.schema.dsn import DSN_ENV, STORE_FOLDER, DsnError, default_data_dir, resolve_dsn

TOKENS_ENV: Final = "INFERENSICS_TOKENS"
CONFIG_ENV: Final = "INFERENSICS_CONFIG"
SPOOL_MIN_BYTES: Final = 64 << 10
"""The smallest spool cap: below it hardly a request fits, and 0 would refuse every one while looking set."""
BODY_MIN_BYTES: Final = 64 << 10
"""The smallest request body limit: 0 answered 413 to every non-empty export, and one host's export of a few
spans is kilobytes."""
DECODE_WORKERS_MAX: Final = 64
"""The most decode processes: each is a spawned interpreter with its own memory, started before the service
listens, so a typo such as ``1e9`` would start forever and never answer."""
ENGINE_PARSE_FILES_MAX: Final = 256
"""The most files a spool segment is split into (one engine parsing thread and one open file each)."""
ENGINE_MAX_THREADS_MAX: Final = 1024
"""The largest ``max_threads`` handed to the engine (far above any machine's cores; a bigger value only
multiplies the engine's per-thread buffers)."""
SQL_MIN_MEMORY: Final = 16 << 20
"""The smallest admin SQL memory limit: below it the engine refuses every query (0 would mean no limit)."""
TOKENS_TABLE_FORM: Final = f'"token" = ["read", "replay"] in the [tokens] table (roles: {", ".join(ROLES)})'
"""How a config file's ``[tokens]`` table gives a token its roles (a string ``"read+replay"`` is taken too)."""
TOKENS_FORM: Final = f"token=role+role,token=role (roles: {', '.join(ROLES)}; no spaces inside an entry)"
_TOKEN_CHARS: Final = re.compile(r"[A-Za-z0-9._~+/-]+=*")
"""RFC 6750's token68: the characters a bearer token can carry in an Authorization header."""


@dataclass(frozen=True, slots=True)
class Setting:
    """One declared setting."""

    name: str
    env: str
    default: object
    type: type
    meaning: str
    maximum: int | None = None
    minimum: float = 0
    """The smallest accepted value. Where 0 (or a tiny value) would make the service refuse everything, or lift
    an engine limit (ClickHouse reads 0 as "no limit"), it is above 0."""


LEGACY_SPOOL: Final = f"{STORE_FOLDER}-spool"
"""Where releases before the data directory's ``spool/`` kept the spool of ``<data dir>/store`` (its sibling)."""


SETTINGS: Final[tuple[Setting, ...]] = (
    Setting("host", "INFERENSICS_HOST", "127.0.0.1", str, "Address to listen on."),
    Setting("port", "INFERENSICS_PORT", 4318, int, "TCP port to listen on (4318 is the OTLP/HTTP port).", 65535),
    Setting("dsn", DSN_ENV, "", str, "Store DSN; empty means the embedded default directory."),
    Setting(
        "spool_dir",
        "INFERENSICS_SPOOL_DIR",
        "",
        str,
        "Spool dir; empty means the data directory's spool/ beside its store/ (the sibling <dir>-spool of a store "
        "folder of another name).",
    ),
    Setting(
        "spool_max_bytes",
        "INFERENSICS_SPOOL_MAX_BYTES",
        1 << 30,
        int,
        "Spool cap; above it ingest answers 429 (backlog) or 503 (store down) with Retry-After.",
        minimum=SPOOL_MIN_BYTES,
    ),
    Setting(
        "batch_max_rows",
        "INFERENSICS_BATCH_MAX_ROWS",
        50_000,
        int,
        "Spans that seal a batch (spool segment; the engine decodes and inserts one segment at a time).",
        minimum=1,
    ),
    Setting("batch_max_bytes", "INFERENSICS_BATCH_MAX_BYTES", 64 << 20, int, "Bytes that seal a batch.", minimum=1),
    Setting(
        "batch_max_age_s",
        "INFERENSICS_BATCH_MAX_AGE_S",
        1.0,
        float,
        "Seconds after which a batch is sealed.",
        minimum=0.01,
    ),
    Setting(
        "max_body_bytes",
        "INFERENSICS_MAX_BODY_BYTES",
        32 << 20,
        int,
        "Largest request body, after gunzip; larger bodies get 413.",
        minimum=BODY_MIN_BYTES,
    ),
    Setting(
        "decode_workers",
        "INFERENSICS_DECODE_WORKERS",
        0,
        int,
        "Processes that parse OTLP bodies at ingest (0: in the service process). Experimental: ingest only "
        "parses and spools (the engine maps spans to rows), so workers mostly add pickling.",
        DECODE_WORKERS_MAX,
    ),
    Setting(
        "engine_parse_files",
        "INFERENSICS_ENGINE_PARSE_FILES",
        2,
        int,
        "Files a spool segment is split into for the engine's Protobuf parser (one parsing thread each).",
        ENGINE_PARSE_FILES_MAX,
        minimum=1,
    ),
    Setting(
        "engine_max_threads",
        "INFERENSICS_ENGINE_MAX_THREADS",
        0,
        int,
        "max_threads of the engine's decode and insert queries (0: the engine's default, one per core).",
        ENGINE_MAX_THREADS_MAX,
    ),
    Setting("retry_after_s", "INFERENSICS_RETRY_AFTER_S", 5, int, "Retry-After seconds sent with 429/503.", minimum=1),
    Setting(
        "auth",
        "INFERENSICS_AUTH",
        True,
        bool,
        "Require bearer tokens; false opens every endpoint (loopback development only).",
    ),
    Setting("tls_cert", "INFERENSICS_TLS_CERT", "", str, "PEM certificate path; with tls_key, serve HTTPS."),
    Setting("tls_key", "INFERENSICS_TLS_KEY", "", str, "PEM private key path."),
    Setting("sql_max_rows", "INFERENSICS_SQL_MAX_ROWS", 100_000, int, "Admin SQL: max_result_rows.", minimum=1),
    Setting("sql_max_seconds", "INFERENSICS_SQL_MAX_SECONDS", 30, int, "Admin SQL: max_execution_time.", minimum=1),
    Setting(
        "sql_max_memory",
        "INFERENSICS_SQL_MAX_MEMORY",
        2 << 30,
        int,
        "Admin SQL: max_memory_usage bytes.",
        minimum=SQL_MIN_MEMORY,
    ),
    Setting(
        "fault_control",
        "INFERENSICS_FAULT_CONTROL",
        False,
        bool,
        "Test-only: enable POST /api/v1/_faults to make the store writer fail (never in production).",
    ),
)
BY_NAME: Final = {s.name: s for s in SETTINGS}


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """The resolved configuration, built once and passed down."""

    host: str = "127.0.0.1"
    port: int = 4318
    dsn: str = ""
    spool_dir: str = ""
    spool_max_bytes: int = 1 << 30
    batch_max_rows: int = 50_000
    batch_max_bytes: int = 64 << 20
    batch_max_age_s: float = 1.0
    max_body_bytes: int = 32 << 20
    decode_workers: int = 0
    engine_parse_files: int = 2
    engine_max_threads: int = 0
    retry_after_s: int = 5
    auth: bool = True
    tls_cert: str = ""
    tls_key: str = ""
    sql_max_rows: int = 100_000
    sql_max_seconds: int = 30
    sql_max_memory: int = 2 << 30
    fault_control: bool = False
    tokens: Mapping[str, frozenset[str]] = field(default_factory=dict)
    config_file: str = ""
    """The config file the settings were read from (``--config`` or ``$INFERENSICS_CONFIG``; ``""``: none): SIGHUP
    reads its ``[tokens]`` again."""
    argument_tokens: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """The tokens given as an argument (``load_config({"tokens": ...})``): part of :attr:`tokens`, kept over a
    SIGHUP's reload as ``$INFERENSICS_TOKENS`` is."""

    def resolved_spool_dir(self) -> Path:
        """The spool directory: the setting, else the data directory's ``spool/`` beside its ``store/`` (the store
        ``--data-dir DIR``, ``$INFERENSICS_DATA_DIR=DIR`` and ``chdb://DIR/store`` all name; a server's spool goes
        in the default data directory), else the sibling ``<dir>-spool`` of an embedded store in a folder of
        another name.

        A spool an earlier release left at the sibling ``<data dir>/store-spool`` is still used while it holds
        segments (spans it acknowledged and had not yet written); the service says so when it starts, and retires
        the folder once it holds none. Its own files there (the lock, the engine's scratch folder) are no spans."""
        if self.spool_dir:
            return Path(self.spool_dir).expanduser().absolute()
        dsn = resolve_dsn(self.dsn or None)
        base = (dsn.path if dsn.path is not None else default_data_dir()).absolute()
        if base.name != STORE_FOLDER:
            return base.parent / f"{base.name}-spool"
        legacy = self.legacy_spool_dir()
        if legacy is not None and holds_segments(legacy):
            return legacy
        return base.parent / "spool"

    def legacy_spool_dir(self) -> Path | None:
        """Where an earlier release kept this configuration's spool (``<data dir>/store-spool``), or ``None`` where
        that cannot apply (a ``spool_dir`` is set, or the store folder is not named ``store``)."""
        if self.spool_dir:
            return None
        dsn = resolve_dsn(self.dsn or None)
        base = (dsn.path if dsn.path is not None else default_data_dir()).absolute()
        return base.parent / LEGACY_SPOOL if base.name == STORE_FOLDER else None


def _convert(setting: Setting, raw: object, origin: str) -> object:
    try:
        if setting.type is bool:
            if isinstance(raw, bool):
                return raw
            text = str(raw).strip().lower()
            if text in ("1", "true", "yes", "on"):
                return True
            if text in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if setting.type is int and isinstance(raw, bool):
            raise ValueError(raw)
        if setting.type is int and isinstance(raw, float) and not raw.is_integer():
            # int() would cut 4318.9 to 4318 (and raise OverflowError, not ValueError, for inf)
            raise ValueError(raw)
        value = setting.type(raw)
    except (TypeError, ValueError, OverflowError):
        raise ConfigError(
            f"setting {setting.name} ({origin}): {raw!r} is not a valid {setting.type.__name__}{_range(setting)}; "
            f"{setting.meaning}"
        ) from None
    if isinstance(value, float) and not math.isfinite(value):
        raise ConfigError(f"setting {setting.name} ({origin}): {raw!r} is not a finite number; {setting.meaning}")
    if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
        raise ConfigError(f"setting {setting.name} ({origin}): must not be negative, got {raw!r}{_range(setting)}")
    if isinstance(value, int | float) and not isinstance(value, bool) and value < setting.minimum:
        raise ConfigError(
            f"setting {setting.name} ({origin}): at least {setting.minimum}, got {raw!r}{_range(setting)}; "
            f"{setting.meaning}"
        )
    if setting.maximum is not None and isinstance(value, int) and value > setting.maximum:
        raise ConfigError(
            f"setting {setting.name} ({origin}): at most {setting.maximum}, got {raw!r}; {setting.meaning}"
        )
    return value


def _range(setting: Setting) -> str:
    """The valid range of a bounded setting, as the tail of its error line ('' for an unbounded one)."""
    if setting.minimum <= 0 and setting.maximum is None:
        return ""
    upper = f"to {setting.maximum}" if setting.maximum is not None else "or more"
    return f" (valid: {setting.minimum} {upper})"


def parse_tokens(text: str, origin: str) -> dict[str, frozenset[str]]:
    """Parse ``token=role+role,token=role`` into a token → roles map, strictly.

    Spaces around an entry (after a comma) are ignored; inside one they are refused, as are a token listed
    twice and an unknown role: a token kept with a stray space could never be presented (the service strips
    the header), so it would fail every request with "unknown bearer token" and nothing to say why.

    Raises:
        ConfigError: one line naming the entry (by position; its token masked) and the expected form.
    """
    out: dict[str, frozenset[str]] = {}
    for number, item in enumerate((p.strip() for p in text.split(",")), start=1):
        if not item:
            continue  # a trailing or doubled comma
        token, sep, roles = item.rpartition("=")  # roles hold no "=": a base64 token may end in "=" padding
        if not sep:
            token, roles = item, ""
        where = f"tokens ({origin}): entry {number} (token {_masked(token)}, roles {roles!r})"
        if not sep or not token:
            raise ConfigError(f"{where}: expected token=role+role, got an item without '=' or a token; "
                              f"the form is {TOKENS_FORM}")  # fmt: skip
        check_token(token, where)
        if token in out:
            raise ConfigError(f"{where}: the token is listed twice; give each token once, "
                              f"with all its roles joined by '+'; the form is {TOKENS_FORM}")  # fmt: skip
        out[token] = _roles(roles.split("+"), where, TOKENS_FORM)
    return out


def check_token(token: str, where: str, form: str = TOKENS_FORM) -> None:
    """Refuse a token no client could send as ``Authorization: Bearer <token>``, in one line ending with ``form``
    (how the place it was read from writes a token: :data:`TOKENS_FORM` or :data:`TOKENS_TABLE_FORM`)."""
    if token != token.strip():
        raise ConfigError(f"{where}: the token has spaces around it; the form is {form}")
    if not _TOKEN_CHARS.fullmatch(token):
        raise ConfigError(
            f"{where}: the token has a space or a character a bearer token cannot carry (use letters, digits "
            f"and - . _ ~ + /); the form is {form}"
        )


def _masked(token: str) -> str:
    """A token as an error line shows it: its first two characters when it is long enough to stay secret
    after that, its length and where it has spaces; never the whole secret."""
    core = token.strip()
    notes = [f"{len(core)} character{'' if len(core) == 1 else 's'}"]
    notes += ["a space before it"] if token[:1].isspace() else []
    notes += ["a space after it"] if token[-1:].isspace() else []
    return f"'{core[:2] if len(core) > 6 else ''}…' ({', '.join(notes)})"


def _roles(roles: object, where: str, form: str) -> frozenset[str]:
    if isinstance(roles, str):  # one role, or roles joined by '+' as $INFERENSICS_TOKENS writes them
        roles = roles.split("+")
    if not isinstance(roles, list | tuple) or not roles:
        raise ConfigError(f"{where}: each token needs a list of roles from {list(ROLES)}; the form is {form}")
    bad = [r for r in roles if r not in ROLES]
    if bad:
        raise ConfigError(f"{where}: unknown roles {bad}; known: {list(ROLES)}; the form is {form}")
    return frozenset(str(r) for r in roles)


def load_config(
    arguments: Mapping[str, object | None] | None = None,
    *,
    config_file: str | Path | None = None,
    environ: Mapping[str, str] | None = None,
) -> ServiceConfig:
    """Resolve every setting: argument > environment variable > config file > default.

    ``arguments`` values of ``None`` count as not given. ``config_file`` defaults to ``$INFERENSICS_CONFIG``.

    Raises:
        ConfigError: a bad value, an unknown file key, or an unreadable file, naming the setting.
    """
    env = os.environ if environ is None else environ
    args = {k: v for k, v in (arguments or {}).items() if v is not None}
    path = str(config_file or env.get(CONFIG_ENV) or "")
    file_values = _read_file(path) if path else {}
    unknown = sorted(set(file_values) - set(BY_NAME) - {"tokens"})
    if unknown:
        raise ConfigError(f"config file {path}: unknown settings {unknown}; known: {sorted(BY_NAME)}")
    values: dict[str, object] = {}
    for s in SETTINGS:
        if s.name in args:
            values[s.name] = _convert(s, args[s.name], "argument")
        elif s.env in env:
            values[s.name] = _convert(s, env[s.env], f"${s.env}")
        elif s.name in file_values:
            values[s.name] = _convert(s, file_values[s.name], f"config file {path}")
    tokens = _tokens(file_values, path, env)
    given: dict[str, frozenset[str]] = {}
    if "tokens" in args:
        raw = args["tokens"]
        given = parse_tokens(raw, "argument") if isinstance(raw, str) else dict(raw)  # type: ignore[call-overload]
        tokens.update(given)
    config = ServiceConfig(**values, tokens=tokens, config_file=path, argument_tokens=given)  # type: ignore[arg-type]
    if not config.host.strip():
        # An unset variable in a unit's `--host ${VAR}` arrives as "", which would bind every interface.
        raise ConfigError(
            "setting host: empty; give an address to listen on (127.0.0.1: this machine only, 0.0.0.0: every "
            "interface) with --host or $INFERENSICS_HOST"
        )
    if bool(config.tls_cert) != bool(config.tls_key):
        raise ConfigError("settings tls_cert and tls_key: give both paths for TLS, or neither")
    if config.tls_cert:
        _check_tls(config.tls_cert, config.tls_key)
    try:
        resolve_dsn(config.dsn or None)
    except DsnError as exc:
        raise ConfigError(f"setting dsn: {exc}") from None
    return config


def reload_tokens(config: ServiceConfig, environ: Mapping[str, str] | None = None) -> dict[str, frozenset[str]]:
    """The tokens a start would read now: the config file's ``[tokens]`` read again, then ``$INFERENSICS_TOKENS``.

    A process's environment is fixed when it starts, so only the file can bring new tokens to a running service
    (a changed ``$INFERENSICS_TOKENS`` needs a restart). ``environ`` defaults to this process's environment.

    Raises:
        ConfigError: the file cannot be read, is not TOML, or holds a bad token (the running tokens stay).
    """
    env = os.environ if environ is None else environ
    file_values = _read_file(config.config_file) if config.config_file else {}
    return {**_tokens(file_values, config.config_file, env), **config.argument_tokens}


def token_sources(
    config: ServiceConfig, tokens: Mapping[str, frozenset[str]], environ: Mapping[str, str] | None = None
) -> list[tuple[str, int]]:
    """Where ``tokens`` (what a start or :func:`reload_tokens` read) came from: ``(place, count)`` for the config
    file (named even when it gives none), ``$INFERENSICS_TOKENS`` and the arguments, those the service was started
    with. A token given in two counts where it was read last (the variable over the file, an argument over both).
    ``environ`` as in :func:`reload_tokens`."""
    env = os.environ if environ is None else environ
    from_env = set(parse_tokens(env[TOKENS_ENV], f"${TOKENS_ENV}")) if TOKENS_ENV in env else set()
    from_args = set(config.argument_tokens) & set(tokens)
    from_env -= from_args
    out: list[tuple[str, int]] = []
    if config.config_file:
        out.append((f"config file {config.config_file}", len(set(tokens) - from_env - from_args)))
    if TOKENS_ENV in env:
        out.append((f"${TOKENS_ENV}", len(from_env)))
    if config.argument_tokens:
        out.append(("the arguments the service started with", len(from_args)))
    return out


def _read_file(path: str) -> dict[str, Any]:
    """A config file's TOML, or one line saying why it cannot be read."""
    try:
        return tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config file {path}: not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at offset {exc.start}); "
            "TOML files are UTF-8: save it as UTF-8"
        ) from None
    except OSError as exc:
        raise ConfigError(
            f"config file {path}: cannot read it ({exc.strerror or exc}); give a readable TOML file with "
            f"--config or ${CONFIG_ENV}"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path}: not valid TOML ({exc}); correct the file") from None


def _tokens(file_values: Mapping[str, Any], path: str, env: Mapping[str, str]) -> dict[str, frozenset[str]]:
    """The config file's ``[tokens]``, then ``$INFERENSICS_TOKENS`` over them."""
    tokens: dict[str, frozenset[str]] = {}
    file_tokens = file_values.get("tokens", {})
    if not isinstance(file_tokens, dict):
        raise ConfigError(f"config file {path}: [tokens] must be a table of token = [roles]")
    for token, roles in file_tokens.items():
        where = f"tokens (config file {path}): token {_masked(str(token))}"
        check_token(str(token), where, TOKENS_TABLE_FORM)
        tokens[str(token)] = _roles(roles, where, TOKENS_TABLE_FORM)
    if TOKENS_ENV in env:
        tokens.update(parse_tokens(env[TOKENS_ENV], f"${TOKENS_ENV}"))
    return tokens


def _check_tls(cert: str, key: str) -> None:
    """Load the certificate and key now: the server would otherwise fail after binding, with a traceback."""
    for name, path in (("tls_cert", cert), ("tls_key", key)):
        if not Path(path).is_file():
            raise ConfigError(f"setting {name}: {path} is not a file; give the PEM path the service user can read")
    try:
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(
            f"settings tls_cert and tls_key: cannot load {cert} with {key} ({exc.strerror or exc}); give a "
            "readable PEM certificate and the private key that matches it"
        ) from None
