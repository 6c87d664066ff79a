#!/usr/bin/env bash
# Session 61, call 2 (a fresh machine): the four open issues' figures at HEAD c809927 in one call
# (issues 6, 8, 12, 13), and whether the selector timing the wide kernel (ROOFLINE_MATMUL_WIDE=1)
# now changes the llama3-8b bs 64 step. Outputs go to /tmp/r and are packed into DEST/r.tgz after
# every phase, so a call stopped at its limit still brings back what ran.
#   bash bench/results/2026-12-06-issues-at-head/run1.sh DEST [SECONDS]
set -uo pipefail
dest=${1:?}; limit=${2:-480}; out=/tmp/r; mkdir -p "$dest" "$out"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf /tmp/r.tgz -C "$out" . && mv /tmp/r.tgz "$dest/"; }
left() { [ "$(el)" -lt "$limit" ]; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline attention_cuda_bench matmul_cuda_bench sampling_cuda_bench >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"; pack
R=build/cuda/tools/cli/roofline; O=build/cuda/src/ops
export XDG_CACHE_HOME=/tmp/cache
timeout 60 $R profile --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 2 --calibrate > "$out/calibrate.txt" 2>&1
echo "calibrate rc=$? at $(el) s"; grep -E "^ceilings" "$out/calibrate.txt"; pack
step() {  # label env model batch steps [flag]
  left || return
  echo "== $1 $3 bs $4 ${6:-}" >> "$out/steps.txt"
  env $2 timeout 60 $R bench --dummy-weights "$3" --batch "$4" --context 512 --device cuda --steps "$5" ${6:-} >> "$out/steps.txt" 2>&1
  echo "rc=$? at $(el) s" >> "$out/steps.txt"
}
for pass in 1 2; do
  step graphs X=0 qwen2.5-0.5b 1 64; step graphs X=0 qwen2.5-0.5b 32 32
  step graphs X=0 llama3-8b 1 32; step graphs X=0 llama3-8b 64 32
done
step eager X=0 qwen2.5-0.5b 1 32 --no-cuda-graphs; step eager X=0 qwen2.5-0.5b 32 16 --no-cuda-graphs
step eager X=0 llama3-8b 1 16 --no-cuda-graphs; step eager X=0 llama3-8b 64 16 --no-cuda-graphs
for w in 1 0 0 1; do step "wide=$w" ROOFLINE_MATMUL_WIDE=$w llama3-8b 64 32; done
echo "steps at $(el) s"; pack
left && { timeout 120 $O/attention_cuda_bench > "$out/attention.txt" 2>&1; echo "attention rc=$? at $(el) s"; pack; }
left && { for r in 1 64 256; do timeout 30 $O/sampling_cuda_bench $r bf16 >> "$out/sampling.txt" 2>&1; done; echo "sampling at $(el) s"; pack; }
left && { timeout 160 $O/matmul_cuda_bench decode > "$out/matmul_decode.txt" 2>&1; echo "matmul rc=$? at $(el) s"; pack; }
grep -E "^== |median|graph floor|roofline " "$out/steps.txt" | sed -E 's/ -> .*//; s/ a step with its CUDA graph.*//' | cut -c1-160
grep -E "B=1 L=4096|B=64 L=4096" "$out/attention.txt" | head -4
grep -iE "top-k|greedy|read" "$out/sampling.txt" | head -12
