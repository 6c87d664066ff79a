#!/usr/bin/env bash
# The sampler's phase traces at 1, 64, 32, 256 rows (bf16), then the untraced bench at 1, 16, 32,
# 64 rows, packed into DEST/t.tgz after each step. Session 69 ran it on 2ef219c with
# bench/results/2026-12-07-finish-by-counting/trace-marks.patch applied (the `git apply` line);
# the marks are in the tree since, so on a later tree drop that line.
#   bash bench/results/2026-12-07-token-phase-trace/run.sh DEST   (94 s on a bare H100; .staged)
set -uo pipefail
dest=${1:?}; w=/tmp/t69; rm -rf "$w"; mkdir -p "$dest" "$w"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf /tmp/t69.tgz -C "$w" . && mv /tmp/t69.tgz "$dest/t.tgz"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
git apply bench/results/2026-12-07-finish-by-counting/trace-marks.patch || { echo "patch failed"; exit 1; }
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$w/build.log" 2>&1
cmake --build build/cuda -j16 --target sampling_trace_bench sampling_cuda_bench >> "$w/build.log" 2>&1
echo "build rc=$? at $(el) s"; pack
T=$(find build/cuda -name sampling_trace_bench -type f -executable | head -n 1)
B=$(find build/cuda -name sampling_cuda_bench -type f -executable | head -n 1)
for r in 1 64 32 256; do
  timeout 40 "$T" trace $r bf16 > "$w/trace_$r.txt" 2>&1; echo "trace $r rc=$? at $(el) s"; pack
done
for r in 1 16 32 64; do timeout 40 "$B" $r bf16 >> "$w/bench.txt" 2>&1; done
echo "bench rc=$? at $(el) s"; pack
grep -E "us/step" "$w/bench.txt" | cut -c1-120
