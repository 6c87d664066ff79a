#!/usr/bin/env bash
# NOT RUN: prepared in session 70 for two-lists-greedy-flag.patch (apply it first); no machine
# started before the session's device time was spent (see ../2026-12-07-best-pack.md).
# Run 2: HEAD's sampler (.ab/old) against the tree: the best pack for unsplit rows only, the
# gather's two lists kept (an unsplit row's first list holds single packs), greedy rows' pass 1
# without the pack tracking (a template flag); sampling_cuda_test on the tree first. Everything
# in DEST/ab2.tgz, packed every 15 s.
# Session 70: from 296c1d6 plus the change, .ab/old by `scripts/gpu/ab_base.sh HEAD .ab/old`
# (.staged carried):  bash bench/results/2026-12-07-best-pack/run2.sh $OUT
set -uo pipefail
dest=${1:?}; w=/tmp/ab2; rm -rf "$w"; mkdir -p "$dest" "$w"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf /tmp/ab2.tgz -C "$w" . && mv /tmp/ab2.tgz "$dest/ab2.tgz"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
( AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=${AB_PASSES:-1} \
    AB_ARGS="${AB_ARGS:-256 bf16;64 bf16;1 bf16}" \
    scripts/gpu/ab.sh .ab/old "$w/ab" > "$w/ab_table.txt" 2>&1
  echo "$?" > "$w/ab_rc" ) &
abpid=$!
while kill -0 "$abpid" 2> /dev/null; do sleep 15; pack; done
echo "ab rc=$(cat "$w/ab_rc") at $(el) s"; pack
grep -E "PASSED|FAILED" "$w/ab/ab_test.log" | head -5
grep -E "^== |sample_rows .*us/step" "$w/ab/ab.txt" | cut -c1-100
