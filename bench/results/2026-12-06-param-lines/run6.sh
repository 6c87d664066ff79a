#!/usr/bin/env bash
# Session 58, call 6: the skinny kernel at HEAD (deep ring, touch_params, TokenSource) against c3a2cfe's matmul_skinny.h and matmul_skinny_cuda.cu (.ab/c3a), by scripts/gpu/ab.sh.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 8 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout 520 bash scripts/gpu/ab.sh .ab/c3a "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(( $(date +%s) - start )) s"
grep -E "^== |graph floor|decode step" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//; s/ \(.*//'
