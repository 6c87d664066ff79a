#!/usr/bin/env bash
# The device run for the cluster sampler (issue 12): sample_rows_cluster_cuda holds each row's
# logits in the shared memory of one thread-block cluster, so that nothing after the one read of
# the logits goes back to global memory. In order of what matters, each step skipped once the
# clock says the next would not finish:
#   1. builds the sampling op's test and bench; runs the cluster sampler's tests (every row against
#      the CPU twin, sizes that abort, a graph replay) and the tile sampler's (it shares the
#      cluster sampler's selection code, sampling_block.cuh);
#   2. sampling_cuda_bench at batch 64, 1 and 32 in bf16 and 32 in f32: sample_rows, the tile
#      sampler and the cluster sampler in one process, each beside one read of the logits at
#      4.28 TB/s (issue 12's figure);
#   3. builds the engine; sampled_step_test (the engine's tokens against the CPU twin, with the
#      cluster sampler taking the qualifying steps, and off);
#   4. decode steps with ROOFLINE_CLUSTER_SAMPLER=1 / 0 alternated: llama3-8b at batch 64 and 1,
#      qwen2.5-0.5b at batch 1 (the bench's rows are greedy: they qualify);
#   5. sampling_trace_bench trace 64 bf16: where a batch-64 launch's time goes, phase by phase;
#   6. the rest of sampling_cuda_test.
# Writes OUTDIR/sampling_cluster.tgz and prints the table and the summary last. Carry .staged:
#   scripts/gpu/sampling_cluster_check.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=${1:?usage: scripts/gpu/sampling_cluster_check.sh OUTDIR}
out=$top/sampling_cluster
# shellcheck source=scripts/gpu/run_common.sh
. scripts/gpu/run_common.sh
run_start "$out"
pack() {
  grep -hE "batch|clusters|decode step|graph floor|cuda graphs|^== " "$out/bench.txt" \
    "$out/steps.txt" > "$out/table.txt" 2>/dev/null
  tar -czf "$top/sampling_cluster.tgz.part" -C "$top" sampling_cluster &&
    mv "$top/sampling_cluster.tgz.part" "$top/sampling_cluster.tgz"
}
cmake --build build/cuda -j16 --target sampling_cuda_test sampling_cuda_bench sampling_trace_bench \
  >> "$out/build.log" 2>&1
note "op build rc=$?"
run_test src/ops/sampling_cuda_test '*SampleRowsCluster*' "sampling_cuda_test clusters"
# The tile sampler now shares its selection code with the cluster sampler (sampling_block.cuh).
run_test src/ops/sampling_cuda_test '*SampleRowsTiles*' \
  "sampling_cuda_test tiles"
for args in "64 bf16" "1 bf16" "32 bf16" "32 f32"; do
  [ "$(run_elapsed)" -gt 240 ] && break
  echo "== sampling_cuda_bench $args" >> "$out/bench.txt"
  timeout 60 build/cuda/src/ops/sampling_cuda_bench $args >> "$out/bench.txt" 2>&1
done
note "op bench done"
pack
if [ "$(run_elapsed)" -lt 250 ]; then
  cmake --build build/cuda -j16 --target roofline sampled_step_test >> "$out/build.log" 2>&1
  note "engine build rc=$?"
  run_test tests/runtime/sampled_step_test 'GpuSampling*' "sampled_step_test"
  pack
  for spec in "llama3-8b 64" "llama3-8b 1" "qwen2.5-0.5b 1"; do
    set -- $spec
    for on in 1 0 0 1; do
      [ "$(run_elapsed)" -gt 520 ] && break 2
      echo "== $1 bs $2 ROOFLINE_CLUSTER_SAMPLER=$on" >> "$out/steps.txt"
      ROOFLINE_CLUSTER_SAMPLER=$on timeout 60 build/cuda/tools/cli/roofline bench \
        --dummy-weights "$1" --batch "$2" --context 512 --device cuda --steps 32 2>&1 |
        grep -E "decode step|graph floor|cuda graphs" >> "$out/steps.txt"
    done
  done
  note "steps done"
fi
if [ "$(run_elapsed)" -lt 500 ]; then
  timeout 60 build/cuda/src/ops/sampling_trace_bench trace 64 bf16 > "$out/trace64.txt" 2>&1
  note "trace rc=$?"
fi
[ "$(run_elapsed)" -lt 480 ] &&
  run_test src/ops/sampling_cuda_test '-*SampleRowsCluster*:*SampleRowsTiles*' \
    "sampling_cuda_test the rest"
pack
cat "$out/table.txt" "$out/summary.txt"
rm -rf "$out"
