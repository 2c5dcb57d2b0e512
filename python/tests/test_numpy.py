"""The package on numpy arrays, on every backend that opens a device here
(cpu always; vulkan on lavapipe in CI): every op against the float64
references of refs.py and, off the cpu backend, against the cpu backend
itself, with the spec's tolerances (section 4). Outputs are poisoned
before each run and surrounded by guard elements."""
import zlib

import numpy as np
import pytest

import qattn
from refs import (FMAX, DLPackOnly, bf16_to_f64, decode_codes, decode_ref, f32_to_bf16,
                  half_to_f64, mqa_ref, random_fp8)

GUARD = 8
POISON_BF16 = 0xFFFF  # a NaN
SCALE = {"fp8_e4m3fn": (0.002, 0.006), "fp8_e4m3fnuz": (0.004, 0.012), "i8": (0.01, 0.03),
         "fp8_e5m2": (5e-5, 1.5e-4)}


def seeded(request):
    seed = zlib.crc32(request.node.nodeid.encode())
    return seed, np.random.default_rng(seed)


def guarded(shape, dtype, poison):
    """An array of `shape` inside a poisoned one with GUARD elements on both
    sides; returns (view, whole)."""
    n = int(np.prod(shape))
    whole = np.full(n + 2 * GUARD, poison, dtype=dtype)
    return whole[GUARD:GUARD + n].reshape(shape), whole


def guards_intact(whole, poison):
    return (whole[:GUARD] == poison).all() and (whole[-GUARD:] == poison).all()


def cache_codes(rng, shape, fmt):
    if fmt == "bf16":
        return f32_to_bf16(rng.normal(0, 1, shape).astype(np.float32))
    if fmt == "i8":
        return rng.integers(-127, 128, size=shape, dtype=np.int8)
    return random_fp8(rng, shape, fmt)


def make_decode(rng, B=3, R=1, Hq=8, Hkv=2, D=128, P=16, fmt="fp8_e4m3fn", head_major=False,
                Dv=None, q_f16=False):
    """Random operands; q as bf16 bits (uint16) or, with q_f16, float16; V of
    head dim Dv (default D)."""
    Dv = D if Dv is None else Dv
    lens = rng.integers(R, 70, size=B).astype(np.int32)
    pages_per = [(int(n) + P - 1) // P for n in lens]
    n_pages = sum(pages_per) + 2
    slots = n_pages * P
    perm = rng.permutation(n_pages).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum(pages_per)]).astype(np.int32)
    indices = perm[:indptr[-1]].copy()
    if head_major:  # [Hkv, N_slots, D] memory, read as [N_slots, Hkv, D]
        k = np.ascontiguousarray(cache_codes(rng, (Hkv, slots, D), fmt)).transpose(1, 0, 2)
        v = np.ascontiguousarray(cache_codes(rng, (Hkv, slots, Dv), fmt)).transpose(1, 0, 2)
    else:
        k, v = cache_codes(rng, (slots, Hkv, D), fmt), cache_codes(rng, (slots, Hkv, Dv), fmt)
    ks = vs = None
    if fmt != "bf16":
        lo, hi = SCALE[fmt]
        ks = rng.uniform(lo, hi, (slots, Hkv)).astype(np.float32)
        vs = rng.uniform(lo, hi, (slots, Hkv)).astype(np.float32)
    q = rng.normal(0, 1, (B, R, Hq, D)).astype(np.float32)
    q = q.astype(np.float16) if q_f16 else f32_to_bf16(q)
    return dict(q=q, k_cache=k, v_cache=v, k_scale=ks, v_scale=vs, kv_indptr=indptr,
                kv_indices=indices, kv_lens=lens, page_size=P)


def fmt_kw(fmt):
    return {"kv_format": fmt} if fmt.startswith("fp8") else {}


def plan_kw(p, fmt, max_kv_len=128):
    kw = {k: p[k] for k in ("k_scale", "v_scale")}
    kw.update(page_size=p["page_size"], max_kv_len=max_kv_len, **fmt_kw(fmt))
    return kw


def check_decode(o_bits, lse, p, fmt, seed, sm_scale, **refkw):
    """o_bits: bf16 bits (uint16) or float16 values."""
    o_ref, lse_ref = decode_ref(p["q"], p["k_cache"], p["v_cache"], p["k_scale"], p["v_scale"],
                                p["kv_indptr"], p["kv_indices"], p["kv_lens"], p["page_size"],
                                sm_scale, fmt, **refkw)
    o = half_to_f64(o_bits)
    assert not np.isnan(o).any(), "seed %d: NaN in o (poison left?)" % seed
    err = np.abs(o - o_ref) - (2e-3 + 2e-2 * np.abs(o_ref))
    assert (err <= 0).all(), "seed %d: o off by %g beyond tolerance at %s" % (
        seed, err.max(), np.unravel_index(err.argmax(), err.shape))
    if lse is not None:
        fin = np.isfinite(lse_ref)
        assert (np.isneginf(lse[~fin])).all(), "seed %d: lse of empty rows" % seed
        e = np.abs(lse[fin] - lse_ref[fin]) - (1e-3 + 1e-3 * np.abs(lse_ref[fin]))
        assert (e <= 0).all(), "seed %d: lse off by %g" % (seed, e.max())


