#!/usr/bin/env bash
# The open issues' figures at the working tree, in one device call: this GPU's own ceilings
# (calibrated), issue 6's decode attention grid, issue 8's decode steps with and without CUDA
# graphs, issue 12's sampler at 1 / 64 / 256 rows (after its GPU tests), issue 13's decode GEMMs,
# then torch SDPA's decode grid beside issue 6 when time is left. Each step is skipped once
# SECONDS (default 420) have passed since the start, so the call ends before its limit. The
# outputs are written in a fresh folder under /tmp and packed into OUTDIR/issues.tgz after each
# step (one file: the device tool brings back at most 8 a call, and a call stopped at its limit
# still brings back what ran); summary.txt in it has one line a step, printed as each step ends,
# and the figures are printed last. The issues' goals are the H200's figures: on another GPU this
# measures the code, not the goals.
# Run scripts/stage_deps.sh here first and carry .staged with the call.
#   scripts/gpu/issues_check.sh OUTDIR [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
usage="usage: scripts/gpu/issues_check.sh OUTDIR [SECONDS]"
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "$usage" >&2; exit 2; }
limit=${2:-420}
[[ $limit =~ ^[0-9]+$ ]] && [ "$limit" -ge 60 ] ||
  { echo "issues_check: SECONDS must be a whole number of at least 60, got '$limit'" >&2; exit 2; }
# shellcheck source=scripts/gpu/run_common.sh
source scripts/gpu/run_common.sh
dest=$1
mkdir -p "$dest" || exit 2
out=$(mktemp -d /tmp/issues_check.XXXXXX)
pack() { tar czf "$out.tgz" -C "$out" . && mv "$out.tgz" "$dest/issues.tgz"; }
run_start "$out"
left() {
  pack
  [ "$(run_elapsed)" -lt "$limit" ] || { note "skipped ($1): past ${limit} s"; return 1; }
}
cmake --build build/cuda -j16 --target roofline attention_cuda_bench matmul_cuda_bench \
  sampling_cuda_bench sampling_cuda_test >> "$out/build.log" 2>&1
rc=$?
note "build rc=$rc"
[ $rc -eq 0 ] || { pack; tail -n 30 "$out/build.log"; exit 1; }
R=build/cuda/tools/cli/roofline
O=build/cuda/src/ops
export XDG_CACHE_HOME=$out/cache  # the calibrated ceilings, for the steps' roofline lines

left calibrate && {
  timeout 90 $R profile --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda \
    --steps 2 --calibrate > "$out/calibrate.txt" 2>&1
  note "calibrate rc=$?: $(grep -E '^ceilings' "$out/calibrate.txt" | head -n 1)"
}

left "issue 12 tests" && run_test src/ops/sampling_cuda_test "" "issue 12: sampling_cuda_test"

# Issue 8: graphs twice (the goals' figures), eager once.
step() {  # MODEL BATCH STEPS [FLAG]
  left "step $*" || return
  echo "== $1 bs $2 ${4:-graphs}" >> "$out/steps.txt"
  timeout 90 $R bench --dummy-weights "$1" --batch "$2" --context 512 --device cuda \
    --steps "$3" ${4:-} >> "$out/steps.txt" 2>&1
  echo "rc=$?" >> "$out/steps.txt"
}
for pass in 1 2; do
  step qwen2.5-0.5b 1 64; step qwen2.5-0.5b 32 32; step llama3-8b 1 32; step llama3-8b 64 32
done
step qwen2.5-0.5b 1 32 --no-cuda-graphs; step qwen2.5-0.5b 32 16 --no-cuda-graphs
step llama3-8b 1 16 --no-cuda-graphs; step llama3-8b 64 16 --no-cuda-graphs
note "issue 8: steps done"

left "issue 6" && {
  timeout 150 $O/attention_cuda_bench > "$out/attention.txt" 2>&1
  note "issue 6: attention_cuda_bench rc=$?"
}
left "issue 12" && {
  for r in 1 64 256; do timeout 40 $O/sampling_cuda_bench $r bf16 >> "$out/sampling.txt" 2>&1; done
  note "issue 12: sampling_cuda_bench done"
}
left "issue 13" && {
  timeout 160 $O/matmul_cuda_bench decode > "$out/matmul_decode.txt" 2>&1
  note "issue 13: matmul_cuda_bench decode rc=$?"
}
left "issue 6 peer" && {
  timeout 150 python3 bench/peers/attention_decode_sdpa.py > "$out/peer_sdpa.txt" 2>&1
  note "issue 6: torch SDPA decode rc=$?"
}
pack

# The step lines were printed as each step ended (note); the figures last.
echo
[ -f "$out/steps.txt" ] && grep -E "^== |median|graph floor|^roofline " "$out/steps.txt" |
  sed -E 's/ -> .*//; s/ a step with its CUDA graph.*//' | cut -c1-170
[ -f "$out/attention.txt" ] && grep -E "B=(1|64) L=4096" "$out/attention.txt" | head -n 4
[ -f "$out/sampling.txt" ] && grep -E "sample_rows .*us/step|tiles of 128 tokens \(" "$out/sampling.txt" | cut -c1-150
exit 0
