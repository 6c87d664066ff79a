#!/usr/bin/env bash
# Prepared in session 66 and NOT YET RUN (the session's device time was spent). A/B of
# pivot-two-rounds.patch (bf16 rows' top-k pivot in two radix rounds instead of three, and
# sampling_cuda_test's EditedValuesWithinTheKthValuesBf16Step) against the commit it applies to:
# sampling_cuda_test on the patched tree (the new test included), then sampling_cuda_bench at
# 1 / 64 / 256 bf16 rows and 64 f32 rows (f32 keeps three rounds: the control), old / new / new /
# old. Everything in DEST/ab.tgz. Before the call, from a clean tree:
#   d=bench/results/2026-12-07-arrival-merge
#   git apply $d/pivot-two-rounds.patch && scripts/gpu/ab_base.sh HEAD .ab/old
# then, on the device (about 200 s):
#   bash bench/results/2026-12-07-arrival-merge/next-run.sh DEST
set -uo pipefail
dest=${1:?usage: next-run.sh DEST}
w=/tmp/pivot_rounds
rm -rf "$w" && mkdir -p "$dest" "$w"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 \
  AB_ARGS="1 bf16;64 bf16;256 bf16;64 f32" scripts/gpu/ab.sh .ab/old "$w/ab" > "$w/ab_table.txt" 2>&1
echo "ab rc=$?"
tar czf "$dest/ab.tgz" -C "$w" .
grep -E "^== |sample_rows .*us/step" "$w/ab/ab.txt" | cut -c1-120
tail -n 4 "$w/ab_table.txt"
