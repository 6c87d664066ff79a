#!/usr/bin/env bash
# Copies the header-only dependencies and the GoogleTest sources from this (Debian) machine into
# .staged/, an ignored folder that travels to the GPU host, which has no package registry.
# cmake/dependencies.cmake falls back to .staged/ when the packages are not installed.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .staged
mkdir -p .staged/include
cp -r /usr/include/nlohmann .staged/include/
cp -r /usr/include/CLI .staged/include/
cp -r /usr/src/googletest .staged/googletest
du -sh .staged
