#!/usr/bin/env bash
# Session 60, the last call (a fresh machine, ~280 s of device time left): the wide GEMM's split
# merge with receipts instead of its closing cluster barrier. Its GPU tests, then
# `matmul_skinny_trace_bench trace wide` (Llama-3-8B's decode GEMMs at m = 1 and 64, timed, then
# traced) with ROOFLINE_WIDE_RECEIPTS=1 (the change) and =0 (the closing barrier), alternating,
# in one binary.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target matmul_skinny_trace_bench matmul_cuda_test >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
timeout 40 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 \
  --gtest_filter='MatmulCudaWideTest.*:MatmulCudaSummariesTest.*' > "$out/matmul_cuda_test.txt" 2>&1
echo "matmul_cuda_test rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/matmul_cuda_test.txt" | tr '\n' ' ')"
i=0
for r in 1 0 0 1 1 0; do
  [ "$(el)" -lt 190 ] || break
  i=$((i + 1))
  ROOFLINE_WIDE_RECEIPTS=$r timeout 30 build/cuda/src/ops/matmul_skinny_trace_bench trace wide > "$out/trace_wide_${i}_r$r.txt" 2>&1
  echo "== run $i receipts=$r rc=$? at $(el) s"
  grep -E "TB/s" "$out/trace_wide_${i}_r$r.txt"
done
