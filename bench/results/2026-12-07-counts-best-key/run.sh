#!/usr/bin/env bash
# The call of 2026-12-07-counts-best-key.md (358 s): counts-best-key.patch applied, .ab/old made by
# `scripts/gpu/ab_base.sh HEAD .ab/old` at f40979b; then the open issues' figures.
set -uo pipefail
dest=${1:?}
w=/tmp/ab_counts_$$; rm -rf "$w"; mkdir -p "$w" "$dest"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 \
  AB_ARGS="1 bf16;64 bf16;256 bf16" scripts/gpu/ab.sh .ab/old "$w/ab" > "$w/ab_table.txt" 2>&1
echo "ab rc=$?"
tar czf "$dest/ab.tgz" -C "$w" .
grep -E "^== |sample_rows .*us/step" "$w/ab/ab.txt" | sed -E 's/us\/step.*greedy rows +([0-9.]+) us.*/us greedy \1/' | cut -c1-100
tail -n 2 "$w/ab_table.txt"
scripts/gpu/issues_check.sh "$dest" 220 > "$w/issues_out.txt" 2>&1
echo "issues rc=$?"; tail -n 40 "$w/issues_out.txt"
