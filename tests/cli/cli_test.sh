#!/usr/bin/env bash
# The command line as a user types it: the happy paths produce output, and every bad input exits
# non-zero with a message that says what to fix (never a crash: exit codes >= 128 fail the test).
set -u
bin="$1"
model=tests/fixtures/models/llama_mha
# shellcheck source=tests/expect.sh
source "$(dirname "${BASH_SOURCE[0]}")/../expect.sh"

# expect NAME WANT_EXIT PATTERN -- ARGS...: the CLI run with ARGS.
expect() {
  local name=$1 want=$2 pattern=$3
  shift 4
  expect_run "$name" "$want" "$pattern" -- "$bin" "$@"
}

golden=$(python3 -c "import json;print(' '.join(map(str,json.load(open('$model/golden.json'))['generated_ids'][:8])))" 2>/dev/null)
expect generate_greedy 0 "^${golden}" -- generate --model $model --prompt-ids 1,17,250,3,99,42,7,300,128,5,64 --max-tokens 8 --ignore-eos
expect generate_reports_speed 0 "tok/s" -- generate --model $model --prompt-ids 1,2 --max-tokens 4
expect logits_writes 0 "wrote 15 x 512 logits" -- logits --model $model --prompt-ids 1,2,3,4,5 --decode-steps 10 --out "$tmp/l.npy"
size=$(stat -c %s "$tmp/l.npy" 2>/dev/null || echo 0)
if [ "$size" -ne $((128 + 15 * 512 * 4)) ]; then echo "FAIL logits file size $size"; failures=$((failures + 1)); fi
expect info 0 "LlamaForCausalLM" -- info --model $model --dump-plan
expect bad_ids 2 "not one" -- generate --model $model --prompt-ids 1,x,3
expect empty_ids 2 "is empty" -- generate --model $model --prompt-ids ""
expect id_out_of_vocab 1 "out of range for this model's vocabulary" -- generate --model $model --prompt-ids 1,999
expect negative_tokens 2 "must not be negative" -- generate --model $model --prompt-ids 1 --max-tokens -1
expect bad_top_p 2 "top-p" -- generate --model $model --prompt-ids 1 --temperature 1 --top-p 2
expect no_model 1 "does not exist" -- generate --model /nonexistent --prompt-ids 1
expect bad_block 2 "kv-block-size" -- generate --model $model --prompt-ids 1 --kv-block-size 0
expect unknown_flag 2 "--frobnicate" -- generate --model $model --prompt-ids 1 --frobnicate
expect no_subcommand 2 "subcommand" --
expect bad_out_dir 1 "cannot write" -- logits --model $model --prompt-ids 1 --out /nonexistent/dir/x.npy

