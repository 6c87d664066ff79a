#!/usr/bin/env bash
# Session 60, call 5 (a fresh machine, ~370 s of device time left): the tree's decode steps as they
# stand (on whatever GPU comes: on an H200 these are issue 8's figures), the wide GEMM's split
# merge without its closing cluster barrier (receipts instead) checked on the GPU, then, as time
# allows, its decode step at llama3-8b batch 64 against HEAD 7f2760a's wide kernel (.ab/wide).
set -uo pipefail
out=${1:?}; mkdir -p "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline matmul_cuda_test >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
timeout 60 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 \
  --gtest_filter='MatmulCudaWideTest.*:MatmulCudaSkinnyTest.EverySplit*' > "$out/matmul_cuda_test.txt" 2>&1
echo "matmul_cuda_test rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/matmul_cuda_test.txt" | tr '\n' ' ')"
bin=build/cuda/tools/cli/roofline
for a in "qwen2.5-0.5b --batch 1 --steps 64" "llama3-8b --batch 1 --steps 32" "qwen2.5-0.5b --batch 32 --steps 32" "llama3-8b --batch 64 --steps 32"; do
  set -- $a
  timeout 40 $bin bench --dummy-weights $a --context 512 --device cuda > "$out/bench_$1_$3.txt" 2>&1
  echo "$a: $(grep -E 'graph floor' "$out/bench_$1_$3.txt" | sed -E 's/ a step with its CUDA graph.*//') at $(el) s"
done
if [ "$(el)" -lt 240 ]; then
  AB_PASSES=2 AB_ARGS="bench --dummy-weights llama3-8b --batch 64 --context 512 --device cuda --steps 32" \
    timeout $((330 - $(el))) bash scripts/gpu/ab.sh .ab/wide "$out/ab" > "$out/ab_table.txt" 2>&1
  echo "ab rc=$? at $(el) s"
  grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with its CUDA graph.*//'
fi
tar czf "/tmp/r5.tgz" -C "$out" . && mv /tmp/r5.tgz "$out/"
