#!/usr/bin/env python3
"""Peers for issue 10: the decode step of what a user would otherwise run, on the shapes
`roofline bench latency` times, so the two tables sit side by side.

  python3 bench/peers/decode_peers.py [--models llama3-8b,qwen2.5-0.5b] [--batch 1,8,32,64]
                                      [--context 512] [--steps 32] [--modes eager,compiled]
                                      [--markdown FILE]

Models are random-initialised (the shapes of roofline's --dummy-weights table) directly on the GPU
in bf16. Each (model, batch) runs a greedy generate of --steps + 1 tokens after a --context-token
random prompt; a streamer takes a timestamp (after a device synchronise) as each token arrives, and
the median gap between consecutive tokens is the decode step time (the first token is the prefill).
  eager:    Hugging Face transformers, default (dynamic) KV cache, eager attention kernels as shipped.
  compiled: the same model with a static KV cache and torch.compile(mode="reduce-overhead") on the
            forward (CUDA graphs), transformers' documented fast path (generate's own compile where
            transformers has it, else a manual torch.compile); compilation is warmed up first and
            not timed.
Prints one line per run: model, mode, batch, ms/step, tok/s; --markdown appends a table.
Needs torch and transformers (present on the H200 host); nothing here runs without a GPU.
"""
import argparse
import statistics
import sys
import time

SHAPES = {  # as src/models/dummy_models.cc
    "llama3-8b": dict(arch="llama", vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                      num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                      max_position_embeddings=8192, rope_theta=500000.0, rms_norm_eps=1e-5,
                      tie_word_embeddings=False),
    "qwen2.5-0.5b": dict(arch="qwen2", vocab_size=151936, hidden_size=896, intermediate_size=4864,
                         num_hidden_layers=24, num_attention_heads=14, num_key_value_heads=2,
                         max_position_embeddings=32768, rope_theta=1000000.0, rms_norm_eps=1e-6,
                         tie_word_embeddings=True),
}


def build(name, torch, transformers):
    shape = dict(SHAPES[name])
    arch = shape.pop("arch")
    config_cls = transformers.LlamaConfig if arch == "llama" else transformers.Qwen2Config
    config = config_cls(**shape)
    with torch.device("cuda"):
        try:
            model = transformers.AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16)
        except TypeError:  # transformers < 4.56 spells it torch_dtype
            model = transformers.AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16)
    return model.eval()


class StepClock:
    """A generate() streamer: a timestamp per arriving token (the prompt's put comes first)."""

    def __init__(self, torch):
        self.torch = torch
        self.times = []
        self.calls = 0

    def put(self, value):
        self.calls += 1
        if self.calls == 1:  # the prompt itself
            return
        self.torch.cuda.synchronize()
        self.times.append(time.perf_counter())

    def end(self):
        pass


def decode_ms(model, torch, batch, context, steps, vocab):
    prompt = torch.randint(256, vocab, (batch, context), device="cuda")
    mask = torch.ones_like(prompt)
    clock = StepClock(torch)
    with torch.inference_mode():
        model.generate(prompt, attention_mask=mask, max_new_tokens=steps + 1, min_new_tokens=steps + 1,
                       do_sample=False, pad_token_id=0, streamer=clock)
    gaps = [(b - a) * 1e3 for a, b in zip(clock.times, clock.times[1:])]
    if not gaps:
        raise RuntimeError("generate produced fewer than two tokens")
    return statistics.median(gaps)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="llama3-8b,qwen2.5-0.5b")
    ap.add_argument("--batch", default="1,8,32,64")
    ap.add_argument("--context", type=int, default=512)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--modes", default="eager,compiled")
    ap.add_argument("--markdown", default="")
    a = ap.parse_args()
    models = [m for m in a.models.split(",") if m]
    for m in models:
        if m not in SHAPES:
            sys.exit(f"unknown model '{m}': known {', '.join(SHAPES)}")
    modes = [m for m in a.modes.split(",") if m]
    for m in modes:
        if m not in ("eager", "compiled"):
            sys.exit(f"unknown mode '{m}': eager or compiled")
    batches = [int(b) for b in a.batch.split(",") if b]
    if any(b < 1 for b in batches) or a.context < 1 or a.steps < 2:
        sys.exit("--batch sizes and --context must be positive, --steps at least 2")

    import torch
    import transformers
    if not torch.cuda.is_available():
        sys.exit("no CUDA device: the peers run on the GPU host")
    print(f"torch {torch.__version__}, transformers {transformers.__version__}, {torch.cuda.get_device_name()}",
          flush=True)
    # One compiled graph per (batch, phase): more than dynamo's default of 8 recompiles per frame,
    # past which it would silently fall back to eager.
    for knob in ("recompile_limit", "cache_size_limit"):
        if hasattr(torch._dynamo.config, knob):
            setattr(torch._dynamo.config, knob, 64)
    # The Markdown table grows row by row, so a run cut short still leaves what it measured.
    if a.markdown:
        with open(a.markdown, "a") as f:
            f.write(f"\n## Peers: decode step, context {a.context}, median of {a.steps} steps "
                    f"(bench/peers/decode_peers.py; torch {torch.__version__}, transformers {transformers.__version__})\n\n")
            f.write("| model | mode | batch | ms/step | tok/s |\n|---|---|---|---|---|\n")
    for name in models:
        for mode in modes:
            model = build(name, torch, transformers)
            if mode == "compiled":
                model.generation_config.cache_implementation = "static"
                try:
                    # transformers >= 4.50: generate() compiles the forward itself for a static
                    # cache, marking the cache tensors static so CUDA graphs keep them (a forward
                    # compiled by hand has its graphs skipped for "mutated inputs" and then fails
                    # on the overwritten cache, measured with transformers 5.17).
                    from transformers import CompileConfig
                    model.generation_config.compile_config = CompileConfig(fullgraph=True,
                                                                           mode="reduce-overhead")
                except ImportError:  # older transformers: their documented manual compile
                    model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
            vocab = SHAPES[name]["vocab_size"]
            for batch in batches:
                try:
                    # Warm-up (compilation, CUDA-graph capture, allocator) with the timed run's own
                    # lengths: a static cache sized for fewer new tokens would be reallocated, and
                    # the forward recompiled, inside the timed run.
                    for _ in range(2):
                        decode_ms(model, torch, batch, a.context, a.steps, vocab)
                    ms = decode_ms(model, torch, batch, a.context, a.steps, vocab)
                    if a.markdown:
                        with open(a.markdown, "a") as f:
                            f.write(f"| {name} | {mode} | {batch} | {ms:.3f} | {batch / ms * 1e3:.1f} |\n")
                    print(f"{name:<14} {mode:<9} batch {batch:>4}: {ms:8.3f} ms/step, {batch / ms * 1e3:10.1f} tok/s",
                          flush=True)
                except torch.OutOfMemoryError:
                    print(f"{name:<14} {mode:<9} batch {batch:>4}: out of GPU memory", flush=True)
                    torch.cuda.empty_cache()
            del model
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
