"""Service settings: precedence argument > env > file > default, tokens, and errors that name the setting."""

from __future__ import annotations

from pathlib import Path

import pytest

from inferensics.collector.errors import ConfigError
from inferensics.collector.service.auth import AuthError, TokenAuth
from inferensics.collector.service.config import SETTINGS, ServiceConfig, load_config, reload_tokens, token_sources


def test_precedence(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('port = 1001\nhost = "0.0.0.0"\nretry_after_s = 9\n[tokens]\nabc = ["read", "ingest"]\n')
    env = {"INFERENSICS_PORT": "1002", "INFERENSICS_HOST": "10.0.0.1", "INFERENSICS_TOKENS": "def=admin"}
    c = load_config({"port": 1003, "host": None}, config_file=cfg, environ=env)
    assert c.port == 1003
    assert c.host == "10.0.0.1"
    assert c.retry_after_s == 9
    assert c.batch_max_rows == 50_000
    assert c.tokens == {"abc": frozenset({"read", "ingest"}), "def": frozenset({"admin"})}
    assert load_config(environ={}) == ServiceConfig()


def test_every_setting_is_declared_once_with_a_meaning() -> None:
    assert len({s.name for s in SETTINGS}) == len({s.env for s in SETTINGS}) == len(SETTINGS)
    assert all(s.meaning and s.env.startswith("INFERENSICS_") for s in SETTINGS)
    assert {s.name for s in SETTINGS} == set(ServiceConfig.__dataclass_fields__) - {
        "tokens",
        "config_file",
        "argument_tokens",
    }


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({"INFERENSICS_PORT": "http"}, "setting port ($INFERENSICS_PORT)"),
        ({"INFERENSICS_PORT": "99999"}, "setting port ($INFERENSICS_PORT): at most 65535, got '99999'"),
        ({"INFERENSICS_AUTH": "maybe"}, "setting auth"),
        ({"INFERENSICS_SPOOL_MAX_BYTES": "-1"}, "must not be negative"),
        ({"INFERENSICS_TOKENS": "abc=root"}, "unknown roles ['root']"),
        ({"INFERENSICS_TOKENS": "abc"}, "expected token=role"),
        ({"INFERENSICS_TLS_CERT": "/c.pem"}, "tls_cert and tls_key"),
        ({"INFERENSICS_DSN": "mysql://x"}, "setting dsn"),
    ],
)
def test_bad_values_name_the_setting(env: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=None) as info:
        load_config(environ=env)
    assert message in str(info.value)


def test_unknown_file_key(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text("prot = 1\n")
    with pytest.raises(ConfigError, match=r"unknown settings \['prot'\]"):
        load_config(config_file=cfg, environ={})


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"port = 1\n# caf\xe9\n", "not UTF-8 text (byte 0xe9 at offset 14); TOML files are UTF-8: save it as UTF-8"),
        (b"port = \n", "not valid TOML"),
        (None, "cannot read it (Is a directory); give a readable TOML file with --config or $INFERENSICS_CONFIG"),
    ],
)
def test_a_config_file_it_cannot_read_is_one_line(tmp_path: Path, content: bytes | None, message: str) -> None:
    """A Latin-1 file ended in a UnicodeDecodeError traceback."""
    cfg = tmp_path / "c.toml"
    if content is None:
        cfg.mkdir()
    else:
        cfg.write_bytes(content)
    with pytest.raises(ConfigError) as info:
        load_config(config_file=cfg, environ={})
    assert str(info.value).startswith(f"config file {cfg}: ")
    assert message in str(info.value)
    assert "\n" not in str(info.value)


def test_roles() -> None:
    auth = TokenAuth({"i": frozenset({"ingest"}), "a": frozenset({"admin"})})
    auth.check("Bearer i", "ingest")
    auth.check("Bearer a", "read")  # admin holds every role
    for header, role, status in (
        (None, "read", 401), ("Bearer x", "read", 401), ("Basic i", "ingest", 401), ("Bearer i", "read", 403),
    ):  # fmt: skip
        with pytest.raises(AuthError) as info:
            auth.check(header, role)
        assert info.value.status == status
    TokenAuth({}, enabled=False).check(None, "admin")


@pytest.mark.parametrize(
    ("name", "value", "valid"),
    [
        ("max_body_bytes", "0", "65536 or more"),  # every non-empty export got 413
        ("max_body_bytes", "100", "65536 or more"),
        ("batch_max_rows", "0", "1 or more"),
        ("batch_max_bytes", "0", "1 or more"),
        ("batch_max_age_s", "0", "0.01 or more"),
        ("engine_parse_files", "0", "1 to 256"),
        ("retry_after_s", "0", "1 or more"),  # Retry-After: 0 asks senders to hammer a full spool
        ("sql_max_rows", "0", "1 or more"),  # the engine reads 0 as "no limit"
        ("sql_max_seconds", "0", "1 or more"),
        ("sql_max_memory", "0", f"{16 << 20} or more"),
    ],
)
def test_limits_that_would_make_the_service_unusable_are_refused(name: str, value: str, valid: str) -> None:
    """``max_body_bytes = 0`` was accepted, then every non-empty export was answered 413."""
    env = f"INFERENSICS_{name.upper()}"
    with pytest.raises(ConfigError) as info:
        load_config(environ={env: value})
    message = str(info.value)
    assert message.startswith(f"setting {name} (${env}): at least "), message
    assert f"(valid: {valid})" in message
    assert "\n" not in message


