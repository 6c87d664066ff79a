#!/usr/bin/env bash
# Session script (untracked): the skinny epilogue's summaries in three forms (AB_SUMMARY_MODE 0 shuffle64, 1 per-lane RED, 2 shuffle32).
set -uo pipefail
out=${1:?usage: run1.sh OUT}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
note() { echo "$* at $(el) s" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm,memory.total --format=csv > "$out/gpu.txt" 2>&1
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline sampled_step_test matmul_cuda_bench matmul_cuda_test >> "$out/build.log" 2>&1
note "build rc=$?"
grep -E "error" "$out/build.log" | head -20
for mode in 0 1 2; do
  AB_SUMMARY_MODE=$mode timeout 120 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 --gtest_filter='*Summar*' > "$out/mt$mode.log" 2>&1
  note "matmul summaries mode $mode rc=$? $(grep -E 'PASSED|FAILED' "$out/mt$mode.log" | head -3 | tr '\n' ' ')"
  AB_SUMMARY_MODE=$mode ROOFLINE_TILE_SAMPLER_ROWS=8 timeout 200 build/cuda/tests/runtime/sampled_step_test --gtest_brief=1 --gtest_filter='*Tile*' > "$out/st$mode.log" 2>&1
  note "sampled tile mode $mode rc=$? $(grep -E 'PASSED|FAILED' "$out/st$mode.log" | head -3 | tr '\n' ' ')"
done
for mode in 0 1 2 2 1 0; do
  AB_SUMMARY_MODE=$mode timeout 60 build/cuda/src/ops/matmul_cuda_bench summaries 151936x896 1 8 > "$out/bq$mode.txt" 2>&1
  echo "== mode $mode qwen head" >> "$out/lmhead.txt"; grep -E "skinny|summaries:" "$out/bq$mode.txt" | grep -B1 "summaries:" | head -8 >> "$out/lmhead.txt"
done
for mode in 0 1 2; do
  AB_SUMMARY_MODE=$mode timeout 90 build/cuda/src/ops/matmul_cuda_bench summaries 1 8 > "$out/bl$mode.txt" 2>&1
  echo "== mode $mode llama head" >> "$out/lmhead.txt"; grep -E "skinny" "$out/bl$mode.txt" | head -8 >> "$out/lmhead.txt"
done
note "lm heads done"
bench() {  # model batch rows mode
  local model=$1 b=$2 rows=$3 mode=$4
  echo "== $model bs $b rows=$rows mode=$mode" >> "$out/steps.txt"
  AB_SUMMARY_MODE=$mode ROOFLINE_TILE_SAMPLER_ROWS=$rows timeout 90 build/cuda/tools/cli/roofline bench --dummy-weights $model \
    --batch $b --context 512 --device cuda --steps 64 > "$out/one.txt" 2>&1
  echo "rc=$?" >> "$out/steps.txt"
  grep -E "decode step|graph floor" "$out/one.txt" >> "$out/steps.txt"
}
for cfg in "0 0" "8 0" "8 1" "8 2" "8 2" "8 1" "8 0" "0 0"; do bench qwen2.5-0.5b 1 $cfg; done
for cfg in "0 0" "8 1" "8 2" "8 2" "8 1" "0 0"; do bench qwen2.5-0.5b 4 $cfg; done
for cfg in "0 0" "8 0" "8 1" "8 2" "8 1" "0 0"; do [ $(el) -gt 520 ] && break; bench llama3-8b 1 $cfg; done
note "steps done"
cat "$out/lmhead.txt"
grep -E "^==|floor" "$out/steps.txt" | paste - - | sed -E 's/ -> .*//' | head -40
cat "$out/summary.txt"
