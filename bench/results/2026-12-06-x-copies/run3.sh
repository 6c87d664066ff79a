#!/usr/bin/env bash
# Session 59, call 3: on an H200 only, sessions 57-59's skinny kernel (HEAD 647bfd4) against
# c3a2cfe's matmul_skinny.h and matmul_skinny_cuda.cu (.ab/c3a): issue 8's H200 figures.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
grep -q H200 "$out/gpu.txt" || { echo "not an H200: nothing run"; exit 0; }
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((590 - $(el))) bash scripts/gpu/ab.sh .ab/c3a "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"
grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
