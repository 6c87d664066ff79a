#!/usr/bin/env bash
# Session 65: is each ~2 us phase of the sampler's post-merge chain the cost of cold code (its
# 569 KB kernel fetched into the SM's instruction caches as it runs)? On HEAD: sampling_cuda_test
# (owed for d2c4bc5), the phase traces; then the trace build with twice.patch (the top-k pivot and
# the ranking + draw each run twice through the same instructions: the second run is the phase
# with its code warm), laid over the tree from .ab/twice (the two patched files at their paths
# under it: apply twice.patch, copy them there, reverse it); then Nsight Compute's
# stall samples of one untraced batch-64 launch. Outputs in /tmp/s, packed into DEST/s.tgz after
# every phase; Nsight Compute is skipped when less than 100 s of LIMIT (default 480) is left.
#   bash bench/results/2026-12-07-cold-code/run.sh DEST [LIMIT]
set -uo pipefail
dest=${1:?}; limit=${2:-480}; out=/tmp/s; mkdir -p "$dest" "$out"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf /tmp/s.tgz -C "$out" . && mv /tmp/s.tgz "$dest/"; }
bin() { find build/cuda -name "$1" -type f -executable | head -n 1; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/configure.log" 2>&1 ||
  { echo "configure failed"; tail -20 "$out/configure.log"; pack; exit 1; }
cmake --build build/cuda -j16 --target sampling_cuda_test sampling_cuda_bench sampling_trace_bench \
  > "$out/build1.log" 2>&1
echo "build1 rc=$? at $(el) s"
timeout 150 "$(bin sampling_cuda_test)" > "$out/sampling_cuda_test.txt" 2>&1
echo "sampling_cuda_test rc=$? at $(el) s"; tail -n 3 "$out/sampling_cuda_test.txt"
for r in 1 64; do timeout 25 "$(bin sampling_trace_bench)" trace $r bf16 >> "$out/trace_head.txt" 2>&1; done
echo "trace_head at $(el) s"; pack
# The twice build: the patched files over the tree, built, traced, the tree restored.
mkdir -p /tmp/orig
for f in src/ops/sampling/sampling_cuda.cu src/ops/sampling/sampling_cuda_bench.cc; do
  cp "$f" "/tmp/orig/$(basename "$f")"; cp ".ab/twice/$f" "$f"
done
cmake --build build/cuda -j16 --target sampling_trace_bench > "$out/build2.log" 2>&1
echo "build2 rc=$? at $(el) s"
for r in 1 64 256; do timeout 25 "$(bin sampling_trace_bench)" trace $r bf16 >> "$out/trace_twice.txt" 2>&1; done
for f in src/ops/sampling/sampling_cuda.cu src/ops/sampling/sampling_cuda_bench.cc; do
  cp "/tmp/orig/$(basename "$f")" "$f"
done
echo "trace_twice at $(el) s"; pack
if [ $(( limit - $(el) )) -ge 100 ]; then
  rep="$out/ncu64"
  timeout 150 ncu --clock-control none --cache-control none --sampling-interval 0 \
    --section WarpStateStats --section SourceCounters --section InstructionStats \
    --section LaunchStats -k regex:sample_rows_kernel --launch-skip 30 --launch-count 1 -f \
    -o "$rep" "$(bin sampling_cuda_bench)" 64 bf16 > "$out/ncu_run.log" 2>&1
  echo "ncu rc=$? at $(el) s"
  ncu -i "$rep.ncu-rep" --page details > "$out/ncu_details.txt" 2>&1
  ncu -i "$rep.ncu-rep" --page raw --csv > "$out/ncu_raw.csv" 2>&1
  ncu -i "$rep.ncu-rep" --page source --csv --print-source sass > "$out/ncu_source.csv" 2>&1 ||
    ncu -i "$rep.ncu-rep" --page source --csv > "$out/ncu_source.csv" 2>&1
  echo "ncu pages at $(el) s"; pack
else
  echo "ncu skipped at $(el) s (LIMIT $limit)"
fi
grep -E "pivot|token|candidates|batch" "$out/trace_twice.txt" | head -n 40
