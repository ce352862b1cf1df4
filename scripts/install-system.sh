#!/usr/bin/env bash
# Installs the Debian packages recstack's setup wants (idempotent):
#  - gcc (with libc headers): builds recstack's native gather kernel for the
#    machine roofline (without it the gather roof falls back to
#    torch.index_select and says so);
#  - g++: torch.compile's Inductor backend compiles C++ kernels on CPU;
#  - chromium and chromium-driver: the report's browser test (a test tool's
#    own browser download cannot work offline).
set -euo pipefail
need=()
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v c++ >/dev/null 2>&1 || need+=(g++)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v chromedriver >/dev/null 2>&1 || need+=(chromium-driver)
if [ ${#need[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != "0" ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "note: missing ${need[*]} and cannot apt-get install here;" \
    "the gather kernel falls back to torch.index_select / the browser test skips" >&2
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
