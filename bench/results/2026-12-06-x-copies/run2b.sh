#!/usr/bin/env bash
# Session 59, call 2b (warm after 2a): decode steps for HEAD's kernels (.ab/head), the skinny
# change alone (.ab/chains: x copies unrolled, two accumulator chains) and the whole tree (new:
# also the touches), by scripts/gpu/ab.sh.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
[ -f build/cuda/CMakeCache.txt ] || cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights qwen3-0.6b --batch 1 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((590 - $(el))) bash scripts/gpu/ab.sh .ab/head .ab/chains "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"
grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
tar czf "$out/r2b.tgz" -C "$out" --exclude r2b.tgz .
