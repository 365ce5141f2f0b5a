#!/usr/bin/env bash
# Headless Chromium for the page tests (Debian's package; no browser download at run time).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
if [ "$(id -u)" != "0" ]; then
  echo "chromium is missing: run 'sudo apt-get install -y chromium' (needed by the browser tests)" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq chromium >/dev/null
