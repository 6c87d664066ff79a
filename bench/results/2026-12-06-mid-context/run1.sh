#!/usr/bin/env bash
# Session 61, call 3 (a fresh machine): `roofline bench` taking the step's bytes and its graph
# floor halfway through the timed steps (the tree) against HEAD 0e54589's bench, which took both
# after all of its timed runs (.ab/old: HEAD's tools/cli/main.cc and src/engine/profile.cc), on
# issue 8's four shapes, old / new / new / old; then `roofline profile` of llama3-8b bs 64.
set -uo pipefail
dest=${1:?}; out=/tmp/mc; mkdir -p "$dest" "$out"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
args="bench --dummy-weights llama3-8b --batch 64 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights llama3-8b --batch 1 --context 512 --device cuda --steps 32"
args+=";bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64"
AB_PASSES=2 AB_ARGS="$args" timeout 420 bash scripts/gpu/ab.sh .ab/old "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"
tar czf /tmp/mc.tgz -C "$out" . && mv /tmp/mc.tgz "$dest/"
if [ "$(el)" -lt 330 ]; then
  timeout 90 build/cuda/tools/cli/roofline profile --dummy-weights llama3-8b --batch 64 --context 512 \
    --device cuda --steps 8 > "$out/profile_llama64.txt" 2>&1
  echo "profile rc=$? at $(el) s"
  tar czf /tmp/mc.tgz -C "$out" . && mv /tmp/mc.tgz "$dest/"
fi
grep -E "^== |decode step|graph floor|step bytes|^roofline" "$out/ab/ab.txt" |
  sed -E 's/ -> .*//; s/ a step with its CUDA graph replayed back to back \(no host between steps\)//; s/, min .*//' | cut -c1-170
grep -E "step boundary" "$out/profile_llama64.txt" 2>/dev/null
