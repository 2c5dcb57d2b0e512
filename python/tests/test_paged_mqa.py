"""Paged FP8 MQA logits (spec 5, the indexer at decode time) through the
package, on numpy arrays and on every backend that opens a device here (cpu
always; vulkan on lavapipe in CI; hip on the GPU machine where fresh_ctx
opens it): against a float64 reference written from docs/ops.md section 5,
and off the cpu backend against the cpu backend, with the spec's tolerance
(section 4: as for MQA logits). Outputs are poisoned before each run and
surrounded by guard elements; every reference is checked to hold finite
logits and -inf columns, so an output that wrote nothing fails."""
import gc
import zlib

import numpy as np
import pytest

import qattn
from libspy import spy_on
from refs import fp8_table, random_fp8

GUARD = 8
FMTS = ("fp8_e4m3fn", "fp8_e4m3fnuz")


def seeded(request):
    seed = zlib.crc32(request.node.nodeid.encode())
    return seed, np.random.default_rng(seed)


# ---- the reference (spec 5) ------------------------------------------------
def paged_mqa_ref(q, k_cache, k_scale, weights, indptr, indices, lens, page_size, max_kv_len,
                  q_fmt, k_fmt):
    """logits [B, N, max_kv_len] in float64 with -inf in every column a row
    does not see, and the magnitude A of the tolerance per element (0 where
    not visible). k_cache: [N_slots, D] or [N_pages, P, D] codes; k_scale
    [N_slots] or [N_pages, P]. Indices that break the rules are handled as
    the spec says without QATTN_CHECK_INDICES: a position whose kv_indptr
    entry lies outside its request's row or kv_indices, or whose slot falls
    outside the cache, is not visible."""
    D = q.shape[3]
    kf = fp8_table(k_fmt)[np.asarray(k_cache).reshape(-1, D)]
    ksc = np.asarray(k_scale, np.float64).reshape(-1)
    qf = fp8_table(q_fmt)[q]
    w = np.asarray(weights, np.float64)
    B, N, H, _ = q.shape
    n_slots = kf.shape[0]
    logits = np.full((B, N, max_kv_len), -np.inf)
    mag = np.zeros((B, N, max_kv_len))
    for b in range(B):
        lo, hi = int(indptr[b]), int(indptr[b + 1])
        for p in range(max_kv_len):
            pos = lo + p // page_size
            if pos < lo or pos >= hi or pos < 0 or pos >= len(indices):
                continue
            page = int(indices[pos])
            slot = page * page_size + p % page_size
            if page < 0 or slot >= n_slots:
                continue
            dots = qf[b] @ kf[slot]                       # [N, H]
            absd = np.abs(qf[b]) @ np.abs(kf[slot])
            for t in range(N):
                if p > int(lens[b]) - N + t:
                    continue
                logits[b, t, p] = w[b, t] @ np.maximum(0.0, ksc[slot] * dots[t])
                mag[b, t, p] = np.abs(w[b, t]) @ (ksc[slot] * absd[t])
    return logits, mag


def make_paged(rng, B=3, N=2, H=8, D=64, P=16, max_kv_len=300, q_fmt="fp8_e4m3fn",
               k_fmt="fp8_e4m3fn", rank3=False):
    """A paged cache with shuffled pages (two spare), lengths in N..max_kv_len
    (one request at max_kv_len exactly, so the last column is seen)."""
    lens = rng.integers(N, max_kv_len + 1, size=B).astype(np.int32)
    lens[rng.integers(B)] = max_kv_len
    pages_per = (lens + P - 1) // P
    n_pages = int(pages_per.sum()) + 2
    indptr = np.concatenate([[0], np.cumsum(pages_per)]).astype(np.int32)
    indices = rng.permutation(n_pages).astype(np.int32)[:indptr[-1]].copy()
    k = random_fp8(rng, (n_pages * P, D), k_fmt)
    ks = rng.uniform(0.01, 0.1, n_pages * P).astype(np.float32)
    if rank3:
        k, ks = k.reshape(n_pages, P, D), ks.reshape(n_pages, P)
    q = random_fp8(rng, (B, N, H, D), q_fmt)
    w = rng.normal(0, 1, (B, N, H)).astype(np.float32)
    return dict(q=q, k_cache=k, k_scale=ks, weights=w, kv_indptr=indptr, kv_indices=indices,
                kv_lens=lens, page_size=P, max_kv_len=max_kv_len, q_fmt=q_fmt, k_fmt=k_fmt)


