#!/usr/bin/env python3
"""End to end on the GPU host: roofline's CUDA backend against Hugging Face transformers.

For each architecture variant, a random-initialised model at realistic width (hidden >= 896,
4 layers, several GQA ratios) is saved in bf16 safetensors; transformers computes the reference in
fp32 from those same bf16 weights (full forward per step, eager attention) and, to calibrate what
bf16 arithmetic costs, also in bf16. roofline runs `roofline logits --device cuda` (bf16 weights,
activations and KV cache, fp32 accumulation) for the prompt prefill and 32 greedy decode steps.

Pass criteria, per model:
  * logits: max |roofline - hf_fp32| <= 2 * max |hf_bf16 - hf_fp32| + 0.02 over every row both
    runs share (bf16 roofline may not be further from the exact answer than twice what transformers'
    own bf16 path is; the floor covers rows where HF bf16 happens to be unusually close);
  * greedy tokens identical until the first step whose fp32 top-1/top-2 margin is below the bf16
    error bound (a near-tie, where either choice is right).
Usage: python3 tests/gpu/hf_e2e.py --roofline build/cuda/tools/cli/roofline --out OUTDIR
"""
import argparse
import json
import os
import subprocess
import sys
import time

import numpy as np
import torch
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM,
                          Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
from hf_model_util import dtype_kwargs, init_weights, rope_kwargs  # noqa: E402

DECODE_STEPS = 32


def base(**kw):
    c = dict(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=4,
             num_attention_heads=16, num_key_value_heads=4, max_position_embeddings=4096,
             rms_norm_eps=1e-5, tie_word_embeddings=False, bos_token_id=1, eos_token_id=2)
    c.update(kw)
    return c


MODELS = [
    ("llama3_gqa4_h1024", LlamaForCausalLM, LlamaConfig(**base(**rope_kwargs(500000.0, {
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 1024})))),
    ("mistral_gqa8_h1024", MistralForCausalLM, MistralConfig(**base(
        num_attention_heads=32, num_key_value_heads=4, head_dim=32, sliding_window=None,
        **rope_kwargs(1000000.0)))),
    ("qwen2_bias_gqa7_h896", Qwen2ForCausalLM, Qwen2Config(**base(
        hidden_size=896, intermediate_size=4864, num_attention_heads=14, num_key_value_heads=2,
        tie_word_embeddings=True, use_sliding_window=False, rms_norm_eps=1e-6, **rope_kwargs(1000000.0)))),
    ("qwen3_qknorm_hd128_h1024", Qwen3ForCausalLM, Qwen3Config(**base(
        intermediate_size=3072, num_attention_heads=16, num_key_value_heads=8, head_dim=128,
        tie_word_embeddings=True, use_sliding_window=False, rms_norm_eps=1e-6, **rope_kwargs(1000000.0)))),
    ("llama_mha_bias_h1024", LlamaForCausalLM, LlamaConfig(**base(
        num_attention_heads=8, num_key_value_heads=8, attention_bias=True, **rope_kwargs(10000.0)))),
]


def hf_logits(model, tokens):
    with torch.no_grad():
        return model(torch.tensor([tokens], device="cuda")).logits[0].float().cpu().numpy()


def run_one(name, cls, config, roofline, root, seed):
    path = os.path.join(root, name)
    config._attn_implementation = "eager"
    torch.manual_seed(seed)
    m = cls(config)
    init_weights(m, seed, bias_std=0.1)
    m.to(torch.bfloat16).save_pretrained(path)
    del m
    kw32 = dtype_kwargs(torch.float32)
    kw16 = dtype_kwargs(torch.bfloat16)
    ref32 = cls.from_pretrained(path, attn_implementation="eager", **kw32).cuda().eval()
    ref16 = cls.from_pretrained(path, attn_implementation="eager", **kw16).cuda().eval()
    rng = np.random.default_rng(seed)
    prompt = [1] + [int(x) for x in rng.integers(3, config.vocab_size, size=36)]
    tokens = list(prompt)
    for _ in range(DECODE_STEPS):
        tokens.append(int(np.argmax(hf_logits(ref32, tokens)[-1])))
    l32 = hf_logits(ref32, tokens)
    l16 = hf_logits(ref16, tokens)
    out = os.path.join(root, name + ".npy")
    t0 = time.time()
    proc = subprocess.run([roofline, "logits", "--model", path, "--device", "cuda", "--prompt-ids",
                           ",".join(map(str, prompt)), "--decode-steps", str(DECODE_STEPS), "--out", out],
                          capture_output=True, text=True)
    wall = time.time() - t0
    if proc.returncode != 0:
        return {"name": name, "ok": False, "error": proc.stderr.strip()[-2000:]}
    ours = np.load(out)
    greedy = [int(x) for x in proc.stderr.split("greedy tokens:")[1].split()]
    bf16_err = float(np.abs(l16 - l32).max())
    bound = 2 * bf16_err + 0.02
    # Rows are comparable while our greedy tokens equal the reference's.
    P = len(prompt)
    agree = 0
    while agree < DECODE_STEPS and greedy[agree] == tokens[P + agree]:
        agree += 1
    rows = P + agree  # rows 0..P+agree-1 saw identical inputs
    err = float(np.abs(ours[:rows] - l32[:rows]).max())
    first_mismatch_margin = None
    near_tie = True
    if agree < DECODE_STEPS:
        row = l32[P + agree - 1]
        top2 = np.sort(row)[-2:]
        first_mismatch_margin = float(top2[1] - top2[0])
        near_tie = first_mismatch_margin <= bound
    ok = err <= bound and near_tie
    return {"name": name, "ok": bool(ok), "max_err_vs_fp32": err, "hf_bf16_err_vs_fp32": bf16_err,
            "bound": bound, "rows_compared": rows, "greedy_agree_steps": agree,
            "first_mismatch_margin": first_mismatch_margin, "max_abs_logit": float(np.abs(l32).max()),
            "roofline_wall_s": wall}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--roofline", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    root = os.path.join(args.out, "hf_e2e_models")
    os.makedirs(root, exist_ok=True)
    results = []
    for i, (name, cls, config) in enumerate(MODELS):
        try:
            r = run_one(name, cls, config, args.roofline, root, 100 + i)
        except Exception as e:  # report every model
            import traceback
            traceback.print_exc()
            r = {"name": name, "ok": False, "error": repr(e)}
        results.append(r)
        print(json.dumps(r), flush=True)
    with open(os.path.join(args.out, "hf_e2e.json"), "w") as f:
        json.dump({"transformers": transformers.__version__, "torch": torch.__version__,
                   "results": results}, f, indent=1)
    print("\n| model | max err vs HF fp32 | HF bf16 err | bound | greedy steps agreeing | ok |")
    print("|---|---|---|---|---|---|")
    for r in results:
        if "error" in r:
            print(f"| {r['name']} | error | | | | no |")
            continue
        print(f"| {r['name']} | {r['max_err_vs_fp32']:.4f} | {r['hf_bf16_err_vs_fp32']:.4f} | "
              f"{r['bound']:.4f} | {r['greedy_agree_steps']}/{DECODE_STEPS} | {'yes' if r['ok'] else 'NO'} |")
    # The model dirs are large; drop them so $OUT stays small.
    import shutil
    shutil.rmtree(root, ignore_errors=True)
    sys.exit(0 if all(r.get("ok") for r in results) else 1)


if __name__ == "__main__":
    main()
