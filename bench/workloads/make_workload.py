#!/usr/bin/env python3
"""Synthetic request files for `roofline generate --input`, with stated length distributions.

  make_workload.py mixed OUT.jsonl [--requests 1000] [--seed 0] [--vocab 32000]
      prompt lengths uniform in [32, 1024], output lengths uniform in [16, 256] (means 528 / 136),
      random token ids; every request greedy with ignore_eos, so the lengths hold exactly.
  make_workload.py shared-prefix OUT.jsonl [--requests 256] [--prefix 1024] [--suffix 32]
      every prompt = the same PREFIX-token system prompt + SUFFIX unique tokens, 64 output tokens;
  make_workload.py unique-prefix OUT.jsonl ...
      the same lengths, but every request's first PREFIX tokens differ: the no-sharing baseline.

Token ids avoid 0..255 (special and byte tokens of most vocabularies); only the stdlib is used.
"""
import argparse
import json
import random
import sys


def ids(rng, n, vocab):
    return [rng.randrange(256, vocab) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kind", choices=["mixed", "shared-prefix", "unique-prefix"])
    ap.add_argument("out")
    ap.add_argument("--requests", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--vocab", type=int, default=32000, help="ids are drawn from [256, vocab)")
    ap.add_argument("--prefix", type=int, default=1024)
    ap.add_argument("--suffix", type=int, default=32)
    ap.add_argument("--output-tokens", type=int, default=64)
    a = ap.parse_args()
    if a.vocab <= 256:
        sys.exit("--vocab must exceed 256")
    rng = random.Random(a.seed)
    n = a.requests if a.requests is not None else (1000 if a.kind == "mixed" else 256)
    if n < 1:
        sys.exit("--requests must be >= 1")
    shared = ids(rng, a.prefix, a.vocab)
    with open(a.out, "w") as f:
        for _ in range(n):
            if a.kind == "mixed":
                prompt = ids(rng, rng.randint(32, 1024), a.vocab)
                out = rng.randint(16, 256)
            else:
                prefix = shared if a.kind == "shared-prefix" else ids(rng, a.prefix, a.vocab)
                prompt = prefix + ids(rng, a.suffix, a.vocab)
                out = a.output_tokens
            f.write(json.dumps({"prompt_ids": prompt, "max_tokens": out, "ignore_eos": True}) + "\n")


if __name__ == "__main__":
    main()