OPERANDS = ("q", "k_cache", "k_scale", "weights", "kv_indptr", "kv_indices", "kv_lens")


def args_of(p):
    return tuple(p[n] for n in OPERANDS)


def kw_of(p, **extra):
    return dict(page_size=p["page_size"], max_kv_len=p["max_kv_len"], q_format=p["q_fmt"],
                k_format=p["k_fmt"], **extra)


def ref_of(p, **over):
    d = dict(p, **over)
    return paged_mqa_ref(d["q"], d["k_cache"], d["k_scale"], d["weights"], d["kv_indptr"],
                         d["kv_indices"], d["kv_lens"], d["page_size"], d["max_kv_len"],
                         d["q_fmt"], d["k_fmt"])


def guarded_out(shape, stride):
    """[B, N, M] f32 rows of `stride` elements inside a NaN-poisoned array
    with GUARD elements on both sides; returns (view, whole)."""
    B, N, M = shape
    n = B * N * stride
    whole = np.full(n + 2 * GUARD, np.nan, np.float32)
    return whole[GUARD:GUARD + n].reshape(B, N, stride)[:, :, :M], whole


def check(out, ref, mag, seed, what, clean=True):
    """-inf exactly where the contract says (clean_logits), the visible
    columns within 4e-5 * A + 1e-6; the reference must have both kinds."""
    inf = np.isneginf(ref)
    assert inf.any() and (~inf).any(), "%s: a reference that cannot fail" % what
    assert (np.abs(ref[~inf]) > 1e-3).any(), "%s: a reference of zeros" % what
    if clean:
        assert (np.isneginf(out) == inf).all(), "seed %d, %s: -inf where the contract says" % (
            seed, what)
    got = out[~inf]
    assert not np.isnan(got).any(), "seed %d, %s: NaN (poison) in a visible column" % (seed, what)
    err = np.abs(got - ref[~inf]) - (4e-5 * mag[~inf] + 1e-6)
    assert (err <= 0).all(), "seed %d, %s: logits off by %g beyond the tolerance" % (
        seed, what, err.max())


# ---- results -------------------------------------------------------------
@pytest.mark.parametrize("q_fmt,k_fmt,N,P,rank3", [
    ("fp8_e4m3fn", "fp8_e4m3fn", 1, 16, False),
    ("fp8_e4m3fnuz", "fp8_e4m3fn", 4, 64, True),
    ("fp8_e4m3fn", "fp8_e4m3fnuz", 2, 1, False),
])
def test_paged_mqa_logits(ctx, cpu, request, q_fmt, k_fmt, N, P, rank3):
    seed, rng = seeded(request)
    p = make_paged(rng, N=N, P=P, q_fmt=q_fmt, k_fmt=k_fmt, rank3=rank3)
    B, M = p["q"].shape[0], p["max_kv_len"]
    stride = 320
    out, whole = guarded_out((B, N, M), stride)
    plan = ctx.paged_mqa_logits_plan(*args_of(p), out=out, **kw_of(p))
    assert plan.run(out=out) is out
    assert np.isnan(whole[:GUARD]).all() and np.isnan(whole[-GUARD:]).all(), "guard"
    pad = whole[GUARD:GUARD + B * N * stride].reshape(B, N, stride)[:, :, M:]
    assert np.isnan(pad).all(), "seed %d: a write past max_kv_len in a row" % seed
    ref, mag = ref_of(p)
    check(out, ref, mag, seed, "planned")
    info = plan.info()
    variants = qattn._lib.paged_mqa_variants()
    assert plan.variant in variants and plan.variant != "auto" and info["variant"] == plan.variant
    assert info["batch"] == B and info["rows"] == N and info["max_kv_len"] == M
    assert plan.num_splits >= 1 and plan.num_splits * plan.keys_per_split >= M
    assert info["workspace_bytes"] == plan.workspace_bytes
    assert isinstance(plan.reason, str) and "PagedMqaLogitsPlan" in repr(plan)
    if ctx.backend != "cpu":  # parity with the cpu backend, the spec's reference
        c_out, _ = guarded_out((B, N, M), stride)
        cpu.paged_mqa_logits_plan(*args_of(p), out=c_out, **kw_of(p)).run(out=c_out)
        fin = ~np.isneginf(ref)
        assert (np.abs(out[fin] - c_out[fin]) <= 4e-5 * mag[fin] + 1e-6).all(), "seed %d" % seed
        assert (np.isneginf(c_out) == ~fin).all()


