"""Bad arguments the binding itself must refuse, naming them (issue 24,
items 4 and 5): scalars that do not fit their C field (ctypes would store
them modulo 2^32 or as inf), operands of a rank a qattn_tensor cannot hold,
and any call on a closed context. On each backend that opens a device here
(cpu and lavapipe in CI; hip on the GPU machine)."""
import zlib

import numpy as np
import pytest

import qattn
from test_numpy import make_decode, make_mqa, make_store, plan_kw

BAD_INT32 = [2**32 + 2, 2**31, -(2**31) - 1]


def rng_for(request):
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


def message(e):
    return e.message if isinstance(e, qattn.QattnError) else str(e)


def assert_names(excinfo, name):
    """The error's message starts with the argument's name."""
    m = message(excinfo.value)
    assert m.startswith(name + ":"), "%s: %r does not name it first" % (name, m)


def decode_setup(ctx, request):
    p = make_decode(rng_for(request), fmt="fp8_e4m3fn")
    args = dict(q=p["q"], k_cache=p["k_cache"], v_cache=p["v_cache"], kv_indptr=p["kv_indptr"],
                kv_indices=p["kv_indices"], kv_lens=p["kv_lens"])
    return p, args, plan_kw(p, "fp8_e4m3fn")


# ---- item 4: scalars in their C fields' ranges ---------------------------
@pytest.mark.parametrize("name", ["page_size", "max_kv_len", "window_left", "num_splits"])
@pytest.mark.parametrize("value", BAD_INT32)
def test_decode_int32_scalars_range_checked(fresh_ctx, request, name, value):
    """2^32 + 2 used to run as 2 (page_size, max_kv_len, window_left,
    num_splits are int32 fields)."""
    p, args, kw = decode_setup(fresh_ctx, request)
    kw[name] = value
    with pytest.raises(ValueError, match="outside the range of its C field") as e:
        fresh_ctx.decode_plan(**args, **kw)
    assert_names(e, name)
    assert str(value) in str(e.value)


@pytest.mark.parametrize("name", ["sm_scale", "logit_softcap"])
@pytest.mark.parametrize("value", [1e39, -3.5e38])
def test_decode_float_scalars_range_checked(fresh_ctx, request, name, value):
    """A finite value beyond FLT_MAX used to become inf in the float field."""
    p, args, kw = decode_setup(fresh_ctx, request)
    kw[name] = value
    with pytest.raises(ValueError, match="outside the range of its C field") as e:
        fresh_ctx.decode_plan(**args, **kw)
    assert_names(e, name)


@pytest.mark.parametrize("name", ["rows_per_subgroup", "kv_slices"])
@pytest.mark.parametrize("value", BAD_INT32)
def test_mqa_int32_options_range_checked(fresh_ctx, request, name, value):
    """2^32 + 2 used to run as 2 (rows_per_subgroup, kv_slices: int32)."""
    mq = make_mqa(rng_for(request))
    with pytest.raises(ValueError, match="outside the range of its C field") as e:
        fresh_ctx.mqa_logits_plan(*mq, q_format="fp8_e4m3fn", k_format="fp8_e4m3fn",
                                  **{name: value})
    assert_names(e, name)


def test_scalar_types(cpu, request):
    """Integral values of any integer type (and 16.0) pass; 16.5 and a
    string are refused naming the argument, not truncated."""
    p, args, kw = decode_setup(cpu, request)
    want = cpu.decode_plan(**args, **kw).run()
    for ok in (np.int64(16), np.int32(16), 16.0):
        assert np.array_equal(cpu.decode_plan(**args, **dict(kw, page_size=ok)).run(), want)
    for bad, err in ((16.5, TypeError), ("16", TypeError), (np.float32(16.5), TypeError)):
        with pytest.raises(err) as e:
            cpu.decode_plan(**args, **dict(kw, page_size=bad))
        assert_names(e, "page_size")
    with pytest.raises(TypeError) as e:
        cpu.decode_plan(**args, **dict(kw, sm_scale="big"))
    assert_names(e, "sm_scale")


@pytest.mark.parametrize("stream", [2**64 + 1, -1])
def test_stream_handle_range_checked(fresh_ctx, request, stream):
    """A stream handle is a pointer: one outside 64 bits used to wrap."""
    p, args, kw = decode_setup(fresh_ctx, request)
    plan = fresh_ctx.decode_plan(**args, **kw)
    with pytest.raises(ValueError, match="outside the range") as e:
        plan.run(stream=stream)
    assert_names(e, "stream")


