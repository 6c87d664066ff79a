#!/usr/bin/env bash
# Session 60, call 4 (a fresh machine): the push merge at the larger batches, whose clustered
# launches run 4 and 8 token tiles: HEAD 7f2760a's skinny GEMM (.ab/head) against the tree.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
args="bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights llama3-8b --batch 64 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
AB_PASSES=2 AB_ARGS="$args" timeout 540 bash scripts/gpu/ab.sh .ab/head "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"
grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
tar czf "/tmp/r4.tgz" -C "$out" . && mv /tmp/r4.tgz "$out/"
