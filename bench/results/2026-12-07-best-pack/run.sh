#!/usr/bin/env bash
# A/B/C: HEAD's sampler (.ab/old), the best pack for unsplit rows only (.ab/unsplit: pass 1 keeps
# each stripe's best pack and its other packs' largest maximum, the gather reads that one pack
# where the others stay below its floor) and the tree (the same for split rows, through a
# workspace word per thread and slice); sampling_cuda_test on the tree; then the tree's traces
# at 64 and 256 rows. Everything in DEST/ab.tgz, packed every 15 s.
# Session 70: from 296c1d6 plus the change, .ab/old by `scripts/gpu/ab_base.sh HEAD .ab/old`,
# .ab/unsplit holding the unsplit-only sampling_cuda.cu (.staged carried):
#   bash bench/results/2026-12-07-best-pack/run.sh $OUT
set -uo pipefail
dest=${1:?}; w=/tmp/abx; rm -rf "$w"; mkdir -p "$dest" "$w"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf /tmp/abx.tgz -C "$w" . && mv /tmp/abx.tgz "$dest/ab.tgz"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
( AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 \
    AB_ARGS="${AB_ARGS:-256 bf16;64 bf16;1 bf16;64 f32}" \
    scripts/gpu/ab.sh .ab/old .ab/unsplit "$w/ab" > "$w/ab_table.txt" 2>&1
  echo "$?" > "$w/ab_rc" ) &
abpid=$!
while kill -0 "$abpid" 2> /dev/null; do sleep 15; pack; done
echo "ab rc=$(cat "$w/ab_rc") at $(el) s"; pack
grep -E "PASSED|FAILED" "$w/ab/ab_test.log" | head -5
grep -E "^== |sample_rows .*us/step" "$w/ab/ab.txt" | cut -c1-100
[ "$(el)" -lt "${LIMIT:-470}" ] || { echo "traces skipped at $(el) s"; exit 0; }
cmake --build build/cuda -j16 --target sampling_trace_bench > "$w/trace_build.log" 2>&1
echo "trace build rc=$? at $(el) s"
T=$(find build/cuda -name sampling_trace_bench -type f -executable | head -n 1)
for r in 256 64; do timeout 30 "$T" trace $r bf16 > "$w/trace_$r.txt" 2>&1; pack; done
echo "traces at $(el) s"
grep -E "candidates gathered" "$w"/trace_*.txt
