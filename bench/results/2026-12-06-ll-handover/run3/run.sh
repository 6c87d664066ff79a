#!/usr/bin/env bash
# Session 57, call 2: decode attention's fewest keys a split, 128 (tree) / 256 / 512, in the steps.
set -uo pipefail
out=${1:?}
mkdir -p "$out"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt" 2>&1
cat "$out/gpu.txt"
args="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout 540 bash scripts/gpu/ab.sh .ab/k256 .ab/k512 "$out/ab" 2>&1 | tail -40
