#!/usr/bin/env bash
# `make cluster-test`: the live two-shard cluster of deploy/compose/cluster.yml (3 Keeper, 2 shards x 2
# replicas, two collectors behind nginx, the dashboard) started on this machine's loopback with fresh
# secrets, tests/deploy/test_live_cluster.py run against it, and everything removed afterwards (volumes too).
# Needs Docker with the compose plugin (`docker compose`) or docker-compose.
set -euo pipefail
cd "$(dirname "$0")/../.."
if docker compose version >/dev/null 2>&1; then COMPOSE=(docker compose); elif command -v docker-compose >/dev/null 2>&1 && docker info >/dev/null 2>&1; then COMPOSE=(docker-compose); else
  echo "make cluster-test needs Docker (a running daemon) with 'docker compose'; none here" >&2
  exit 2
fi
env_file=$(mktemp)
secret() { python3 -c 'import secrets; print(secrets.token_urlsafe(18))'; }
cat > "$env_file" <<ENV
INFERENSICS_MIGRATOR_PASSWORD=$(secret)
INFERENSICS_INGEST_PASSWORD=$(secret)
INFERENSICS_READER_PASSWORD=$(secret)
CH_CLUSTER_SECRET=$(secret)
INFERENSICS_TOKENS=ingest-test=ingest,read-test=read,admin-test=admin
INFERENSICS_DASHBOARD_TOKEN=read-test
INFERENSICS_BIND=127.0.0.1
ENV
project=(-p inferensics-cluster-test -f deploy/compose/cluster.yml -f deploy/compose/cluster.test.yml --env-file "$env_file")
cleanup() { "${COMPOSE[@]}" "${project[@]}" down -v --remove-orphans >/dev/null 2>&1 || true; rm -f "$env_file"; }
trap cleanup EXIT
"${COMPOSE[@]}" "${project[@]}" up -d --build --wait
set -a; . "$env_file"; set +a
export INFERENSICS_CLUSTER_TEST=1 INFERENSICS_CLUSTER_COMPOSE="${COMPOSE[*]} ${project[*]}"
.venv/bin/python -m pytest -q tests/deploy/test_live_cluster.py "$@"
