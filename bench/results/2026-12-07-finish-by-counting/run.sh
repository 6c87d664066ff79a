#!/usr/bin/env bash
# Session 68's call (run once, as LIMIT=220 AB_ARGS="1 bf16;32 bf16;64 bf16;256 bf16;64 f32": the
# traces were cut for time; results in 2026-12-07-finish-by-counting.md). Three variants of the
# sampler built in one folder by scripts/gpu/ab.sh:
#   old    = HEAD (8c6b2a3): 4 to 16 slices a row within two blocks per SM, finish_in_warp;
#   slices = one-block-per-sm.patch (2026-12-07-sampler-slices) + trace-marks.patch: one block
#            per SM, finish_in_warp;
#   new    = the tree: both, and finish-by-counting.patch (the candidates are not put in order).
# trace-marks.patch only adds phase marks, which compile to nothing outside trace builds
# (scripts/gpu/sass_loops.py --same: the library's instructions are unchanged). sampling_cuda_test
# on the tree (if it fails, again on the slices variant), then sampling_cuda_bench old / slices /
# new / new / slices / old at each AB_ARGS entry; then, while less than LIMIT (default 380) s have
# passed, the phase traces of the tree and of the slices variant at 1 and 64 rows. Everything in
# DEST/s68.tgz, packed every 15 s while the A/B runs (a call cut at its limit keeps what ran).
# Set up as it was, from a clean tree at 8c6b2a3:
#   d=bench/results/2026-12-07-finish-by-counting
#   git apply bench/results/2026-12-07-sampler-slices/one-block-per-sm.patch $d/trace-marks.patch
#   scripts/gpu/ab_base.sh HEAD .ab/old
#   mkdir -p .ab/slices/src/ops/sampling && cp src/ops/sampling/sampling_cuda.cu .ab/slices/src/ops/sampling/
#   git apply $d/finish-by-counting.patch
# then on the device (270 s without the traces, ~400 with them; carry .staged):
#   bash bench/results/2026-12-07-finish-by-counting/run.sh DEST
set -uo pipefail
dest=${1:?}; w=/tmp/s68; rm -rf "$w"; mkdir -p "$dest" "$w"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf /tmp/s68.tgz -C "$w" . && mv /tmp/s68.tgz "$dest/s68.tgz"; }
bin() { find build/cuda -name "$1" -type f -executable | head -n 1; }
cp src/ops/sampling/sampling_cuda.cu /tmp/tree_sampling_cuda.cu
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
( AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 \
    AB_ARGS="${AB_ARGS:-1 bf16;16 bf16;32 bf16;64 bf16;256 bf16;64 f32}" \
    scripts/gpu/ab.sh .ab/old .ab/slices "$w/ab" > "$w/ab_table.txt" 2>&1
  echo "$?" > "$w/ab_rc" ) &
abpid=$!
while kill -0 "$abpid" 2> /dev/null; do sleep 15; pack; done  # a call cut at its limit keeps these
echo "ab rc=$(cat "$w/ab_rc") at $(el) s"; tail -n 3 "$w/ab_table.txt"; pack
grep -E "^== |sample_rows .*us/step" "$w/ab/ab.txt" | cut -c1-110
if grep -q FAILED "$w/ab/ab_test.log"; then
  cp .ab/slices/src/ops/sampling/sampling_cuda.cu src/ops/sampling/sampling_cuda.cu
  cmake --build build/cuda -j16 --target sampling_cuda_test > "$w/slices_test_build.log" 2>&1
  timeout 300 "$(bin sampling_cuda_test)" --gtest_brief=1 > "$w/slices_test.log" 2>&1
  echo "slices-only sampling_cuda_test rc=$? at $(el) s"; tail -n 3 "$w/slices_test.log"
  cp /tmp/tree_sampling_cuda.cu src/ops/sampling/sampling_cuda.cu
fi
[ "$(el)" -lt "${LIMIT:-380}" ] || { echo "traces skipped at $(el) s"; exit 0; }
cmake --build build/cuda -j16 --target sampling_trace_bench > "$w/trace_build.log" 2>&1
echo "trace build (tree) rc=$? at $(el) s"
for r in 1 64; do timeout 30 "$(bin sampling_trace_bench)" trace $r bf16 >> "$w/trace_new.txt" 2>&1; done
pack
[ "$(el)" -lt "${LIMIT:-380}" ] || { echo "slices trace skipped at $(el) s"; exit 0; }
cp .ab/slices/src/ops/sampling/sampling_cuda.cu src/ops/sampling/sampling_cuda.cu
cmake --build build/cuda -j16 --target sampling_trace_bench > "$w/trace_build2.log" 2>&1
echo "trace build (slices) rc=$? at $(el) s"
for r in 1 64; do timeout 30 "$(bin sampling_trace_bench)" trace $r bf16 >> "$w/trace_slices.txt" 2>&1; done
cp /tmp/tree_sampling_cuda.cu src/ops/sampling/sampling_cuda.cu
echo "traces at $(el) s"; pack
