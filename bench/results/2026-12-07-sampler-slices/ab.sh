#!/usr/bin/env bash
# Run 2 of 2026-12-07-sampler-slices.md (224 s): the change against c1f45a6, laid over the tree
# by `scripts/gpu/ab_base.sh HEAD .ab/old` before the call; then the phase traces at 1 and 8 rows.
set -uo pipefail
dest=${1:?}
w=/tmp/ab_slices_$$; rm -rf "$w"; mkdir -p "$w" "$dest"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 \
  AB_ARGS="1 bf16;8 bf16;1 f32;16 bf16" scripts/gpu/ab.sh .ab/old "$w/ab" > "$w/ab_table.txt" 2>&1
echo "ab rc=$?"
cmake --build build/cuda -j16 --target sampling_trace_bench > "$w/trace_build.log" 2>&1 && {
  t=$(find build/cuda -name sampling_trace_bench -type f -perm -u+x | head -1)
  "$t" trace 1 bf16 > "$w/trace.txt" 2>&1; "$t" trace 8 bf16 >> "$w/trace.txt" 2>&1; }
tar czf "$dest/ab.tgz" -C "$w" .
grep -E "^== |sample_rows .*us/step" "$w/ab/ab.txt" | sed -E 's/us\/step.*greedy rows +([0-9.]+) us.*/us greedy \1/' | cut -c1-100
tail -n 4 "$w/ab_table.txt"
grep -A12 "^  phase" "$w/trace.txt" | head -30
