#!/usr/bin/env bash
# Session script (untracked): where the tile sampler's step time goes (roofline profile, CUPTI).
set -uo pipefail
out=${1:?usage: run8.sh OUT}
mkdir -p "$out"
start=$(date +%s)
el() { echo $(( $(date +%s) - start )); }
cmake --preset cuda -DROOFLINE_WERROR=OFF -DROOFLINE_DEPS_DIR="$PWD/.staged" > "$out/build.log" 2>&1
cmake --build build/cuda -j16 --target roofline >> "$out/build.log" 2>&1
echo "build rc=$? at $(el) s"
for model in qwen2.5-0.5b llama3-8b; do
  for rows in 0 8; do
    ROOFLINE_TILE_SAMPLER_ROWS=$rows timeout 120 build/cuda/tools/cli/roofline profile --dummy-weights $model \
      --device cuda --steps 8 --trace "$out/trace_${model}_$rows.json" > "$out/profile_${model}_$rows.txt" 2>&1
    echo "$model rows=$rows rc=$? at $(el) s"
  done
done
cd "$out" && tar czf traces.tgz trace_*.json && rm -f trace_*.json
