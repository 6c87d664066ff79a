#!/usr/bin/env bash
# Prepared in session 67 and NOT YET RUN (the session's device time was spent). A/B of
# one-block-per-sm.patch (a split launch keeps to one block per SM: 64 rows in 2 slices, 32 in 4,
# 16 in 8; rows 1-8 keep the cap of 16) against the commit it applies to: sampling_cuda_test on the
# patched tree, then sampling_cuda_bench, old / new / new / old. Everything in DEST/ab.tgz.
# Before the call, from a clean tree:
#   d=bench/results/2026-12-07-sampler-slices
#   git apply $d/one-block-per-sm.patch && scripts/gpu/ab_base.sh HEAD .ab/old
# then, on the device (about 200 s; carry .staged):
#   bash bench/results/2026-12-07-sampler-slices/next-run.sh DEST
# Predicted (H100, from run 3's sweep): 1 row level; 16 rows -0.3 to -0.8 us (unmeasured: 8 slices
# instead of 16); 32 rows 17.0 -> 16.4 us; 64 and 66 rows 20.9 -> 20.1 us; 64 f32 rows unknown
# (each block then streams 256 KB).
set -uo pipefail
dest=${1:?usage: next-run.sh DEST}
w=/tmp/one_block_per_sm
rm -rf "$w" && mkdir -p "$dest" "$w"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 \
  AB_ARGS="1 bf16;16 bf16;32 bf16;64 bf16;66 bf16;64 f32" scripts/gpu/ab.sh .ab/old "$w/ab" \
  > "$w/ab_table.txt" 2>&1
echo "ab rc=$?"
tar czf "$dest/ab.tgz" -C "$w" .
grep -E "^== |sample_rows .*us/step" "$w/ab/ab.txt" | cut -c1-120
tail -n 4 "$w/ab_table.txt"