# Text in, text out with the default model (when scripts/setup.sh installed it).
if [ -f .models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  expect run_default 0 "Paris" -- run "What is the capital of France?" --max-tokens 12
  expect run_raw 0 "tok/s" -- run "Once upon a time" --raw --max-tokens 8
  out=$(printf 'What is 2+2?\n/exit\n' | "$bin" chat --max-tokens 12 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! grep -q "4" <<<"$out"; then echo "FAIL chat: $out"; failures=$((failures + 1)); else passes=$((passes + 1)); fi
  # A message past the model length is dropped with a note; the session goes on.
  long=$(printf 'tell me about the history of the roman empire %.0s' $(seq 20))
  out=$(printf '%s\nWhat is 2+2?\n/exit\n' "$long" | "$bin" chat --max-model-len 96 --max-tokens 12 2>&1); rc=$?
  if [ $rc -ne 0 ] || ! grep -q "That message was dropped" <<<"$out" || ! grep -q "4" <<<"$out"; then
    echo "FAIL chat_past_model_length: $out"; failures=$((failures + 1))
  else passes=$((passes + 1)); fi
else
  echo "skip: default model not installed (scripts/setup.sh)"
fi
expect version 0 "^roofline [0-9]+\\.[0-9]+\\.[0-9]+ \\((CPU|CUDA) build" -- --version
expect unknown_command 2 "unknown command 'frobnicate'; the commands are: generate, logits, run" -- frobnicate
expect run_no_tokenizer 1 "no tokenizer" -- run "hello" --model $model
expect run_dummy_no_tokenizer 1 "dummy weights.*roofline generate --prompt-ids" -- run "hello" --dummy-weights llama-tiny
# Without a tokenizer --raw cannot help, so the error must not suggest it; chat fails before its
# first prompt, not after the user's first message.
out=$("$bin" run "hello" --dummy-weights llama-tiny 2>&1)
if grep -q -- "--raw" <<<"$out"; then echo "FAIL run_no_tokenizer_no_raw: $out"; failures=$((failures + 1)); else passes=$((passes + 1)); fi
out=$(printf 'hi\n/exit\n' | "$bin" chat --dummy-weights llama-tiny 2>&1); rc=$?
if [ $rc -ne 1 ] || ! grep -q "no tokenizer" <<<"$out" || grep -q "Type a message" <<<"$out"; then
  echo "FAIL chat_no_tokenizer: exit $rc: $out"; failures=$((failures + 1))
else passes=$((passes + 1)); fi
expect dummy_generate 0 "tok/s" -- generate --dummy-weights llama-tiny --prompt-ids 1,2,3 --max-tokens 4
# The model length (llama-tiny: 256) bounds prompt + generated tokens: generation stops there and
# says so; a prompt that fills it is an error.
ids250=$(seq -s, 1 250)
ids256=$(seq -s, 1 256)
expect model_length_stop 0 "6 tokens generated.*stopped at the model length of 256" -- generate --dummy-weights llama-tiny --prompt-ids "$ids250" --max-tokens 10 --ignore-eos
expect logits_past_model_length 1 "the prompt \\(2 tokens\\) \\+ --decode-steps \\(255\\) exceed the model length of 256" -- logits --dummy-weights llama-tiny --prompt-ids 1,2 --decode-steps 255 --out "$tmp/l.npy"
expect logits_at_model_length 0 "wrote 256 x 512 logits" -- logits --dummy-weights llama-tiny --prompt-ids 1,2 --decode-steps 254 --out "$tmp/l.npy"
expect model_length_full 1 "leaves no room to generate within the model length of 256" -- generate --dummy-weights llama-tiny --prompt-ids "$ids256" --max-tokens 1
expect dummy_unknown 2 "known: llama3-8b" -- generate --dummy-weights gpt5 --prompt-ids 1
expect both_sources 2 "exactly one" -- generate --dummy-weights llama-tiny --model $model --prompt-ids 1
expect bad_device 2 "--device must be" -- generate --model $model --prompt-ids 1 --device tpu
# Profile exports: pictures and JSON.
expect profile_svg 0 "pictures:" -- profile --dummy-weights llama-tiny --context 8 --steps 2 --svg "$tmp/prof" --bandwidth-gbps 20 --peak-tflops 0.2
for f in "$tmp/prof.roofline.svg" "$tmp/prof.timeline.svg"; do
  if ! grep -q "</svg>" "$f" 2>/dev/null; then echo "FAIL profile picture $f"; failures=$((failures + 1)); fi
done
expect profile_json 0 "\"speed_of_light_fraction\"" -- profile --dummy-weights llama-tiny --context 8 --steps 2 --json -
expect profile_json_capture 0 "\"method\": \"host clock\"" -- profile --dummy-weights llama-tiny --context 8 --steps 2 --json -
expect profile_bad_svg 1 "cannot write the roofline chart" -- profile --dummy-weights llama-tiny --context 8 --steps 1 --svg /nonexistent/dir/p
expect serve_empty_api_key 2 "--api-key is empty" -- serve --dummy-weights llama-tiny --port 0 --api-key ""
expect serve_api_key_space 2 "--api-key may hold only visible ASCII" -- serve --dummy-weights llama-tiny --port 0 --api-key "my key"
expect serve_negative_grace 2 "--shutdown-grace must be in \\[0, 3600\\] seconds" -- serve --dummy-weights llama-tiny --port 0 --shutdown-grace -5
expect bench_context_too_long 2 "--context 99999999 leaves no room for the [0-9]+ decode steps within 16777216 tokens" -- bench --dummy-weights llama-tiny --context 99999999
expect bench_latency 0 "decode t/s" -- bench latency --dummy-weights llama-tiny --batch 1,3 --context 16 --steps 2
expect bench_latency_json 0 "\"prefill_mfu\"" -- bench latency --dummy-weights llama-tiny --batch 2 --context 8 --steps 1 --json -
# No CUDA graph on the CPU: no graph kernels to count.
expect bench_latency_json_kernels 0 "\"decode_graph_kernels\": 0" -- bench latency --dummy-weights llama-tiny --batch 1 --context 8 --steps 1 --json -
# The CPU prices no handover of its own: the JSON's is the H200's, not calibrated.
expect bench_latency_json_handover 0 "\"handover_calibrated\": false" -- bench latency --dummy-weights llama-tiny --batch 1 --context 8 --steps 1 --json -
expect bench_latency_bad 2 "comma-separated sizes" -- bench latency --dummy-weights llama-tiny --batch 1,x
expect bench_latency_empty_size 2 "'' in '1,,2' is not one" -- bench latency --dummy-weights llama-tiny --batch 1,,2
# A bad size at the end of the list stops the command before the first size is measured.
expect bench_latency_bad_late 2 "'0' in '1,0' is not one" -- bench latency --dummy-weights llama-tiny --batch 1,0 --context 8 --steps 1
expect_run bench_latency_bad_late_measures_nothing 1 "^0$" -- bash -c \
  '"$1" bench latency --dummy-weights llama-tiny --batch 1,0 --context 8 --steps 1 2>&1 | grep -c "of 2"' _ "$bin"
# Integer flags are decimal whole numbers within 64 bits, of the option's sign: CLI11 alone would
# saturate the first, wrap the second to 2^64 - 1, take 0x10 as 16 and 010 as octal 8.
expect int_flag_overflow 2 "--max-tokens: must fit in 64 bits, got '99999999999999999999'" -- generate --dummy-weights llama-tiny --prompt-ids 1 --max-tokens 99999999999999999999
expect int_flag_narrow 2 "^roofline: --top-k: 99999999999 is out of range for this flag$" -- generate --dummy-weights llama-tiny --prompt-ids 1 --top-k 99999999999
expect int_flag_narrow_negative 2 "^roofline: --port: -99999999999 is out of range for this flag$" -- serve --dummy-weights llama-tiny --port -99999999999
expect float_flag_not_number 2 "Could not convert: --top-p = abc" -- generate --dummy-weights llama-tiny --prompt-ids 1 --top-p abc
expect unsigned_flag_negative 2 "--seed: must not be negative, got '-1'" -- generate --dummy-weights llama-tiny --prompt-ids 1 --seed -1
expect int_flag_hex 2 "--max-tokens: must be a whole number in decimal digits, got '0x10'" -- generate --dummy-weights llama-tiny --prompt-ids 1 --max-tokens 0x10
expect int_flag_leading_zero 0 "10 tokens generated" -- generate --dummy-weights llama-tiny --prompt-ids 1 --max-tokens 010 --ignore-eos
expect int_flag_subcommand 2 "--requests: must be a whole number in decimal digits, got '1.5'" -- bench throughput --dummy-weights llama-tiny --requests 1.5
expect unsigned_flag_max 0 "3 tokens generated" -- generate --dummy-weights llama-tiny --prompt-ids 1 --max-tokens 3 --temperature 1 --seed 18446744073709551615
# Benchmarks: throughput (synthetic requests, percentiles, JSON) and cold start (phases).
expect bench_throughput 0 "time to first token +p50" -- bench throughput --dummy-weights llama-tiny --requests 20 --prompt-len 4:40 --output-len 2:16 --max-num-seqs 8
expect bench_throughput_json 0 "\"output_tokens_per_s\"" -- bench throughput --dummy-weights llama-tiny --requests 5 --prompt-len 4:8 --output-len 2:4 --json -
expect bench_throughput_range 2 "must be LO:HI" -- bench throughput --dummy-weights llama-tiny --prompt-len 9:3
expect bench_throughput_too_long 1 "exceed the model length" -- bench throughput --dummy-weights llama-tiny --prompt-len 200:250 --output-len 100:100
# --input: the requests of a JSONL file (generate --input's format), with their own sampling fields.
printf '{"prompt_ids": [1, 2, 3], "max_tokens": 4, "ignore_eos": true}\n\n{"prompt_ids": [5, 6], "max_tokens": 3, "temperature": 0.7, "seed": 1, "ignore_eos": true}\n' > "$tmp/requests.jsonl"
expect bench_throughput_input 0 "\"output_tokens\": 7" -- bench throughput --dummy-weights llama-tiny --input "$tmp/requests.jsonl" --json -
printf '{"prompt_ids": [1, 2]}\n{"prompt_ids": [1, 999999]}\n' > "$tmp/bad_requests.jsonl"
expect bench_throughput_input_bad_token 1 "bad_requests.jsonl line 2: token id 999999 is out of range" -- bench throughput --dummy-weights llama-tiny --input "$tmp/bad_requests.jsonl"
expect bench_throughput_input_missing 1 "cannot read" -- bench throughput --dummy-weights llama-tiny --input "$tmp/none.jsonl"
expect bench_coldstart 0 "time to first token" -- bench coldstart --dummy-weights llama-tiny --markdown "$tmp/cold.md"
if ! grep -q "bench coldstart" "$tmp/cold.md" 2>/dev/null; then echo "FAIL coldstart markdown"; failures=$((failures + 1)); fi
# The KV cache's size: in tokens, bytes or a share of free memory; at most one; clear errors.
expect kv_memory 0 "tok/s" -- generate --dummy-weights llama-tiny --prompt-ids 1,2,3 --max-tokens 3 --kv-memory 1MiB
expect kv_memory_fraction 0 "tok/s" -- generate --dummy-weights llama-tiny --prompt-ids 1,2,3 --max-tokens 3 --kv-memory-fraction 0.01
expect kv_memory_bad_unit 2 "not a byte size.*8GiB" -- generate --dummy-weights llama-tiny --prompt-ids 1 --kv-memory 8XB
expect kv_memory_two_ways 2 "at most one of" -- generate --dummy-weights llama-tiny --prompt-ids 1 --kv-memory 1MiB --kv-cache-tokens 64
expect kv_memory_too_small 1 "less than one KV block" -- generate --dummy-weights llama-tiny --prompt-ids 1 --kv-memory 100
expect kv_memory_too_big 1 "are free on cpu" -- generate --dummy-weights llama-tiny --prompt-ids 1 --kv-memory 100TiB
expect kv_fraction_range 2 "kv-memory-fraction must be in" -- generate --dummy-weights llama-tiny --prompt-ids 1 --kv-memory-fraction 1.5
expect cuda_device 1 "cuda" -- generate --model $model --prompt-ids 1 --device cuda:99
# Batch mode: a JSONL file in, a JSONL file out in input order.
printf '{"prompt_ids": [1,17,250,3,99,42,7,300,128,5,64], "max_tokens": 8, "ignore_eos": true}\n\n{"prompt_ids": [1,2,3], "max_tokens": 3, "temperature": 0.7, "seed": 5}\n' > "$tmp/in.jsonl"
expect batch_good 0 "output tokens/s; prefix cache hit rate" -- generate --model $model --input "$tmp/in.jsonl" --output "$tmp/out.jsonl" --max-step-tokens 16
want_ids=$(tr ' ' ',' <<<"$golden")
if ! head -1 "$tmp/out.jsonl" | grep -q "\"index\":0" || ! head -1 "$tmp/out.jsonl" | grep -q "\"token_ids\":\[${want_ids}\]" ||
   ! sed -n 2p "$tmp/out.jsonl" | grep -q '"completion_tokens":3,"finish_reason":"length","index":1'; then
  echo "FAIL batch_good output:"; cat "$tmp/out.jsonl"; failures=$((failures + 1))
else
  passes=$((passes + 1))
fi
printf '{"prompt_ids": [1]}\n{"prompt_ids": [1], "top_p": 3}\n{oops\n' > "$tmp/bad.jsonl"
expect batch_bad_param 1 "bad.jsonl line 2: sampling param 'top_p'" -- generate --model $model --input "$tmp/bad.jsonl" --output "$tmp/o.jsonl"
printf '{"prompt_ids": [1]}\n{oops\n' > "$tmp/bad2.jsonl"
expect batch_bad_json 1 "bad2.jsonl line 2: not valid JSON" -- generate --model $model --input "$tmp/bad2.jsonl" --output "$tmp/o.jsonl"
printf '{"prompt_ids": [1], "temprature": 1}\n' > "$tmp/bad3.jsonl"
expect batch_unknown_field 1 "line 1: unknown field 'temprature'" -- generate --model $model --input "$tmp/bad3.jsonl" --output "$tmp/o.jsonl"
expect batch_missing_file 1 "cannot read" -- generate --model $model --input "$tmp/nope.jsonl" --output "$tmp/o.jsonl"
expect batch_needs_output 2 "needs --output" -- generate --model $model --input "$tmp/in.jsonl"
# A bad sampling flag is the flag's fault, not the first request's.
expect batch_bad_flag 2 "the sampling flags \\(every request's defaults\\): sampling param 'min_p' must be in \\[0, 1\\], got nan" -- generate --model $model --input "$tmp/in.jsonl" --output "$tmp/o.jsonl" --min-p nan
# One prompt cannot apply the batch-only flags: refused, not ignored.
expect batch_only_flag 2 "--repetition-penalty requires --input" -- generate --model $model --prompt-ids 1 --repetition-penalty 1.2
expect top_p_nan 2 "--top-p must be in \\(0, 1\\]" -- generate --model $model --prompt-ids 1 --temperature 1 --top-p nan
expect batch_output_is_input 2 "is the --input file" -- generate --model $model --input "$tmp/in.jsonl" --output "$tmp/in.jsonl"
if ! grep -q '"prompt_ids"' "$tmp/in.jsonl"; then echo "FAIL batch_output_is_input: the input was overwritten"; failures=$((failures + 1)); fi
expect batch_output_is_dir 1 "is a directory" -- generate --model $model --input "$tmp/in.jsonl" --output "$tmp"
# A run whose line fails the model's checks keeps an earlier output file and leaves no partial one.
echo keep > "$tmp/kept.jsonl"
expect batch_bad_keeps_output 1 "bad.jsonl line 2" -- generate --model $model --input "$tmp/bad.jsonl" --output "$tmp/kept.jsonl"
if [ "$(cat "$tmp/kept.jsonl")" != keep ] || [ -e "$tmp/kept.jsonl.partial" ]; then echo "FAIL batch_bad_keeps_output"; failures=$((failures + 1)); fi
expect generate_needs_prompt 2 "prompt-ids" -- generate --model $model
printf '{"prompt_ids": [1,2,3], "max_tokens": 300}\n{"prompt_ids": [4,5], "max_tokens": 2}\n' > "$tmp/big.jsonl"
expect batch_request_error 1 "1 of 2 requests failed" -- generate --model $model --input "$tmp/big.jsonl" --output "$tmp/o.jsonl"
if ! grep -q '"error":"the prompt (3 tokens) + max_tokens (300)' "$tmp/o.jsonl"; then echo "FAIL batch_request_error output"; failures=$((failures + 1)); else passes=$((passes + 1)); fi
printf '{"prompt": "the quick brown fox", "max_tokens": 6, "stop": ["zzz"]}\n' > "$tmp/text.jsonl"
expect batch_text 0 "1/1 requests" -- generate --model tests/fixtures/gguf/llama_mha.f32.gguf --input "$tmp/text.jsonl" --output "$tmp/text_out.jsonl"
if ! grep -q '"text":' "$tmp/text_out.jsonl"; then echo "FAIL batch_text output: $(cat "$tmp/text_out.jsonl")"; failures=$((failures + 1)); else passes=$((passes + 1)); fi
printf '{"messages": [{"role": "user"}]}\n' > "$tmp/bad4.jsonl"
expect batch_bad_messages 1 "line 1: each message must be" -- generate --model $model --input "$tmp/bad4.jsonl" --output "$tmp/o.jsonl"
if [ -f .models/SmolLM2-135M-Instruct.Q4_1.gguf ]; then
  printf '{"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 12}\n{"messages": [{"role": "user", "content": "What is the capital of France?"}], "max_tokens": 12}\n' > "$tmp/chat.jsonl"
  expect batch_chat 0 "prefix cache hit rate" -- generate --input "$tmp/chat.jsonl" --output "$tmp/chat_out.jsonl"
  if [ "$(grep -c 'Paris' "$tmp/chat_out.jsonl")" -ne 2 ]; then echo "FAIL batch_chat output: $(cat "$tmp/chat_out.jsonl")"; failures=$((failures + 1)); else passes=$((passes + 1)); fi
fi
expect profile_cpu 0 "of the speed of light" -- profile --dummy-weights llama-tiny --batch 2 --context 16 --steps 3 --trace "$tmp/trace.json" --bandwidth-gbps 10 --peak-tflops 0.1
if ! python3 -c "import json,sys; d=json.load(open(sys.argv[1])); assert len(d['traceEvents']) > 0" "$tmp/trace.json"; then echo "FAIL profile trace json"; failures=$((failures + 1)); else passes=$((passes + 1)); fi
expect profile_bad_batch 2 "batch \\(--batch\\) must be in \\[1, 4096\\]" -- profile --dummy-weights llama-tiny --batch 0
expect bench_bad_batch 2 "batch \\(--batch\\) must be in \\[1, 4096\\]" -- bench --dummy-weights llama-tiny --batch 4097
expect profile_bad_steps 2 "--steps must be in" -- profile --dummy-weights llama-tiny --steps 0
expect profile_nan_bandwidth 2 "--bandwidth-gbps must be finite and not negative \\(0: none\\), got nan" -- profile --dummy-weights llama-tiny --steps 1 --bandwidth-gbps nan
expect profile_bad_budget 2 "--overhead-budget must be in \[0, 100\]" -- profile --dummy-weights llama-tiny --steps 1 --overhead-budget 101
expect profile_bad_trace 1 "cannot write the trace" -- profile --dummy-weights llama-tiny --steps 1 --context 4 --trace /nonexistent/dir/t.json
# --calibrate measures this machine and caches it, the next profile uses the cache, a corrupt cache
# is an error that names the file.
export XDG_CACHE_HOME="$tmp/cache"
expect profile_default_ceilings 0 "H200 measured defaults" -- profile --dummy-weights llama-tiny --steps 1 --context 4
expect profile_calibrate 0 "calibrated now on cpu" -- profile --dummy-weights llama-tiny --steps 1 --context 4 --calibrate
expect profile_cached_ceilings 0 "calibrated .* on cpu .*ceilings.json" -- profile --dummy-weights llama-tiny --steps 1 --context 4
echo "not json" > "$tmp/cache/roofline/ceilings.json"
expect profile_corrupt_ceilings 1 "ceilings.json' is not a JSON object; delete it" -- profile --dummy-weights llama-tiny --steps 1 --context 4
unset XDG_CACHE_HOME
expect bench_cpu 0 "decode step .*sampled by the CPU twin" -- bench --dummy-weights llama-tiny --batch 2 --context 16 --steps 4 --breakdown
# The CPU has no CUDA graph: no graph floor, no kernels line.
if "$bin" bench --dummy-weights llama-tiny --batch 1 --context 8 --steps 2 2>&1 | grep -qE "^(graph floor|kernels) "; then echo "FAIL bench_cpu_no_graph_lines"; failures=$((failures + 1)); else passes=$((passes + 1)); fi
# The step's bytes are counted at the context the timed steps straddle: 16 prompt tokens, 3
# warm-up steps, then 4 timed steps attending 20..23 keys, counted after the first 2 (21).
expect bench_cpu_mid_context 0 "^step bytes .* at context 21 \(the timed steps' middle\)" -- bench --dummy-weights llama-tiny --batch 2 --context 16 --steps 4
expect bench_cpu_mid_context_one 0 "^step bytes .* at context 20 \(" -- bench --dummy-weights llama-tiny --batch 1 --context 16 --steps 1
expect bench_cpu_logits 0 "with logits +median" -- bench --dummy-weights llama-tiny --batch 1 --context 8 --steps 2
expect bench_bad_steps 2 "--steps must be in \\[1, 30000\\]" -- bench --dummy-weights llama-tiny --steps 30001

# A flag's value out of its range is a bad command line (exit 2), refused before anything loads:
# with a model path that does not exist, the flag is what the message names.
nomodel=(--model /nonexistent)
expect early_temperature 2 "--temperature must be finite and not negative" -- generate "${nomodel[@]}" --prompt-ids 1 --temperature -1
expect early_decode_steps 2 "--decode-steps must not be negative" -- logits "${nomodel[@]}" --prompt-ids 1 --decode-steps -1 --out "$tmp/e.npy"
expect early_run_top_p 2 "--top-p must be in \\(0, 1\\]" -- run "${nomodel[@]}" --top-p 0 hello
expect early_chat_top_k 2 "--top-k must not be negative" -- chat "${nomodel[@]}" --top-k -3
expect early_threads 2 "--threads must be in \\[0, 1024\\], got 5000" -- generate "${nomodel[@]}" --prompt-ids 1 --threads 5000
expect early_model_len 2 "--max-model-len must be in \\[0, 16777216\\]" -- generate "${nomodel[@]}" --prompt-ids 1 --max-model-len 99999999
expect early_device 2 "--device must be 'cpu', 'cuda' or 'cuda:N', got 'cuda:x'" -- generate "${nomodel[@]}" --prompt-ids 1 --device cuda:x
expect early_port 2 "--port must be in \\[0, 65535\\], got 70000" -- serve "${nomodel[@]}" --port 70000
expect early_grace 2 "--shutdown-grace must be in \\[0, 3600\\] seconds, got -5$" -- serve "${nomodel[@]}" --shutdown-grace -5
expect early_bench_batch 2 "batch \\(--batch\\) must be in" -- bench "${nomodel[@]}" --batch 0
expect early_latency_context 2 "context \\(--context\\) must be positive" -- bench latency "${nomodel[@]}" --batch 1,2 --context 0
expect early_profile_budget 2 "--overhead-budget must be in" -- profile "${nomodel[@]}" --overhead-budget nan
expect early_tput_requests 2 "--requests must be in" -- bench throughput "${nomodel[@]}" --requests 0
expect early_coldstart 2 "--prompt-tokens must be in" -- bench coldstart "${nomodel[@]}" --prompt-tokens 0
printf '{"prompt_ids":[1,2],"max_tokens":3}\n{"prompt_ids":[3],"max_tokens":2}\n' > "$tmp/two.jsonl"
expect batch_max_seqs_range 2 "--max-num-seqs must be in \\[1, 4096\\]" -- generate --dummy-weights llama-tiny --input "$tmp/two.jsonl" --output "$tmp/o.jsonl" --max-num-seqs 0
expect serve_max_seqs_range 2 "--max-num-seqs must be in \\[1, 4096\\]" -- serve "${nomodel[@]}" --max-num-seqs 0
expect tput_max_seqs_range 2 "--max-num-seqs must be in \\[1, 4096\\]" -- bench throughput "${nomodel[@]}" --max-num-seqs 4097
# More requests at once than the default 512 tokens a step: the step grows to hold them (as serve).
expect batch_max_seqs_above_step 0 "2 requests in" -- generate --dummy-weights llama-tiny --input "$tmp/two.jsonl" --output "$tmp/o.jsonl" --max-num-seqs 1000

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
