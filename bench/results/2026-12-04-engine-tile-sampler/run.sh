#!/usr/bin/env bash
# Session script (untracked): the qwen LM head's summaries; the tile test under three bounds; steps A/B.
set -uo pipefail
out=${1:?usage: run6.sh OUT}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
note() { echo "$* at $(el) s" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$out/gpu.txt" 2>&1
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline sampled_step_test matmul_cuda_bench >> "$out/build.log" 2>&1
note "build rc=$?"
grep -E "error" "$out/build.log" | head -20
timeout 200 build/cuda/tests/runtime/sampled_step_test --gtest_brief=1 > "$out/tests.log" 2>&1
note "sampled_step_test rc=$? $(grep -E 'PASSED|FAILED|SKIPPED' "$out/tests.log" | head -4 | tr '\n' ' ')"
grep -E "FAILED|Failure" -A10 "$out/tests.log" | head -40
timeout 60 build/cuda/src/ops/matmul_cuda_bench summaries 151936x896 1 8 > "$out/bench_lmhead_qwen.txt" 2>&1
note "qwen lm head bench rc=$?"
grep -E "lm head|summaries:" "$out/bench_lmhead_qwen.txt"
bench() {  # model batch rows
  local model=$1 b=$2 rows=$3
  echo "== $model bs $b ROOFLINE_TILE_SAMPLER_ROWS=$rows" >> "$out/steps.txt"
  ROOFLINE_TILE_SAMPLER_ROWS=$rows timeout 90 build/cuda/tools/cli/roofline bench --dummy-weights $model \
    --batch $b --context 512 --device cuda --steps 64 > "$out/one.txt" 2>&1
  echo "rc=$?" >> "$out/steps.txt"
  grep -E "cuda graphs|decode step|graph floor" "$out/one.txt" >> "$out/steps.txt"
}
for rows in 0 8 8 0 0 8; do bench qwen2.5-0.5b 1 $rows; done
for rows in 0 8 8 0; do bench qwen2.5-0.5b 4 $rows; done
for rows in 0 8 8 0 0 8; do [ $(el) -gt 500 ] && break; bench llama3-8b 1 $rows; done
note "steps done"
grep -E "^==|median|floor" "$out/steps.txt" | sed -E 's/ -> .*//; s/ a step with.*//; s/, min.*//' | paste - - - | head -40
cat "$out/summary.txt"
