#!/usr/bin/env bash
# Session script (untracked): the sampling targets only, the tile tests (failures in detail), the
# sampling bench and the trace of batch 64.
set -uo pipefail
out=${1:?usage: run2.sh OUT}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
note() { echo "$* at $(el) s" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$out/gpu.txt" 2>&1
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/configure.log" 2>&1
note "configure rc=$?"
cmake --build build/cuda -j16 --target sampling_cuda_test sampling_cuda_bench sampling_trace_bench > "$out/build.log" 2>&1
note "build rc=$?"
grep -E "error" "$out/build.log" | head -20
timeout 240 build/cuda/src/ops/sampling_cuda_test > "$out/tiles_test.log" 2>&1
note "tiles test rc=$? $(grep -E 'PASSED|FAILED' "$out/tiles_test.log" | head -3 | tr '\n' ' ')"
grep -E "FAILED|Failure" -A6 "$out/tiles_test.log" | head -60
timeout 100 build/cuda/src/ops/sampling_cuda_bench > "$out/sampling_bench.txt" 2>&1
note "sampling bench rc=$?"
timeout 60 build/cuda/src/ops/sampling_trace_bench trace 64 bf16 > "$out/trace64.txt" 2>&1
note "trace rc=$?"
grep -E "tiles of|sample_rows" "$out/sampling_bench.txt"
cat "$out/trace64.txt" | tail -40
cat "$out/summary.txt"
