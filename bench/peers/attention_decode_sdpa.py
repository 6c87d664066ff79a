#!/usr/bin/env python3
"""The peer for issue 6: torch SDPA decode attention on the grid attention_cuda_bench times.

Llama-3-8B heads (32 q / 8 kv, head_dim 128), bf16, one query per sequence, contiguous (unpaged)
K/V of B sequences x L tokens, torch.nn.functional.scaled_dot_product_attention(enable_gqa=True)
with its default backend choice. Bandwidth = K+V bytes / time beside the 4.28 TB/s copy ceiling.
Method as attention_cuda_bench: 16 back-to-back launches per sample rotating over enough K/V
copies to defeat L2, CUDA events, median of 20 samples after 3 warm-up samples.
  python3 bench/peers/attention_decode_sdpa.py
"""
import statistics

import torch
import torch.nn.functional as F

CEILING = 4.28e12
LAUNCHES = 16


def time_shape(batch, length):
    kv_bytes = 2 * batch * 8 * length * 128 * 2
    copies = max(1, min(16, (240 << 20) // kv_bytes + 1))
    q = torch.randn(batch, 32, 1, 128, device="cuda", dtype=torch.bfloat16)
    ks = [torch.randn(batch, 8, length, 128, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    vs = [torch.randn(batch, 8, length, 128, device="cuda", dtype=torch.bfloat16) for _ in range(copies)]
    times = []
    for sample in range(23):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for i in range(LAUNCHES):
            c = (sample * LAUNCHES + i) % copies
            F.scaled_dot_product_attention(q, ks[c], vs[c], enable_gqa=True)
        end.record()
        end.synchronize()
        if sample >= 3:
            times.append(start.elapsed_time(end) / LAUNCHES)
    ms = statistics.median(times)
    return ms, kv_bytes


def main():
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for batch in (1, 8, 64, 256):
        for length in (512, 4096, 32768):
            name = f"sdpa decode 32/8 heads d128 B={batch} L={length}"
            try:
                ms, kv = time_shape(batch, length)
                bw = kv / (ms * 1e-3)
                print(f"{name:<48} {ms:9.4f} ms  {bw / 1e12:7.3f} TB/s = {100 * bw / CEILING:5.1f}% "
                      f"of {CEILING / 1e12:.2f} TB/s copy ceiling", flush=True)
            except torch.OutOfMemoryError:
                print(f"{name:<48} out of GPU memory", flush=True)
            torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
