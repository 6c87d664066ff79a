#!/usr/bin/env bash
# session 52: the four open issues' figures at HEAD in one call (issues 6, 8, 12, 13)
set -uo pipefail
top=$1; out=$top/r; mkdir -p "$out"
( while sleep 20; do tar czf "$top/partial.tgz.tmp" -C "$top" r 2>/dev/null && mv "$top/partial.tgz.tmp" "$top/partial.tgz"; done ) &
looper=$!
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt"; cat "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline attention_cuda_bench matmul_cuda_bench sampling_cuda_bench >> "$out/build.log" 2>&1
echo "build rc=$? $(el) s"
R=build/cuda/tools/cli/roofline; O=build/cuda/src/ops
export XDG_CACHE_HOME=$top/cache
timeout 60 $R profile --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 2 --calibrate > "$out/calibrate.txt" 2>&1; echo "calibrate rc=$? $(el) s"
B="--context 512 --device cuda"
for pass in 1 2; do
  for v in auto fused block; do
    echo "== qwen2.5-0.5b bs1 $v pass $pass" >> "$out/steps.txt"
    ROOFLINE_SKINNY_NORM=$v timeout 40 $R bench --dummy-weights qwen2.5-0.5b --batch 1 $B --steps 32 >> "$out/steps.txt" 2>&1
  done
  echo "== llama3-8b bs1 auto pass $pass" >> "$out/steps.txt"
  timeout 50 $R bench --dummy-weights llama3-8b --batch 1 $B --steps 32 >> "$out/steps.txt" 2>&1
done; echo "steps $(el) s"
timeout 40 $R bench --dummy-weights qwen2.5-0.5b --batch 1 $B --steps 8 --verbose 2>&1 | grep -E "matmul: m <= 1," > "$out/choices.txt"; echo "choices $(el) s"
timeout 100 $O/attention_cuda_bench > "$out/attention.txt" 2>&1; echo "attention rc=$? $(el) s"
for r in 1 64 256; do timeout 30 $O/sampling_cuda_bench $r bf16 >> "$out/sampling.txt" 2>&1; done; echo "sampling $(el) s"
timeout 150 $O/matmul_cuda_bench decode > "$out/matmul_decode.txt" 2>&1; echo "matmul rc=$? $(el) s"
kill $looper; rm -f "$top/partial.tgz" "$top/partial.tgz.tmp"
(cd "$top" && tar czf r.tgz r)
grep -E "^== |graph floor|roofline " "$out/steps.txt" | cut -c1-200
cut -c1-200 "$out/choices.txt"
grep -E "B=1 |L=4096" "$out/attention.txt" | head -12
grep -iE "rows|µs|us" "$out/sampling.txt" | head -20
grep -E "o |down|q\|k\|v|gate_up" "$out/matmul_decode.txt" | grep -E "m=(1|2|4|8) " | grep -E "selected" | head -40
