#!/usr/bin/env bash
# Session 57, call 1: the LL handover experiment; on an H200 also the owed overlap A/B.
set -uo pipefail
out=${1:?}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
nvcc -O2 -std=c++17 -gencode arch=compute_90a,code=sm_90a \
  bench/results/2026-12-06-ll-handover/handover.cu -o /tmp/handover > "$out/nvcc.txt" 2>&1
echo "nvcc rc=$?"
for pass in 1 2; do echo "== pass $pass"; timeout 60 /tmp/handover; done > "$out/handover.txt" 2>&1
cat "$out/handover.txt"
if grep -q H200 "$out/gpu.txt"; then
  bash scripts/gpu/overlap_check.sh "$out" .ab/split > "$out/overlap_stdout.txt" 2>&1
  tail -30 "$out/overlap_stdout.txt"
fi