def run_decode(ctx, p, fmt, o_f16=False, **extra):
    """Plans and runs into guarded, poisoned outputs (o: bf16 bits, or with
    o_f16 float16; the poison is NaN in both); returns (o, lse, plan)."""
    B, R, Hq, _ = p["q"].shape
    o, o_whole = guarded((B, R, Hq, p["v_cache"].shape[2]), np.uint16, POISON_BF16)
    if o_f16:
        o = o.view(np.float16)
    lse, lse_whole = guarded((B, R, Hq), np.float32, np.float32(np.nan))
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"],
                           p["kv_lens"], return_lse=True, out=o, lse=lse,
                           **plan_kw(p, fmt), **extra)
    ro, rl = plan.run(out=o, lse=lse)
    assert ro is o and rl is lse
    assert guards_intact(o_whole, POISON_BF16), "a write outside o"
    assert np.isnan(lse_whole[:GUARD]).all() and np.isnan(lse_whole[-GUARD:]).all(), \
        "a write outside lse"
    return o.copy(), lse.copy(), plan


@pytest.mark.parametrize("fmt", ["bf16", "fp8_e4m3fn", "fp8_e4m3fnuz", "i8", "fp8_e5m2"])
@pytest.mark.parametrize("R,D", [(1, 128), (2, 64)])
def test_decode(ctx, cpu, request, fmt, R, D):
    seed, rng = seeded(request)
    p = make_decode(rng, R=R, D=D, fmt=fmt)
    o, lse, plan = run_decode(ctx, p, fmt)
    check_decode(o, lse, p, fmt, seed, 1 / np.sqrt(D))
    assert plan.variant in ("simt", "matrix") and plan.num_splits >= 1
    if ctx.backend != "cpu":  # parity with the cpu backend, the spec's reference
        o_c, lse_c, _ = run_decode(cpu, p, fmt)
        ref = bf16_to_f64(o_c)
        assert (np.abs(bf16_to_f64(o) - ref) <= 2e-3 + 2e-2 * np.abs(ref)).all(), "seed %d" % seed


@pytest.mark.parametrize("fmt", ["fp8_e5m2", "fp8_e4m3fn", "bf16", "i8"])
@pytest.mark.parametrize("q_f16,D,Dv", [(True, 128, 128), (True, 96, 96), (False, 80, 80),
                                        (True, 192, 128), (False, 64, 128)])
def test_decode_f16_and_head_dims(ctx, cpu, request, fmt, q_f16, D, Dv):
    """Issue 27: f16 q (numpy float16), head dims 80/96/192 and Dv != D; the
    output the plan allocates has q's dtype (float16, or bf16 bits)."""
    seed, rng = seeded(request)
    p = make_decode(rng, R=2, D=D, Dv=Dv, fmt=fmt, q_f16=q_f16)
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"],
                           p["kv_lens"], **plan_kw(p, fmt))
    o = plan.run()
    assert o.shape == (3, 2, 8, Dv) and o.dtype == (np.float16 if q_f16 else np.uint16)
    check_decode(o, None, p, fmt, seed, 1 / np.sqrt(D))
    o2, lse, _ = run_decode(ctx, p, fmt, o_f16=q_f16)
    check_decode(o2, lse, p, fmt, seed, 1 / np.sqrt(D))
    if ctx.backend != "cpu":  # parity with the cpu backend
        o_c, _, _ = run_decode(cpu, p, fmt, o_f16=q_f16)
        ref, got = half_to_f64(o_c), half_to_f64(o2)
        assert (np.abs(got - ref) <= 2e-3 + 2e-2 * np.abs(ref)).all(), "seed %d" % seed


@pytest.mark.parametrize("q_f16,o_f16", [(True, False), (False, True)])
def test_decode_out_dtype_of_its_own(ctx, request, q_f16, o_f16):
    """o's dtype is o's: a caller's bf16 o under an f16 q, and an f16 o under
    a bf16 q (issue 27: o follows q only when the plan allocates it)."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e5m2", q_f16=q_f16)
    o, lse, plan = run_decode(ctx, p, "fp8_e5m2", o_f16=o_f16)
    assert o.dtype == (np.float16 if o_f16 else np.uint16)
    check_decode(o, lse, p, "fp8_e5m2", seed, 1 / np.sqrt(128))
    o2, lse2 = plan.run()  # allocated in the dtype of the out given at planning
    assert o2.dtype == o.dtype and (o2.view(np.uint16) == o.view(np.uint16)).all()


def test_decode_options(ctx, request):
    """Window, softcap, sinks, a pinned split count; the plan is inspectable."""
    seed, rng = seeded(request)
    p = make_decode(rng, R=2, fmt="fp8_e4m3fn")
    sinks = rng.normal(0, 1, 8).astype(np.float32)
    o, lse, plan = run_decode(ctx, p, "fp8_e4m3fn", window_left=20, logit_softcap=30.0,
                              sinks=sinks, num_splits=3)
    check_decode(o, lse, p, "fp8_e4m3fn", seed, 1 / np.sqrt(128), window_left=20,
                 softcap=30.0, sinks=sinks)
    info = plan.info()
    assert info["num_splits"] == 3 == plan.num_splits
    assert info["workspace_bytes"] == plan.workspace_bytes > 0
    assert isinstance(plan.reason, str) and "DecodePlan" in repr(plan)


def test_decode_allocates_output(ctx, request):
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="bf16")
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"],
                           p["kv_lens"], **plan_kw(p, "bf16"))
    o = plan.run()  # every operand from planning, the output allocated
    assert o.shape == (3, 1, 8, 128) and o.dtype == np.uint16
    check_decode(o, None, p, "bf16", seed, 1 / np.sqrt(128))
    # a fresh q of the same shape through the same plan
    p["q"] = f32_to_bf16(rng.normal(0, 1, p["q"].shape).astype(np.float32))
    check_decode(plan.run(p["q"]), None, p, "bf16", seed, 1 / np.sqrt(128))


def test_decode_device_arrays(ctx, request):
    """Operands in DeviceArrays (no host staging per call), read back with .numpy()."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fnuz")
    d = {n: ctx.buffer(p[n], format="fp8_e4m3fnuz" if n in ("k_cache", "v_cache") else None)
         for n in ("q", "k_cache", "v_cache", "k_scale", "v_scale", "kv_indptr", "kv_indices",
                   "kv_lens")}
    assert d["k_cache"].dtype_name == "fp8_e4m3fnuz" and d["q"].dtype_name == "bf16"
    plan = ctx.decode_plan(d["q"], d["k_cache"], d["v_cache"], d["kv_indptr"], d["kv_indices"],
                           d["kv_lens"], k_scale=d["k_scale"], v_scale=d["v_scale"],
                           page_size=16, max_kv_len=128)
    out = plan.run()
    assert isinstance(out, qattn.DeviceArray)
    check_decode(out.numpy(), None, p, "fp8_e4m3fnuz", seed, 1 / np.sqrt(128))


