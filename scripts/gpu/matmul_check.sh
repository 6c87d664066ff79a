#!/usr/bin/env bash
# Issue 13's focused run for the H200 host, when a whole check.sh does not fit the device time:
# build the GEMM targets and the CLI, run the GEMM tests (CPU twin on every element), the GEMM
# benchmark (programmatic dependent launch on, as by default), and the decode step of both shapes
# with every GEMM on cuBLASLt, on the skinny kernel wherever it applies, and on the selector's
# choice, twice each, interleaved (their differences are a few percent, their run-to-run spread
# about as much), and the selector without PDL; then CUPTI profiles of the llama3-8b bs 1 step
# with cuBLASLt and with the skinny kernel (each GEMM's time inside the replayed graph); the CUDA
# backend against the Hugging Face goldens (hf_golden_test) with whatever the selector chose. One
# log per part, a short table last. Carry .staged (scripts/stage_deps.sh) with the call.
#   scripts/gpu/matmul_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/gpu/matmul_check.sh OUTDIR}
mkdir -p "$out"
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"

cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/configure.log" 2>&1
cmake --build build/cuda -j16 --target matmul_skinny_test matmul_cuda_test matmul_cuda_bench roofline \
  cuda_graph_test sampled_step_test hf_golden_test > "$out/build.log" 2>&1
build_rc=$?
[ "$build_rc" -eq 0 ] || tail -n 40 "$out/build.log"
built=$(date +%s)

tests=""
for t in src/ops/matmul_skinny_test src/ops/matmul_cuda_test tests/runtime/cuda_graph_test \
         tests/e2e/hf_golden_test; do
  r=$(timeout 240 "build/cuda/$t" --gtest_brief=1 2>&1 | tee -a "$out/tests.log" | grep -E "PASSED|FAILED" | tr '\n' ' ')
  tests="$tests $(basename "$t"): $r;"
done
for t in tests/runtime/cuda_graph_test tests/runtime/sampled_step_test; do
  r=$(ROOFLINE_PDL=0 timeout 120 "build/cuda/$t" --gtest_brief=1 2>&1 | tee -a "$out/tests.log" | grep -E "PASSED|FAILED" | tr '\n' ' ')
  tests="$tests no PDL $(basename "$t"): $r;"
done
tested=$(date +%s)

echo "== matmul_cuda_bench" >> "$out/matmul_bench.txt"
timeout 150 build/cuda/src/ops/matmul_cuda_bench >> "$out/matmul_bench.txt" 2>&1 \
  || echo "(exit $?)" >> "$out/matmul_bench.txt"

for model in "llama3-8b --batch 1" "qwen2.5-0.5b --batch 1" "llama3-8b --batch 64"; do
  for env in "ROOFLINE_MATMUL_IMPL=cublas" "ROOFLINE_MATMUL_IMPL=skinny" "ROOFLINE_MATMUL_IMPL=auto" \
             "ROOFLINE_MATMUL_IMPL=cublas" "ROOFLINE_MATMUL_IMPL=skinny" "ROOFLINE_MATMUL_IMPL=auto" \
             "ROOFLINE_PDL=0 ROOFLINE_MATMUL_IMPL=auto"; do
    echo "== $env roofline bench --dummy-weights $model --context 512 --device cuda --steps 32" >> "$out/decode_bench.txt"
    env $env timeout 90 build/cuda/tools/cli/roofline bench --dummy-weights $model --context 512 \
      --device cuda --steps 32 >> "$out/decode_bench.txt" 2>&1 || echo "(exit $?)" >> "$out/decode_bench.txt"
  done
done
for impl in cublas skinny; do
  echo "== ROOFLINE_MATMUL_IMPL=$impl roofline profile --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 8" >> "$out/profile.txt"
  ROOFLINE_MATMUL_IMPL=$impl timeout 120 build/cuda/tools/cli/roofline profile --dummy-weights llama3-8b \
    --batch 1 --context 512 --device cuda --steps 8 >> "$out/profile.txt" 2>&1 || echo "(exit $?)" >> "$out/profile.txt"
done
done_at=$(date +%s)

grep -E "^==|m=(1|8|64) |skinny/cublas|splits:|\+residual|\(exit" "$out/matmul_bench.txt"
grep -E "^==|decode step|roofline|\(exit" "$out/decode_bench.txt"
echo
echo "| step | result | seconds |"
echo "|---|---|---|"
echo "| build -j16 | rc=$build_rc | $((built - start)) |"
echo "| tests | $tests | $((tested - built)) |"
echo "| benches | matmul_bench.txt, decode_bench.txt | $((done_at - tested)) |"
