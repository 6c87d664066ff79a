#!/usr/bin/env bash
# Session 58, call 4: the skinny GEMM with its x sources worked out before the PDL wait
# (TokenSource, first_chunks) and its parameter block touched there (cuda::touch_params):
# correctness (every matmul_cuda_test case, the Hugging Face goldens, the sampled steps), its
# phases on Qwen2.5-0.5B's shapes, then the steps against HEAD's kernel (.ab/base).
set -uo pipefail
out=${1:?}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline matmul_cuda_test matmul_skinny_trace_bench hf_golden_test sampled_step_test >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
timeout 200 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 > "$out/matmul_cuda_test.txt" 2>&1
echo "matmul_cuda_test rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/matmul_cuda_test.txt" | tr '\n' ' ')"
for t in tests/e2e/hf_golden_test tests/runtime/sampled_step_test; do
  timeout 60 build/cuda/$t --gtest_brief=1 > "$out/$(basename $t).txt" 2>&1
  echo "$(basename $t) rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/$(basename $t).txt" | tr '\n' ' ')"
done
timeout 60 build/cuda/src/ops/matmul_skinny_trace_bench trace qwen > "$out/trace_qwen.txt" 2>&1
echo "trace rc=$? at $(el) s"
grep -E "^qwen.*TB/s" "$out/trace_qwen.txt"
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights qwen3-0.6b --batch 1 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((570 - $(el))) bash scripts/gpu/ab.sh .ab/base "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"
grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
tar czf "$out/r4.tgz" -C "$out" --exclude r4.tgz .
