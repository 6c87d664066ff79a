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
# PCRE2: header and the shared library (the host has the runtime .so.0 but no dev files).
mkdir -p .staged/lib
cp /usr/include/pcre2.h .staged/include/
# xxhash: used header-only (XXH_INLINE_ALL), so only the header travels.
cp /usr/include/xxhash.h .staged/include/
cp -L /usr/lib/x86_64-linux-gnu/libpcre2-8.so.0 .staged/lib/
ln -sf libpcre2-8.so.0 .staged/lib/libpcre2-8.so
du -sh .staged
