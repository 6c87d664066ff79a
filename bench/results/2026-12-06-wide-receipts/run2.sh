#!/usr/bin/env bash
# Session 61, call 1 (a fresh machine): the wide GEMM's receipts (branch next/wide-receipts, on top
# of main's dc0e440) in one binary with ROOFLINE_WIDE_RECEIPTS=1 (the change) and =0 (main's
# closing cluster barrier): the wide and summaries GPU tests, `trace wide` alternating the switch,
# then the decode steps whose launches split wide tiles (llama3-8b bs 64, qwen2.5-0.5b bs 32)
# alternating it, and the bs 1 steps (no wide launch: main's figures) owed for issue 8.
set -uo pipefail
# Usage: run2.sh DEST [SECONDS]: the outputs are written to /tmp/r2 and packed into DEST/r2.tgz
# after every phase (so a call stopped at its limit still brings back what ran); no new run
# starts after SECONDS (default 520).
dest=${1:?}; limit=${2:-520}; out=/tmp/r2; mkdir -p "$dest" "$out"; start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
pack() { tar czf /tmp/r2.tgz -C "$out" . && mv /tmp/r2.tgz "$dest/"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline matmul_skinny_trace_bench matmul_cuda_test >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"; pack
timeout 40 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 \
  --gtest_filter='MatmulCudaWideTest.*:MatmulCudaSummariesTest.*' > "$out/matmul_cuda_test.txt" 2>&1
echo "matmul_cuda_test rc=$? at $(el) s: $(grep -E 'PASSED|FAILED|tests ran' "$out/matmul_cuda_test.txt" | tr '\n' ' ')"
i=0
for r in 1 0 0 1; do
  i=$((i + 1))
  ROOFLINE_WIDE_RECEIPTS=$r timeout 30 build/cuda/src/ops/matmul_skinny_trace_bench trace wide > "$out/trace_wide_${i}_r$r.txt" 2>&1
  echo "== trace $i receipts=$r rc=$? at $(el) s"
  grep -E "TB/s" "$out/trace_wide_${i}_r$r.txt"
  pack
done
step() {  # receipts model batch steps [extra flag]
  [ "$(el)" -lt "$limit" ] || return
  echo "== receipts=$1 $2 bs $3 ${5:-}" >> "$out/steps.txt"
  ROOFLINE_WIDE_RECEIPTS=$1 timeout 60 build/cuda/tools/cli/roofline bench --dummy-weights "$2" --batch "$3" \
    --context 512 --device cuda --steps "$4" ${5:-} > "$out/one.txt" 2>&1
  echo "rc=$? at $(el) s" >> "$out/steps.txt"
  grep -E "decode step|graph floor|roofline" "$out/one.txt" >> "$out/steps.txt"
  pack
}
for r in 0 1 1 0; do step $r llama3-8b 64 32; step $r qwen2.5-0.5b 32 32; done
for r in 0 0; do step $r qwen2.5-0.5b 1 64; step $r llama3-8b 1 32; done
step 0 qwen2.5-0.5b 1 32 --no-cuda-graphs; step 0 llama3-8b 1 16 --no-cuda-graphs
for r in 1 0 0 1; do step $r llama3-8b 64 32; done
grep -E "^==|rc=|median|floor" "$out/steps.txt" | sed -E 's/ a step with its CUDA graph.*//; s/, min.*//'
rm -f "$out/one.txt"; pack
