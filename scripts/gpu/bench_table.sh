#!/usr/bin/env bash
# Issue 10's one command on the H200 host: the decode/prefill latency table for the llama3-8b and
# qwen2.5-0.5b shapes at bs 1, 8, 32, 64 — roofline (CUDA graphs), roofline's engine (throughput),
# Hugging Face eager and compiled PyTorch (bench/peers/decode_peers.py) — plus cold start, all
# appended to OUTDIR/table.md. Uses the CUDA build in build/cuda (scripts/gpu/check.sh makes one),
# or configures and builds the roofline binary there (carry .staged) when it is missing.
#   [BENCH_BUDGET_S=540] scripts/gpu/bench_table.sh OUTDIR
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${1:?usage: scripts/gpu/bench_table.sh OUTDIR}
mkdir -p "$out"
start=$(date +%s)
bin=build/cuda/tools/cli/roofline
if [ ! -x "$bin" ]; then
  cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/configure.log" 2>&1
  cmake --build build/cuda -j16 --target roofline > "$out/build.log" 2>&1 || { tail -n 30 "$out/build.log"; exit 1; }
fi
table="$out/table.md"
echo "# $(date -u '+%Y-%m-%d %H:%M UTC'), $(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)" > "$table"
for model in llama3-8b qwen2.5-0.5b; do
  timeout 300 "$bin" bench latency --dummy-weights "$model" --device cuda --batch 1,8,32,64 --context 512 \
    --steps 32 --markdown "$table" --json "$out/latency_$model.json" || echo "(latency $model: exit $?)" >> "$table"
  timeout 120 "$bin" bench coldstart --dummy-weights "$model" --device cuda --markdown "$table" \
    || echo "(coldstart $model: exit $?)" >> "$table"
done
timeout 300 "$bin" bench throughput --dummy-weights llama3-8b --device cuda --requests 1000 --max-num-seqs 64 \
  --max-step-tokens 2048 --markdown "$table" --json "$out/throughput.json" 2>/dev/null \
  || echo "(throughput: exit $?)" >> "$table"
# The peers get what is left of BENCH_BUDGET_S (default 540, under the device's 10-minute call),
# or PEERS_TIMEOUT seconds when set: torch.compile takes minutes; rows measured before a timeout
# stay in the table.
left=$(( ${BENCH_BUDGET_S:-540} - ($(date +%s) - start) ))
peers_timeout=${PEERS_TIMEOUT:-$(( left > 60 ? left : 60 ))}
echo "(peers: ${peers_timeout} s)" >&2
PYTHONUNBUFFERED=1 timeout "$peers_timeout" python3 bench/peers/decode_peers.py --models llama3-8b,qwen2.5-0.5b \
  --batch 1,8,32,64 --context 512 --steps 32 --markdown "$table" > "$out/peers.log" 2>&1 \
  || echo "(peers: exit $?, see peers.log)" >> "$table"
cat "$table"
