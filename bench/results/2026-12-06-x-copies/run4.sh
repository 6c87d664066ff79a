#!/usr/bin/env bash
# Session 59, call 4: the larger batches, HEAD's ten kernel files before this session (.ab/head)
# against the tree (647bfd4): qwen2.5-0.5b bs 8 and 32, llama3-8b bs 64.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
args="bench --dummy-weights qwen2.5-0.5b --batch 8 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights llama3-8b --batch 64 --context 512 --device cuda --steps 16"
AB_PASSES=2 AB_ARGS="$args" timeout $((560 - $(el))) bash scripts/gpu/ab.sh .ab/head "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"
grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
