"""The Python side of DecodePlan.run alone, on the cpu backend (no GPU, no
torch): a tiny fp8 decode, one real call to fill the argument cache, then
qattn_decode_run replaced by a stub returning 0, so the time is everything
plan.run does around the C call. Numpy operands; the cpu kernel's own time
would otherwise hide the difference.

    QATTN_LIBRARY_DIR=... PYTHONPATH=... python3 python_side.py
"""
import statistics
import sys
import time

import numpy as np

import qattn


def per_call_us(fn, calls=50000, chunk=1000):
    times = []
    for _ in range(calls // chunk):
        t0 = time.perf_counter()
        for _ in range(chunk):
            fn()
        times.append((time.perf_counter() - t0) / chunk * 1e6)
    return min(times), statistics.median(times)


def main():
    rng = np.random.default_rng(1)
    Hkv, D, P, L = 1, 128, 16, 16
    kc = rng.integers(0, 0x70, (L, Hkv, D), dtype=np.uint8)
    vc = kc.copy()
    ks = np.full((L, Hkv), 0.01, np.float32)
    indptr = np.array([0, 1], np.int32)
    indices = np.array([0], np.int32)
    lens = np.array([L], np.int32)
    q = rng.integers(0, 0x3F00, (1, 1, 8, D)).astype(np.uint16)
    out = np.empty(q.shape, np.uint16)
    ctx = qattn.Context(backend="cpu")
    plan = ctx.decode_plan(q, kc, vc, indptr, indices, lens, k_scale=ks, v_scale=ks,
                           page_size=P, max_kv_len=L, kv_format="fp8_e4m3fn")
    kc2, vc2, ks2 = kc.copy(), vc.copy(), ks.copy()  # another layer's, as it were
    plan.run(q, out=out)
    plan.run(q, kc2, vc2, ks2, ks2, out=out)
    plan.run(q, kv_indptr=indptr, kv_indices=indices, kv_lens=lens, out=out)
    ctx._lib.qattn_decode_run = lambda *a: 0  # this process only
    cases = [("plan.run(q, out=out)", lambda: plan.run(q, out=out)),
             ("plan.run(q, kv_indptr=, kv_indices=, kv_lens=, out=)",
              lambda: plan.run(q, kv_indptr=indptr, kv_indices=indices, kv_lens=lens,
                               out=out)),
             ("plan.run(q, k_cache, v_cache, k_scale, v_scale, page table, out=)",
              lambda: plan.run(q, kc, vc, ks, ks, kv_indptr=indptr, kv_indices=indices,
                               kv_lens=lens, out=out)),
             ("plan.run(q, other caches and scales, out=) (read each call)",
              lambda: plan.run(q, kc2, vc2, ks2, ks2, out=out)),
             ("the stub alone", lambda: ctx._lib.qattn_decode_run(1, 2, 3, 4, 5))]
    res = {n: [] for n, _ in cases}
    for _ in range(3):
        for n, f in cases:
            res[n].append(per_call_us(f))
    print("python %s, numpy %s, qattn %s; microseconds per call, best chunk / median chunk:" %
          (sys.version.split()[0], np.__version__, qattn.__version__))
    for n, _ in cases:
        print("  %-68s %6.2f / %6.2f" % (n, min(r[0] for r in res[n]),
                                         min(r[1] for r in res[n])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
