#!/usr/bin/env bash
# Session 64: the sampler's top-k pivot from the warps' sorted keys (kth_key_bound's warp path),
# A/B against HEAD 8bf3195 (.ab/old, made by scripts/gpu/ab_base.sh HEAD .ab/old),
# sampling_cuda_test on the new tree, the engine tests owed since session 63 (sampled_step_test,
# cuda_graph_test), then the new tree's phase traces. Outputs in /tmp/s, packed into DEST/s.tgz
# after every phase. The engine tests are skipped when less than 80 s of LIMIT (default 480)
# is left, the traces when less than 40 s is.
#   bash bench/results/2026-12-07-warp-pivot/run.sh DEST [LIMIT]
set -uo pipefail
dest=${1:?}; limit=${2:-480}; out=/tmp/s; mkdir -p "$dest" "$out"; t0=$(date +%s)
el() { echo $(( $(date +%s) - t0 )); }
pack() { tar czf /tmp/s.tgz -C "$out" . && mv /tmp/s.tgz "$dest/"; }
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader | tee "$out/gpu.txt"
AB_TARGET=sampling_cuda_bench AB_TEST=sampling_cuda_test AB_PASSES=2 AB_ARGS="1 bf16;64 bf16;256 bf16" \
  scripts/gpu/ab.sh .ab/old "$out/ab" > "$out/ab_table.txt" 2>&1
echo "ab rc=$? at $(el) s"; pack
if [ $(( limit - $(el) )) -ge 80 ]; then
  cmake --build build/cuda -j16 --target sampled_step_test cuda_graph_test > "$out/build2.log" 2>&1
  echo "build2 rc=$? at $(el) s"
  for n in sampled_step_test cuda_graph_test; do
    t=$(find build/cuda -name "$n" -type f -executable | head -n 1)
    timeout 120 "$t" > "$out/$n.txt" 2>&1; echo "$n rc=$? at $(el) s"; tail -3 "$out/$n.txt"
  done
  pack
else
  echo "engine tests skipped at $(el) s (LIMIT $limit)"
fi
if [ $(( limit - $(el) )) -ge 40 ]; then
  cmake --build build/cuda -j16 --target sampling_trace_bench >> "$out/build2.log" 2>&1
  for r in 1 64; do timeout 25 build/cuda/src/ops/sampling_trace_bench trace $r bf16 >> "$out/sampling_trace.txt" 2>&1; done
  echo "trace at $(el) s"; pack
fi
tail -n 30 "$out/ab_table.txt"
