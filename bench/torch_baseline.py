#!/usr/bin/env python3
"""What a user would run without qattn, measured on the same GPU and in the
same device session as qattn-bench (docs/perf.md puts them side by side).

- copy bandwidth: device-to-device copy of 1 GiB (read + write bytes / time)
- decode presets: torch SDPA over the same cache dequantized to bf16,
  contiguous [B, Hkv, L, D], GQA through enable_gqa (q [B, Hq, R, D], no
  mask; for qattn's int8 and bf16 cache presets torch still reads bf16; for
  the f16-q preset, _qf16, q and the cache are f16),
  timed as engines run decode: each call captured in a CUDA graph and the
  graph replayed (median_us; device time between events around one replay,
  as qattn-bench's device timer), and also eagerly (eager_us)
- MQA presets: per 128-row chunk, an fp8 torch._scaled_mm for q.k, then
  k_scale, ReLU and the weighted head sum (TFLOP/s counts 2*H*D per valid
  (row, column) pair, as qattn-bench does)
- f16 matmul rate: torch.matmul 8192^3

Every timing is the median of CUDA-event samples; all samples are kept in
the JSON. Usage: torch_baseline.py [--json FILE] [--iters N] [--ops decode,mqa,matmul]
(the copy rate is always measured).
"""
import argparse
import json
import statistics

import torch
import torch.nn.functional as F

DECODE = [  # name, B, R, Hq, Hkv, D, L (the qattn-bench presets of the same name)
    ("decode_b1_gqa4_8k", 1, 1, 32, 8, 128, 8192),
    ("decode_b1_gqa8_8k", 1, 1, 32, 4, 128, 8192),
    ("decode_b1_gqa4_32k", 1, 1, 32, 8, 128, 32768),
    ("decode_b1_gqa8_32k", 1, 1, 32, 4, 128, 32768),
    ("decode_b16_gqa4_32k", 16, 1, 32, 8, 128, 32768),
    ("decode_b16_gqa8_32k", 16, 1, 32, 4, 128, 32768),
    # qattn reads an int8 / bf16 cache here; torch reads bf16 in every row
    ("decode_b16_gqa4_32k_int8", 16, 1, 32, 8, 128, 32768),
    ("decode_b16_gqa4_32k_bf16", 16, 1, 32, 8, 128, 32768),
    ("decode_b16_gqa4_32k_r4", 16, 4, 32, 8, 128, 32768),
    ("decode_b16_gqa4_32k_d64", 16, 1, 32, 8, 64, 32768),
    ("decode_b16_gqa4_32k_d256", 16, 1, 32, 8, 256, 32768),
    ("decode_b16_gqa4_32k_d96", 16, 1, 32, 8, 96, 32768),
    # f16 q and o: an f16 model's SDPA runs over an f16 cache
    ("decode_b16_gqa4_32k_qf16", 16, 1, 32, 8, 128, 32768),
]
MQA = [  # name, S, S_kv, H, D
    ("mqa_1024x131072_h64", 1024, 131072, 64, 128),
    ("mqa_1024x131072_h32", 1024, 131072, 32, 128),
    ("mqa_2048x65536_h64", 2048, 65536, 64, 128),
    ("mqa_4096x32768_h64", 4096, 32768, 64, 128),
    ("mqa_prefill_4096_h64", 4096, 4096, 64, 128),
]


def time_us(fn, iters, warmup=5, warmup_s=0.5):
    # A count and a minimum time, as qattn-bench warms up (clocks ramp up).
    import time
    t0 = time.time()
    n = 0
    while n < warmup or time.time() - t0 < warmup_s:
        fn()
        torch.cuda.synchronize()
        n += 1
    torch.cuda.synchronize()
    samples = []
    for _ in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) * 1e3)
    return statistics.median(samples), samples


def graph_time_us(fns, iters, warmup=5, warmup_s=0.5):
    # One CUDA graph per function (each reads its own cache copy), replayed
    # in turn; the events bracket one replay each.
    import time
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for f in fns:
            f()
    torch.cuda.current_stream().wait_stream(side)
    graphs = []
    for f in fns:
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            f()
        graphs.append(gr)
    t0 = time.time()
    n = 0
    while n < warmup or time.time() - t0 < warmup_s:
        graphs[n % len(graphs)].replay()
        torch.cuda.synchronize()
        n += 1
    samples = []
    for i in range(iters):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        graphs[i % len(graphs)].replay()
        b.record()
        b.synchronize()
        samples.append(a.elapsed_time(b) * 1e3)
    return statistics.median(samples), samples


