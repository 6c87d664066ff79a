#!/usr/bin/env bash
# (An experiment build: the switch it names was in the working tree for this call only, not committed.)
# Session 58, call 3 (experiment, not committed code): does the skinny GEMM's first x copy wait
# behind the weight copies issued before the PDL wait? ROOFLINE_SKINNY_EARLY_STAGES=N issues only
# N weight stages before the wait, the rest after the x copies.
set -uo pipefail
out=${1:?}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline matmul_skinny_trace_bench >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
for e in 99 1 0; do
  ROOFLINE_SKINNY_EARLY_STAGES=$e timeout 60 build/cuda/src/ops/matmul_skinny_trace_bench trace qwen > "$out/trace_qwen_early$e.txt" 2>&1
  echo "trace early=$e rc=$? at $(el) s"
  grep -E "^qwen.*TB/s" "$out/trace_qwen_early$e.txt"
done
for model in qwen2.5-0.5b llama3-8b; do
  for e in 99 1 0 0 1 99; do
    ROOFLINE_SKINNY_EARLY_STAGES=$e timeout 60 build/cuda/tools/cli/roofline bench --dummy-weights $model --batch 1 --context 512 --device cuda --steps 64 > "$out/step_${model}_$e.txt" 2>&1
    echo "$model early=$e: $(grep -E 'graph floor' "$out/step_${model}_$e.txt" | sed -E 's/ a step with its CUDA graph.*//' | head -2 | tr '\n' ' ') at $(el) s"
  done
done
