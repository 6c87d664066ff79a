#!/usr/bin/env bash
# Session 59, call 2a: the skinny GEMM's x copies unrolled and two accumulator chains at 1-2 token
# tiles, and touch_params / touch_values before the PDL wait of every other kernel that waited
# first: correctness (every matmul_cuda_test case, the touched ops' GPU tests, the Hugging Face
# goldens, the sampled steps) and the skinny phases on Qwen2.5-0.5B's shapes.
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
ops="embedding gather_rows qkv_rope rms_norm sampling silu_mul"
tgts="roofline matmul_cuda_test matmul_skinny_trace_bench hf_golden_test sampled_step_test"
for o in $ops; do tgts+=" ${o}_cuda_test"; done
cmake --build build/cuda -j16 --target $tgts >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
timeout 250 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 > "$out/matmul_cuda_test.txt" 2>&1 &
mm=$!
for o in $ops; do
  timeout 200 build/cuda/src/ops/${o}_cuda_test --gtest_brief=1 > "$out/${o}_cuda_test.txt" 2>&1
  echo "${o}_cuda_test rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/${o}_cuda_test.txt" | tr '\n' ' ')"
done
for t in tests/e2e/hf_golden_test tests/runtime/sampled_step_test; do
  timeout 60 build/cuda/$t --gtest_brief=1 > "$out/$(basename $t).txt" 2>&1
  echo "$(basename $t) rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/$(basename $t).txt" | tr '\n' ' ')"
done
wait $mm; echo "matmul_cuda_test rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/matmul_cuda_test.txt" | tr '\n' ' ')"
timeout 60 build/cuda/src/ops/matmul_skinny_trace_bench trace qwen > "$out/trace_qwen.txt" 2>&1
echo "trace rc=$? at $(el) s"
grep -E "^qwen.*TB/s" "$out/trace_qwen.txt"
tar czf "$out/r2a.tgz" -C "$out" --exclude r2a.tgz .
