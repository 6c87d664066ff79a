#!/usr/bin/env bash
# session 56: the profiler's learning step with the backend's own events (the join fix), and the profiles of qwen bs 32 / llama bs 64
set -uo pipefail
top=$1; out=$top/f; mkdir -p "$out"
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt"; cat "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline profile_test >> "$out/build.log" 2>&1; echo "build rc=$? $(el) s"
timeout 90 build/cuda/tests/engine/profile_test > "$out/profile_test.txt" 2>&1; echo "profile_test rc=$? $(el) s"
grep -E "OK|FAILED|PASSED|SKIPPED" "$out/profile_test.txt" | head
R=build/cuda/tools/cli/roofline
for s in "qwen2.5-0.5b 32" "llama3-8b 64" "qwen2.5-0.5b 1"; do
  read -r m b <<< "$s"
  [ "$(el)" -gt 250 ] && break
  timeout 60 $R profile --dummy-weights $m --batch $b --context 512 --device cuda --steps 4 > "$out/profile_${m}_$b.txt" 2>&1; echo "profile $m $b rc=$? $(el) s"
done
(cd "$top" && tar czf f.tgz f)
for f in "$out"/profile_*.txt; do echo "=== $f"; sed -n '/top kernels/,/kernels [0-9.]* a step/p' "$f" | cut -c1-130; tail -1 "$f" | cut -c1-200; done
