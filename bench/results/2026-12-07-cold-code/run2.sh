#!/usr/bin/env bash
# Prepared in session 65, run in session 66 (results: bench/results/2026-12-07-pivot-barriers.md). (1) A/B/C of
# sample_rows against the commit the patches apply to ("old"): "pivot" has
# pivot-two-barriers.patch (kth_key_bound with alternating bin arrays and result slots,
# warp-aggregated atomics), the tree ("new") has it and draw-rel-once.patch (finish_in_warp works
# out the candidates' relative probabilities once into shared memory), with sampling_cuda_test on
# the tree; (2) the tree's phase traces; (3) Nsight Compute's warp-stall samples of one sampled
# batch-64 launch of the trace build, untraced (its %clock reads stay in the code, predicated off,
# and mark the phases' bounds in the SASS), caches and clocks left alone. Outputs in /tmp/s2,
# packed into DEST/s2.tgz after each step; the traces are skipped when less than 100 s of LIMIT
# (default 480) is left, ncu when less than 80 s is. Before the call, from a clean tree:
#   d=bench/results/2026-12-07-cold-code f=src/ops/sampling/sampling_cuda.cu
#   git apply $d/pivot-two-barriers.patch && mkdir -p .ab/pivot/$(dirname $f) &&
#     cp $f .ab/pivot/$f && git apply $d/draw-rel-once.patch && scripts/gpu/ab_base.sh HEAD .ab/old
# then, on the device:
#   bash bench/results/2026-12-07-cold-code/run2.sh DEST [LIMIT]
set -uo pipefail
dest=${1:?}; limit=${2:-480}; out=/tmp/s2; rm -rf "$out"; mkdir -p "$dest" "$out"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
left() { echo $(( limit - $(el) )); }
pack() { tar czf /tmp/s2.tgz -C "$out" . && mv /tmp/s2.tgz "$dest/"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 AB_ARGS="1 bf16;64 bf16;256 bf16" \
  scripts/gpu/ab.sh .ab/old .ab/pivot "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"; tail -n 12 "$out/ab_table.txt"; pack
[ "$(left)" -ge 100 ] || { echo "traces and ncu skipped at $(el) s"; exit 0; }
cmake --build build/cuda -j16 --target sampling_trace_bench > "$out/build_trace.log" 2>&1
echo "build_trace rc=$? at $(el) s"
b=$(find build/cuda -name sampling_trace_bench -type f -executable | head -n 1)
for r in 1 64; do timeout 25 "$b" trace $r bf16 >> "$out/trace_new.txt" 2>&1; done
echo "traces at $(el) s"; grep -E "top-k pivot|token  " "$out/trace_new.txt"; pack
[ "$(left)" -ge 80 ] || { echo "ncu skipped at $(el) s"; exit 0; }
rep="$out/ncu64"
timeout 120 ncu --clock-control none --cache-control none --warp-sampling-interval 0 \
  --section WarpStateStats --section SourceCounters --section InstructionStats \
  --section LaunchStats -k regex:sample_rows_kernel --launch-skip 30 --launch-count 1 -f \
  --export "$rep" "$b" 64 bf16 > "$out/ncu64_run.txt" 2>&1
echo "ncu rc=$? at $(el) s"
ncu --import "$rep.ncu-rep" --print-details all > "$out/ncu64_details.txt" 2>&1
ncu --import "$rep.ncu-rep" --page source --print-source sass --csv > "$out/ncu64_sass.csv" 2>&1
python3 scripts/gpu/ncu_hot.py "$out/ncu64_sass.csv" 80 > "$out/ncu64_hot.txt" 2>&1
rm -f "$rep.ncu-rep"; gzip -f "$out/ncu64_sass.csv"; pack
echo "done at $(el) s"; head -n 25 "$out/ncu64_hot.txt"
