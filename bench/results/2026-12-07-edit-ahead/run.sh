#!/usr/bin/env bash
# A/B: HEAD's sampler (.ab/old) against the tree (each thread's first edit read ahead of the
# pivot, its logit ahead of the stripe list); sampling_cuda_test on the tree; then the tree's
# traces at 64 and 256 rows. Everything in DEST/ab1.tgz, packed every 15 s.
# Session 69 ran it through auto2.sh (beside this file; the call got an H100, so this script with
# its defaults), from 2ad0f1e plus the change, .ab/old made by `scripts/gpu/ab_base.sh HEAD
# .ab/old` (377 s, .staged carried):  bash bench/results/2026-12-07-edit-ahead/auto2.sh $OUT
set -uo pipefail
dest=${1:?}; w=/tmp/ab1; rm -rf "$w"; mkdir -p "$dest" "$w"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf /tmp/ab1.tgz -C "$w" . && mv /tmp/ab1.tgz "$dest/ab1.tgz"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
( AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 \
    AB_ARGS="${AB_ARGS:-64 bf16;256 bf16;1 bf16;64 f32}" \
    scripts/gpu/ab.sh .ab/old "$w/ab" > "$w/ab_table.txt" 2>&1
  echo "$?" > "$w/ab_rc" ) &
abpid=$!
while kill -0 "$abpid" 2> /dev/null; do sleep 15; pack; done
echo "ab rc=$(cat "$w/ab_rc") at $(el) s"; pack
grep -E "PASSED|FAILED" "$w/ab/ab_test.log" | head -5
grep -E "^== |sample_rows .*us/step" "$w/ab/ab.txt" | cut -c1-100
[ "$(el)" -lt "${LIMIT:-330}" ] || { echo "traces skipped at $(el) s"; exit 0; }
cmake --build build/cuda -j16 --target sampling_trace_bench > "$w/trace_build.log" 2>&1
echo "trace build rc=$? at $(el) s"
T=$(find build/cuda -name sampling_trace_bench -type f -executable | head -n 1)
for r in 64 256; do timeout 30 "$T" trace $r bf16 > "$w/trace_$r.txt" 2>&1; pack; done
echo "traces at $(el) s"
grep -E "candidates gathered" "$w"/trace_*.txt