def test_decode_strided_views(ctx, request):
    """A head-major cache (transposed view), per-tensor scales broadcast by a
    stride of 0, q a slice of a wider array, out a slice of a wider one."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn", head_major=True)
    assert not p["k_cache"].flags.c_contiguous
    slots, hkv = p["k_cache"].shape[:2]
    p["k_scale"] = np.broadcast_to(np.float32(0.004), (slots, hkv))
    p["v_scale"] = np.broadcast_to(np.float32(0.003), (slots, hkv))
    wide = np.zeros(p["q"].shape[:3] + (256,), np.uint16)
    wide[..., 64:192] = p["q"]
    p["q"] = wide[..., 64:192]
    out_wide = np.full((3, 1, 8, 192), POISON_BF16, np.uint16)
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"],
                           p["kv_lens"], out=out_wide[..., :128], **plan_kw(p, "fp8_e4m3fn"))
    plan.run(out=out_wide[..., :128])
    assert (out_wide[..., 128:] == POISON_BF16).all(), "a write outside the out view"
    check_decode(out_wide[..., :128], None, p, "fp8_e4m3fn", seed, 1 / np.sqrt(128))


def test_decode_paged_rank4(ctx, request):
    """The cache as [N_pages, P, Hkv, D] (vLLM's layout) with [N_pages, P, Hkv] scales."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn", P=16)
    P = 16
    k4 = p["k_cache"].reshape(-1, P, 2, 128)
    v4 = p["v_cache"].reshape(-1, P, 2, 128)
    plan = ctx.decode_plan(p["q"], k4, v4, p["kv_indptr"], p["kv_indices"], p["kv_lens"],
                           k_scale=p["k_scale"].reshape(-1, P, 2),
                           v_scale=p["v_scale"].reshape(-1, P, 2), page_size=P, max_kv_len=128,
                           kv_format="fp8_e4m3fn")
    check_decode(plan.run(), None, p, "fp8_e4m3fn", seed, 1 / np.sqrt(128))


# ---- KV store ----------------------------------------------------------
def make_store(rng, fmt, T=7, Hkv=2, D=128, slots=40, Dv=None, src="bf16"):
    """k_new / v_new as bf16 bits (uint16) or, src="f16", float16."""
    Dv = D if Dv is None else Dv

    def new(d):
        x = rng.normal(0, 2, (T, Hkv, d)).astype(np.float32)
        return x.astype(np.float16) if src == "f16" else f32_to_bf16(x)
    k_new, v_new = new(D), new(Dv)
    slot_mapping = rng.choice(slots, size=T, replace=False).astype(np.int32)
    slot_mapping[1] = -1  # padding
    dt = {"bf16": np.uint16, "i8": np.int8}.get(fmt, np.uint8)
    k_cache = np.zeros((slots, Hkv, D), dt)
    v_cache = np.zeros((slots, Hkv, Dv), dt)
    ks = vs = None
    if fmt != "bf16":
        ks = np.full((slots, Hkv), -1.0, np.float32)
        vs = np.full((slots, Hkv), -1.0, np.float32)
    return k_new, v_new, slot_mapping, k_cache, v_cache, ks, vs


@pytest.mark.parametrize("fmt", ["bf16", "fp8_e4m3fn", "fp8_e4m3fnuz", "i8", "fp8_e5m2"])
@pytest.mark.parametrize("src,D,Dv", [("bf16", 128, 128), ("f16", 96, 96), ("f16", 192, 128)])
def test_kv_store(ctx, cpu, request, fmt, src, D, Dv):
    """Every cache format from bf16 or f16 (numpy float16) inputs, Dv != D
    included (issue 27): codes decode to within half a step of the input."""
    seed, rng = seeded(request)
    store = dict(D=D, Dv=Dv, src=src)
    k_new, v_new, sm, kc, vc, ks, vs = make_store(rng, fmt, **store)
    ctx.kv_store(k_new, v_new, sm, kc, vc, ks, vs, **fmt_kw(fmt))
    untouched = np.setdiff1d(np.arange(kc.shape[0]), sm)
    assert (kc[untouched] == 0).all() and (vc[untouched] == 0).all(), "seed %d: other slots" % seed
    for new, cache, scale in ((k_new, kc, ks), (v_new, vc, vs)):
        x = half_to_f64(new)
        for t, s in enumerate(sm):
            if s < 0:
                continue
            if fmt == "bf16":  # a copy; f16 rounded to bf16 (nearest even)
                want = new[t] if src == "bf16" else f32_to_bf16(new[t].astype(np.float32))
                assert (cache[s] == want).all(), "seed %d: bf16 copy" % seed
                continue
            amax = np.abs(x[t]).max(axis=-1)
            fmax = FMAX.get(fmt, 127.0)
            want = (amax.astype(np.float32) / np.float32(fmax))
            assert np.allclose(scale[s], want, rtol=1e-6), "seed %d: scale" % seed
            back = decode_codes(cache[s], fmt) * scale[s][:, None]
            # half an ulp at the top, relative: 3 mantissa bits (e4m3), 2 (e5m2)
            step = {"i8": 1.0 / 127, "fp8_e5m2": 2.0 ** -3}.get(fmt, 2.0 ** -4)
            assert (np.abs(back - x[t]) <= step * amax[:, None] + 1e-12).all(), \
                "seed %d: decoded cache far from the input" % seed
    if ctx.backend != "cpu":  # codes and scales bit-identical to the cpu backend
        _, _, _, kc2, vc2, ks2, vs2 = make_store(np.random.default_rng(seed), fmt, **store)
        cpu.kv_store(k_new, v_new, sm, kc2, vc2, ks2, vs2, **fmt_kw(fmt))
        assert (kc2 == kc).all() and (vc2 == vc).all(), "seed %d: codes differ from cpu" % seed
        if ks is not None:
            assert (ks2.view(np.uint32) == ks.view(np.uint32)).all(), "seed %d: scales" % seed


def test_kv_store_device_arrays(ctx, request):
    seed, rng = seeded(request)
    k_new, v_new, sm, kc, vc, ks, vs = make_store(rng, "fp8_e4m3fn")
    d = [ctx.buffer(a) for a in (k_new, v_new, sm)]
    dk, dv = ctx.buffer(kc, format="fp8_e4m3fn"), ctx.buffer(vc, format="fp8_e4m3fn")
    dks, dvs = ctx.buffer(ks), ctx.buffer(vs)
    ctx.kv_store(*d, dk, dv, dks, dvs)
    ctx.kv_store(k_new, v_new, sm, kc, vc, ks, vs, kv_format="fp8_e4m3fn")
    assert (dk.numpy() == kc).all() and (dvs.numpy() == vs).all(), "seed %d" % seed


# ---- MQA logits --------------------------------------------------------
def make_mqa(rng, S=21, H=8, D=64, Skv=300, q_fmt="fp8_e4m3fn", k_fmt="fp8_e4m3fn"):
    q = random_fp8(rng, (S, H, D), q_fmt)
    k = random_fp8(rng, (Skv, D), k_fmt)
    k_scale = rng.uniform(0.01, 0.1, Skv).astype(np.float32)
    weights = rng.normal(0, 1, (S, H)).astype(np.float32)
    ks = rng.integers(-5, Skv, S).astype(np.int32)
    ke = (ks + rng.integers(0, 200, S)).astype(np.int32)
    return q, k, k_scale, weights, ks, ke


@pytest.mark.parametrize("q_fmt,k_fmt", [("fp8_e4m3fn", "fp8_e4m3fn"),
                                         ("fp8_e4m3fnuz", "fp8_e4m3fn")])
def test_mqa_logits(ctx, cpu, request, q_fmt, k_fmt):
    seed, rng = seeded(request)
    q, k, k_scale, w, ks, ke = make_mqa(rng, q_fmt=q_fmt, k_fmt=k_fmt)
    S, Skv = q.shape[0], k.shape[0]
    stride = 512
    whole = np.full(S * stride + 2 * GUARD, np.nan, np.float32)
    out = whole[GUARD:GUARD + S * stride].reshape(S, stride)[:, :Skv]
    plan = ctx.mqa_logits_plan(q, k, k_scale, w, ks, ke, q_format=q_fmt, k_format=k_fmt,
                               out=out)
    assert plan.run(out=out) is out
    assert np.isnan(whole[:GUARD]).all() and np.isnan(whole[-GUARD:]).all(), "guard"
    pad = whole[GUARD:GUARD + S * stride].reshape(S, stride)[:, Skv:]
    assert np.isnan(pad).all(), "seed %d: a write past S_kv in a row" % seed
    ref, mag = mqa_ref(q, k, k_scale, w, ks, ke, q_fmt, k_fmt)
    inf = np.isneginf(ref)
    assert (np.isneginf(out) == inf).all(), "seed %d: -inf where the contract says" % seed
    err = np.abs(out[~inf] - ref[~inf]) - (4e-5 * mag[~inf] + 1e-6)
    assert (err <= 0).all(), "seed %d: logits off by %g" % (seed, err.max())
    if ctx.backend != "cpu":
        ref_c = cpu.mqa_logits_plan(q, k, k_scale, w, ks, ke, q_format=q_fmt,
                                    k_format=k_fmt).run()
        fin = ~inf
        assert (np.abs(out[fin] - ref_c[fin]) <= 4e-5 * mag[fin] + 1e-6).all(), "seed %d" % seed
    # allocated output: [S, S_kv] rows padded to 256
    o2 = plan.run()
    assert o2.shape == (S, Skv) and o2.strides[0] == 512 * 4


# ---- errors, dtypes, untouched outputs ----------------------------------
def test_error_carries_status_and_message(ctx, request):
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="bf16")
    qf = bf16_to_f64(p["q"]).astype(np.float32)  # f32 q: the library wants bf16
    with pytest.raises(qattn.QattnError) as e:
        ctx.decode_plan(qf, p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"],
                        p["kv_lens"], **plan_kw(p, "bf16"))
    assert e.value.status_name == "QATTN_ERR_DTYPE" and "q" in e.value.message
    assert str(e.value).startswith("QATTN_ERR_DTYPE: ")
    with pytest.raises(qattn.QattnError) as e:  # page_size 0
        ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"],
                        p["kv_lens"], page_size=0, max_kv_len=128)
    assert e.value.status_name.startswith("QATTN_ERR_") and "page_size" in e.value.message


