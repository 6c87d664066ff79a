#!/usr/bin/env bash
# session 52, call 4: qwen steps, old/new selection, three passes
set -uo pipefail
top=$1; out=$top/r; mkdir -p "$out"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt"; cat "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
B="--batch 1 --context 512 --device cuda"
args="bench --dummy-weights qwen2.5-0.5b $B --steps 64;bench --dummy-weights qwen3-0.6b $B --steps 32"
AB_PASSES=3 AB_ARGS="$args" timeout $((540 - $(date +%s) + t0)) scripts/gpu/ab.sh .ab/main "$out/ab" > "$out/ab_table.txt" 2>&1; echo "ab rc=$? $(( $(date +%s)-t0 )) s"
rm -f "$out"/ab/ab_build_*.log
(cd "$top" && tar czf r.tgz r && rm -rf r)
tar xzf "$top/r.tgz" -C /tmp && grep -E "^== |graph floor|cuda graphs" /tmp/r/ab/ab.txt | sed -E 's/ a step with.*//; s/ \(0 also.*in / /' | cut -c1-130
