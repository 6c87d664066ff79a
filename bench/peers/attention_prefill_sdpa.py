#!/usr/bin/env python3
"""The peer for issue 5: torch SDPA causal prefill attention on attention_cuda_bench's shapes.

Llama-3-8B heads (32 q / 8 kv, head_dim 128), bf16, batch 1, causal, L = 2048, 8192, 16384, and the
ragged batch of eight prompts (4096, 3072, 2048, 2048, 1536, 1536, 1024, 1024 tokens), through
torch.nn.functional.scaled_dot_product_attention with one backend forced at a time: cuDNN and
FlashAttention-2. K/V are expanded to the 32 query heads (the FA2 backend has no GQA path; the
FLOPs are the same). SDPA has no ragged (varlen) entry point, so the ragged batch is one call per
prompt, timed together. TFLOP/s counts the attended (query, key) pairs only, 4·d·heads each, as
attention_cuda_bench does.
Method as attention_cuda_bench: 16 back-to-back launches per sample, CUDA events, median of 50
samples after 3 warm-up ones. The H200 holds these shapes at its 700 W power cap, so a figure
depends on how long the load lasts: short samples (4 launches, 10 of them, this script's method
until 2026-12-02) caught cuDNN partly at boost clocks, 596-601 TFLOP/s at L=8192, where sustained
samples measure 547-549 on the same host (bench/results/2026-12-02-prefill-block-phases.md).
  python3 bench/peers/attention_prefill_sdpa.py
"""
import statistics

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

CEILING = 783e12
HEADS, D = 32, 128
RAGGED = (4096, 3072, 2048, 2048, 1536, 1536, 1024, 1024)


def flops(lengths):
    return sum(4.0 * D * HEADS * L * (L + 1) / 2 for L in lengths)


def time_lengths(lengths, backend, launches=16, samples=50, warmup=3):
    qkv = []
    for L in lengths:
        q = torch.randn(1, HEADS, L, D, device="cuda", dtype=torch.bfloat16)
        k = torch.randn(1, HEADS, L, D, device="cuda", dtype=torch.bfloat16)
        v = torch.randn(1, HEADS, L, D, device="cuda", dtype=torch.bfloat16)
        qkv.append((q, k, v))
    times = []
    with sdpa_kernel([backend]):
        for sample in range(samples + warmup):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(launches):
                for q, k, v in qkv:
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)
            end.record()
            end.synchronize()
            if sample >= warmup:
                times.append(start.elapsed_time(end) / launches)
    return statistics.median(times)


def main():
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    shapes = [(f"L={L}", (L,)) for L in (2048, 8192, 16384)]
    shapes.append(("ragged 8 seqs (16384 tokens)", RAGGED))
    for backend, label in ((SDPBackend.CUDNN_ATTENTION, "cudnn"), (SDPBackend.FLASH_ATTENTION, "fa2")):
        for name, lengths in shapes:
            title = f"sdpa-{label} prefill 32 heads d128 {name}"
            try:
                ms = time_lengths(lengths, backend)
                tf = flops(lengths) / (ms * 1e-3)
                print(f"{title:<52} {ms:9.4f} ms  {tf / 1e12:7.1f} TFLOP/s = {100 * tf / CEILING:5.1f}% "
                      f"of {CEILING / 1e12:.0f} TFLOP/s bf16 GEMM ceiling", flush=True)
            except (RuntimeError, torch.OutOfMemoryError) as e:
                print(f"{title:<52} unavailable: {str(e).splitlines()[0][:80]}", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
