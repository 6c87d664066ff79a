#!/usr/bin/env bash
# Session 58, call 2: the skinny GEMM with its parameter block touched before the PDL wait
# (cuda::touch_params): correctness, its phases on Qwen2.5-0.5B's shapes, then the steps against
# HEAD's kernel (.ab/base: HEAD's matmul_skinny_cuda.cu).
set -uo pipefail
out=${1:?}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline matmul_cuda_test matmul_skinny_trace_bench >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
f='Weights/MatmulCudaTest.*/qwen*:Weights/MatmulCudaTest.*/odd*:MatmulCudaSkinnyTest.*:MatmulCudaGraphTest.*'
timeout 150 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 --gtest_filter="$f" > "$out/test.txt" 2>&1
echo "matmul_cuda_test (qwen, odd, skinny, graph) rc=$? at $(el) s: $(grep -E 'PASSED|FAILED' "$out/test.txt" | tr '\n' ' ')"
timeout 60 build/cuda/src/ops/matmul_skinny_trace_bench trace qwen > "$out/trace_qwen.txt" 2>&1
echo "trace rc=$? at $(el) s"
grep -E "^qwen.*TB/s" "$out/trace_qwen.txt"
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights qwen3-0.6b --batch 1 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((560 - $(el))) bash scripts/gpu/ab.sh .ab/base "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"
grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
