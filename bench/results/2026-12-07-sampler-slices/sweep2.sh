#!/usr/bin/env bash
# Run 3 of 2026-12-07-sampler-slices.md (161 s): on f40979b + slices-override-any.patch (which also
# forces 1 slice, and applies to every launch with a workspace), slices swept at 32 to 128 rows.
set -uo pipefail
dest=${1:?}
w=/tmp/slices_sweep2_$$; rm -rf "$w"; mkdir -p "$w" "$dest"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$w/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$w/configure.log" 2>&1
cmake --build build/cuda -j16 --target sampling_cuda_bench > "$w/build.log" 2>&1; echo "build rc=$?"
b=$(find build/cuda -name sampling_cuda_bench -type f -perm -u+x | head -1)
run() { echo "== rows $1 slices $2" >> "$w/sweep.txt"; ROOFLINE_SAMPLE_SLICES_EXPERIMENT=$2 "$b" "$1" bf16 >> "$w/sweep.txt" 2>&1; }
for pass in 1 2; do
  for s in 8 6 4; do run 32 $s; done
  for s in 4 3 2 1; do run 64 $s; done
  for s in 3 2 1; do run 72 $s; done
  for s in 2 1; do run 96 $s; done
  for s in 2 1; do run 128 $s; done
done
tar czf "$dest/sweep2.tgz" -C "$w" .
grep -E "^== |sample_rows .*us/step" "$w/sweep.txt" | sed -E 's/.*sample_rows +([0-9.]+) us\/step.*greedy rows +([0-9.]+) us.*/\1 greedy \2/' | paste - - | cut -c1-80
