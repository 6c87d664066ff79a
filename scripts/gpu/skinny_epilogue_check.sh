#!/usr/bin/env bash
# The H200 run for the skinny GEMM's end-of-tile changes (issues 8, 12, 13): the fused logit tile
# summaries' short epilogue and the two reduction buffers of one-token-tile launches with the
# RMSNorm prologue. Builds the GEMM and engine targets; runs the GEMM tests (the CPU twin on every
# element, the summaries against their oracle), the sampled-step and graph tests and the Hugging
# Face goldens; then the LM heads with and without summaries, with two buffers and with one
# (ROOFLINE_SKINNY_SECOND_BUFFER=0), and the decode steps with one and two, with the tile sampler
# off and on (ROOFLINE_TILE_SAMPLER_ROWS=0 / 8), alternated. Writes one archive,
# OUTDIR/skinny_epilogue.tgz (a device call returns at most 8 files), and prints a table last.
# Carry .staged (scripts/stage_deps.sh) with the call.
#   scripts/gpu/skinny_epilogue_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=${1:?usage: scripts/gpu/skinny_epilogue_check.sh OUTDIR}
out=$top/skinny_epilogue
# shellcheck source=scripts/gpu/run_common.sh
. scripts/gpu/run_common.sh
run_start "$out"
cmake --build build/cuda -j16 --target roofline matmul_cuda_test matmul_cuda_bench \
  sampled_step_test cuda_graph_test hf_golden_test >> "$out/build.log" 2>&1
note "build rc=$?"
for t in src/ops/matmul_cuda_test tests/runtime/sampled_step_test tests/runtime/cuda_graph_test \
         tests/e2e/hf_golden_test; do
  run_test "$t"
done
for buffers in 2 1; do
  for head in 151936x896 128256x4096; do
    echo "== buffers $buffers head $head" >> "$out/lm_heads.txt"
    ROOFLINE_SKINNY_SECOND_BUFFER=$((buffers - 1)) timeout 90 build/cuda/src/ops/matmul_cuda_bench summaries \
      $head 1 8 >> "$out/lm_heads.txt" 2>&1
  done
done
note "lm heads done"
step() {  # model batch buffers rows
  echo "== $1 bs $2 buffers $3 tile_sampler_rows $4" >> "$out/steps.txt"
  ROOFLINE_SKINNY_SECOND_BUFFER=$(($3 - 1)) ROOFLINE_TILE_SAMPLER_ROWS=$4 timeout 90 build/cuda/tools/cli/roofline \
    bench --dummy-weights "$1" --batch "$2" --context 512 --device cuda --steps 64 2>&1 |
    grep -E "decode step|graph floor|tile|^roofline" >> "$out/steps.txt"
}
for cfg in "1 0" "2 0" "2 8" "1 8" "1 0" "2 0" "2 8" "1 8"; do step qwen2.5-0.5b 1 $cfg; done
for cfg in "1 0" "2 0" "2 8" "1 0"; do step qwen2.5-0.5b 4 $cfg; done
for cfg in "1 0" "2 0" "2 0" "1 0"; do step qwen3-0.6b 1 $cfg; done
for cfg in "1 0" "2 0" "2 8" "1 0"; do  # the largest model last, as far as the call's 600 s allow
  [ $(run_elapsed) -gt 520 ] && break
  step llama3-8b 1 $cfg
done
note "steps done"
grep -E "^== |summaries:|skinny \+norm" "$out/lm_heads.txt" | head -60
grep -E "^== |graph floor" "$out/steps.txt" | paste - - | sed -E 's/ a step with.*//'
cat "$out/summary.txt"
(cd "$top" && tar czf skinny_epilogue.tgz skinny_epilogue && rm -rf skinny_epilogue)