def test_paged_mqa_allocated_output(ctx, request):
    """run() with nothing but the plan: every operand from planning, the
    output [B, N, max_kv_len] allocated with rows padded to 256; a fresh q
    and weights through the same plan."""
    seed, rng = seeded(request)
    p = make_paged(rng, max_kv_len=200)
    plan = ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p))
    out = plan.run()
    assert out.shape == (3, 2, 200) and out.dtype == np.float32 and out.strides[1] == 256 * 4
    check(out, *ref_of(p), seed, "allocated")
    q2 = random_fp8(rng, p["q"].shape, "fp8_e4m3fn")
    w2 = rng.normal(0, 1, p["weights"].shape).astype(np.float32)
    out2 = plan.run(q2, weights=w2)
    ref2, mag2 = ref_of(p, q=q2, weights=w2)
    check(out2, ref2, mag2, seed, "new q and weights")
    assert np.abs(np.nan_to_num(ref2, neginf=0) - np.nan_to_num(ref_of(p)[0], neginf=0)).max() > 0.1


def test_paged_mqa_fused_layout(ctx, request):
    """The fused layout of spec 5: each slot's D codes followed by its f32
    scale in one row of bytes, passed as two views of one array (k_scale's
    stride is the row's (D + 4) / 4 elements)."""
    seed, rng = seeded(request)
    p = make_paged(rng, N=3, D=128, P=16)
    slots, D = p["k_cache"].shape
    fused = np.zeros((slots, D + 4), np.uint8)
    fused[:, :D] = p["k_cache"]
    fused[:, D:] = p["k_scale"].view(np.uint8).reshape(slots, 4)
    k_view, s_view = fused[:, :D], fused[:, D:].view(np.float32)[:, 0]
    assert s_view.strides == (D + 4,) and np.array_equal(s_view, p["k_scale"])
    plan = ctx.paged_mqa_logits_plan(p["q"], k_view, s_view, *args_of(p)[3:], **kw_of(p))
    check(plan.run(), *ref_of(p), seed, "fused")


def test_paged_mqa_device_arrays(ctx, request):
    """Operands in DeviceArrays (no staging per call); the output a
    DeviceArray (unpadded rows), read back with .numpy()."""
    seed, rng = seeded(request)
    p = make_paged(rng, q_fmt="fp8_e4m3fnuz")
    fmt = {"q": "fp8_e4m3fnuz", "k_cache": "fp8_e4m3fn"}
    d = {n: ctx.buffer(p[n], format=fmt.get(n)) for n in OPERANDS}
    assert d["q"].dtype_name == "fp8_e4m3fnuz" and d["k_cache"].dtype_name == "fp8_e4m3fn"
    plan = ctx.paged_mqa_logits_plan(*(d[n] for n in OPERANDS), page_size=16,
                                     max_kv_len=p["max_kv_len"])
    out = plan.run()
    assert isinstance(out, qattn.DeviceArray) and out.shape == (3, 2, p["max_kv_len"])
    check(out.numpy(), *ref_of(p), seed, "DeviceArrays")


def test_paged_mqa_unclean(ctx, request):
    """clean_logits=False: the visible columns are the same; the others are
    unspecified (not checked)."""
    seed, rng = seeded(request)
    p = make_paged(rng)
    out = ctx.paged_mqa_logits_plan(*args_of(p), clean_logits=False, **kw_of(p)).run()
    check(out, *ref_of(p), seed, "clean_logits=False", clean=False)


