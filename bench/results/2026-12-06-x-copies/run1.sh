#!/usr/bin/env bash
# Session 59, call 1 (got an H100, so the H200-only A/B did not run; the profile line used a wrong path and was rerun alone as run 1b: `$(find build/cuda -name roofline) profile --calibrate ...`): on an H200, the owed A/B of sessions 57-58's skinny kernel against c3a2cfe
# (issue 8's figure); on any GPU, a calibrated profile of qwen2.5-0.5b bs 1 at HEAD and the skinny
# kernel's phase trace on its shapes.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline matmul_skinny_trace_bench >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
timeout 90 build/cuda/roofline profile --calibrate --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 4 > "$out/profile_qwen1.txt" 2>&1
echo "profile rc=$? at $(el) s"
timeout 60 build/cuda/src/ops/matmul_skinny_trace_bench trace qwen > "$out/trace_qwen.txt" 2>&1
echo "trace rc=$? at $(el) s"
if grep -q H200 "$out/gpu.txt"; then
  args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
  args+=";bench --dummy-weights qwen2.5-0.5b --batch 8 --context 512 --device cuda --steps 64"
  args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
  args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
  AB_PASSES=2 AB_ARGS="$args" timeout $((580 - $(el))) bash scripts/gpu/ab.sh .ab/c3a "$out/ab" > "$out/ab_table.txt" 2>&1
  echo "ab rc=$? at $(el) s"
  grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
fi
sed -n '/top kernels/,/kernels .* a step/p' "$out/profile_qwen1.txt"
tar czf "$out/r1.tgz" -C "$out" --exclude r1.tgz .
