#!/usr/bin/env bash
# The device run for the GEMM selection's chained timings (issues 8 and 13; src/ops/matmul/
# matmul_measure.h): a weight of at most 48 MiB is now timed as a chain of back-to-back calls over
# cold copies of W instead of one call after an L2 flush. Builds the engine and the tests; runs the
# whole matmul_cuda_test (every implementation against the CPU twin, the selection's own tests),
# the engine's GPU tests (sampled steps, CUDA graphs, the runner, the Hugging Face goldens); logs
# the selector's timings and choices for both bs 1 steps; then the decode steps of the models whose
# weights are chained, before the change ("old": BASE_DIR's files laid over the tree by
# scripts/gpu/ab.sh) against the tree, alternated. Prints a table, then leaves everything in
# OUTDIR/selection_chains.tgz. Carry .staged (scripts/stage_deps.sh) and BASE_DIR with the call;
# make BASE_DIR first:
#   scripts/gpu/ab_base.sh main .ab/main; scripts/gpu/selection_chains_check.sh .ab/main OUTDIR
# (LIMIT_S: the seconds after the start by which the steps' A/B must end; default 560).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
base=${1:?usage: scripts/gpu/selection_chains_check.sh BASE_DIR OUTDIR}
top=${2:?usage: scripts/gpu/selection_chains_check.sh BASE_DIR OUTDIR}
# shellcheck source=scripts/gpu/run_common.sh
. scripts/gpu/run_common.sh
require_base selection_chains_check "$base" src/ops/matmul/matmul_cuda.cu
out=$top/selection_chains
run_start "$out"
cmake --build build/cuda -j16 --target roofline matmul_cuda_test sampled_step_test cuda_graph_test \
  model_runner_test hf_golden_test >> "$out/build.log" 2>&1
note "build rc=$?"
run_test src/ops/matmul_cuda_test
run_test tests/runtime/sampled_step_test
run_test tests/runtime/cuda_graph_test
run_test tests/runtime/model_runner_test
run_test tests/e2e/hf_golden_test
for model in qwen2.5-0.5b llama3-8b; do
  timeout 90 build/cuda/tools/cli/roofline bench --dummy-weights $model --batch 1 --context 512 \
    --device cuda --steps 8 --verbose 2>&1 | grep -E "matmul: m <= " | sed "s/^/$model /" \
    >> "$out/choices.txt"
done
note "choices done"
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 4 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights qwen3-0.6b --batch 1 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((${LIMIT_S:-560} - $(run_elapsed))) \
  scripts/gpu/ab.sh "$base" "$out/ab" > "$out/ab_table.txt" 2>&1
note "steps rc=$?"
sed -E 's/^([^ ]+) .*matmul: m <= ([0-9]+), (n [0-9]+, k [0-9]+[^:]*): skinny ([0-9.]+) us, skinny block copies ([0-9.]+) us, skinny after rms_norm ([0-9.]+) us, wide [0-9.]+ us, cuBLASLt ([0-9.]+) us.*(a call.s share of a chain of [0-9]+ over [0-9]+|one call).* -> (.*)/\1 m<=\2 \3: slices \4 block \5 apart \6 cublas \7 [\8] -> \9/' \
  "$out/choices.txt" | grep -E "m<=1 " | cut -c1-200
grep -E "^== |graph floor|kernels" "$out/ab/ab.txt" | sed -E 's/ a step with.*//' | cut -c1-150
cat "$out/summary.txt"
(cd "$top" && tar czf selection_chains.tgz selection_chains && rm -rf selection_chains)
