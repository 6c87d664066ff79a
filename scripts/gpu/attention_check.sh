#!/usr/bin/env bash
# Issues 5 and 6's focused run for the H200 host, when a whole check.sh does not fit the device
# time: build the attention targets, run attention_cuda_test (every kernel against its CPU twin on
# every element, and within 2x a naive bf16 implementation's error, against fp64 here and against
# torch SDPA in fp32 by tests/gpu/attention_sdpa_check.py), the prefill and decode
# benchmarks, torch SDPA on the same shapes (bench/peers), Nsight Compute profiles (the
# hottest SASS instructions) of one L=8192 prefill launch and one B=1 L=4096 decode launch, and
# the kernels' phases (attention_trace_bench, phase_trace.h): prefill at L=2048 and 8192 with how
# its blocks fill the SMs, decode at B=1. One log per step, a short table last. Carry .staged
# (scripts/stage_deps.sh) with the call.
#   scripts/gpu/attention_check.sh OUTDIR [prefill|decode|all]   (default: prefill)
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/gpu/attention_check.sh OUTDIR [prefill|decode|all]}
what=${2:-prefill}
case "$what" in prefill|decode|all) ;; *) echo "attention_check.sh: unknown part '$what' (prefill, decode or all)" >&2; exit 2 ;; esac
mkdir -p "$out"
start=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv,noheader | tee "$out/gpu.txt"

cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/configure.log" 2>&1
targets="attention_cuda_test attention_cuda_bench attention_trace_bench"
cmake --build build/cuda -j16 --target $targets > "$out/build.log" 2>&1
build_rc=$?
[ "$build_rc" -eq 0 ] || tail -n 40 "$out/build.log"
built=$(date +%s)

# The prefill and tree-mask cases also dump their inputs and output for the check against torch
# SDPA in fp32 (tests/gpu/attention_sdpa_check.py).
dump=$(mktemp -d)
tests=$(ROOFLINE_ATTENTION_DUMP="$dump" timeout 300 build/cuda/src/ops/attention_cuda_test \
  --gtest_brief=1 2>&1 | tee "$out/tests.log" | grep -E "PASSED|FAILED" | tr '\n' ' ')
timeout 200 python3 tests/gpu/attention_sdpa_check.py "$dump" > "$out/sdpa_check.log" 2>&1
sdpa_rc=$?
rm -rf "$dump"
tested=$(date +%s)

bench=build/cuda/src/ops/attention_cuda_bench
if [ "$what" != decode ]; then
  timeout 200 "$bench" prefill > "$out/prefill_bench.txt" 2>&1 || echo "(exit $?)" >> "$out/prefill_bench.txt"
  timeout 200 python3 bench/peers/attention_prefill_sdpa.py > "$out/prefill_peers.txt" 2>&1 \
    || echo "(exit $?)" >> "$out/prefill_peers.txt"
  # Where a launch's time goes: each block's phases, its fixed cost beside its cost per K/V
  # tile, and the time the SMs wait between blocks.
  for len in 2048 8192; do
    timeout 120 build/cuda/src/ops/attention_trace_bench trace prefill $len
  done > "$out/prefill_trace.txt" 2>&1 || echo "(exit $?)" >> "$out/prefill_trace.txt"
  if command -v ncu > /dev/null; then
    # One L=8192 prefill launch, after two warm-up launches: the summary sections, then the
    # hottest SASS instructions by warp-stall samples (scripts/gpu/ncu_hot.py).
    timeout 150 ncu --kernel-name regex:flash_prefill --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section Occupancy \
      --section ComputeWorkloadAnalysis --section InstructionStats --section SourceCounters \
      --export "$out/prefill" "$bench" prefill 8192 > "$out/ncu_prefill.txt" 2>&1 \
      || echo "(exit $?)" >> "$out/ncu_prefill.txt"
    ncu --import "$out/prefill.ncu-rep" --print-details all >> "$out/ncu_prefill.txt" 2>&1
    ncu --import "$out/prefill.ncu-rep" --page source --print-source sass --csv > "$out/sass.csv" 2>&1
    python3 scripts/gpu/ncu_hot.py "$out/sass.csv" 70 > "$out/ncu_hot.txt" 2>&1
    rm -f "$out/sass.csv" "$out/prefill.ncu-rep"
  fi
fi
if [ "$what" != prefill ]; then
  timeout 200 "$bench" > "$out/decode_bench.txt" 2>&1 || echo "(exit $?)" >> "$out/decode_bench.txt"
  # Where a B=1 call's time goes, phase by phase: llama3-8b's heads at 512 and 4096 keys,
  # qwen2.5-0.5b's at 512.
  for shape in "1 512" "1 4096" "1 512 14 2 64"; do
    timeout 60 build/cuda/src/ops/attention_trace_bench trace $shape
  done > "$out/decode_trace.txt" 2>&1 || echo "(exit $?)" >> "$out/decode_trace.txt"
  timeout 200 python3 bench/peers/attention_decode_sdpa.py > "$out/decode_peers.txt" 2>&1 \
    || echo "(exit $?)" >> "$out/decode_peers.txt"
  if command -v ncu > /dev/null; then
    # One B=1 L=4096 decode launch (issue 6's latency-bound shape), after two warm-up launches.
    timeout 150 ncu --kernel-name regex:paged_decode --launch-skip 2 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section Occupancy \
      --section LaunchStats --section SourceCounters \
      --export "$out/decode" "$bench" 1 4096 > "$out/ncu_decode.txt" 2>&1 \
      || echo "(exit $?)" >> "$out/ncu_decode.txt"
    ncu --import "$out/decode.ncu-rep" --print-details all >> "$out/ncu_decode.txt" 2>&1
    ncu --import "$out/decode.ncu-rep" --page source --print-source sass --csv > "$out/sass.csv" 2>&1
    python3 scripts/gpu/ncu_hot.py "$out/sass.csv" 60 > "$out/ncu_hot_decode.txt" 2>&1
    rm -f "$out/sass.csv" "$out/decode.ncu-rep"
  fi
fi
done_at=$(date +%s)

cat "$out"/prefill_bench.txt "$out"/prefill_peers.txt 2>/dev/null | grep -E "prefill|cuDNN|FLASH|flash|cudnn|TFLOP|exit"
grep -E "Duration|Compute \(SM\) Throughput|Memory Throughput|Registers Per|Achieved Occupancy|Issue Slots Busy|exit" \
  "$out/ncu_prefill.txt" 2>/dev/null
echo
echo "| step | result | seconds |"
echo "|---|---|---|"
echo "| build -j16 | rc=$build_rc | $((built - start)) |"
echo "| attention_cuda_test | $tests | $((tested - built)) |"
echo "| vs SDPA fp32 (attention_sdpa_check.py) | rc=$sdpa_rc: $(tail -n 1 "$out/sdpa_check.log") | |"
echo "| benches ($what) | see the *_bench.txt and *_peers.txt files | $((done_at - tested)) |"
