#!/usr/bin/env bash
# Session 60, call 3 (a fresh machine): the push merge with its cluster barrier arrived at relaxed,
# before the kernel's first copy (call 2's releasing arrival after the weight copies waited for
# them): correctness as call 1, then decode steps of HEAD 7f2760a's skinny GEMM (.ab/head) against
# the tree, and the skinny phases of both.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
tgts="roofline matmul_cuda_test matmul_skinny_trace_bench hf_golden_test sampled_step_test"
cmake --build build/cuda -j16 --target $tgts >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
timeout 200 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 > "$out/matmul_cuda_test.txt" 2>&1
echo "matmul_cuda_test rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/matmul_cuda_test.txt" | tr '\n' ' ')"
for t in tests/e2e/hf_golden_test tests/runtime/sampled_step_test; do
  timeout 60 build/cuda/$t --gtest_brief=1 > "$out/$(basename $t).txt" 2>&1
  echo "$(basename $t) rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/$(basename $t).txt" | tr '\n' ' ')"
done
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 8 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((500 - $(el))) bash scripts/gpu/ab.sh .ab/head "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"
grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
AB_PASSES=1 AB_TARGET=matmul_skinny_trace_bench AB_ARGS="trace qwen" timeout $((590 - $(el))) bash scripts/gpu/ab.sh .ab/head "$out/abtrace" > "$out/abtrace_table.txt" 2>&1
echo "ab trace rc=$? at $(el) s"
grep -E "^== |^qwen.*TB/s" "$out/abtrace/ab.txt"
tar czf "/tmp/r3.tgz" -C "$out" . && mv /tmp/r3.tgz "$out/"
