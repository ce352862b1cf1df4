#!/usr/bin/env bash
# Installs Debian's chromium and chromium-driver for the report's browser test
# (a test tool's own browser download cannot work offline). Idempotent.
set -euo pipefail
if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "note: chromium/chromedriver missing and cannot apt-get install here; the browser test will skip" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