def test_the_smallest_accepted_limits_load() -> None:
    names = ("max_body_bytes", "batch_max_rows", "batch_max_age_s", "retry_after_s", "sql_max_memory")
    smallest = {s.name: s.minimum for s in SETTINGS if s.name in names}
    config = load_config(smallest, environ={})
    assert config.max_body_bytes == 64 << 10
    assert config.batch_max_age_s == 0.01


def test_every_way_of_naming_a_data_directory_gives_one_spool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`serve --data-dir DIR` spooled into DIR/spool and `$INFERENSICS_DATA_DIR=DIR` into DIR/store-spool: a collector
    restarted the other way did not see the spans it had acknowledged, and the backup in deploy/README.md named a
    folder that was not there. One rule now: a data directory's spool/ beside its store/."""
    data = tmp_path / "data"
    monkeypatch.delenv("INFERENSICS_DSN", raising=False)
    monkeypatch.setenv("INFERENSICS_DATA_DIR", str(data))
    assert ServiceConfig(dsn="").resolved_spool_dir() == data / "spool"
    assert ServiceConfig(dsn="https://u:p@ch:8443/db").resolved_spool_dir() == data / "spool"
    monkeypatch.delenv("INFERENSICS_DATA_DIR")
    assert ServiceConfig(dsn=f"chdb://{data / 'store'}").resolved_spool_dir() == data / "spool"
    # A store folder of another name keeps its sibling.
    assert ServiceConfig(dsn=f"chdb://{tmp_path / 'db'}").resolved_spool_dir() == tmp_path / "db-spool"
    # An earlier release's spool that still holds spans is used until it is empty.
    legacy = data / "store-spool"
    legacy.mkdir(parents=True)
    assert ServiceConfig(dsn=f"chdb://{data / 'store'}").resolved_spool_dir() == data / "spool"
    (legacy / "000000000001-0123456789ab.seg").write_bytes(b"x")
    assert ServiceConfig(dsn=f"chdb://{data / 'store'}").resolved_spool_dir() == legacy
    assert ServiceConfig(dsn="", spool_dir=str(tmp_path / "mine")).resolved_spool_dir() == tmp_path / "mine"


def test_an_earlier_releases_spool_counts_only_its_segments(tmp_path: Path) -> None:
    """The service's own files in the old `store-spool` (its `spool.lock`, the engine's `engine/` folder, an empty
    `quarantine/`) kept it "non-empty" for ever: the new `spool/` was never used, the start warned of unwritten
    spans every time, and the documented backup of `store spool` failed on the missing `spool`."""
    data = tmp_path / "data"
    legacy = data / "store-spool"
    (legacy / "engine").mkdir(parents=True)
    (legacy / "engine" / "inferensics_otlp_trace.proto").write_text("syntax")
    (legacy / "quarantine").mkdir()
    (legacy / "spool.lock").write_text("123\n")
    (legacy / "000000000007-0123456789ab.seg").write_bytes(b"")  # an empty segment holds nothing
    config = ServiceConfig(dsn=f"chdb://{data / 'store'}")
    assert config.legacy_spool_dir() == legacy
    assert config.resolved_spool_dir() == data / "spool"
    (legacy / "quarantine" / "000000000003-0123456789ab.seg").write_bytes(b"INFS")  # quarantined spans count
    assert config.resolved_spool_dir() == legacy
    assert ServiceConfig(dsn=f"chdb://{data / 'store'}", spool_dir=str(legacy)).legacy_spool_dir() is None


def test_tokens_are_read_again_from_the_config_file(tmp_path: Path) -> None:
    cfg = tmp_path / "c.toml"
    cfg.write_text('[tokens]\n"old-read" = ["read"]\n')
    env = {"INFERENSICS_TOKENS": "ingest-tok=ingest"}
    config = load_config(config_file=cfg, environ=env)
    assert config.config_file == str(cfg)
    assert set(config.tokens) == {"old-read", "ingest-tok"}
    cfg.write_text('[tokens]\n"new-read" = "read+replay"\n')
    assert reload_tokens(config, env) == {
        "new-read": frozenset({"read", "replay"}),
        "ingest-tok": frozenset({"ingest"}),
    }
    cfg.write_text('[tokens]\n"bad tok" = ["read"]\n')
    with pytest.raises(ConfigError, match="a space or a character"):
        reload_tokens(config, env)
    cfg.write_text("port = 4400\n")
    assert load_config(environ={"INFERENSICS_CONFIG": str(cfg), "INFERENSICS_AUTH": "0"}).config_file == str(cfg)


