#!/usr/bin/env bash
# Puts cuobjdump and nvdisasm (NVIDIA's wheels on PyPI) in .tools/cuda/bin for
# scripts/gpu/sass_loops.py, where the CUDA toolkit here lacks them (the development machines'
# CUDA 13 has nvcc and ptxas only). Needs python3 with pip and access to PyPI; idempotent.
#   scripts/gpu/get_sass_tools.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
dest=.tools/cuda
if [ -x "$dest/bin/cuobjdump" ] && [ -x "$dest/bin/nvdisasm" ]; then
  echo "get_sass_tools: $dest/bin already holds cuobjdump and nvdisasm"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m pip download --no-deps --quiet -d "$tmp" nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm ||
  { echo "get_sass_tools: pip could not download nvidia-cuda-cuobjdump / nvidia-cuda-nvdisasm" >&2; exit 1; }
mkdir -p "$tmp/x" "$dest/bin"
for wheel in "$tmp"/*.whl; do
  python3 -c 'import sys, zipfile; zipfile.ZipFile(sys.argv[1]).extractall(sys.argv[2])' "$wheel" "$tmp/x"
done
for tool in cuobjdump nvdisasm; do
  found=$(find "$tmp/x" -type f -name "$tool" | head -n 1)
  [ -n "$found" ] || { echo "get_sass_tools: no $tool in the downloaded wheels" >&2; exit 1; }
  cp "$found" "$dest/bin/$tool"
  chmod +x "$dest/bin/$tool"
done
echo "get_sass_tools: $dest/bin/cuobjdump and nvdisasm ($("$dest/bin/cuobjdump" --version | tail -n 1))"
