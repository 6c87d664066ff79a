#!/usr/bin/env python3
"""finish_by_counting's sums against finish_in_warp's prefix scans, on random cases (no GPU).

ref: the candidates put in rank order, the top k kept, top-p by the inclusive prefix reaching
ceil(top_p * total), min-p, then the first rank whose kept prefix reaches U + 1 (U = floor(u *
total kept), standing in for uniform_below). cnt: the same from per-candidate sums over the keys
above, with exactly one candidate allowed to claim the draw. Weights are rel * 2^45 truncated,
as sampling::weight_of. Prints "equal in 3000 trials" or stops at the first difference.
    python3 equivalence.py
"""
import random, math
def ref(keys, k, top_p, min_p, rel, u_frac):
    order = sorted(range(len(keys)), key=lambda i: -keys[i])[:k]
    w = [int(rel[i]*2**45) for i in order]
    total = sum(w)
    kept = len(order)
    if top_p < 1:
        thr = math.ceil(top_p*total)
        run = 0
        for r, x in enumerate(w):
            run += x
            if run >= thr: kept = r+1; break
    wk = [int(rel[order[r]]*2**45) if (r < kept and rel[order[r]] >= min_p) else 0 for r in range(len(order))]
    tk = sum(wk); u = int(u_frac*tk); t = u+1; run = 0
    for r, x in enumerate(wk):
        run += x
        if run >= t: return order[r]
def cnt(keys, k, top_p, min_p, rel, u_frac):
    n = len(keys)
    rank = [sum(1 for j in range(n) if keys[j] > keys[i]) for i in range(n)]
    w = [int(rel[i]*2**45) if rank[i] < k else 0 for i in range(n)]
    total = sum(w)
    wk = []
    for i in range(n):
        above = sum(w[j] for j in range(n) if keys[j] > keys[i])
        kept = rank[i] < k
        if top_p < 1: kept = kept and above < math.ceil(top_p*total)
        wk.append(int(rel[i]*2**45) if kept and rel[i] >= min_p else 0)
    tk = sum(wk); u = int(u_frac*tk); t = u+1
    found = [i for i in range(n) if sum(wk[j] for j in range(n) if keys[j] > keys[i]) < t <= sum(wk[j] for j in range(n) if keys[j] > keys[i]) + wk[i]]
    assert len(found) == 1, found
    return found[0]
random.seed(1)
for trial in range(3000):
    n = random.randint(1, 80); k = random.randint(1, n)
    keys = random.sample(range(1, 10**6), n)
    mx = max(keys)
    rel = [math.exp(-(mx-x)/random.choice([1e3, 1e4, 1e5])) if random.random() > 0.1 else 0.0 for x in keys]
    rel[keys.index(mx)] = 1.0
    top_p = random.choice([1.0, 0.9, 0.5, 0.1, 0.999, 1e-6])
    min_p = random.choice([0.0, 0.05, 0.5, 1.0])
    u = random.random()
    a = ref(keys, k, top_p, min_p, rel, u); b = cnt(keys, k, top_p, min_p, rel, u)
    assert a == b, (trial, a, b)
print("equal in 3000 trials")
