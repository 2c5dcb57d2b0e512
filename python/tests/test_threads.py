"""Contexts, plans and DeviceArrays shared between threads (issue 24, item 1).

ctypes releases the GIL during every C call, and the C API allows a context
on one thread at a time (core/include/qattn/vulkan.h), so the package holds
a lock per context around every C call that touches it. These tests run one
plan (and make plans, DeviceArrays, KV stores and MQA logits) from several
threads at once on each backend and check every result against the same
call made on one thread. The context's library is watched (libspy): no two
calls may be inside the context at once (max_in_use == 1). The last test
takes the lock away and sees the watch fire, so the check can fail."""
import threading
import zlib

import numpy as np

import qattn
from libspy import spy_on
from test_numpy import make_decode, make_mqa, make_store, plan_kw

THREADS = 8
ITERS = 3
HOLD = 0.0002  # seconds each watched call sleeps inside the context


def hammer(fn, n=THREADS):
    """Runs fn(i) on n threads released together; returns what they raised."""
    errors = []
    start = threading.Barrier(n)

    def body(i):
        try:
            start.wait()
            fn(i)
        except BaseException as e:  # noqa: B902 (reported by the caller)
            errors.append((i, repr(e)))
    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def rng_for(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def decode_case(ctx, rng):
    p = make_decode(rng, fmt="fp8_e4m3fn")
    args = (p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"], p["kv_lens"])
    return p, args, plan_kw(p, "fp8_e4m3fn")


def test_threads_share_one_plan(fresh_ctx, request):
    """THREADS threads, each ITERS times: run one shared decode plan (host
    operands, staged off cpu), make a plan of their own and run it, run a
    plan over DeviceArrays, write a KV store and run an MQA logits plan; all
    on one context, each result equal to the one-thread result."""
    ctx, rng = fresh_ctx, rng_for(request)
    spy = spy_on(ctx, HOLD)
    p, args, kw = decode_case(ctx, rng)
    plan = ctx.decode_plan(*args, num_splits=2, **kw)
    want = plan.run().copy()
    dev = [ctx.buffer(a, format="fp8_e4m3fn" if a.dtype == np.uint8 else None) for a in args]
    dplan = ctx.decode_plan(*dev, k_scale=ctx.buffer(p["k_scale"]),
                            v_scale=ctx.buffer(p["v_scale"]), page_size=16, max_kv_len=128)
    dwant = dplan.run().numpy()
    mq = make_mqa(rng)
    mplan = ctx.mqa_logits_plan(*mq, q_format="fp8_e4m3fn", k_format="fp8_e4m3fn")
    mwant = mplan.run().copy()
    store = make_store(rng, "fp8_e4m3fn")
    kc, vc, ks, vs = (a.copy() for a in store[3:])
    ctx.kv_store(*store[:3], kc, vc, ks, vs, kv_format="fp8_e4m3fn")
    assert (want != 0).any() and np.isfinite(mwant).any()

    def work(i):
        for it in range(ITERS):
            o = plan.run()
            assert np.array_equal(o, want), "thread %d, call %d: shared plan" % (i, it)
            own = ctx.decode_plan(*args, num_splits=2, **kw)
            assert np.array_equal(own.run(), want), "thread %d: its own plan" % i
            assert np.array_equal(dplan.run().numpy(), dwant), "thread %d: DeviceArrays" % i
            m = mplan.run()
            assert np.array_equal(m, mwant, equal_nan=True), "thread %d: MQA logits" % i
            k2, v2, s2, t2 = (a.copy() for a in store[3:])
            ctx.kv_store(*store[:3], k2, v2, s2, t2, kv_format="fp8_e4m3fn")
            assert np.array_equal(k2, kc) and np.array_equal(t2, vs), "thread %d: kv_store" % i

    spy.max_in_use = 0
    calls0 = spy.calls
    errors = hammer(work)
    assert not errors, errors[:3]
    assert spy.calls - calls0 >= THREADS * ITERS * 5, "the calls did not reach the library"
    assert spy.max_in_use == 1, \
        "%d calls were inside the context at once" % spy.max_in_use


def test_threads_close_while_running(fresh_ctx, request):
    """Threads running a plan while another thread closes the context: each
    call either finishes with the right result or raises QattnError saying
    the context is closed; nothing reaches a freed context."""
    ctx, rng = fresh_ctx, rng_for(request)
    spy = spy_on(ctx, HOLD)
    p, args, kw = decode_case(ctx, rng)
    plan = ctx.decode_plan(*args, **kw)
    want = plan.run().copy()
    ran = threading.Semaphore(0)
    outcomes = []

    def work(i):
        if i == 0:
            for _ in range(THREADS):
                ran.acquire()  # some calls are done, others in flight
            ctx.close()
            return
        while True:
            try:
                o = plan.run()
            except qattn.QattnError as e:
                assert "closed" in e.message, e.message
                outcomes.append("closed")
                return
            assert np.array_equal(o, want)
            ran.release()

    errors = hammer(work)
    assert not errors, errors[:3]
    assert outcomes.count("closed") == THREADS - 1
    assert spy.max_in_use == 1


class _NoLock:
    """What a context's lock would be without item 1's fix."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    acquire = release = lambda self, *a, **k: True


def test_threads_watch_fires_without_the_lock(request):
    """The check of the tests above can fail: with the context's lock
    replaced by one that holds nothing, the watch sees two calls inside
    the context at once (cpu backend only: its calls survive the overlap,
    lavapipe's crash the interpreter)."""
    ctx = qattn.Context(backend="cpu")
    try:
        spy = spy_on(ctx, HOLD)
        p, args, kw = decode_case(ctx, rng_for(request))
        plan = ctx.decode_plan(*args, **kw)
        plan.run()
        ctx._lock = _NoLock()
        errors = hammer(lambda i: [plan.run() for _ in range(ITERS)])
        assert not errors, errors[:3]
        assert spy.max_in_use > 1, "the watch cannot see two threads in one context"
    finally:
        ctx._lock = threading.RLock()
        ctx.close()
