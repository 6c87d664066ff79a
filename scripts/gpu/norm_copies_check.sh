#!/usr/bin/env bash
# The device run for the RMSNorm prologue's copy layout (issues 8 and 13): the skinny GEMM's
# prologue variants copy each stage either in warp slices (each warp its own K slice, the layout
# they had) or as a block (the plain variants' layout, a barrier per stage), and the matmul
# selection now times both beside the prologue apart. An H100 A/B (2026-12-05, run 1) had block
# copies faster at m = 1 on every shape and at m = 8 on Llama-3-8B's, slower on Qwen2.5-0.5B's
# gate_up at m = 8. Builds the engine and the GEMM targets; runs matmul_cuda_test's prologue,
# SwiGLU, RoPE, few-token and graph tests (the new bit-for-bit test of the two layouts against
# each other and the CPU twin included), then its SwiGLU and RoPE tests again with
# ROOFLINE_SKINNY_NORM=block (every forced skinny context in block copies); times the prologue
# section and the K = 896 shapes in both layouts; logs the selector's choice for every prologue
# problem of both bs 1 steps; then the decode steps before the change ("old": BASE_DIR's files
# laid over the tree by scripts/gpu/ab.sh) against the tree, alternated. Writes
# OUTDIR/norm_copies.tgz and prints a table last. Carry .staged (scripts/stage_deps.sh) and
# BASE_DIR with the call; make BASE_DIR first:
#   scripts/gpu/ab_base.sh main .ab/main; scripts/gpu/norm_copies_check.sh .ab/main OUTDIR
# (LIMIT_S: the seconds after the start by which the steps' A/B must end; default 585).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
base=${1:?usage: scripts/gpu/norm_copies_check.sh BASE_DIR OUTDIR}
top=${2:?usage: scripts/gpu/norm_copies_check.sh BASE_DIR OUTDIR}
# shellcheck source=scripts/gpu/run_common.sh
. scripts/gpu/run_common.sh
require_base norm_copies_check "$base" src/ops/matmul/matmul_cuda.cu
out=$top/norm_copies
run_start "$out"
cmake --build build/cuda -j16 --target roofline matmul_cuda_test matmul_cuda_bench \
  >> "$out/build.log" 2>&1
note "build rc=$?"
run_test src/ops/matmul_cuda_test \
  'MatmulCudaNorm*:MatmulCudaSwiglu*:MatmulCudaRope*:MatmulCudaSkinnyTest.FewToken*:MatmulCudaGraph*'
ROOFLINE_SKINNY_NORM=block run_test src/ops/matmul_cuda_test 'MatmulCudaSwiglu*:MatmulCudaRope*' \
  "block copies everywhere"
{
  timeout 90 build/cuda/src/ops/matmul_cuda_bench prologue
  timeout 45 build/cuda/src/ops/matmul_cuda_bench shape 151936 896
  timeout 45 build/cuda/src/ops/matmul_cuda_bench shape 9728 896
} > "$out/kernels.txt" 2>&1
note "kernels done"
for model in qwen2.5-0.5b llama3-8b; do
  timeout 90 build/cuda/tools/cli/roofline bench --dummy-weights $model --batch 1 --context 512 \
    --device cuda --steps 8 --verbose 2>&1 | grep -E "rms_norm prologue" | sed "s/^/$model /" \
    >> "$out/choices.txt"
done
note "choices done"
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights llama3-8b --batch 8 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((${LIMIT_S:-585} - $(run_elapsed))) \
  scripts/gpu/ab.sh "$base" "$out/ab" > "$out/ab_table.txt" 2>&1
note "steps rc=$?"
(cd "$top" && tar czf norm_copies.tgz norm_copies)
grep -E "m=1 .*\+norm|m=8 .*\+norm" "$out/kernels.txt" | sed -E 's/ +/ /g; s/ TB\/s.*=//' |
  cut -c1-100
sed -E 's/^([^ ]+) .*matmul: m <= ([0-9]+), (n [0-9]+, k [0-9]+)(, rms_norm prologue)?([^:]*): skinny ([0-9.]+) us, skinny block copies ([0-9.]+) us, skinny after rms_norm ([0-9.]+) us.* -> (.*)/\1 m<=\2 \3\5: slices \6 block \7 apart \8 -> \9/' \
  "$out/choices.txt"
grep -E "^== |graph floor|kernels" "$out/ab/ab.txt" | sed -E 's/ a step with.*//' | cut -c1-150
cat "$out/summary.txt"
