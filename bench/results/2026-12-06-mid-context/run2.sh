#!/usr/bin/env bash
# Session 61, call 4 (a fresh machine, ~350 s of device time left): issue 8's four steps at HEAD
# 7c289bc with the bench that takes its floor and bytes mid-run, graphs and eager.
set -uo pipefail
dest=${1:?}; out=/tmp/m2; mkdir -p "$dest" "$out"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
step() {  # model batch steps [flag]
  [ "$(el)" -lt 200 ] || return
  echo "== $1 bs $2 ${4:-}" >> "$out/steps.txt"
  timeout 40 build/cuda/tools/cli/roofline bench --dummy-weights "$1" --batch "$2" --context 512 \
    --device cuda --steps "$3" ${4:-} >> "$out/steps.txt" 2>&1
  echo "rc=$? at $(el) s" >> "$out/steps.txt"
  cp "$out/steps.txt" "$dest/steps.txt"
}
step qwen2.5-0.5b 1 64; step qwen2.5-0.5b 32 32; step llama3-8b 1 32; step llama3-8b 64 32
step qwen2.5-0.5b 1 32 --no-cuda-graphs; step llama3-8b 1 16 --no-cuda-graphs
step llama3-8b 64 16 --no-cuda-graphs; step qwen2.5-0.5b 32 16 --no-cuda-graphs
cp "$out/gpu.txt" "$dest/"
grep -E "^== |decode step|graph floor|^roofline" "$out/steps.txt" |
  sed -E 's/ -> .*//; s/ a step with its CUDA graph replayed back to back \(no host between steps\)//; s/, min .*//' | cut -c1-150