def test_failed_call_leaves_outputs_untouched(ctx, request, monkeypatch):
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    o, _ = guarded((3, 1, 8, 128), np.uint16, POISON_BF16)
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"],
                           p["kv_lens"], out=o, **plan_kw(p, "fp8_e4m3fn"))
    o[...] = 0x1234
    bad_q = np.zeros((3, 1, 8, 64), np.uint16)  # another head dim than planned
    with pytest.raises(qattn.QattnError):
        plan.run(bad_q, out=o)
    assert (o == 0x1234).all(), "seed %d: a failed decode wrote its output" % seed
    # KV store with a slot past the cache under QATTN_CHECK_INDICES=1
    k_new, v_new, sm, kc, vc, ks, vs = make_store(rng, "fp8_e4m3fn")
    sm[0] = kc.shape[0] + 5
    kc[...] = 0x11
    ks[...] = 7.0
    monkeypatch.setenv("QATTN_CHECK_INDICES", "1")
    with pytest.raises(qattn.QattnError) as e:
        ctx.kv_store(k_new, v_new, sm, kc, vc, ks, vs, kv_format="fp8_e4m3fn")
    assert e.value.status_name == "QATTN_ERR_INDEX_OUT_OF_RANGE"
    assert (kc == 0x11).all() and (vc == 0).all() and (ks == 7.0).all(), \
        "seed %d: a failed kv_store wrote the cache" % seed


