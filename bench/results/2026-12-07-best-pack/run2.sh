#!/usr/bin/env bash
# Run 2 (session 71): on an H200, the old tree's whole check + the issues' figures (owed since
# session 58); on an H100 (what came), two-lists-greedy-flag.patch A/B against .ab/old, then the
# old tree's sampling_cuda_test. Set up from 6d07a48 plus the edit helpers (RowView::holds /
# edited): `scripts/gpu/ab_base.sh HEAD .ab/old` after applying the patch, the helpers in both
# (.staged carried):  bash bench/results/2026-12-07-best-pack/run2.sh $OUT
set -uo pipefail
dest=${1:?}; mkdir -p "$dest"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
gpu=$(nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$dest/gpu.txt")
echo "$gpu"
if echo "$gpu" | grep -q H200; then
  cp -r .ab/old/. .            # HEAD's tree
  git diff --stat 2>/dev/null | tail -1
  scripts/gpu/issues_check.sh "$dest" 200 > "$dest/issues_stdout.txt" 2>&1; echo "issues rc=$? at $(el) s"
  tail -30 "$dest/issues_stdout.txt"
  left=$(( 570 - $(el) ))
  CHECK_SKIP=ops,peers,engine,profile,compare timeout "$left" scripts/gpu/check.sh "$dest/check" > "$dest/check_stdout.txt" 2>&1
  echo "check rc=$? at $(el) s"; tail -25 "$dest/check_stdout.txt"
else
  w=$dest/ab
  AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 \
    AB_ARGS="256 bf16;64 bf16;1 bf16" scripts/gpu/ab.sh .ab/old "$w" > "$dest/ab_table.txt" 2>&1
  echo "ab rc=$? at $(el) s"
  grep -E "PASSED|FAILED" "$w/ab_test.log" | head -5
  grep -E "^== |sample_rows .*us/step|greedy" "$w/ab.txt" | cut -c1-110
  cp -r .ab/old/. .
  cmake --build build/cuda -j16 --target sampling_cuda_test > "$dest/head_build.txt" 2>&1; echo "head build rc=$?"
  build/cuda/src/ops/sampling_cuda_test > "$dest/head_test.txt" 2>&1
  echo "head test at $(el) s"; grep -E "PASSED|FAILED" "$dest/head_test.txt" | head -5
fi
echo "done at $(el) s"
