"""How long plans and DeviceArrays hold device memory (issue 24, item 9).

A plan or DeviceArray no longer referenced frees its buffers at once (the
context holds them weakly); plan.close() frees a plan's explicitly;
Context.close() frees the ones still alive. The buffers are counted where
they are made and freed, at the C calls (libspy's watch on the context's
library), and on the cpu backend also as process memory."""
import gc
import zlib

import numpy as np
import pytest

import qattn
from libspy import spy_on
from test_numpy import check_decode, make_decode, make_mqa, plan_kw

LOOPS = 40


def decode_args(p):
    return (p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"], p["kv_lens"])


def rng_for(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def test_dropped_plans_free_their_buffers(fresh_ctx, request):
    """Plans made and dropped in a loop (decode with a workspace, MQA, a
    plan over DeviceArrays and its DeviceArray outputs): the context's live
    C buffers come back to where they were after every iteration."""
    ctx, rng = fresh_ctx, rng_for(request)
    spy = spy_on(ctx)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    mq = make_mqa(rng)
    dks = ctx.buffer(p["k_scale"])
    base = spy.live_buffers
    for i in range(LOOPS):
        plan = ctx.decode_plan(*decode_args(p), num_splits=3, **plan_kw(p, "fp8_e4m3fn"))
        assert plan.workspace_bytes > 0
        plan.run()
        plan2 = ctx.decode_plan(*decode_args(p), num_splits=2, page_size=16, max_kv_len=128,
                                k_scale=dks, v_scale=ctx.buffer(p["v_scale"]),
                                kv_format="fp8_e4m3fn")
        plan2.run(out=ctx.empty(plan2.out_shape, "bf16"))
        mplan = ctx.mqa_logits_plan(*mq, q_format="fp8_e4m3fn", k_format="fp8_e4m3fn")
        mplan.run()
        del plan, plan2, mplan
        wrapped = len(ctx._wrapped)  # cpu: host arrays wrapped once, cached by address
        assert spy.live_buffers - wrapped == base, \
            "iteration %d: %d buffers more than before" % (i, spy.live_buffers - wrapped - base)
    assert spy.buffers_allocated >= base + 3 * LOOPS  # the loop did allocate
    assert len(ctx._live) == 1  # dks


def test_dropped_plans_return_memory(fresh_ctx, request):
    """Plans over fresh 4 MiB K and V caches each, made, run and dropped 40 times:
    the process's resident memory does not grow by their sum (a plan holds
    the operands it was made with, and its workspace)."""
    try:
        statm = open("/proc/self/statm")
    except OSError:
        pytest.skip("skipped: no /proc/self/statm here")
    ctx, rng = fresh_ctx, rng_for(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    slots = (4 << 20) // (2 * 128)

    def resident():
        statm.seek(0)
        return int(statm.read().split()[1]) * 4096

    def padded(a, fill):
        big = np.full((slots,) + a.shape[1:], fill, a.dtype)  # written: its pages are resident
        big[:len(a)] = a
        return big

    def one():
        plan = ctx.decode_plan(p["q"], padded(p["k_cache"], 1), padded(p["v_cache"], 1),
                               p["kv_indptr"], p["kv_indices"], p["kv_lens"], num_splits=3,
                               page_size=16, max_kv_len=128, k_scale=padded(p["k_scale"], 1),
                               v_scale=padded(p["v_scale"], 1), kv_format="fp8_e4m3fn")
        plan.run()

    one()
    gc.collect()
    before = resident()
    for _ in range(LOOPS):
        one()
    grown = resident() - before
    assert grown < 64 << 20, "resident memory grew by %d MiB over %d plans of 8 MiB operands" % (
        grown >> 20, LOOPS)


def test_plan_close(fresh_ctx, request):
    """close() frees the plan's workspace (when no plan made by bind() from
    it still uses it), is idempotent, and a later run raises QattnError
    saying the plan is closed; a bound plan keeps working after its
    origin is closed."""
    ctx, rng = fresh_ctx, rng_for(request)
    spy = spy_on(ctx)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    base = spy.live_buffers
    plan = ctx.decode_plan(*decode_args(p), num_splits=3, **plan_kw(p, "fp8_e4m3fn"))
    want = plan.run().copy()
    wrapped = len(ctx._wrapped)
    assert spy.live_buffers - wrapped == base + 1  # the workspace
    plan.close()
    plan.close()
    assert plan.closed and spy.live_buffers - len(ctx._wrapped) == base
    with pytest.raises(qattn.QattnError, match="DecodePlan: the plan is closed"):
        plan.run()
    with pytest.raises(qattn.QattnError, match="the plan is closed"):
        plan.bind(k_scale=p["k_scale"])
    plan = ctx.decode_plan(*decode_args(p), num_splits=3, **plan_kw(p, "fp8_e4m3fn"))
    bound = plan.bind(k_scale=p["k_scale"].copy())
    plan.close()  # the workspace stays: bound uses it
    assert spy.live_buffers - len(ctx._wrapped) == base + 1
    assert np.array_equal(bound.run(), want)
    bound.close()
    assert spy.live_buffers - len(ctx._wrapped) == base
    mplan = ctx.mqa_logits_plan(*make_mqa(rng), q_format="fp8_e4m3fn", k_format="fp8_e4m3fn")
    mplan.close()
    with pytest.raises(qattn.QattnError, match="MqaLogitsPlan: the plan is closed"):
        mplan.run()


def test_context_close_frees_live_plans(fresh_ctx, request):
    """Context.close() frees the buffers of the plans and DeviceArrays still
    referenced, and marks the plans closed."""
    ctx, rng = fresh_ctx, rng_for(request)
    spy = spy_on(ctx)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    plans = [ctx.decode_plan(*decode_args(p), num_splits=3, **plan_kw(p, "fp8_e4m3fn"))
             for _ in range(3)]
    arrays = [ctx.buffer(p["q"]) for _ in range(2)]
    check_decode(plans[0].run(), None, p, "fp8_e4m3fn", 0, 1 / np.sqrt(128))
    assert spy.live_buffers >= 5
    ctx.close()
    assert spy.live_buffers == 0 and spy.by_name["qattn_context_free"] == 1
    assert all(pl.closed for pl in plans)
    with pytest.raises(qattn.QattnError, match="the context is closed"):
        plans[1].run()
    with pytest.raises(qattn.QattnError, match="the context is closed"):
        arrays[0].numpy()


def test_finalizer_never_waits_for_the_lock(fresh_ctx):
    """A DeviceArray collected while another thread is inside its context
    (holds its lock) does not wait for it -- a finalizer runs in whatever
    thread the collector does, perhaps one holding another context's lock,
    so waiting could deadlock -- its buffer is freed at the context's next
    call instead."""
    import threading
    import time
    ctx = fresh_ctx
    spy = spy_on(ctx)
    base = spy.live_buffers
    d = ctx.empty((16,), "f32")
    assert spy.live_buffers == base + 1
    inside, leave = threading.Event(), threading.Event()

    def holder():
        with ctx.lock:
            inside.set()
            leave.wait(3)
    t = threading.Thread(target=holder)
    t.start()
    inside.wait()
    t0 = time.monotonic()
    del d  # the finalizer runs here, while the holder is inside the context
    waited = time.monotonic() - t0
    deferred = len(getattr(ctx, "_pending_free", ()))
    leave.set()
    t.join()
    assert waited < 1 and deferred == 1, "the finalizer waited %.1f s for the lock" % waited
    ctx.synchronize()  # the next call frees it
    assert spy.live_buffers == base and not ctx._pending_free
