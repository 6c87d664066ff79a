#!/usr/bin/env bash
# The H200 run that asks where the skinny GEMM's RMSNorm prologue loses its time at short K
# (issues 8 and 13): Qwen2.5-0.5B's LM head (K = 896) ran 75.2 us fused against 66.6 us as an
# rms_norm kernel plus the plain product (bench/results/2026-12-05-lm-head-fold.md), and its
# gate_up 79 % plain against 62 % with prologue and SwiGLU. Two switches of the A/B build (read by
# the launcher once): AB_NORM_BLOCK_COPIES=1 runs the prologue variants with the block's shared
# copies and a barrier per stage (the plain variants' way) instead of warp slices; AB_NORM_UNIT=1
# leaves the norm weight out (no copy, x not scaled: the cost a norm weight folded into W would
# leave; timing only). Builds the engine and the GEMM targets; runs the prologue's GPU tests with
# warp slices and with block copies (the CPU twin on every element); times the prologue section
# and the two K = 896 shapes under 0 / B / U / BU; then the decode steps with and without block
# copies, alternated. Writes OUTDIR/norm_prologue.tgz and prints the summary last. Carry .staged.
#   scripts/gpu/norm_prologue_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=${1:?usage: scripts/gpu/norm_prologue_check.sh OUTDIR}
out=$top/norm_prologue
# shellcheck source=scripts/gpu/run_common.sh
. scripts/gpu/run_common.sh
run_start "$out"
cmake --build build/cuda -j16 --target roofline matmul_cuda_test matmul_cuda_bench \
  >> "$out/build.log" 2>&1
note "build rc=$?"
run_test src/ops/matmul_cuda_test 'MatmulCudaNorm*:MatmulCudaGraph*' "tests, warp slices"
AB_NORM_BLOCK_COPIES=1 run_test src/ops/matmul_cuda_test 'MatmulCudaNorm*:MatmulCudaGraph*' \
  "tests, block copies"
mode_env() {
  case $1 in
    0) echo "" ;;
    B) echo "AB_NORM_BLOCK_COPIES=1" ;;
    U) echo "AB_NORM_UNIT=1" ;;
    BU) echo "AB_NORM_BLOCK_COPIES=1 AB_NORM_UNIT=1" ;;
  esac
}
kernels() {  # one pass over the modes given
  for mode in "$@"; do
    [ "$(run_elapsed)" -lt 470 ] || { note "kernels: no time left for mode $mode"; return; }
    {
      echo "== mode $mode"
      env $(mode_env "$mode") timeout 60 build/cuda/src/ops/matmul_cuda_bench prologue
      env $(mode_env "$mode") timeout 40 build/cuda/src/ops/matmul_cuda_bench shape 151936 896
      env $(mode_env "$mode") timeout 40 build/cuda/src/ops/matmul_cuda_bench shape 9728 896
    } >> "$out/kernels.txt" 2>&1
    note "kernels mode $mode"
  done
}
kernels 0 B U BU
for mode in 0 B B 0; do
  [ "$(run_elapsed)" -lt 520 ] || { note "steps: no time left"; break; }
  for model in qwen2.5-0.5b llama3-8b; do
    echo "== mode $mode $model" >> "$out/steps.txt"
    env $(mode_env "$mode") timeout 60 build/cuda/tools/cli/roofline bench --dummy-weights $model \
      --batch 1 --context 512 --device cuda --steps 64 2>&1 |
      grep -E "decode step|graph floor|^roofline|kernels" \
      >> "$out/steps.txt"
  done
  note "steps mode $mode"
done
kernels BU U B 0
tar -czf "$top/norm_prologue.tgz" -C "$top" norm_prologue
grep -E "^== |graph floor" "$out/steps.txt" | paste - - | sed -E 's/ a step with.*//'
grep -E "^== |(qwen2.5-0.5b|151936x896|9728x896).* m=1 .*(skinny|few-token)" "$out/kernels.txt" |
  sed -E 's/ +/ /g' | cut -c1-110
cat "$out/summary.txt"