def test_device_array_sizes(fresh_ctx):
    """Extents and byte counts beyond int64 used to wrap (2^68 bytes asked
    for 0); negative extents made a negative size."""
    with pytest.raises(ValueError) as e:
        fresh_ctx.empty((2**33, 2**33), "f32")
    assert_names(e, "shape (8589934592, 8589934592): the bytes")
    with pytest.raises(ValueError) as e:
        fresh_ctx.empty((2**64 + 4,), "f32")
    assert_names(e, "shape[0]")
    with pytest.raises(ValueError) as e:
        fresh_ctx.empty((-1, 4), "f32")
    assert_names(e, "shape")
    with pytest.raises(ValueError) as e:
        fresh_ctx.empty((4,), "f64")
    assert_names(e, "dtype")


# ---- item 5: operands of a bad rank, named -------------------------------
DECODE_DTYPES = dict(q=np.uint16, k_cache=np.uint8, v_cache=np.uint8, k_scale=np.float32,
                     v_scale=np.float32, kv_indptr=np.int32, kv_indices=np.int32,
                     kv_lens=np.int32, sinks=np.float32, out=np.uint16, lse=np.float32)


def bad_rank(dtype, rank):
    return np.zeros((1,) * rank, dtype)


@pytest.mark.parametrize("rank", [0, 5])
@pytest.mark.parametrize("name", list(DECODE_DTYPES))
def test_decode_operand_rank_named(fresh_ctx, request, name, rank):
    """Each decode operand of rank 0 or 5, at planning and at run: the error
    names it (a rank-0 v_cache used to raise a bare IndexError, others
    "rank 0: ..." without the operand)."""
    ctx = fresh_ctx
    p, args, kw = decode_setup(ctx, request)
    bad = bad_rank(DECODE_DTYPES[name], rank)
    plan_args = dict(args, **kw, return_lse=True)
    plan_args[name] = bad
    with pytest.raises((ValueError, qattn.QattnError)) as e:
        ctx.decode_plan(**plan_args)
    assert_names(e, name)
    plan = ctx.decode_plan(**args, **kw, return_lse=True)
    with pytest.raises((ValueError, qattn.QattnError)) as e:
        plan.run(**{name: bad})
    assert_names(e, name)
    if name in ("k_scale", "sinks"):  # a DeviceArray of that rank
        with pytest.raises((ValueError, qattn.QattnError)) as e:
            plan.run(**{name: ctx.buffer(bad)})
        assert_names(e, name)


MQA_DTYPES = dict(q=np.uint8, k=np.uint8, k_scale=np.float32, weights=np.float32, ks=np.int32,
                  ke=np.int32, out=np.float32)


@pytest.mark.parametrize("rank", [0, 5])
@pytest.mark.parametrize("name", list(MQA_DTYPES))
def test_mqa_operand_rank_named(fresh_ctx, request, name, rank):
    q, k, k_scale, weights, ks, ke = make_mqa(rng_for(request))
    ops = dict(q=q, k=k, k_scale=k_scale, weights=weights, ks=ks, ke=ke)
    fmts = dict(q_format="fp8_e4m3fn", k_format="fp8_e4m3fn")
    bad = bad_rank(MQA_DTYPES[name], rank)
    with pytest.raises((ValueError, qattn.QattnError)) as e:
        fresh_ctx.mqa_logits_plan(**dict(ops, **{name: bad}), **fmts)
    assert_names(e, name)
    plan = fresh_ctx.mqa_logits_plan(**ops, **fmts)
    if name in ("q", "k"):  # run() takes them; the plan refuses another rank
        return
    with pytest.raises((ValueError, qattn.QattnError)) as e:
        plan.run(**{name: bad})
    assert_names(e, name)


STORE_NAMES = ("k_new", "v_new", "slot_mapping", "k_cache", "v_cache", "k_scale", "v_scale")


@pytest.mark.parametrize("rank", [0, 5])
@pytest.mark.parametrize("name", STORE_NAMES)
def test_kv_store_operand_rank_named(fresh_ctx, request, name, rank):
    ops = dict(zip(STORE_NAMES, make_store(rng_for(request), "fp8_e4m3fn")))
    ops[name] = bad_rank(ops[name].dtype, rank)
    with pytest.raises((ValueError, qattn.QattnError)) as e:
        fresh_ctx.kv_store(**ops, kv_format="fp8_e4m3fn")
    assert_names(e, name)


