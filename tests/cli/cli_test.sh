#!/usr/bin/env bash
# The command line as a user types it: the happy paths produce output, and every bad input exits
# non-zero with a message that says what to fix (never a crash: exit codes >= 128 fail the test).
set -u
bin="$1"
model=tests/fixtures/models/llama_mha
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0
passes=0

# expect NAME WANT_EXIT PATTERN -- ARGS...
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  local out rc
  out=$("$bin" "$@" 2>&1)
  rc=$?
  if [ "$rc" -ne "$want" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: exit $rc (want $want), output:"
    echo "$out" | head -20
    failures=$((failures + 1))
  else
    passes=$((passes + 1))
  fi
}

golden=$(python3 -c "import json;print(' '.join(map(str,json.load(open('$model/golden.json'))['generated_ids'][:8])))" 2>/dev/null)
expect generate_greedy 0 "^${golden}" -- generate --model $model --prompt-ids 1,17,250,3,99,42,7,300,128,5,64 --max-tokens 8 --ignore-eos
expect generate_reports_speed 0 "tok/s" -- generate --model $model --prompt-ids 1,2 --max-tokens 4
expect logits_writes 0 "wrote 15 x 512 logits" -- logits --model $model --prompt-ids 1,2,3,4,5 --decode-steps 10 --out "$tmp/l.npy"
size=$(stat -c %s "$tmp/l.npy" 2>/dev/null || echo 0)
if [ "$size" -ne $((128 + 15 * 512 * 4)) ]; then echo "FAIL logits file size $size"; failures=$((failures + 1)); fi
expect info 0 "LlamaForCausalLM" -- info --model $model --dump-plan
expect bad_ids 1 "not one" -- generate --model $model --prompt-ids 1,x,3
expect empty_ids 1 "is empty" -- generate --model $model --prompt-ids ""
expect id_out_of_vocab 1 "out of range for this model's vocabulary" -- generate --model $model --prompt-ids 1,999
expect negative_tokens 1 "must not be negative" -- generate --model $model --prompt-ids 1 --max-tokens -1
expect bad_top_p 1 "top-p" -- generate --model $model --prompt-ids 1 --temperature 1 --top-p 2
expect no_model 1 "does not exist" -- generate --model /nonexistent --prompt-ids 1
expect bad_block 1 "kv-block-size" -- generate --model $model --prompt-ids 1 --kv-block-size 0
expect unknown_flag 2 "--frobnicate" -- generate --model $model --prompt-ids 1 --frobnicate
expect no_subcommand 2 "subcommand" --
expect bad_out_dir 1 "cannot write" -- logits --model $model --prompt-ids 1 --out /nonexistent/dir/x.npy

# Text in, text out with the default model (when scripts/setup.sh installed it).
if [ -f .models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  expect run_default 0 "Paris" -- run "What is the capital of France?" --max-tokens 12
  expect run_raw 0 "tok/s" -- run "Once upon a time" --raw --max-tokens 8
  out=$(printf 'What is 2+2?\n/exit\n' | "$bin" chat --max-tokens 12 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! grep -q "4" <<<"$out"; then echo "FAIL chat: $out"; failures=$((failures + 1)); else passes=$((passes + 1)); fi
else
  echo "skip: default model not installed (scripts/setup.sh)"
fi
expect run_no_tokenizer 1 "no tokenizer" -- run "hello" --model $model
expect run_dummy_no_tokenizer 1 "dummy weights" -- run "hello" --dummy-weights llama-tiny
expect dummy_generate 0 "tok/s" -- generate --dummy-weights llama-tiny --prompt-ids 1,2,3 --max-tokens 4
expect dummy_unknown 1 "known: llama3-8b" -- generate --dummy-weights gpt5 --prompt-ids 1
expect both_sources 1 "exactly one" -- generate --dummy-weights llama-tiny --model $model --prompt-ids 1
expect bad_device 1 "--device must be" -- generate --model $model --prompt-ids 1 --device tpu
expect cuda_device 1 "cuda" -- generate --model $model --prompt-ids 1 --device cuda:99
expect bench_cpu 0 "decode step" -- bench --dummy-weights llama-tiny --batch 2 --context 16 --steps 4 --breakdown

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
