#!/usr/bin/env bash
# session 52: the GEMM selection timed as chains of calls over cold copies of W (matmul_measure.h)
set -uo pipefail
top=$1; out=$top/r; mkdir -p "$out"
( while sleep 20; do tar czf "$top/partial.tgz.tmp" -C "$top" r 2>/dev/null && mv "$top/partial.tgz.tmp" "$top/partial.tgz"; done ) &
looper=$!
t0=$(date +%s); el() { echo $(( $(date +%s)-t0 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > "$out/gpu.txt"; cat "$out/gpu.txt"
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline matmul_cuda_test >> "$out/build.log" 2>&1; echo "build rc=$? $(el) s"
timeout 150 build/cuda/src/ops/matmul_cuda_test --gtest_brief=1 \
  --gtest_filter='MatmulCudaTest*:MatmulCudaNorm*:MatmulCudaGraph*:MatmulCudaSwiglu*:MatmulCudaRope*' > "$out/tests.log" 2>&1
echo "tests rc=$? $(el) s: $(grep -E 'PASSED|FAILED' "$out/tests.log" | tr '\n' ' ')"
R=build/cuda/tools/cli/roofline; B="--batch 1 --context 512 --device cuda"
for m in qwen2.5-0.5b llama3-8b; do
  timeout 60 $R bench --dummy-weights $m $B --steps 8 --verbose 2>&1 | grep -E "matmul: m <=" | sed "s/^/$m /" >> "$out/choices.txt"
done; echo "choices $(el) s"
cp $R "$top/roofline_new"
echo "== block ref 1" >> "$out/ref.txt"; ROOFLINE_SKINNY_NORM=block timeout 40 $R bench --dummy-weights qwen2.5-0.5b $B --steps 64 >> "$out/ref.txt" 2>&1
args="bench --dummy-weights qwen2.5-0.5b $B --steps 64;bench --dummy-weights llama3-8b $B --steps 32"
AB_PASSES=2 AB_ARGS="$args" timeout $((560 - $(el))) scripts/gpu/ab.sh .ab/main "$out/ab" > "$out/ab_table.txt" 2>&1; echo "ab rc=$? $(el) s"
echo "== block ref 2" >> "$out/ref.txt"; ROOFLINE_SKINNY_NORM=block timeout 30 "$top/roofline_new" bench --dummy-weights qwen2.5-0.5b $B --steps 64 >> "$out/ref.txt" 2>&1
rm -f "$top/roofline_new"
kill $looper; rm -f "$top/partial.tgz" "$top/partial.tgz.tmp"
(cd "$top" && tar czf r.tgz r)
grep -E "^== |graph floor" "$out/ab/ab.txt" | sed -E 's/ a step with.*//' | cut -c1-150
grep -E "^== |graph floor" "$out/ref.txt" | sed -E 's/ a step with.*//'
sed -E 's/^([^ ]+) .*matmul: m <= ([0-9]+), (n [0-9]+, k [0-9]+)([^:]*): skinny ([0-9.]+) us, skinny block copies ([0-9.]+) us, skinny after rms_norm ([0-9.]+) us, wide [0-9.]+ us, cuBLASLt ([0-9.]+) us.*; (a call.s share of a chain of [0-9]+|one call).* -> (.*)/\1 m<=\2 \3\4: sl \5 bl \6 ap \7 cu \8 [\9] -> \10/' "$out/choices.txt" | grep -E "m<=(1|8) " | cut -c1-200