# ---- item 5: a closed context says so -----------------------------------
def test_closed_context_says_so(fresh_ctx, request):
    """Every call after Context.close() raises QattnError saying the
    context is closed (plan.run() used to raise one with an empty
    message)."""
    ctx = fresh_ctx
    p, args, kw = decode_setup(ctx, request)
    plan = ctx.decode_plan(**args, **kw)
    mq = make_mqa(rng_for(request))
    mplan = ctx.mqa_logits_plan(*mq, q_format="fp8_e4m3fn", k_format="fp8_e4m3fn")
    d = ctx.buffer(p["k_scale"])
    store = make_store(rng_for(request), "fp8_e4m3fn")
    ctx.close()
    ctx.close()  # idempotent
    assert ctx.closed and repr(ctx) == "qattn.Context(closed)"
    calls = {
        "DecodePlan": lambda: plan.run(),
        "DecodePlan ": lambda: plan.run(p["q"], out=np.empty(plan.out_shape, np.uint16)),
        "MqaLogitsPlan": lambda: mplan.run(),
        "DecodePlan  ": lambda: ctx.decode_plan(**args, **kw),
        "MqaLogitsPlan ": lambda: ctx.mqa_logits_plan(*mq, q_format="fp8_e4m3fn",
                                                      k_format="fp8_e4m3fn"),
        "kv_store": lambda: ctx.kv_store(*store, kv_format="fp8_e4m3fn"),
        "buffer": lambda: ctx.buffer(p["k_scale"]),
        "DeviceArray": lambda: ctx.empty((4,), "f32"),
        "DeviceArray.numpy": lambda: d.numpy(),
        "DeviceArray.upload": lambda: d.upload(p["k_scale"]),
        "synchronize": lambda: ctx.synchronize(),
        "caps": lambda: ctx.caps,
    }
    for what, call in calls.items():
        with pytest.raises(qattn.QattnError) as e:
            call()
        assert e.value.message == "%s: the context is closed (close() was called); " \
            "make a new one" % what.strip(), (what, e.value.message)
        assert e.value.status_name == "QATTN_ERR_INVALID_ARGUMENT"


# ---- item 5: an output over an input, one answer on every backend --------
def test_output_over_input_refused_alike(fresh_ctx, cpu, request):
    """out = q: the cpu backend (reading host memory itself) refused it,
    Vulkan's host staging copied q and out into two buffers and ran. Host
    ranges that overlap are staged as one buffer now, so every backend gives
    the cpu's answer and writes nothing."""
    msgs = []
    for ctx in (cpu, fresh_ctx):
        p, args, kw = decode_setup(ctx, request)
        plan = ctx.decode_plan(**args, **kw)
        q = p["q"].copy()
        before = q.copy()
        with pytest.raises(qattn.QattnError) as e:
            plan.run(q, out=q)
        assert np.array_equal(q, before), "%s: the refused call wrote its output" % ctx.backend
        msgs.append(message(e.value))
    assert msgs[1] == msgs[0], "%s answers %r, cpu %r" % (fresh_ctx.backend, msgs[1], msgs[0])


# ---- issue 27: the library's rules for dtypes and head dims, named -------
def test_new_axes_refusals_name_the_argument_and_rule(fresh_ctx, request):
    """What issue 27 still refuses reaches Python as the library's message,
    starting with the argument and stating the rule: q or out neither bf16
    nor f16, head dims that are not multiples of 16 in [16, 256] (D 88, D
    272, Dv 8), k_new and v_new of different dtypes."""
    rng = rng_for(request)
    p, args, kw = decode_setup(fresh_ctx, request)
    cases = [
        ("q: dtype f32 not allowed (expected bf16|f16)",
         dict(args, q=p["q"].astype(np.float32)), {}),
        ("o: dtype f32 not allowed (expected bf16|f16)",
         args, dict(out=np.zeros(p["q"].shape, np.float32))),
    ]
    slots, hkv = p["k_cache"].shape[:2]
    for what, d, dv in (("k_cache: head dim 88", 88, 88), ("k_cache: head dim 272", 272, 272),
                        ("v_cache: head dim 8", 128, 8)):
        k = np.zeros((slots, hkv, d), np.uint8)
        v = np.zeros((slots, hkv, dv), np.uint8)
        cases.append((what + " is not a multiple of 16 in [16, 256]",
                      dict(args, q=np.zeros(p["q"].shape[:3] + (d,), np.float16), k_cache=k,
                           v_cache=v), {}))
    for want, a, extra in cases:
        with pytest.raises(qattn.QattnError) as e:
            fresh_ctx.decode_plan(**a, **dict(kw, **extra))
        assert e.value.status_name in ("QATTN_ERR_DTYPE", "QATTN_ERR_SHAPE")
        assert message(e.value).startswith(want), "want %r, got %r" % (want, message(e.value))
    k_new, v_new, sm, kc, vc, ks, vs = make_store(rng, "fp8_e5m2", src="f16")
    kc[...] = 0x11
    with pytest.raises(qattn.QattnError) as e:  # f16 k_new, bf16 bits for v_new
        fresh_ctx.kv_store(k_new, v_new.view(np.uint16), sm, kc, vc, ks, vs, kv_format="fp8_e5m2")
    assert e.value.status_name == "QATTN_ERR_DTYPE"
    assert message(e.value).startswith("v_new: dtype bf16 differs from k_new's f16")
    assert (kc == 0x11).all() and (vc == 0).all(), "a refused KV store wrote the cache"
