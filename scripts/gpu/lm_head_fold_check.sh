#!/usr/bin/env bash
# The H200 run for the final norm folded into the LM head (issues 8 and 12): the decoder graph
# gathers each sequence's last token before the final norm, so fuse_rms_norm_matmul makes the norm
# the LM head's prologue, and the matmul selection times the skinny kernel with that prologue fused
# and after an rms_norm kernel (MatmulSkinnyNorm), so the fold cannot cost more than the two
# kernels it replaced. Builds the engine and the GEMM targets; runs the GEMM's RMSNorm tests (the
# CPU twin on every element, the new form included), the Hugging Face goldens and the graph test;
# times both LM heads in their forms (fused, after rms_norm, cuBLASLt, selected; with and without
# the logit tile summaries); then the decode steps with the graph before the fold ("unfolded":
# BASE_DIR's dense_decoder.cc laid over the tree by scripts/gpu/ab.sh) against the tree, alternated,
# with the selector's choices for the heads (--verbose). Writes OUTDIR/lm_head_fold.tgz and prints
# a table last. Carry .staged (scripts/stage_deps.sh) and BASE_DIR with the call; make BASE_DIR
# first, from the commit before the fold:
#   mkdir -p .ab/unfolded/src/models
#   git show main:src/models/dense_decoder.cc > .ab/unfolded/src/models/dense_decoder.cc
#   scripts/gpu/lm_head_fold_check.sh .ab/unfolded OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
base=${1:?usage: scripts/gpu/lm_head_fold_check.sh BASE_DIR OUTDIR}
top=${2:?usage: scripts/gpu/lm_head_fold_check.sh BASE_DIR OUTDIR}
[ -f "$base/src/models/dense_decoder.cc" ] || {
  echo "lm_head_fold_check: $base/src/models/dense_decoder.cc is missing: make it as the header says" >&2
  exit 2
}
cmp -s "$base/src/models/dense_decoder.cc" src/models/dense_decoder.cc && {
  echo "lm_head_fold_check: $base's dense_decoder.cc is the tree's: nothing to compare" >&2
  exit 2
}
out=$top/lm_head_fold
mkdir -p "$out"
start=$(date +%s)
note() { echo "$* at $(($(date +%s) - start)) s" | tee -a "$out/summary.txt"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline matmul_cuda_test matmul_cuda_bench hf_golden_test \
  passes_test >> "$out/build.log" 2>&1
note "build rc=$?"
run_test() {  # binary [gtest filter]
  r=$(timeout 300 "build/cuda/$1" --gtest_brief=1 ${2:+--gtest_filter="$2"} 2>&1 |
      tee -a "$out/tests.log" | grep -E "PASSED|FAILED" | tr '\n' ' ')
  note "$(basename "$1") ${2:-}: $r"
}
run_test src/ops/matmul_cuda_test 'MatmulCudaNorm*:MatmulCudaSummaries*:MatmulCudaGraph*'
run_test tests/e2e/hf_golden_test
run_test tests/graph/passes_test
for head in 151936x896 128256x4096; do
  echo "== head $head" >> "$out/lm_heads.txt"
  timeout 90 build/cuda/src/ops/matmul_cuda_bench summaries $head 1 8 >> "$out/lm_heads.txt" 2>&1
done
note "lm heads done"
# The selector's choice for each head at m <= 1 (its log line names every candidate's time).
for model in qwen2.5-0.5b llama3-8b; do
  timeout 90 build/cuda/tools/cli/roofline bench --dummy-weights $model --batch 1 --context 512 \
    --device cuda --steps 8 --verbose 2>&1 | grep -E "matmul: m <= 1, n (151936|128256)" \
    >> "$out/head_choices.txt"
done
note "head choices done"
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights qwen3-0.6b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((590 - ($(date +%s) - start))) \
  scripts/gpu/ab.sh "$base" "$out/ab" > "$out/ab_table.txt" 2>&1
note "steps rc=$?"
grep -E "^== |lm head|summaries:" "$out/lm_heads.txt" | head -60
cat "$out/head_choices.txt"
grep -E "^== |graph floor|kernels" "$out/ab/ab.txt" | sed -E 's/ a step with.*//' | cut -c1-150
cat "$out/summary.txt"
(cd "$top" && tar czf lm_head_fold.tgz lm_head_fold && rm -rf lm_head_fold)