def test_dtype_mapping(cpu, request):
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    args = (p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"], p["kv_lens"])
    kw = dict(k_scale=p["k_scale"], v_scale=p["v_scale"], page_size=16, max_kv_len=128)
    with pytest.raises(TypeError, match="k_cache: uint8 needs its format"):
        cpu.decode_plan(*args, **kw)
    with pytest.raises(ValueError, match="k_cache: format 'fp8' is not one of"):
        cpu.decode_plan(*args, kv_format="fp8", **kw)
    with pytest.raises(TypeError, match="q: element type float64 has no qattn dtype"):
        cpu.decode_plan(p["q"].astype(np.float64), *args[1:], kv_format="fp8_e4m3fn", **kw)
    with pytest.raises(TypeError, match="needs 2-byte elements"):
        cpu.decode_plan(*args, kv_format="bf16", **kw)
    # the same bytes read as fn and as fnuz differ by the spec's factor of
    # two: fn with scale s equals fnuz with scale 2s (codes 0x80/NaN excluded)
    for c in (p["k_cache"], p["v_cache"]):
        c[c == 0x80] = 0  # fn -0: its byte is the fnuz NaN
    o_fn = cpu.decode_plan(*args, kv_format="fp8_e4m3fn", **kw).run()
    kw2 = dict(kw, k_scale=2 * p["k_scale"], v_scale=2 * p["v_scale"])
    o_fnuz = cpu.decode_plan(*args, kv_format="fp8_e4m3fnuz", **kw2).run()
    assert (o_fn == o_fnuz).all(), "seed %d" % seed
    # int8 arrays are i8 without a format; uint16 is bf16 bits
    assert qattn.Context(backend="cpu").buffer(np.zeros(3, np.int8)).dtype_name == "i8"
    assert cpu.buffer(np.zeros(3, np.uint16)).dtype_name == "bf16"
    assert cpu.buffer(np.zeros(3, np.uint16), format="f16").dtype_name == "f16"


def test_ml_dtypes(cpu, request):
    ml = pytest.importorskip("ml_dtypes", reason="skipped: ml_dtypes is not installed")
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    o_raw = cpu.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"], p["kv_indices"],
                            p["kv_lens"], **plan_kw(p, "fp8_e4m3fn")).run()
    o_ml = cpu.decode_plan(p["q"].view(ml.bfloat16), p["k_cache"].view(ml.float8_e4m3fn),
                           p["v_cache"].view(ml.float8_e4m3fn), p["kv_indptr"], p["kv_indices"],
                           p["kv_lens"], k_scale=p["k_scale"], v_scale=p["v_scale"],
                           page_size=16, max_kv_len=128).run()
    assert (o_raw == o_ml.view(np.uint16)).all(), "seed %d" % seed


def test_dlpack_input(ctx, request):
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="i8", head_major=True)
    if not hasattr(p["q"], "__dlpack__"):
        pytest.skip("skipped: this numpy has no DLPack export")
    args = [DLPackOnly(p[n]) for n in ("q", "k_cache", "v_cache", "kv_indptr", "kv_indices",
                                       "kv_lens")]
    plan = ctx.decode_plan(*args, k_scale=DLPackOnly(p["k_scale"]),
                           v_scale=DLPackOnly(p["v_scale"]), page_size=16, max_kv_len=128)
    out = np.empty((3, 1, 8, 128), np.uint16)
    plan.run(out=DLPackOnly(out))
    check_decode(out, None, p, "i8", seed, 1 / np.sqrt(128))


def test_context_errors():
    with pytest.raises(ValueError, match="backend"):
        qattn.Context(backend="tpu")
    with pytest.raises(qattn.QattnError) as e:
        qattn.Context(backend="cpu", device="no such device")
    assert e.value.status_name == "QATTN_ERR_BACKEND_UNAVAILABLE"
    assert "cpu" in qattn.backends()


def test_module_main(capsys):
    from qattn import __main__ as m
    assert m.main() == 0
    text = capsys.readouterr().out
    assert "qattn package 0.1.0, library 0.1.0" in text and "cpu" in text


