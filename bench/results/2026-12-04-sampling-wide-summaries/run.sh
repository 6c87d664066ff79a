#!/usr/bin/env bash
# Session script (untracked): the wide GEMM's summaries with interleaved reductions; the writer's
# own duration under ncu at m = 64.
set -uo pipefail
out=${1:?usage: run4.sh OUT}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
note() { echo "$* at $(el) s" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$out/gpu.txt" 2>&1
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target matmul_cuda_test matmul_cuda_bench >> "$out/build.log" 2>&1
note "build rc=$?"
grep -E "error" "$out/build.log" | head -20
timeout 60 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 --gtest_filter='*Summar*:LogitTiles*' > "$out/tests.log" 2>&1
note "summaries tests rc=$? $(grep -E 'PASSED|FAILED' "$out/tests.log" | head -3 | tr '\n' ' ')"
grep -E "FAILED|Failure" -A8 "$out/tests.log" | head -60
timeout 150 build/cuda/src/ops/matmul_cuda_bench summaries 1 8 64 256 > "$out/bench.txt" 2>&1
note "matmul summaries bench rc=$?"
cat "$out/bench.txt"
timeout 150 build/cuda/src/ops/matmul_cuda_bench summaries 1 8 64 256 > "$out/bench2.txt" 2>&1
note "matmul summaries bench (again) rc=$?"
grep -E "summaries:|selected" "$out/bench2.txt"
timeout 200 ncu --clock-control none --cache-control none -k regex:summarize --launch-skip 300 --launch-count 4 \
  --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_op_read.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
  build/cuda/src/ops/matmul_cuda_bench summaries 64 > "$out/ncu_writer.txt" 2>&1
note "ncu rc=$?"
grep -E "summarize|duration|bytes|sectors|warps_active" "$out/ncu_writer.txt" | head -12
timeout 240 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 > "$out/tests_all.log" 2>&1
note "matmul_cuda_test rc=$? $(grep -E 'PASSED|FAILED' "$out/tests_all.log" | head -3 | tr '\n' ' ')"
grep -E "FAILED|Failure" -A8 "$out/tests_all.log" | head -40
cat "$out/summary.txt"
