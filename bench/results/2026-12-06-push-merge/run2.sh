#!/usr/bin/env bash
# Session 60, call 2 (warm after call 1): decode steps with the skinny GEMM as it was before
# sessions 57-59 (.ab/s57base: c3a2cfe's matmul_skinny.h and matmul_skinny_cuda.cu), at HEAD
# 7f2760a (.ab/head) and with the push merge (new), by scripts/gpu/ab.sh; then the skinny phases
# of HEAD against new.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
[ -f build/cuda/CMakeCache.txt ] || cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 8 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((420 - $(el))) bash scripts/gpu/ab.sh .ab/s57base .ab/head "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"
grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
AB_PASSES=1 AB_TARGET=matmul_skinny_trace_bench AB_ARGS="trace qwen" timeout $((585 - $(el))) bash scripts/gpu/ab.sh .ab/head "$out/abtrace" > "$out/abtrace_table.txt" 2>&1
echo "ab trace rc=$? at $(el) s"
grep -E "^== |^qwen.*TB/s" "$out/abtrace/ab.txt"
tar czf "$out/r2.tgz" -C "$out" --exclude r2.tgz .
