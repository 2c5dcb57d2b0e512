"""The per-call cost of the Python binding on a launch-bound decode.

Prints, per call (microseconds): the kernel time from the backend's timer;
the host time to issue one call through plan.run (eager), through
torch.ops.qattn.decode (the custom op, as torch.compile calls it) and
through the bare C function with prebuilt arguments (ctypes, no Python
around it); the wall time of back-to-back calls; and one replayed CUDA
graph of the same calls. "python overhead" = plan.run's issue time minus
the bare C call's: what the binding adds on top of the library and driver.

    QATTN_LIBRARY_DIR=... python3 overhead.py [--calls 2000]
"""
import argparse
import ctypes
import statistics
import sys
import time

import torch

import qattn


def issue_time_us(fn, calls, chunk=100):
    """Median host time of one call, timed in chunks with the device idle
    before each chunk, so the launch queue never fills and blocks."""
    times = []
    for _ in range(max(1, calls // chunk)):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(chunk):
            fn()
        times.append((time.perf_counter() - t0) / chunk * 1e6)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    a = ap.parse_args()
    print("torch %s, CUDA %s, %s; qattn %s (library %s)" % (
        torch.__version__, torch.version.cuda, torch.cuda.get_device_name(), qattn.__version__,
        qattn.library_version()))
    dev = "cuda"
    B, Hq, Hkv, D, P, L = 1, 32, 8, 128, 16, 1024
    n_pages = L // P
    kc = (torch.randint(0, 256, (n_pages, P, Hkv, D), device=dev, dtype=torch.int32) & 0xB7) \
        .to(torch.uint8)
    vc = kc.clone()
    ks = torch.full((n_pages, P, Hkv), 0.01, device=dev)
    indptr = torch.tensor([0, n_pages], device=dev, dtype=torch.int32)
    indices = torch.arange(n_pages, device=dev, dtype=torch.int32)
    lens = torch.tensor([L], device=dev, dtype=torch.int32)
    q = torch.randn((B, 1, Hq, D), device=dev).to(torch.bfloat16)
    out = torch.empty_like(q)
    ctx = qattn.Context(backend="hip", device=torch.cuda.current_device())
    plan = ctx.decode_plan(q, kc, vc, indptr, indices, lens, k_scale=ks, v_scale=ks,
                           page_size=P, max_kv_len=L, kv_format="fp8_e4m3fn")
    print(plan)
    for _ in range(20):
        plan.run(q, out=out)
    kern = []
    for _ in range(50):
        plan.run(q, out=out)
        kern.append(ctx.last_op_time_ms() * 1e3)
    kernel_us = statistics.median(kern)

    eager = issue_time_us(lambda: plan.run(q, out=out), a.calls)
    op = torch.ops.qattn.decode
    args = (q, kc, vc, ks, ks, indptr, indices, lens, None, out, None, plan.workspace, plan.id, 0)
    via_op = issue_time_us(lambda: op(*args), a.calls)
    plan.refresh()  # then plan.run's own entry is the only one
    plan.run(q, out=out)
    entry, = plan._args_cache.values()
    c_args = entry[1]  # (wrap generation, the filled DecodeArgs, ...)
    ws_buf, ws_off = plan._bound_workspace(plan.workspace)
    run_c, h, p = ctx._lib.qattn_decode_run, ctx.handle, ctypes.byref(plan._plan)
    ca = ctypes.byref(c_args)
    bare_c = issue_time_us(lambda: run_c(h, p, ca, ws_buf, ws_off), a.calls)

    torch.cuda.synchronize()
    n = a.calls
    t0 = time.perf_counter()
    for _ in range(n):
        plan.run(q, out=out)
    torch.cuda.synchronize()
    wall = (time.perf_counter() - t0) / n * 1e6

    per_graph = 100
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        plan.run(q, out=out)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for _ in range(per_graph):
            plan.run(q, out=out)
    g.replay()
    torch.cuda.synchronize()
    reps = 20
    t0 = time.perf_counter()
    for _ in range(reps):
        g.replay()
    torch.cuda.synchronize()
    replay = (time.perf_counter() - t0) / (reps * per_graph) * 1e6
    ev0, ev1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ev0.record()
    g.replay()
    ev1.record()
    torch.cuda.synchronize()
    replay_dev = ev0.elapsed_time(ev1) * 1e3 / per_graph

    rows = [("kernel time (backend timer)", kernel_us),
            ("plan.run eager: host issue time", eager),
            ("torch.ops.qattn.decode: host issue time", via_op),
            ("bare C call (ctypes, prebuilt args): host issue time", bare_c),
            ("python overhead (plan.run - bare C)", eager - bare_c),
            ("back-to-back plan.run: wall per call", wall),
            ("back-to-back wall minus kernel", wall - kernel_us),
            ("CUDA graph replay: wall per decode", replay),
            ("CUDA graph replay: device time per decode", replay_dev),
            ("graph replay minus kernel time", replay_dev - kernel_us)]
    print("overhead (B=%d, Hq=%d, Hkv=%d, D=%d, fp8 cache, %d keys), microseconds per call:" %
          (B, Hq, Hkv, D, L))
    for name, us in rows:
        print("  %-55s %8.2f" % (name, us))
    target = eager - bare_c < 20.0
    print("overhead: python adds %.2f us per eager call (target < 20 us): %s" %
          (eager - bare_c, "PASS" if target else "FAIL"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
