#!/usr/bin/env bash
# Session 57: the deep ring end to end: hf_golden_test and sampled_step_test on the GPU.
set -uo pipefail
out=${1:?}
mkdir -p "$out"
start=$(date +%s)
nvidia-smi --query-gpu=name --format=csv,noheader
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target hf_golden_test sampled_step_test >> "$out/build.log" 2>&1
echo "build rc=$? at $(( $(date +%s) - start )) s"
for t in tests/e2e/hf_golden_test tests/runtime/sampled_step_test; do
  timeout 60 build/cuda/$t --gtest_brief=1 > "$out/$(basename $t).txt" 2>&1
  echo "$(basename $t) rc=$? at $(( $(date +%s) - start )) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/$(basename $t).txt" | tr '\n' ' ')"
done
