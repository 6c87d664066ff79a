#!/usr/bin/env bash
# The sweep of 2026-12-07-sampler-slices.md: sample_rows_cuda's slices a row forced by
# ROOFLINE_SAMPLE_SLICES_EXPERIMENT, which only slices-override.patch (beside this file; an
# experiment, never on main) reads. Ran on c1f45a6 + that patch: bash sweep.sh DEST (~90 s).
set -uo pipefail
dest=${1:?}
w=/tmp/slices_sweep_$$; rm -rf "$w"; mkdir -p "$w" "$dest"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" -DCMAKE_CUDA_ARCHITECTURES=90a > "$w/configure.log" 2>&1 || { tail -20 "$w/configure.log"; }
bench=$(cmake --build build/cuda -j16 --target sampling_cuda_bench sampling_cuda_test > "$w/build.log" 2>&1; echo $?)
echo "build rc=$bench"; tail -n 3 "$w/build.log"
b=$(find build/cuda -name sampling_cuda_bench -type f -perm -u+x | head -1)
for rows in 1 2 4 8; do
  for s in 0 48 32 24 16 12 8 4; do
    if [ "$s" = 0 ]; then unset ROOFLINE_SAMPLE_SLICES_EXPERIMENT; else export ROOFLINE_SAMPLE_SLICES_EXPERIMENT=$s; fi
    echo "== rows $rows slices ${s} (0: default)" >> "$w/sweep.txt"
    "$b" "$rows" bf16 >> "$w/sweep.txt" 2>&1
  done
done
unset ROOFLINE_SAMPLE_SLICES_EXPERIMENT
# one more default pass at rows 1 for drift
echo "== rows 1 slices 0 (again)" >> "$w/sweep.txt"; "$b" 1 bf16 >> "$w/sweep.txt" 2>&1
t=$(find build/cuda -name sampling_cuda_test -type f -perm -u+x | head -1)
ROOFLINE_SAMPLE_SLICES_EXPERIMENT=16 "$t" > "$w/test16.log" 2>&1; echo "test at 16 slices rc=$?"; tail -n 2 "$w/test16.log"
tar czf "$dest/sweep.tgz" -C "$w" .
grep -E "^== |sample_rows .*us/step" "$w/sweep.txt" | sed -E 's/us\/step.*greedy rows +([0-9.]+) us.*/us greedy \1/' | cut -c1-100