# ---- the argument cache: what a repeated call may not reuse -------------
# On backends that read memory in place (cpu here) a plan keeps the filled C
# arguments per key; each case below gives a call whose key must differ from
# the previous one's, checks the result against the float64 reference, and
# checks that the reference differs from the previous call's (so reusing the
# previous arguments fails the case). On Vulkan (staged) nothing is cached and
# the same cases check the plain path.
SM = 1 / np.sqrt(128)


def other_page_table(rng, p):
    """Another page table over p's cache: other lengths, other pages."""
    P, B = p["page_size"], len(p["kv_lens"])
    n_pages = p["k_cache"].shape[0] // P
    lens = rng.integers(20, 70, size=B).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum((lens + P - 1) // P)]).astype(np.int32)
    indices = rng.choice(n_pages, size=int(indptr[-1])).astype(np.int32)
    return dict(kv_indptr=indptr, kv_indices=indices, kv_lens=lens)


def decode_out(p, fmt="fp8_e4m3fn", **over):
    d = dict(p, **over)
    o, _ = decode_ref(d["q"], d["k_cache"], d["v_cache"], d["k_scale"], d["v_scale"],
                      d["kv_indptr"], d["kv_indices"], d["kv_lens"], p["page_size"], SM, fmt)
    return o


def run_checked(plan, p, seed, what, prev, fmt="fp8_e4m3fn", **call):
    """plan.run(**call) into a poisoned output; checks it against p with the
    call's operands; returns the reference, which must differ from prev's."""
    o = call.pop("out", None)
    if o is None:
        o = np.empty(plan.out_shape, np.uint16)
    o[...] = POISON_BF16
    plan.run(out=o, **call)
    over = {n: call[n] for n in ("q", "k_cache", "v_cache", "k_scale", "v_scale", "kv_indptr",
                                 "kv_indices", "kv_lens") if call.get(n) is not None}
    ref = decode_out(p, fmt, **over)
    check_decode(o, None, dict(p, **over), fmt, seed, SM)
    if prev is not None:
        assert np.abs(ref - prev).max() > 0.1, "%s: a case that cannot fail" % what
    return ref


def test_cache_page_table_changes(ctx, request):
    """The same q object each call; the page table another object, the same
    objects rewritten in place, and views at the same address of another length."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"],
                           p["kv_indices"], p["kv_lens"], **plan_kw(p, "fp8_e4m3fn"))
    q, t1, t2 = p["q"], {n: p[n] for n in ("kv_indptr", "kv_indices", "kv_lens")}, \
        other_page_table(rng, p)
    r = run_checked(plan, p, seed, "planned table", None, q=q)
    r = run_checked(plan, p, seed, "another table", r, q=q, **t2)
    r = run_checked(plan, p, seed, "the planned table again", r, q=q, **t1)
    r = run_checked(plan, p, seed, "the other table again", r, q=q, **t2)
    # the planned objects rewritten in place (same addresses, shapes, strides)
    n = len(t1["kv_indices"])
    t1["kv_indices"][:] = rng.choice(p["k_cache"].shape[0] // 16, size=n)
    t1["kv_lens"][:] = np.minimum(t1["kv_lens"] + 5, (np.diff(t1["kv_indptr"]) * 16))
    r = run_checked(plan, p, seed, "the planned table rewritten", r, q=q)
    # the planned kv_indices grown in place (numpy moves its memory): a page
    # table is keyed on every call even when it is the planned object
    t3 = other_page_table(rng, p)
    m = len(t3["kv_indices"])
    t1["kv_indices"].resize(4096, refcheck=False)
    t1["kv_indices"][:m] = t3["kv_indices"]
    t1["kv_indptr"][:] = t3["kv_indptr"]
    t1["kv_lens"][:] = t3["kv_lens"]
    r = run_checked(plan, p, seed, "the planned kv_indices resized", r, q=q)
    # views of one buffer: the same start address, another length and contents
    buf = np.zeros(64, np.int32)
    for table in (other_page_table(rng, p), other_page_table(rng, p)):
        m = len(table["kv_indices"])
        buf[:m] = table["kv_indices"]
        table["kv_indices"] = buf[:m]
        r = run_checked(plan, p, seed, "indices of %d pages at one address" % m, r, q=q, **table)


def test_cache_same_address_other_layout(ctx, request):
    """Operands made anew at an address used before with other strides,
    dtype or shape: the plan refuses each (its strides and dtypes are fixed at
    planning), where reused arguments would run as before."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"],
                           p["kv_indices"], p["kv_lens"], **plan_kw(p, "fp8_e4m3fn"))
    shape = plan.out_shape
    whole = np.empty(2 * int(np.prod(shape)), np.uint16)
    dense = whole[:int(np.prod(shape))].reshape(shape)
    wide = whole.reshape(shape[:3] + (2 * shape[3],))
    run_checked(plan, p, seed, "dense out", None, out=dense)
    whole[...] = POISON_BF16
    strided = wide[..., :shape[3]]  # the same first element, rows twice as far apart
    with pytest.raises(qattn.QattnError) as e:
        plan.run(out=strided)
    assert e.value.status_name.startswith("QATTN_ERR_")
    assert (whole == POISON_BF16).all(), "seed %d: a refused call wrote out" % seed
    run_checked(plan, p, seed, "dense out again", None, out=dense)
    # q at one address: bf16 bits, then the same bytes as f32 of the same shape
    qbuf = np.zeros(4 * p["q"].size, np.uint8)
    q16 = qbuf[:2 * p["q"].size].view(np.uint16).reshape(p["q"].shape)
    q16[...] = p["q"]
    run_checked(plan, p, seed, "q at a buffer's start", None, q=q16)
    q32 = qbuf.view(np.float32).reshape(p["q"].shape)
    with pytest.raises(qattn.QattnError) as e:
        plan.run(q32)
    assert e.value.status_name.startswith("QATTN_ERR_")
    with pytest.raises(qattn.QattnError):  # another batch at that address
        plan.run(q16[:2])
    run_checked(plan, p, seed, "q at a buffer's start again", None, q=q16)