def test_a_tokens_table_takes_roles_as_a_list_or_joined_and_says_its_own_form(tmp_path: Path) -> None:
    """`"rd-tok" = "read+replay"` in the [tokens] table was refused with the environment variable's form as the fix
    (`token=role+role`), which a TOML file cannot take."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[tokens]\n"rd-tok" = "read+replay"\n"ad-tok" = ["admin"]\n')
    tokens = load_config(config_file=cfg, environ={}).tokens
    assert tokens["rd-tok"] == frozenset({"read", "replay"})
    cfg.write_text('[tokens]\n"rd-tok" = ["read", "reply"]\n')
    with pytest.raises(ConfigError) as info:
        load_config(config_file=cfg, environ={})
    assert "unknown roles ['reply']" in str(info.value)
    assert '"token" = ["read", "replay"] in the [tokens] table' in str(info.value)
    assert "token=role+role" not in str(info.value)


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("retry_after_s = inf", "inf is not a valid int"),  # int(inf) raised OverflowError: a traceback
        ("decode_workers = -inf", "-inf is not a valid int"),
        ("port = 4318.9", "4318.9 is not a valid int"),  # int() cut it to 4318
        ("spool_max_bytes = nan", "nan is not a valid int"),
    ],
)
def test_an_int_setting_written_as_a_float_that_is_no_integer_is_one_line(
    tmp_path: Path, line: str, shown: str
) -> None:
    path = tmp_path / "c.toml"
    path.write_text(line + "\n")
    name = line.split(" ", 1)[0]
    with pytest.raises(ConfigError) as info:
        load_config(config_file=path, environ={})
    message = str(info.value)
    assert message.startswith(f"setting {name} (config file {path}): {shown}"), message
    assert "\n" not in message


def test_an_integral_float_is_taken_for_an_int_setting(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text("port = 4319.0\n")
    assert load_config(config_file=path, environ={}).port == 4319


@pytest.mark.parametrize(
    ("name", "value", "most"),
    [
        ("decode_workers", "1e9", 64),  # one spawned interpreter each, before listening: serve hung silently
        ("decode_workers", "65", 64),
        ("engine_parse_files", "100000", 256),
        ("engine_max_threads", "1000000", 1024),
    ],
)
def test_settings_that_start_processes_or_threads_are_bounded(tmp_path: Path, name: str, value: str, most: int) -> None:
    path = tmp_path / "c.toml"
    path.write_text(f"{name} = {value}\n")
    with pytest.raises(ConfigError) as info:
        load_config(config_file=path, environ={})
    message = str(info.value)
    assert message.startswith(f"setting {name} (config file {path}): at most {most}, got "), message
    assert "\n" not in message
    assert load_config(config_file=None, environ={f"INFERENSICS_{name.upper()}": str(most)}) is not None


def test_a_reload_keeps_the_tokens_given_as_arguments_and_says_where_each_came_from(tmp_path: Path) -> None:
    """Tokens handed to load_config as an argument were dropped by a SIGHUP's reload of the config file."""
    cfg = tmp_path / "c.toml"
    cfg.write_text('[tokens]\n"file-tok" = ["read"]\n')
    env = {"INFERENSICS_TOKENS": "env-tok=ingest"}
    config = load_config({"tokens": "arg-tok=admin"}, config_file=cfg, environ=env)
    cfg.write_text('[tokens]\n"new-file-tok" = ["read"]\n')
    tokens = reload_tokens(config, env)
    assert set(tokens) == {"new-file-tok", "env-tok", "arg-tok"}
    assert token_sources(config, tokens, env) == [
        (f"config file {cfg}", 1),
        ("$INFERENSICS_TOKENS", 1),
        ("the arguments the service started with", 1),
    ]
    assert token_sources(load_config(config_file=cfg, environ={}), {"new-file-tok": frozenset({"read"})}, {}) == [
        (f"config file {cfg}", 1)
    ]


def test_a_bad_token_in_the_tokens_table_is_shown_the_tables_form(tmp_path: Path) -> None:
    """A token with a space in a config file's [tokens] was told the environment variable's form (token=role+role),
    which a TOML table cannot take."""
    cfg = tmp_path / "c.toml"
    for token in ("to k", " tok"):
        cfg.write_text(f'[tokens]\n"{token}" = ["read"]\n')
        with pytest.raises(ConfigError) as err:
            load_config(config_file=cfg, environ={})
        assert str(err.value).endswith('the form is "token" = ["read", "replay"] in the [tokens] table '
                                       "(roles: ingest, read, metrics, replay, admin)")  # fmt: skip
        assert "token=role" not in str(err.value)
