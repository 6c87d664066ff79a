#!/usr/bin/env bash
# The device run for the overlapped decode loop (issue 8; ModelRunner::launch_step / collect_step):
# step N + 1 is launched, its tokens fed on the device from step N's sampling outputs, before step
# N's tokens are back on the host, so the step boundary (tokens back, inputs up, launch) overlaps
# the GPU's work. Builds; runs sampled_step_test (the overlapped loop against plain sampled steps,
# graphs and eager, padded buckets, a sequence released mid-flight), cuda_graph_test and
# profile_test (the profiler's join of a step's kernels to plan calls); then
# `roofline bench` of issue 8's four shapes, whose "decode step", "overlapped" and "graph floor"
# lines are the plain loop, the overlapped loop and the GPU's own floor, measured in one process;
# then the engine overlapped and in turn (EngineOptions::overlap_steps, --overlap): the same
# requests' outputs through `roofline generate`, and `roofline bench throughput`.
# Writes OUTDIR/overlap.tgz and prints a table last. Carry .staged:
#   scripts/gpu/overlap_check.sh OUTDIR [BASE_DIR]
# BASE_DIR (optional): a src/runtime/cuda_backend.cu to A/B the tree's against (scripts/gpu/ab.sh).
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
top=${1:?usage: scripts/gpu/overlap_check.sh OUTDIR [BASE_DIR]}
base=${2:-}
# shellcheck source=scripts/gpu/run_common.sh
. scripts/gpu/run_common.sh
out=$top/overlap
run_start "$out"
cmake --build build/cuda -j16 --target roofline sampled_step_test cuda_graph_test profile_test \
  >> "$out/build.log" 2>&1
note "build rc=$?"
run_test tests/runtime/sampled_step_test
run_test tests/runtime/cuda_graph_test
# The profiler joins its traces by the backend's call markers: a new event in the step must not
# break it (2026-12-06-profile-join.md).
run_test tests/engine/profile_test
for shape in "qwen2.5-0.5b 1 64" "qwen2.5-0.5b 32 32" "llama3-8b 1 32" "llama3-8b 64 32" \
  "qwen2.5-0.5b 1 64"; do
  read -r model batch steps <<< "$shape"
  [ "$(run_elapsed)" -gt 520 ] && break
  echo "== $model bs $batch" >> "$out/bench.txt"
  timeout 120 build/cuda/tools/cli/roofline bench --dummy-weights "$model" --batch "$batch" \
    --context 512 --device cuda --steps "$steps" >> "$out/bench.txt" 2>&1
done
note "bench done"
# The engine end to end: the same 160 requests (greedy, seeded top-k/top-p draws, a few with a
# repetition penalty, 1 to 96 tokens) through `roofline generate` overlapped and in turn; then
# `roofline bench throughput` both ways at 32 requests running and at 1.
python3 - "$out/reqs.jsonl" <<'PY'
import json, random, sys
random.seed(1)
with open(sys.argv[1], "w") as f:
    for i in range(160):
        r = {"prompt_ids": [random.randrange(3, 30000) for _ in range(random.randrange(4, 200))],
             "max_tokens": random.randrange(1, 97), "ignore_eos": True}
        if i % 4 == 1: r.update(temperature=0.8, top_p=0.9, top_k=50, seed=i)
        if i % 9 == 3: r.update(repetition_penalty=1.2)
        f.write(json.dumps(r) + "\n")
PY
gen="build/cuda/tools/cli/roofline generate --dummy-weights qwen2.5-0.5b --device cuda"
gen+=" --input $out/reqs.jsonl --max-num-seqs 32"
timeout 90 $gen --output "$out/gen_overlap.jsonl" --overlap > "$out/generate.txt" 2>&1
timeout 90 $gen --output "$out/gen_in_turn.jsonl" >> "$out/generate.txt" 2>&1
python3 - "$out/gen_overlap.jsonl" "$out/gen_in_turn.jsonl" <<'PY' | tee -a "$out/generate.txt"
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
same = sum(x["token_ids"] == y["token_ids"] and x["finish_reason"] == y["finish_reason"]
           for x, y in zip(a, b))
first = [next((i for i, (p, q) in enumerate(zip(x["token_ids"], y["token_ids"])) if p != q), None)
         for x, y in zip(a, b)]
print(f"generate: {same}/{len(b)} requests identical overlapped and in turn "
      f"({len(a)} results); first divergences at tokens {[f for f in first if f is not None][:12]}")
PY
for seqs in 32 1; do
  for mode in --overlap ""; do
    n=256; lens=64:256
    [ "$seqs" = 1 ] && n=8 && lens=256:256
    echo "== throughput max-num-seqs $seqs ${mode:-in turn}" >> "$out/throughput.txt"
    [ "$(run_elapsed)" -gt 560 ] && break
    timeout 60 build/cuda/tools/cli/roofline bench throughput --dummy-weights qwen2.5-0.5b \
      --device cuda --requests $n --prompt-len 32:128 --output-len $lens --max-num-seqs $seqs \
      $mode 2>/dev/null >> "$out/throughput.txt"
    echo "rc=$?" >> "$out/throughput.txt"
  done
done
note "engine done"
# With BASE_DIR: BASE_DIR's src/runtime/cuda_backend.cu against the tree's, alternated (plain and
# overlapped steps, qwen2.5-0.5b bs 1 and 32).
if [ -n "$base" ] && [ "$(run_elapsed)" -lt 420 ]; then
  AB_PASSES=2 AB_ARGS="bench --dummy-weights qwen2.5-0.5b --batch 1 --context 512 --device cuda --steps 64;bench --dummy-weights qwen2.5-0.5b --batch 32 --context 512 --device cuda --steps 32" \
    timeout $((580 - $(run_elapsed))) scripts/gpu/ab.sh "$base" "$out/ab" > "$out/ab_table.txt" 2>&1
  note "uploads A/B rc=$?"
fi
grep -E "^== |decode step|overlapped|graph floor" "$out/bench.txt" |
  sed -E 's/ -> .*tok\/s / /; s/ a step with its CUDA graph.*costs/: boundary/' | cut -c1-160
grep -E "^generate:" "$out/generate.txt"
grep -E "^== |tok/s|inter-token|rc=" "$out/throughput.txt" | cut -c1-200
[ -f "$out/ab/ab.txt" ] && grep -E "^== |decode step|overlapped|graph floor" "$out/ab/ab.txt" |
  sed -E 's/ -> .*tok\/s / /; s/ a step with its CUDA graph.*costs/: boundary/' | cut -c1-120
cat "$out/summary.txt"
(cd "$top" && tar czf overlap.tgz overlap && rm -rf overlap)