def test_cache_non_default_operands(ctx, request):
    """Cache and scales passed instead of the planned ones, swapped, and the
    planned ones again (omitted or passed)."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"],
                           p["kv_indices"], p["kv_lens"], **plan_kw(p, "fp8_e4m3fn"))
    kc2, vc2 = random_fp8(rng, p["k_cache"].shape, "fp8_e4m3fn"), \
        random_fp8(rng, p["v_cache"].shape, "fp8_e4m3fn")
    ks2 = rng.uniform(0.001, 0.02, p["k_scale"].shape).astype(np.float32)
    r = run_checked(plan, p, seed, "planned", None)
    r = run_checked(plan, p, seed, "another k_scale", r, k_scale=ks2)
    r = run_checked(plan, p, seed, "planned again", r)
    r = run_checked(plan, p, seed, "scales swapped", r, k_scale=p["v_scale"], v_scale=ks2)
    r = run_checked(plan, p, seed, "planned scales passed", r, k_scale=p["k_scale"],
                    v_scale=p["v_scale"])
    r = run_checked(plan, p, seed, "another cache", r, k_cache=kc2, v_cache=vc2)
    r = run_checked(plan, p, seed, "caches swapped", r, k_cache=vc2, v_cache=kc2)
    r = run_checked(plan, p, seed, "planned caches passed", r, k_cache=p["k_cache"],
                    v_cache=p["v_cache"])


def test_cache_outputs_swapped(ctx, request):
    """Two (out, lse) pairs, used in turn and crossed: each call writes
    exactly the outputs it is given."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    outs = [guarded((3, 1, 8, 128), np.uint16, POISON_BF16)[0] for _ in range(2)]
    lses = [guarded((3, 1, 8), np.float32, np.nan)[0] for _ in range(2)]
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"],
                           p["kv_indices"], p["kv_lens"], return_lse=True, out=outs[0],
                           lse=lses[0], **plan_kw(p, "fp8_e4m3fn"))
    for i, j in ((0, 0), (1, 1), (0, 1), (1, 0), (0, 0)):
        for a in outs:
            a[...] = POISON_BF16
        for a in lses:
            a[...] = np.nan
        ro, rl = plan.run(out=outs[i], lse=lses[j])
        assert ro is outs[i] and rl is lses[j]
        check_decode(outs[i], lses[j], p, "fp8_e4m3fn", seed, SM)
        assert (outs[1 - i] == POISON_BF16).all(), "seed %d: (%d, %d) wrote the other out" % (
            seed, i, j)
        assert np.isnan(lses[1 - j]).all(), "seed %d: (%d, %d) wrote the other lse" % (seed, i, j)


def test_cache_freed_device_array(ctx, request):
    """A planned DeviceArray freed after a run: the next run refuses it
    instead of reusing its buffer."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    ks = ctx.buffer(p["k_scale"])
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"],
                           p["kv_indices"], p["kv_lens"], page_size=16, max_kv_len=128,
                           k_scale=ks, v_scale=p["v_scale"], kv_format="fp8_e4m3fn")
    run_checked(plan, p, seed, "DeviceArray k_scale", None)
    ks.free()
    with pytest.raises(ValueError, match="freed"):
        plan.run()


def test_cache_refresh_after_in_place_change(ctx, request):
    """A planned operand whose dtype is changed in place: refresh() makes
    the next run read it again (and refuse it)."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"],
                           p["kv_indices"], p["kv_lens"], **plan_kw(p, "fp8_e4m3fn"))
    run_checked(plan, p, seed, "planned", None)
    p["v_scale"].dtype = np.int32  # the same bytes, now int32: not a scale
    plan.refresh()
    with pytest.raises(qattn.QattnError) as e:
        plan.run()
    assert e.value.status_name == "QATTN_ERR_DTYPE"


