#!/usr/bin/env bash
# Install inferensics as systemd services on one VM, or upgrade it (run as root from the new release's root):
#   bash deploy/systemd/install.sh
# An upgrade restarts the running units: the collector's start runs `inferensics init` first (ExecStartPre), so
# the new release's migrations are applied before the new collector writes; the spool is kept and replayed.
# ClickHouse itself comes from ClickHouse's own packages (clickhouse-server 25.8 or later); this script puts
# the inferensics server config, users and format schema in place for it when /etc/clickhouse-server exists.
set -euo pipefail
cd "$(dirname "$0")/../.."
id inferensics >/dev/null 2>&1 || useradd --system --home-dir /var/lib/inferensics --shell /usr/sbin/nologin inferensics
python3 -m venv /opt/inferensics/venv
/opt/inferensics/venv/bin/pip install -q --index-url https://download.pytorch.org/whl/cpu torch==2.13.0
/opt/inferensics/venv/bin/pip install -q '.[dashboard]'
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
if systemctl is-active --quiet inferensics-collector.service; then
  # an upgrade: restarting the collector migrates the store first; what fails is in the collector's journal
  systemctl restart inferensics-collector.service || {
    echo "the collector did not start (its migration or a setting): journalctl -u inferensics-collector -n 50" >&2
    exit 1
  }
  systemctl try-restart inferensics-dashboard.service
  echo "upgraded: the collector migrated the store and restarted; check with"
  echo "  journalctl -u inferensics-collector -n 20 && INFERENSICS_TOKEN=<read token> /opt/inferensics/venv/bin/inferensics status --service http://127.0.0.1:4318"
else
  echo "edit /etc/inferensics/inferensics.env (and clickhouse-passwords.env), then:"
  echo "  systemctl restart clickhouse-server && systemctl enable --now inferensics-collector inferensics-dashboard"
fi