def copy_bandwidth(iters):
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    med, s = time_us(lambda: dst.copy_(src), iters)
    return {"name": "copy_1GiB", "median_us": med, "GBps": 2 * n / (med * 1e3), "samples_us": s}


def decode(name, B, R, Hq, Hkv, D, L, iters):
    g = torch.Generator(device="cuda").manual_seed(1)
    dt = torch.float16 if name.endswith("_qf16") else torch.bfloat16
    # R query rows attend to all L keys (no mask): the causal offset of the
    # last R - 1 keys changes a few keys out of thousands, not the time.
    q = torch.randn(B, Hq, R, D, device="cuda", dtype=dt, generator=g)
    # Rotate among copies of a cache smaller than the L2, as qattn-bench does,
    # so repeated runs read memory rather than a warm cache.
    nbytes = 2 * B * Hkv * L * D * 2
    copies = min(8, (256 << 20) // nbytes + 1)
    kv = [(torch.randn(B, Hkv, L, D, device="cuda", dtype=dt, generator=g),
           torch.randn(B, Hkv, L, D, device="cuda", dtype=dt, generator=g)) for _ in range(copies)]
    state = {"i": 0}

    def fn():
        k, v = kv[state["i"]]
        state["i"] = (state["i"] + 1) % copies
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=True)

    eager, es = time_us(fn, iters)
    calls = [(lambda k=k, v=v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True)) for k, v in kv]
    med, s = graph_time_us(calls, iters)
    what = "torch SDPA, %s cache, CUDA-graph replay" % ("f16" if dt == torch.float16 else "bf16")
    return {"name": name, "what": what, "median_us": med, "samples_us": s,
            "eager_us": eager, "eager_samples_us": es, "bytes": float(nbytes), "copies": copies}


def mqa(name, S, Skv, H, D, iters):
    g = torch.Generator(device="cuda").manual_seed(2)
    q = (torch.randn(S * H, D, device="cuda", generator=g)).to(torch.float8_e4m3fn)
    k = (torch.randn(Skv, D, device="cuda", generator=g)).to(torch.float8_e4m3fn)
    ks = torch.rand(Skv, device="cuda", generator=g) * 0.01 + 0.01
    w = torch.randn(S, H, device="cuda", generator=g)
    one = torch.ones((), device="cuda")
    out = torch.empty(S, Skv, device="cuda")
    chunk = max(1, min(S, (1 << 31) // (H * Skv * 4)))

    def run():
        for r0 in range(0, S, chunk):
            r1 = min(S, r0 + chunk)
            qk = torch._scaled_mm(q[r0 * H:r1 * H], k.t(), scale_a=one, scale_b=one,
                                  out_dtype=torch.float32)
            qk = torch.relu(qk.view(r1 - r0, H, Skv) * ks) * w[r0:r1, :, None]
            out[r0:r1] = qk.sum(1)

    med, s = time_us(run, max(3, iters // 5), warmup=2)
    pairs = sum(Skv - S + i + 1 for i in range(S))
    return {"name": name, "what": "torch fp8 _scaled_mm + relu + weighted sum", "median_us": med,
            "TFLOPs": 2.0 * H * D * pairs / (med * 1e6), "samples_us": s}


def matmul_rate(iters):
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.float16)
    b = torch.randn(n, n, device="cuda", dtype=torch.float16)
    med, s = time_us(lambda: torch.matmul(a, b), iters)
    return {"name": "matmul_f16_8192", "median_us": med, "TFLOPs": 2.0 * n ** 3 / (med * 1e6), "samples_us": s}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--iters", type=int, default=30)
    ap.add_argument("--ops", default="decode,mqa,matmul", help="comma-separated subset to run")
    args = ap.parse_args()
    ops = set(args.ops.split(","))
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__}
    res["copy"] = copy_bandwidth(args.iters)
    print(f"copy 1 GiB: {res['copy']['GBps']:.0f} GB/s")
    res["decode"] = []
    for p in DECODE if "decode" in ops else []:
        r = decode(*p, args.iters)
        res["decode"].append(r)
        print(f"{r['name']:24s} SDPA bf16 {r['median_us']:9.2f} us (graph replay; eager {r['eager_us']:.2f} us)")
    res["mqa"] = []
    for p in MQA if "mqa" in ops else []:
        r = mqa(*p, args.iters)
        res["mqa"].append(r)
        print(f"{r['name']:24s} torch fp8 {r['median_us']:9.1f} us {r['TFLOPs']:7.1f} TFLOP/s")
    if "matmul" in ops:
        res["matmul"] = matmul_rate(args.iters)
        print(f"matmul f16 8192^3: {res['matmul']['TFLOPs']:.0f} TFLOP/s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(res, f, indent=1)


if __name__ == "__main__":
    main()
