#!/usr/bin/env bash
# Install inferensics as systemd services on one VM, or upgrade it (run as root from the new release's root):
#   bash deploy/systemd/install.sh
# An upgrade restarts the running units: the collector's start runs `inferensics init` first (ExecStartPre), so
# the new release's migrations are applied before the new collector writes; the spool is kept and replayed.
# Each release gets a virtualenv of its own, /opt/inferensics/venv-<version>-<time>; /opt/inferensics/venv (what
# the units run) is a symlink to the current one and venv.previous to the one before (deploy/README.md: rollback).
# The new one is built and checked beside the live one, then the symlink is swapped in one rename: pip never
# writes into the environment the running services import from, and a failed install leaves them as they were.
# ClickHouse itself comes from ClickHouse's own packages (clickhouse-server 25.8 or later); this script puts
# the inferensics server config, users and format schema in place for it when /etc/clickhouse-server exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
id inferensics >/dev/null 2>&1 || useradd --system --home-dir /var/lib/inferensics --shell /usr/sbin/nologin inferensics
PREFIX=/opt/inferensics
VENV="$PREFIX/venv"
install -d -m 0755 "$PREFIX"
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)"
# a name of its own for every run (mktemp's suffix): installing the same version again never touches the live one
release="$(mktemp -d "$PREFIX/venv-${version:-unknown}-$(date -u +%Y%m%dT%H%M%SZ)-XXXX")"
chmod 0755 "$release"
serving="nothing was installed"
[ -e "$VENV" ] && serving="$VENV ($(readlink -f "$VENV")) is untouched and still serving"
if ! {
  python3 -m venv "$release" &&
    "$release"/bin/pip install -q --index-url https://download.pytorch.org/whl/cpu torch==2.13.0 &&
    "$release"/bin/pip install -q '.[dashboard]' &&
    # what the units run loads: the command line, the service, the dashboard and their engines
    "$release/bin/inferensics" --help >/dev/null &&
    "$release/bin/python" -c 'import inferensics.collector.service, inferensics.dashboard, chdb, clickhouse_connect, streamlit'
}; then
  rm -rf "$release"
  echo "install failed (the error is above; the new environment $release is removed): $serving" >&2
  exit 1
fi
install -m 0644 README.md /opt/inferensics/README.md
install -d -m 0750 -g inferensics /etc/inferensics
[ -e /etc/inferensics/inferensics.env ] || install -m 0640 -g inferensics deploy/systemd/inferensics.env.example /etc/inferensics/inferensics.env
if [ -d /etc/clickhouse-server ]; then
  install -m 0644 deploy/clickhouse/config.d/inferensics.xml /etc/clickhouse-server/config.d/inferensics.xml
  install -m 0640 -g clickhouse deploy/clickhouse/users.d/inferensics.xml /etc/clickhouse-server/users.d/inferensics.xml
  install -d -o clickhouse -g clickhouse /var/lib/clickhouse/format_schemas
  install -m 0644 deploy/clickhouse/format_schemas/inferensics_otlp_trace.proto /var/lib/clickhouse/format_schemas/
  # the users file reads the passwords from clickhouse-server's environment
  install -d /etc/systemd/system/clickhouse-server.service.d
  printf '[Service]\nEnvironmentFile=/etc/inferensics/clickhouse-passwords.env\n' > /etc/systemd/system/clickhouse-server.service.d/inferensics.conf
  [ -e /etc/inferensics/clickhouse-passwords.env ] || printf 'INFERENSICS_MIGRATOR_PASSWORD=change-me-migrator\nINFERENSICS_INGEST_PASSWORD=change-me-ingest\nINFERENSICS_READER_PASSWORD=change-me-reader\n' > /etc/inferensics/clickhouse-passwords.env
  chmod 0600 /etc/inferensics/clickhouse-passwords.env
fi
# releases before this one had a separate oneshot migrator unit, which ran only once per boot
if [ -e /etc/systemd/system/inferensics-migrate.service ]; then
  systemctl disable --now inferensics-migrate.service || true
  rm -f /etc/systemd/system/inferensics-migrate.service
fi
install -m 0644 deploy/systemd/inferensics-collector.service deploy/systemd/inferensics-dashboard.service /etc/systemd/system/
systemctl daemon-reload
# The switch. A service started from the old environment keeps running from it (its scripts name their own
# environment's python), until the restart below; venv.previous keeps it for a rollback, older ones go.
previous=""
if [ -L "$VENV" ]; then
  previous="$(readlink -f "$VENV")"
elif [ -d "$VENV" ]; then
  # made in place by a release before this script built one environment per release: keep it as the previous
  # one (its scripts name $VENV/bin/python, which is it again once a rollback points the symlink back)
  previous="$PREFIX/venv-older-$(date -u +%Y%m%dT%H%M%SZ)"
  mv -T "$VENV" "$previous"
fi
ln -sfnT "$(basename "$release")" "$PREFIX/venv.new"
mv -Tf "$PREFIX/venv.new" "$VENV"
if [ -n "$previous" ]; then
  ln -sfnT "$(basename "$previous")" "$PREFIX/venv.previous.new"
  mv -Tf "$PREFIX/venv.previous.new" "$PREFIX/venv.previous"
fi
for old in "$PREFIX"/venv-*; do
  [ "$old" = "$release" ] || [ "$old" = "$previous" ] || rm -rf "$old"
done
if systemctl is-active --quiet inferensics-collector.service; then
  # an upgrade: restarting the collector migrates the store first; what fails is in the collector's journal
  systemctl restart inferensics-collector.service || {
    echo "the collector did not start (its migration or a setting): journalctl -u inferensics-collector -n 50; the previous release is $PREFIX/venv.previous (deploy/README.md: rollback)" >&2
    exit 1
  }
  systemctl try-restart inferensics-dashboard.service
  echo "upgraded: the collector migrated the store and restarted; check with"
  echo "  journalctl -u inferensics-collector -n 20 && INFERENSICS_TOKEN=<read token> /opt/inferensics/venv/bin/inferensics status --service http://127.0.0.1:4318"
else
  echo "edit /etc/inferensics/inferensics.env (and clickhouse-passwords.env), then:"
  echo "  systemctl restart clickhouse-server && systemctl enable --now inferensics-collector inferensics-dashboard"
fi