def test_paged_mqa_options(ctx, request):
    """A pinned split length (a multiple of the plan's key tile) and the
    auto plan's variant pinned give the same logits; options the library
    refuses raise QattnError naming them; names the binding refuses raise
    ValueError."""
    seed, rng = seeded(request)
    p = make_paged(rng, max_kv_len=500)
    auto = ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p))
    tile = auto.info()["kv_tile"]
    assert tile >= 1
    pinned = ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p, keys_per_split=tile,
                                                              variant=auto.variant))
    assert pinned.keys_per_split == tile and pinned.variant == auto.variant
    assert pinned.num_splits == -(-500 // tile)
    ref, mag = ref_of(p)
    check(auto.run(), ref, mag, seed, "auto")
    check(pinned.run(), ref, mag, seed, "keys_per_split %d" % tile)
    if tile > 1:
        with pytest.raises(qattn.QattnError) as e:
            ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p, keys_per_split=tile + 1))
        assert e.value.status_name == "QATTN_ERR_INVALID_ARGUMENT"
        assert "options.keys_per_split" in e.value.message
    with pytest.raises(qattn.QattnError) as e:
        ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p, keys_per_split=-1))
    assert "options.keys_per_split" in e.value.message
    with pytest.raises(ValueError, match="^variant: 'coopmat' is not one of"):
        ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p, variant="coopmat"))


