#!/usr/bin/env bash
# Installs everything the CPU build and its tests need (Debian packages), then configures and
# builds the CPU preset. Safe to run again: packages already present are not reinstalled and the
# build is incremental.
#   scripts/setup.sh            # CPU build in build/cpu
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(build-essential cmake python3 nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
          libbenchmark-dev clang)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

cmake --preset cpu >/dev/null
cmake --build --preset cpu -j2
echo "setup: built build/cpu (roofline CLI: build/cpu/tools/cli/roofline)"
