#!/usr/bin/env bash
# The H200 run for the final norm folded into the LM head and the decode steps' plan (issues 8 and
# 12). Three changes meet here: decode steps (one token a sequence) run the all-token plan, which
# has no last-token gather and whose final norm already folds into the LM head as its prologue; the
# last-token graph gathers before the final norm, so its norm folds too (prefill and mixed steps);
# and the matmul selection times the skinny kernel with that prologue fused and after an rms_norm
# kernel (MatmulSkinnyNorm), so a fold cannot cost more than the two kernels it replaced. Builds the
# engine and the GEMM targets; runs the GEMM's RMSNorm, summaries and graph tests (the CPU twin on
# every element, the new form included), the Hugging Face goldens and the graph and runner tests;
# times both LM heads in every form (fused, after rms_norm, cuBLASLt, selected; with and without
# the logit tile summaries) and logs the selector's choice for each head in a step; then the decode
# steps before these changes ("old": BASE_DIR's dense_decoder.cc and model_runner.cc laid over the
# tree by scripts/gpu/ab.sh: the norm kernel, the gather, the plain head) against the tree,
# alternated. Writes OUTDIR/lm_head_fold.tgz and prints a table last. Carry .staged
# (scripts/stage_deps.sh) and BASE_DIR with the call; make BASE_DIR first, from the commit before
# the changes:
#   for f in src/models/dense_decoder.cc src/runtime/model_runner.cc; do
#     mkdir -p .ab/before/$(dirname $f); git show main:$f > .ab/before/$f; done
#   scripts/gpu/lm_head_fold_check.sh .ab/before OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
base=${1:?usage: scripts/gpu/lm_head_fold_check.sh BASE_DIR OUTDIR}
top=${2:?usage: scripts/gpu/lm_head_fold_check.sh BASE_DIR OUTDIR}
# shellcheck source=scripts/gpu/run_common.sh
. scripts/gpu/run_common.sh
require_base_changed lm_head_fold_check "$base" src/models/dense_decoder.cc \
  src/runtime/model_runner.cc
out=$top/lm_head_fold
run_start "$out"
cmake --build build/cuda -j16 --target roofline matmul_cuda_test matmul_cuda_bench hf_golden_test \
  passes_test model_runner_test >> "$out/build.log" 2>&1
note "build rc=$?"
run_test src/ops/matmul_cuda_test 'MatmulCudaNorm*:MatmulCudaSummaries*:MatmulCudaGraph*'
run_test tests/e2e/hf_golden_test
run_test tests/graph/passes_test
run_test tests/runtime/model_runner_test
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
args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((590 - $(run_elapsed))) \
  scripts/gpu/ab.sh "$base" "$out/ab" > "$out/ab_table.txt" 2>&1
note "steps rc=$?"
grep -E "^== |lm head|summaries:" "$out/lm_heads.txt" | head -60
cat "$out/head_choices.txt"
grep -E "^== |graph floor|kernels" "$out/ab/ab.txt" | sed -E 's/ a step with.*//' | cut -c1-150
cat "$out/summary.txt"
(cd "$top" && tar czf lm_head_fold.tgz lm_head_fold && rm -rf lm_head_fold)
