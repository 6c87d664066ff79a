#!/usr/bin/env python3
"""Paged attention's CUDA output against torch SDPA in fp32, on the GPU host (issue 5's oracle).

`ROOFLINE_ATTENTION_DUMP=DIR attention_cuda_test` writes each case of its prefill and tree-mask
suites to DIR: NAME.json (the shape: heads, KV heads, head_dim, sliding window, (seq_len, q_len)
per sequence, the tree masks or null) and NAME.bin (bf16: q [tokens, heads, d], then each
sequence's k and v [seq_len, kv_heads, d], then the kernel's out [tokens, heads, d]). The cases
are attention_cuda_test's: contexts 1, 15, 16, 17, 255, 1000 and 4097, ragged batches, chunked
prefill over cached prefixes, sliding windows, GQA 1 to 40, head_dim 32 to 256, tree masks.

For every case this computes, from the same bf16 inputs:
- the reference: torch SDPA in fp32 (the math backend, TF32 off), with the mask the kernel applies
  (causal from the sequence's cached prefix, the sliding window, or the tree mask over the draft
  tokens with the whole prefix);
- a naive bf16 implementation, torch eager's order: Q·Kᵀ in bf16, the scaling in bf16, softmax
  in fp32 rounded to bf16, P·V in bf16;
and requires max|ours - reference| <= 2 · max|naive - reference| + 1e-5 (the floor covers rows
with a single attended key, where both errors are ~0). Exits 1 when any case fails, 2 on a
missing or malformed dump.
  python3 tests/gpu/attention_sdpa_check.py DIR
"""
import json
import math
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

FACTOR, FLOOR = 2.0, 1e-5


def fail_input(message):
    print(f"attention_sdpa_check: {message}", file=sys.stderr)
    sys.exit(2)


def load(path_json):
    with open(path_json) as f:
        meta = json.load(f)
    h, kvh, d = meta["num_heads"], meta["num_kv_heads"], meta["head_dim"]
    seqs = meta["seqs"]
    tokens = sum(q for _, q in seqs)
    sizes = [tokens * h * d]
    for seq_len, _ in seqs:
        sizes += [seq_len * kvh * d, seq_len * kvh * d]
    sizes.append(tokens * h * d)
    path_bin = path_json[: -len(".json")] + ".bin"
    raw = open(path_bin, "rb").read()
    if len(raw) != 2 * sum(sizes):
        fail_input(f"{path_bin}: {len(raw)} bytes, the shape in {path_json} needs {2 * sum(sizes)}")
    flat = torch.frombuffer(bytearray(raw), dtype=torch.int16).view(torch.bfloat16)
    parts, at = [], 0
    for n in sizes:
        parts.append(flat[at:at + n])
        at += n
    return meta, parts


def allowed_keys(seq_len, q_len, window, tree, device):
    """[q_len, seq_len] bool: the keys each query of the sequence attends."""
    ctx0 = seq_len - q_len
    pos = torch.arange(ctx0, seq_len, device=device).unsqueeze(1)
    key = torch.arange(seq_len, device=device).unsqueeze(0)
    if tree is None:
        allowed = key <= pos
    else:
        bits = torch.tensor([[(word >> j) & 1 for j in range(q_len)] for word in tree],
                            dtype=torch.bool, device=device)
        allowed = torch.ones(q_len, seq_len, dtype=torch.bool, device=device)
        allowed[:, ctx0:] = bits
    if window > 0:
        allowed &= (pos - key) < window
    return allowed


def check_case(meta, parts, device):
    h, kvh, d = meta["num_heads"], meta["num_kv_heads"], meta["head_dim"]
    group = h // kvh
    window = meta["sliding_window"]
    tree = meta["tree_mask"]
    q_all = parts[0].view(-1, h, d).to(device)
    out_all = parts[-1].view(-1, h, d).to(device)
    scale = 1.0 / math.sqrt(d)
    ours_err = naive_err = 0.0
    q_begin = 0
    for s, (seq_len, q_len) in enumerate(meta["seqs"]):
        k = parts[1 + 2 * s].view(seq_len, kvh, d).to(device).transpose(0, 1)
        v = parts[2 + 2 * s].view(seq_len, kvh, d).to(device).transpose(0, 1)
        k = k.repeat_interleave(group, dim=0)  # [h, seq_len, d]
        v = v.repeat_interleave(group, dim=0)
        q = q_all[q_begin:q_begin + q_len].transpose(0, 1)  # [h, q_len, d]
        ours = out_all[q_begin:q_begin + q_len].transpose(0, 1).float()
        words = None if tree is None else tree[q_begin:q_begin + q_len]
        mask = allowed_keys(seq_len, q_len, window, words, device)
        with sdpa_kernel([SDPBackend.MATH]):
            ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=mask,
                                                 scale=scale)
        scores = torch.matmul(q, k.transpose(1, 2)) * scale  # bf16 matmul, bf16 scaling
        scores = scores.float().masked_fill(~mask, float("-inf"))
        probs = torch.softmax(scores, dim=-1).to(torch.bfloat16)
        naive = torch.matmul(probs, v).float()
        ours_err = max(ours_err, (ours - ref).abs().max().item())
        naive_err = max(naive_err, (naive - ref).abs().max().item())
        q_begin += q_len
    return ours_err, naive_err


def main():
    if len(sys.argv) != 2:
        fail_input("usage: attention_sdpa_check.py DIR (a ROOFLINE_ATTENTION_DUMP directory)")
    folder = sys.argv[1]
    if not os.path.isdir(folder):
        fail_input(f"{folder} is not a directory")
    names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    if not names:
        fail_input(f"{folder} holds no cases: run ROOFLINE_ATTENTION_DUMP={folder} attention_cuda_test")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = "cuda"
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}: {len(names)} cases, "
          f"max|ours - sdpa fp32| <= {FACTOR} x max|naive bf16 - sdpa fp32| + {FLOOR}")
    failed = 0
    for name in names:
        try:
            meta, parts = load(os.path.join(folder, name))
        except (OSError, ValueError, KeyError, TypeError) as e:
            fail_input(f"{name}: not a case attention_cuda_test wrote ({type(e).__name__}: {e})")
        ours_err, naive_err = check_case(meta, parts, device)
        ok = ours_err <= FACTOR * naive_err + FLOOR  # NaN fails
        failed += 0 if ok else 1
        shape = (f"seqs {meta['seqs']} heads {meta['num_heads']}/{meta['num_kv_heads']} "
                 f"d{meta['head_dim']} window {meta['sliding_window']}"
                 f"{' tree' if meta['tree_mask'] is not None else ''}")
        print(f"{'ok  ' if ok else 'FAIL'} {name[:-5]:<8} ours {ours_err:.3e} naive {naive_err:.3e}  "
              f"{shape[:110]}", flush=True)
    print(f"{len(names) - failed} / {len(names)} cases within {FACTOR}x the naive bf16 error")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
