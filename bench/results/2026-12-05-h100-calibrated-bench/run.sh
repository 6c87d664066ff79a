#!/usr/bin/env bash
# session 51: light H200 run: the selector's prologue choices, calibrated bench line, steps by norm layout
set -uo pipefail
top=$1; out=$top/r; mkdir -p "$out"
( while sleep 15; do tar czf "$top/partial.tgz.tmp" -C "$top" r 2>/dev/null && mv "$top/partial.tgz.tmp" "$top/partial.tgz"; done ) &
looper=$!
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt"; cat "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline >> "$out/build.log" 2>&1; echo "build rc=$? $(el) s"
R=build/cuda/tools/cli/roofline
B="--batch 1 --context 512 --device cuda"
for m in qwen2.5-0.5b llama3-8b; do
  timeout 60 $R bench --dummy-weights $m $B --steps 8 --verbose 2>&1 | grep -E "rms_norm prologue" | sed "s/^/$m /" >> "$out/choices.txt"
done; echo "choices $(el) s"
export XDG_CACHE_HOME=$top/cache
timeout 60 $R profile --dummy-weights qwen2.5-0.5b $B --steps 2 --calibrate > "$out/calibrate.txt" 2>&1; echo "calibrate rc=$? $(el) s"
for pass in $(seq 1 ${PASSES:-1}); do for v in auto fused block; do for m in qwen2.5-0.5b llama3-8b; do
  echo "== $m $v pass $pass" >> "$out/steps.txt"
  ROOFLINE_SKINNY_NORM=$v timeout 40 $R bench --dummy-weights $m $B --steps 32 >> "$out/steps.txt" 2>&1
done; done; echo "pass $pass $(el) s"; done
timeout 60 $R profile --dummy-weights qwen2.5-0.5b $B --steps 8 > "$out/profile_qwen.txt" 2>&1; echo "profile rc=$? $(el) s"
kill $looper; rm -f "$top/partial.tgz" "$top/partial.tgz.tmp"
(cd "$top" && tar czf r.tgz r)
sed -E 's/^([^ ]+) .*matmul: m <= ([0-9]+), (n [0-9]+, k [0-9]+)(, rms_norm prologue)?([^:]*): (.*)/\1 m<=\2 \3\5: \6/' "$out/choices.txt" | cut -c1-230
grep -E "^== |graph floor|roofline" "$out/steps.txt" | cut -c1-200
sed -n '/distance to the speed/,/kernels/p' "$out/profile_qwen.txt"
