#!/usr/bin/env bash
# Session 60, call 1: the skinny GEMM's cluster merge by one-way pushes (each block stores its sums
# into the owning block's shared memory and arrives on that block's mbarrier; no cluster barrier on
# the way out): correctness (every matmul_cuda_test case, including every split count against the
# workspace merge bit for bit, the Hugging Face goldens, the sampled steps) and the skinny phases on
# Qwen2.5-0.5B's shapes.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
tgts="roofline matmul_cuda_test matmul_skinny_trace_bench hf_golden_test sampled_step_test"
cmake --build build/cuda -j16 --target $tgts >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
timeout 250 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 > "$out/matmul_cuda_test.txt" 2>&1
echo "matmul_cuda_test rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/matmul_cuda_test.txt" | tr '\n' ' ')"
for t in tests/e2e/hf_golden_test tests/runtime/sampled_step_test; do
  timeout 60 build/cuda/$t --gtest_brief=1 > "$out/$(basename $t).txt" 2>&1
  echo "$(basename $t) rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/$(basename $t).txt" | tr '\n' ' ')"
done
timeout 60 build/cuda/src/ops/matmul_skinny_trace_bench trace qwen > "$out/trace_qwen.txt" 2>&1
echo "trace rc=$? at $(el) s"
grep -E "^qwen.*TB/s" "$out/trace_qwen.txt"
tar czf "$out/r1.tgz" -C "$out" --exclude r1.tgz .
