#!/usr/bin/env bash
# Prepared in session 62, not yet run (no device machine started): the GEMM selection's stand-in
# (ROOFLINE_MATMUL_STANDIN warp / full) in decode steps, alternated in one binary; then decode
# attention's and the sampler's phase traces. Apply standin.patch (beside this script) first.
# Outputs in /tmp/r, packed into DEST/r.tgz after every phase.
#   git apply bench/results/2026-12-06-standin-ab/standin.patch
#   bash bench/results/2026-12-06-standin-ab/run.sh DEST [SECONDS]
set -uo pipefail
grep -q ROOFLINE_MATMUL_STANDIN src/ops/matmul/matmul_cuda.cu || { echo "apply standin.patch first" >&2; exit 2; }
dest=${1:?}; limit=${2:-540}; out=/tmp/r; mkdir -p "$dest" "$out"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf /tmp/r.tgz -C "$out" . && mv /tmp/r.tgz "$dest/"; }
left() { [ "$(el)" -lt "$limit" ]; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline attention_trace_bench sampling_trace_bench >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"; pack
R=build/cuda/tools/cli/roofline; O=build/cuda/src/ops; export XDG_CACHE_HOME=/tmp/cache
for s in warp full; do
  ROOFLINE_MATMUL_STANDIN=$s timeout 60 $R bench --dummy-weights llama3-8b --batch 32 --context 512 --device cuda --steps 8 --verbose 2>&1 | grep -E "matmul: m" > "$out/choices_llama32_$s.txt"
done
echo "choices at $(el) s"; pack
step() {  # standin model batch steps
  left || return
  echo "== standin=$1 $2 bs $3" >> "$out/steps.txt"
  ROOFLINE_MATMUL_STANDIN=$1 timeout 60 $R bench --dummy-weights "$2" --batch "$3" --context 512 --device cuda --steps "$4" >> "$out/steps.txt" 2>&1
  echo "rc=$? at $(el) s" >> "$out/steps.txt"
}
for mb in "llama3-8b 32 32" "qwen2.5-0.5b 32 32" "llama3-8b 1 32" "qwen2.5-0.5b 1 64" "llama3-8b 64 32"; do
  set -- $mb
  for s in warp full full warp; do step $s $1 $2 $3; done
  pack
done
echo "steps at $(el) s"; pack
for s in "1 512 14 2 64" "1 2048 14 2 64" "1 512 32 8 128" "1 4096 32 8 128"; do
  left || break
  echo "== trace $s" >> "$out/attn_trace.txt"
  timeout 40 $O/attention_trace_bench trace $s >> "$out/attn_trace.txt" 2>&1
done
echo "attn at $(el) s"; pack
for r in 1 64; do left && timeout 40 $O/sampling_trace_bench trace $r bf16 >> "$out/sampling_trace.txt" 2>&1; done
echo "sampling at $(el) s"; pack
grep -E "^== |median|graph floor" "$out/steps.txt" | sed -E 's/ a step with its CUDA graph.*//' | cut -c1-140
