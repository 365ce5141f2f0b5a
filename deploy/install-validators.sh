#!/usr/bin/env bash
# The validators tests/deploy runs (Debian's packages): docker-compose checks the compose files (no Docker
# daemon needed), systemd-analyze the units, nginx -t the load balancer's config (the service is not started). kubernetes-validate comes with the dev extras (pyproject.toml).
set -euo pipefail
missing=()
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v systemd-analyze >/dev/null 2>&1 || missing+=(systemd)
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
if [ "${#missing[@]}" -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != "0" ]; then
  echo "${missing[*]} missing: run 'sudo apt-get install -y --no-install-recommends ${missing[*]}' (needed by tests/deploy)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
# RUNLEVEL=1: invoke-rc.d starts no service from these packages (nginx is only a config checker here)
RUNLEVEL=1 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
