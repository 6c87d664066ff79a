#!/usr/bin/env bash
# The H200 run for the logit tile summaries' own pass at batch 64 (issue 12): after cuBLASLt the
# LM head's summaries cost +12 us at m = 64 (bench/results/2026-12-04-sampling-wide-summaries.md),
# which keeps the tile sampler's batch-64 step above 3x the logits read. The short-tile writer now
# finds a tile's column and row without divisions and, for bf16, makes a lane's pack one 32-bit
# compact word whose tile max is one or two warp reductions (ROOFLINE_SUMMARIES_COMPACT=0: the
# 64-bit words and shuffles). Builds; runs the writer's and the summarised GEMMs' tests with the
# compact words and without; times the LM head with and without summaries at m = 64 and 1 with
# the writer before this change ("old": BASE_DIR's logit_tiles_cuda.cu laid over the tree by
# scripts/gpu/ab.sh) against the tree, alternated; then the tree with the 64-bit words; Nsight
# Compute's duration and instruction counts of the writer at m = 64, old and new (compact); and issue 12's
# step at batch 64 end to end (llama3-8b, the tile sampler on and off). Writes
# OUTDIR/summaries_writer.tgz and prints a table last. Carry .staged and BASE_DIR; make BASE_DIR
# from the commit before the change:
#   mkdir -p .ab/writer/src/ops/sampling
#   git show main:src/ops/sampling/logit_tiles_cuda.cu > .ab/writer/src/ops/sampling/logit_tiles_cuda.cu
#   scripts/gpu/summaries_writer_check.sh .ab/writer OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
base=${1:?usage: scripts/gpu/summaries_writer_check.sh BASE_DIR OUTDIR}
top=${2:?usage: scripts/gpu/summaries_writer_check.sh BASE_DIR OUTDIR}
f=src/ops/sampling/logit_tiles_cuda.cu
# shellcheck source=scripts/gpu/run_common.sh
. scripts/gpu/run_common.sh
require_base_changed summaries_writer_check "$base" "$f"
out=$top/summaries_writer
run_start "$out"
cmake --build build/cuda -j16 --target roofline matmul_cuda_test matmul_cuda_bench >> "$out/build.log" 2>&1
note "build rc=$?"
for compact in 1 0; do
  ROOFLINE_SUMMARIES_COMPACT=$compact run_test src/ops/matmul_cuda_test \
    'LogitTilesCuda*:MatmulCudaSummaries*' "matmul_cuda_test summaries, compact $compact"
done
# ncu on the tree's writer first (the A/B below leaves the build folder with the old objects).
ncu_writer() {  # tag
  timeout 120 ncu --clock-control none -k regex:summarize --launch-skip 2 --launch-count 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --metrics \
    smsp__inst_executed.sum,dram__bytes_read.sum,lts__t_sectors_srcunit_tex_op_read.sum \
    build/cuda/src/ops/matmul_cuda_bench summaries 64 > "$out/ncu_$1.txt" 2>&1
}
ncu_writer new
AB_TARGET=matmul_cuda_bench AB_PASSES=2 AB_ARGS="summaries 64 1" timeout 200 \
  scripts/gpu/ab.sh "$base" "$out/ab" > "$out/ab_table.txt" 2>&1
note "heads A/B rc=$?"
ncu_writer old  # the build folder's binary is the old variant's now
touch "$f"
cmake --build build/cuda -j16 --target matmul_cuda_bench roofline >> "$out/build.log" 2>&1
for i in 1 2; do
  ROOFLINE_SUMMARIES_COMPACT=0 timeout 60 build/cuda/src/ops/matmul_cuda_bench summaries 64 1 \
    >> "$out/heads_64bit.txt" 2>&1
done
note "64-bit words done"
for rows in 0 64 64 0; do
  echo "== llama3-8b bs 64 tile_sampler_rows $rows" >> "$out/steps.txt"
  [ $(run_elapsed) -gt 540 ] && break
  ROOFLINE_TILE_SAMPLER_ROWS=$rows timeout 90 build/cuda/tools/cli/roofline bench --dummy-weights llama3-8b \
    --batch 64 --context 512 --device cuda --steps 32 2>&1 |
    grep -E "decode step|graph floor|tile|^roofline" \
    >> "$out/steps.txt"
done
note "steps done"
grep -E "^== |cublas.*summaries|selected.*summaries|summaries:" "$out/ab/ab.txt" | cut -c1-150 | head -60
grep -E "summaries:" "$out/heads_64bit.txt"
for t in new old; do
  echo "-- ncu $t"; grep -E "Duration|smsp__inst_executed.sum|dram__bytes_read.sum|Achieved Occupancy|Registers Per" "$out/ncu_$t.txt"
done
grep -E "^== |graph floor" "$out/steps.txt" | sed -E 's/ a step with.*//'
cat "$out/summary.txt"
(cd "$top" && tar czf summaries_writer.tgz summaries_writer && rm -rf summaries_writer)
