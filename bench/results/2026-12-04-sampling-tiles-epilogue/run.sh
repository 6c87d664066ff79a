#!/usr/bin/env bash
# Session script (untracked): the LM head's logit tile summaries (matmul_cuda_test whole, the
# summaries bench) and the tile sampler (sampling_cuda_test whole, bench, batch-64 trace).
set -uo pipefail
out=${1:?usage: run.sh OUT}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
note() { echo "$* at $(el) s" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$out/gpu.txt" 2>&1
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target sampling_cuda_test sampling_cuda_bench sampling_trace_bench \
  matmul_cuda_test matmul_cuda_bench >> "$out/build.log" 2>&1
note "build rc=$?"
grep -E "error" "$out/build.log" | head -20
timeout 240 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 > "$out/tests.log" 2>&1
note "matmul_cuda_test rc=$? $(grep -E 'PASSED|FAILED' "$out/tests.log" | head -3 | tr '\n' ' ')"
timeout 120 build/cuda/src/ops/sampling_cuda_test --gtest_brief=1 >> "$out/tests.log" 2>&1
note "sampling_cuda_test rc=$? $(grep -E 'PASSED|FAILED' "$out/tests.log" | tail -3 | tr '\n' ' ')"
grep -E "FAILED|Failure" -A8 "$out/tests.log" | head -80
timeout 150 build/cuda/src/ops/matmul_cuda_bench summaries > "$out/bench.txt" 2>&1
note "matmul summaries bench rc=$?"
timeout 100 build/cuda/src/ops/sampling_cuda_bench >> "$out/bench.txt" 2>&1
note "sampling bench rc=$?"
timeout 60 build/cuda/src/ops/sampling_trace_bench trace 64 bf16 > "$out/trace64.txt" 2>&1
note "trace rc=$?"
grep -vE "^f32|batch   1|batch 256" "$out/bench.txt" | head -60
sed -n '/from tiles of 128 tokens:/,$p' "$out/trace64.txt"
cat "$out/summary.txt"