# ---- page tables and indices -------------------------------------------------
def other_table(rng, p, max_len=None):
    """Another page table over p's cache: other lengths, other pages."""
    P, B = p["page_size"], len(p["kv_lens"])
    n_pages = np.asarray(p["k_cache"]).reshape(-1, p["q"].shape[3]).shape[0] // P
    lens = rng.integers(p["q"].shape[1], (max_len or p["max_kv_len"]) + 1, size=B).astype(np.int32)
    indptr = np.concatenate([[0], np.cumsum((lens + P - 1) // P)]).astype(np.int32)
    indices = rng.choice(n_pages, size=int(indptr[-1])).astype(np.int32)
    return dict(kv_indptr=indptr, kv_indices=indices, kv_lens=lens)


def test_paged_mqa_one_plan_many_steps(ctx, request):
    """The plan is made from max_kv_len alone: one plan runs page tables of
    other lengths and pages (other objects, the planned ones rewritten in
    place, views at one address of other lengths), another cache passed,
    and the planned operands again, each against the reference and each
    reference differing from the previous one (so a call reusing the
    previous call's arguments fails)."""
    seed, rng = seeded(request)
    p = make_paged(rng)
    plan = ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p))
    prev = [None]

    def step(what, **call):
        out = plan.run(**call)
        ref, mag = ref_of(p, **{k: v for k, v in call.items() if k != "out"})
        check(out, ref, mag, seed, what)
        flat = np.nan_to_num(ref, neginf=-7.0)
        if prev[0] is not None:
            assert not np.array_equal(flat, prev[0]), "%s: a case that cannot fail" % what
        prev[0] = flat

    t1 = {n: p[n] for n in ("kv_indptr", "kv_indices", "kv_lens")}
    t2 = other_table(rng, p)
    step("planned table")
    step("another table", **t2)
    step("the planned table passed", **t1)
    step("the other table again", **t2)
    step("the planned table again")
    t1["kv_indices"][:] = rng.permutation(t1["kv_indices"])  # rewritten in place
    step("the planned table rewritten")
    buf = np.zeros(64, np.int32)
    for table in (other_table(rng, p, 150), other_table(rng, p, 250)):
        m = len(table["kv_indices"])
        buf[:m] = table["kv_indices"]
        table["kv_indices"] = buf[:m]
        step("indices of %d pages at one address" % m, **table)
    k2 = random_fp8(rng, p["k_cache"].shape, "fp8_e4m3fn")
    s2 = rng.uniform(0.01, 0.1, p["k_scale"].shape).astype(np.float32)
    step("another cache", k_cache=k2, k_scale=s2)
    step("the planned cache")


def test_paged_mqa_bad_indices(ctx, monkeypatch, request):
    """Spec 5's rule for indices that break spec 2's: without the index
    mode, positions whose page lies outside the cache (or past their
    kv_indptr row) are not visible, and kv_lens past max_kv_len is computed
    over the max_kv_len columns there are; with QATTN_CHECK_INDICES=1 the
    call fails naming the entry and writes nothing."""
    seed, rng = seeded(request)
    p = make_paged(rng, B=3, N=2, P=16, max_kv_len=100)
    n_pages = p["k_cache"].shape[0] // 16
    bad = dict(p, kv_indices=p["kv_indices"].copy(), kv_lens=p["kv_lens"].copy())
    b = int(np.argmax(p["kv_lens"]))     # a request of max_kv_len keys
    bad["kv_indices"][p["kv_indptr"][b] + 1] = n_pages + 3  # its second page past the cache
    bad["kv_indices"][-1] = -1
    bad["kv_lens"][(b + 1) % 3] = 10 ** 6  # past max_kv_len
    plan = ctx.paged_mqa_logits_plan(*args_of(bad), **kw_of(bad))
    monkeypatch.delenv("QATTN_CHECK_INDICES", raising=False)
    ref, mag = ref_of(bad)
    out = plan.run()
    check(out, ref, mag, seed, "bad indices, no index mode")
    # the columns the bad pages hold are -inf where they would have been seen
    assert np.isneginf(out[b, :, 16:32]).all() and np.isfinite(ref_of(p)[0][b, -1, 16:32]).all()
    monkeypatch.setenv("QATTN_CHECK_INDICES", "1")
    out[...] = 7.0
    with pytest.raises(qattn.QattnError) as e:
        plan.run(out=out)
    assert e.value.status_name == "QATTN_ERR_INDEX_OUT_OF_RANGE" and e.value.message
    assert (out == 7.0).all(), "seed %d: a refused call wrote its output" % seed
    check(plan.run(*args_of(p)[:4], kv_indices=p["kv_indices"], kv_lens=p["kv_lens"]),
          *ref_of(p), seed, "valid indices with the index mode")


# ---- errors -------------------------------------------------------------------
def test_paged_mqa_refusals(ctx, request):
    """Mistakes named by the binding (TypeError / ValueError starting with
    the argument's name) and by the library (QattnError naming the operand
    and rule), the output untouched by a refused call; a logits row stride
    below max_kv_len (rows would overwrite each other, issue 26 item 6)."""
    seed, rng = seeded(request)
    p = make_paged(rng, max_kv_len=64)
    args, kw = args_of(p), kw_of(p)
    with pytest.raises(ValueError, match=r"^q: shape \(3, 2, 8\) \(rank 3\), want \[B, N, H, D\]"):
        ctx.paged_mqa_logits_plan(p["q"][..., 0], *args[1:], **kw)
    for name in ("page_size", "max_kv_len", "keys_per_split"):
        with pytest.raises(ValueError, match="^%s: 4294967312 is outside" % name):
            ctx.paged_mqa_logits_plan(*args, **dict(kw, **{name: 2 ** 32 + 16}))
    with pytest.raises(TypeError, match="^page_size: 16.5 is not an integer"):
        ctx.paged_mqa_logits_plan(*args, **dict(kw, page_size=16.5))
    with pytest.raises(TypeError, match="q: uint8 needs its format"):
        ctx.paged_mqa_logits_plan(*args, **dict(kw, q_format=None))
    with pytest.raises(ValueError, match="^k_scale: "):
        ctx.paged_mqa_logits_plan(*args[:2], np.float32(1.0), *args[3:], **kw)
    # the library's rules
    with pytest.raises(qattn.QattnError) as e:
        ctx.paged_mqa_logits_plan(*args, **dict(kw, page_size=0))
    assert "page_size" in e.value.message
    with pytest.raises(qattn.QattnError) as e:
        ctx.paged_mqa_logits_plan(p["q"][:, :, :, :32], *args[1:], **kw)
    assert e.value.status_name == "QATTN_ERR_SHAPE" and "q" in e.value.message
    # overlapping rows: [B, N, 64] with a row stride of 63 elements
    B, N, M = 3, 2, 64
    whole = np.full(B * N * 63 + 1 + 2 * GUARD, 5.0, np.float32)
    tight = np.lib.stride_tricks.as_strided(whole[GUARD:], (B, N, M), (N * 63 * 4, 63 * 4, 4))
    with pytest.raises(qattn.QattnError) as e:
        ctx.paged_mqa_logits_plan(*args, out=tight, **kw)
    assert e.value.status_name == "QATTN_ERR_STRIDE" and "logits: stride[1]" in e.value.message
    plan = ctx.paged_mqa_logits_plan(*args, **kw)
    with pytest.raises(qattn.QattnError) as e:
        plan.run(out=tight)
    assert e.value.status_name == "QATTN_ERR_STRIDE" and "logits" in e.value.message
    assert (whole == 5.0).all(), "seed %d: a refused call wrote" % seed
    # run with operands other than the plan's shape or dtype
    out = np.full((B, N, 256), 3.0, np.float32)[:, :, :M]
    with pytest.raises(qattn.QattnError) as e:
        plan.run(p["q"][:2], out=out)
    assert e.value.status_name.startswith("QATTN_ERR_")
    with pytest.raises(qattn.QattnError):
        plan.run(weights=p["weights"].astype(np.int32), out=out)
    assert (out == 3.0).all(), "seed %d: a refused run wrote its output" % seed
    check(plan.run(out=out), *ref_of(p), seed, "after the refusals")


def test_paged_mqa_closed(fresh_ctx, request):
    """A closed plan and a plan of a closed context say so."""
    seed, rng = seeded(request)
    p = make_paged(rng, max_kv_len=64)
    plan = fresh_ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p))
    plan2 = fresh_ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p))
    plan.run()
    plan.close()
    plan.close()  # idempotent
    assert plan.closed
    with pytest.raises(qattn.QattnError, match="PagedMqaLogitsPlan: the plan is closed"):
        plan.run()
    fresh_ctx.close()
    with pytest.raises(qattn.QattnError, match="PagedMqaLogitsPlan: the context is closed"):
        plan2.run()


