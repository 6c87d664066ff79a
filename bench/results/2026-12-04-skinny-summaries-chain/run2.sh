#!/usr/bin/env bash
# Session script (untracked): where the skinny epilogue's summaries cost goes (modes 0-5; ncu of mode 0 vs 4).
set -uo pipefail
out=${1:?usage: run2.sh OUT}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
note() { echo "$* at $(el) s" | tee -a "$out/summary.txt"; }
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target matmul_cuda_bench matmul_cuda_test >> "$out/build.log" 2>&1
note "build rc=$?"
grep -E "error" "$out/build.log" | head -20
B=build/cuda/src/ops/matmul_cuda_bench
for mode in 0 3 4 5; do
  AB_SUMMARY_MODE=$mode timeout 120 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 --gtest_filter='*Summar*' > "$out/mt.log" 2>&1
  note "matmul summaries mode $mode rc=$? $(grep -E 'PASSED|FAILED' "$out/mt.log" | head -3 | tr '\n' ' ')"
done
for pass in 1 2; do
  for mode in 0 2 3 4 5; do
    for which in plain summarized; do
      r=$(AB_BENCH_WHICH=$which AB_SUMMARY_MODE=$mode timeout 60 $B summaries 151936x896 1 8 2>&1 | grep -E "ms$" | awk '{print $NF, $(NF-1)}' | tr '\n' ' ')
      echo "qwen pass $pass mode $mode $which: $r" >> "$out/modes.txt"
    done
  done
done
for mode in 0 3 4 5; do
  r=$(AB_BENCH_WHICH=summarized AB_SUMMARY_MODE=$mode timeout 60 $B summaries 1 8 2>&1 | grep -E "ms$" | awk '{print $NF, $(NF-1)}' | tr '\n' ' ')
  echo "llama mode $mode summarized: $r" >> "$out/modes.txt"
done
note "modes done"
cat "$out/modes.txt"
for cfg in "plain 0" "summarized 0" "summarized 4" "summarized 3"; do
  set -- $cfg
  AB_BENCH_WHICH=$1 AB_SUMMARY_MODE=$2 timeout 120 ncu --clock-control none -k regex:matmul_skinny_kernel --launch-skip 20 --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section SchedulerStats --section MemoryWorkloadAnalysis_Tables --section LaunchStats \
    --export "$out/ncu_$1_$2" $B summaries 151936x896 1 > "$out/ncu_$1_$2.log" 2>&1
  note "ncu $1 $2 rc=$?"
  ncu --import "$out/ncu_$1_$2.ncu-rep" --page details > "$out/details_$1_$2.txt" 2>&1
  ncu --import "$out/ncu_$1_$2.ncu-rep" --page source --print-source sass --csv > "$out/sass_$1_$2.csv" 2>&1
  rm -f "$out/ncu_$1_$2.ncu-rep"
done
grep -E "Duration|Warp Cycles Per Issued|Issued Warp|No Eligible|Executed Ipc" "$out"/details_*.txt
cat "$out/summary.txt"
cd "$out/.." && tar czf r2.tgz "$(basename "$out")" && rm -rf "$out"