def test_cache_bookkeeping(cpu, request):
    """On cpu the cache is in use (else the cases above test nothing of it):
    one entry per distinct call, none for operands without a key."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    plan = cpu.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"],
                           p["kv_indices"], p["kv_lens"], **plan_kw(p, "fp8_e4m3fn"))
    o = np.empty(plan.out_shape, np.uint16)
    for _ in range(3):
        plan.run(p["q"], out=o)
    assert len(plan._args_cache) == 1
    plan.run(p["q"], k_cache=p["k_cache"], v_cache=p["v_cache"], kv_lens=p["kv_lens"], out=o)
    assert len(plan._args_cache) == 1  # the planned objects passed: the same key
    plan.run(p["q"], out=o, **other_page_table(rng, p))
    assert len(plan._args_cache) == 2
    plan.refresh()
    assert len(plan._args_cache) == 0
    if hasattr(p["q"], "__dlpack__"):
        dl = cpu.decode_plan(p["q"], DLPackOnly(p["k_cache"]), p["v_cache"], p["kv_indptr"],
                             p["kv_indices"], p["kv_lens"], **plan_kw(p, "fp8_e4m3fn"))
        dl.run(out=o)
        dl.run(out=o)
        assert len(dl._args_cache) == 0, "a DLPack-only operand has no key"
    k_new, v_new, sm, kc, vc, ks, vs = make_store(rng, "fp8_e4m3fn")
    cpu.kv_store(k_new, v_new, sm, kc, vc, ks, vs, kv_format="fp8_e4m3fn")
    store_cache = cpu._kv_store._args_cache
    store_cache.clear()  # the module's cpu context: other tests' entries
    for fmt, n in (("fp8_e4m3fn", 1), ("fp8_e4m3fn", 1), ("fp8_e4m3fnuz", 2)):
        cpu.kv_store(k_new, v_new, sm, kc, vc, ks, vs, kv_format=fmt)
        assert len(store_cache) == n, fmt


def test_cache_kv_store(ctx, cpu, request):
    """The same arrays with another format, then shorter views at the same
    addresses: each call writes what its own arguments say."""
    seed, rng = seeded(request)
    k_new, v_new, sm, kc, vc, ks, vs = make_store(rng, "fp8_e4m3fn")

    def expect(fmt, n):
        _, _, _, kc2, vc2, ks2, vs2 = make_store(np.random.default_rng(seed), fmt)
        cpu.kv_store(k_new[:n].copy(), v_new[:n].copy(), sm[:n].copy(), kc2, vc2, ks2, vs2,
                     kv_format=fmt)
        return kc2, ks2

    T = len(sm)
    for fmt, n in (("fp8_e4m3fn", T), ("fp8_e4m3fnuz", T), ("fp8_e4m3fnuz", T - 3),
                   ("fp8_e4m3fn", T - 3)):
        kc[...], vc[...], ks[...], vs[...] = 0, 0, -1.0, -1.0
        ctx.kv_store(k_new[:n], v_new[:n], sm[:n], kc, vc, ks, vs, kv_format=fmt)
        kc2, ks2 = expect(fmt, n)
        assert (kc == kc2).all() and (ks.view(np.uint32) == ks2.view(np.uint32)).all(), \
            "seed %d: %s, %d tokens" % (seed, fmt, n)
    assert not (expect("fp8_e4m3fn", T)[0] == expect("fp8_e4m3fnuz", T)[0]).all()
    assert not (expect("fp8_e4m3fnuz", T)[0] == expect("fp8_e4m3fnuz", T - 3)[0]).all()


def test_cache_mqa_operands(ctx, request):
    """MQA logits with the planned k swapped for another, the same q object
    with other ranges, and the planned operands again."""
    seed, rng = seeded(request)
    q, k, k_scale, w, ks, ke = make_mqa(rng)
    plan = ctx.mqa_logits_plan(q, k, k_scale, w, ks, ke, q_format="fp8_e4m3fn",
                               k_format="fp8_e4m3fn")
    _, k2, k_scale2, _, ks2, ke2 = make_mqa(rng)
    prev = None
    for call in ({}, dict(k=k2, k_scale=k_scale2), dict(k=k, k_scale=k_scale),
                 dict(q=q, ks=ks2, ke=ke2), {}):
        out = plan.run(**call)
        d = dict(q=q, k=k, k_scale=k_scale, weights=w, ks=ks, ke=ke)
        d.update(call)
        ref, mag = mqa_ref(d["q"], d["k"], d["k_scale"], w, d["ks"], d["ke"], "fp8_e4m3fn",
                           "fp8_e4m3fn")
        inf = np.isneginf(ref)
        assert (np.isneginf(out) == inf).all(), "seed %d: %s" % (seed, sorted(call))
        assert (np.abs(out[~inf] - ref[~inf]) <= 4e-5 * mag[~inf] + 1e-6).all(), \
            "seed %d: %s" % (seed, sorted(call))
        if prev is not None:
            assert not np.array_equal(np.nan_to_num(ref), np.nan_to_num(prev)), "cannot fail"
        prev = ref


def test_cache_bind_per_layer(ctx, request):
    """plan.bind() per layer: each bound plan reads its own caches and
    scales, the original plan keeps its own, and none leaks into another."""
    seed, rng = seeded(request)
    p = make_decode(rng, fmt="fp8_e4m3fn")
    plan = ctx.decode_plan(p["q"], p["k_cache"], p["v_cache"], p["kv_indptr"],
                           p["kv_indices"], p["kv_lens"], **plan_kw(p, "fp8_e4m3fn"))
    layer2 = dict(k_cache=random_fp8(rng, p["k_cache"].shape, "fp8_e4m3fn"),
                  v_cache=random_fp8(rng, p["v_cache"].shape, "fp8_e4m3fn"),
                  k_scale=rng.uniform(0.001, 0.02, p["k_scale"].shape).astype(np.float32),
                  v_scale=rng.uniform(0.001, 0.02, p["v_scale"].shape).astype(np.float32))
    plan2 = plan.bind(**layer2)
    assert plan2.id != plan.id and plan2.workspace is plan.workspace
    r = None
    for _ in range(2):
        r = run_checked(plan, p, seed, "layer 1", r, q=p["q"])
        o = np.empty(plan.out_shape, np.uint16)
        o[...] = POISON_BF16
        plan2.run(p["q"], out=o)
        check_decode(o, None, dict(p, **layer2), "fp8_e4m3fn", seed, SM)
        ref2 = decode_out(p, **layer2)
        assert np.abs(ref2 - r).max() > 0.1, "a case that cannot fail"
        r = ref2
    # layer 1's operands passed to the layer-2 plan: read, not its bound ones
    r = run_checked(plan2, p, seed, "layer 1 through plan2", r, k_cache=p["k_cache"],
                    v_cache=p["v_cache"], k_scale=p["k_scale"], v_scale=p["v_scale"])
    if ctx.backend == "cpu":  # layer 2's bound objects are not part of plan2's key
        assert plan2._bound[1] is layer2["k_cache"]
    with pytest.raises(TypeError, match="bind: o"):
        plan.bind(o=np.empty(1))