# ---- the argument cache, lifetime, threads ---------------------------------------
def test_paged_mqa_cache_bookkeeping(cpu, request):
    """On cpu the argument cache is in use (else the page-table cases above
    test nothing of it): one entry per distinct call."""
    seed, rng = seeded(request)
    p = make_paged(rng)
    plan = cpu.paged_mqa_logits_plan(*args_of(p), **kw_of(p))
    out = plan.run()
    for _ in range(3):
        plan.run(p["q"], out=out)
    assert len(plan._args_cache) == 1
    plan.run(p["q"], p["k_cache"], p["k_scale"], p["weights"], kv_lens=p["kv_lens"], out=out)
    assert len(plan._args_cache) == 1  # the planned objects passed: the same key
    plan.run(p["q"], out=out, **other_table(rng, p))
    assert len(plan._args_cache) == 2
    plan.refresh()
    assert len(plan._args_cache) == 0


def test_paged_mqa_dropped_plans_free_their_buffers(fresh_ctx, request):
    """Paged plans made, run and dropped in a loop (host operands, and
    DeviceArrays with DeviceArray outputs): the context's live C buffers come
    back to where they were after every iteration."""
    ctx = fresh_ctx
    seed, rng = seeded(request)
    spy = spy_on(ctx)
    p = make_paged(rng)
    dq = ctx.buffer(p["q"], format="fp8_e4m3fn")
    base = spy.live_buffers
    for i in range(20):
        plan = ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p))
        plan.run()
        dplan = ctx.paged_mqa_logits_plan(dq, *(ctx.buffer(p[n], format="fp8_e4m3fn" if n ==
                                                            "k_cache" else None)
                                                for n in OPERANDS[1:]),
                                          page_size=16, max_kv_len=p["max_kv_len"])
        dplan.run()
        del plan, dplan
        gc.collect()
        wrapped = len(ctx._wrapped)
        assert spy.live_buffers - wrapped == base, \
            "iteration %d: %d buffers more than before" % (i, spy.live_buffers - wrapped - base)
    assert spy.by_name.get("qattn_paged_mqa_logits_run", 0) >= 40
    assert len(ctx._live) == 1  # dq


def test_paged_mqa_threads(fresh_ctx, request):
    """8 threads run one paged plan and make plans of their own on one
    context: every result equals the one-thread result, and no two calls
    are ever inside the context at once (libspy's watch)."""
    import threading
    ctx = fresh_ctx
    seed, rng = seeded(request)
    spy = spy_on(ctx, 0.0002)
    p = make_paged(rng)
    plan = ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p))
    want = plan.run().copy()
    check(want, *ref_of(p), seed, "one thread")
    errors, start = [], threading.Barrier(8)

    def work(i):
        try:
            start.wait()
            for it in range(3):
                assert np.array_equal(plan.run(), want, equal_nan=True), (i, it)
                own = ctx.paged_mqa_logits_plan(*args_of(p), **kw_of(p))
                assert np.array_equal(own.run(), want, equal_nan=True), (i, it, "own")
        except BaseException as e:  # noqa: B902 (reported below)
            errors.append((i, repr(e)))
    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[:3]
    assert spy.by_name.get("qattn_paged_mqa_logits_run", 0) >= 8 * 3 * 2
    assert spy.max_in_use == 1, "%d calls were inside the context at once" % spy.max_in_use
