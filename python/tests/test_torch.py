"""The package on torch GPU tensors through the HIP backend (on NVIDIA: its
CUDA "portable twin"): decode, KV store and MQA logits against float64
references in torch, CUDA-graph capture and replay with fresh inputs,
torch.compile(fullgraph=True), and vLLM's cache layout decoded in place.
Skipped (saying so) where torch, a GPU or the HIP library is absent.

The tests at the end ("On CPU tensors") run on CPU tensors through the cpu
backend, which CI does with Debian's CPU torch: the same decode / KV store /
MQA checks, torch.library.opcheck on each custom op (on CPU and, where a GPU
is, CUDA tensors), the fake implementations, and torch.compile(fullgraph=True)
with aot_eager and inductor."""
import math
import numpy as np
import pytest

import qattn
from conftest import REQUIRED
from refs import DLPackOnly, fp8_table

if "torch" in REQUIRED:  # CI: torch must be there (Debian's CPU build in the tool root)
    import torch
else:
    torch = pytest.importorskip("torch", reason="skipped: torch is not installed")


@pytest.fixture(scope="module")
def hip():
    if not torch.cuda.is_available():
        if "hip" in REQUIRED:
            pytest.fail("QATTN_PYTEST_REQUIRE has hip but torch sees no GPU")
        pytest.skip("skipped: torch sees no CUDA/ROCm device")
    try:
        ctx = qattn.Context(backend="hip", device=torch.cuda.current_device())
    except qattn.QattnError as e:
        if "hip" in REQUIRED:
            pytest.fail("QATTN_PYTEST_REQUIRE has hip but: %s" % e)
        pytest.skip("skipped: the HIP backend has no device here: %s" % e)
    yield ctx
    torch.cuda.synchronize()
    ctx.close()


def gen(seed, device="cuda"):
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    return g


def fp8_values(codes, fmt):
    """float64 values of fp8 codes (spec 1; uint8, or a torch fp8 dtype read
    as its bytes), on the codes' device."""
    if codes.dtype != torch.uint8:
        codes = codes.view(torch.uint8)
    t = torch.tensor(fp8_table(fmt), dtype=torch.float64, device=codes.device)
    return t[codes.long()]


def random_codes(shape, fmt, g):
    """uint8 codes of finite fp8 values, magnitudes up to a few units."""
    c = torch.randint(0, 256, shape, generator=g, device=g.device, dtype=torch.int32)
    if fmt == "fp8_e5m2":
        return (c & 0xBF).to(torch.uint8)  # exponent field <= 15: |x| < 2, no inf / NaN
    c = c & 0xB7  # exponent field <= 7: |x| < 2 (fn) or 1 (fnuz), no fn NaN code
    c = torch.where(c == 0x80, torch.zeros_like(c), c)  # -0 in fn is the fnuz NaN
    return c.to(torch.uint8)


def make_paged(seed, B=4, R=1, Hq=32, Hkv=8, D=128, P=16, n_blocks=64, max_len=300,
               fmt="fp8_e4m3fn", device="cuda", Dv=None, q_dtype=torch.bfloat16):
    """vLLM's layout: caches [num_blocks, block_size, Hkv, D] (V: Dv) as uint8
    fp8 codes, scales [num_blocks, block_size, Hkv] f32, a block table
    [B, max_blocks] int32 and context lengths [B]; q in q_dtype."""
    g = gen(seed, device)
    Dv = D if Dv is None else Dv
    max_blocks = (max_len + P - 1) // P
    n_blocks = max(n_blocks, B * max_blocks + 4)
    kc = random_codes((n_blocks, P, Hkv, D), fmt, g)
    vc = random_codes((n_blocks, P, Hkv, Dv), fmt, g)
    ks = torch.rand((n_blocks, P, Hkv), generator=g, device=device) * 0.02 + 0.01
    # V of order 1 (codes below 2 times 0.75-1.25), so outputs, means of
    # many V rows, stay far above the 2e-3 absolute tolerance: a kernel
    # that wrote zeros or read the wrong cache fails
    vs = torch.rand((n_blocks, P, Hkv), generator=g, device=device) * 0.5 + 0.75
    table = torch.randperm(n_blocks, generator=g, device=device)[:B * max_blocks]
    table = table.to(torch.int32).reshape(B, max_blocks)
    lens = torch.randint(R, max_len + 1, (B,), generator=g, device=device, dtype=torch.int32)
    q = torch.randn((B, R, Hq, D), generator=g, device=device).to(q_dtype)
    return dict(q=q, k_cache=kc, v_cache=vc, k_scale=ks, v_scale=vs, block_table=table,
                lens=lens, page_size=P, max_len=max_len, fmt=fmt)


def paging_of(table):
    """kv_indptr / kv_indices over the block table itself, no copy of it:
    request b's pages are row b of the table (views; lens bound the keys)."""
    B, M = table.shape
    indptr = torch.arange(0, (B + 1) * M, M, dtype=torch.int32, device=table.device)
    return indptr, table.view(-1)


def decode_ref64(p, q=None):
    """float64 reference of spec 2 on the paged cache, in torch."""
    q = (p["q"] if q is None else q).double()
    P = p["page_size"]
    kf = fp8_values(p["k_cache"], p["fmt"]) * p["k_scale"].double()[..., None]
    vf = fp8_values(p["v_cache"], p["fmt"]) * p["v_scale"].double()[..., None]
    kf, vf = kf.flatten(0, 1), vf.flatten(0, 1)  # [slots, Hkv, D]
    B, R, Hq, D = q.shape
    G = Hq // kf.shape[1]
    out = torch.zeros((B, R, Hq, vf.shape[-1]), dtype=torch.float64, device=q.device)
    for b in range(B):
        L = int(p["lens"][b])
        pos = torch.arange(L, device=q.device)
        slots = p["block_table"][b].long()[pos // P] * P + pos % P
        k = kf[slots].repeat_interleave(G, dim=1)  # [L, Hq, D]
        v = vf[slots].repeat_interleave(G, dim=1)
        s = torch.einsum("rhd,lhd->rhl", q[b], k) / math.sqrt(D)
        t = L - R + torch.arange(R, device=q.device)
        s = s.masked_fill(pos[None, None, :] > t[:, None, None], float("-inf"))
        out[b] = torch.einsum("rhl,lhd->rhd", torch.softmax(s, dim=-1), v)
    return out


def assert_decode_close(out, ref, what):
    # a reference inside the absolute tolerance would pass an all-zero output
    assert ref.abs().max() > 0.05, "%s: reference too small to check against" % what
    err = (out.double() - ref).abs() - (2e-3 + 2e-2 * ref.abs())
    assert not torch.isnan(out).any(), "%s: NaN in the output" % what
    assert (err <= 0).all(), "%s: off by %g beyond the tolerance" % (what, err.max().item())


def plan_for(hip, p, **kw):
    indptr, indices = paging_of(p["block_table"])
    return hip.decode_plan(p["q"], p["k_cache"], p["v_cache"], indptr, indices, p["lens"],
                           k_scale=p["k_scale"], v_scale=p["v_scale"],
                           page_size=p["page_size"], max_kv_len=p["max_len"],
                           kv_format=p["fmt"], **kw)


@pytest.mark.parametrize("fmt", ["fp8_e4m3fn", "fp8_e4m3fnuz"])
def test_decode_vllm_layout_no_copy(hip, fmt):
    """The vLLM-layout example: the cache decoded where it is (its address
    is the one the library wrapped), matching the float64 reference."""
    p = make_paged(11, R=2, fmt=fmt)
    plan = plan_for(hip, p)
    out = torch.full(p["q"].shape, float("nan"), dtype=torch.bfloat16, device="cuda")
    before = torch.cuda.memory_allocated()
    plan.run(p["q"], out=out)
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == before, "the run allocated device memory"
    wrapped = {lo for (lo, span) in hip._wrapped}
    for name in ("k_cache", "v_cache", "k_scale", "v_scale", "block_table"):
        assert p[name].data_ptr() in wrapped, "%s was not read in place" % name
    assert_decode_close(out, decode_ref64(p), "decode " + fmt)


def test_decode_torch_fp8_dtype(hip):
    """torch.float8_e4m3fn tensors need no format; results equal the uint8 view's."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("skipped: this torch has no float8_e4m3fn")
    p = make_paged(12)
    o1 = plan_for(hip, p).run(p["q"])
    p8 = dict(p, k_cache=p["k_cache"].view(torch.float8_e4m3fn),
              v_cache=p["v_cache"].view(torch.float8_e4m3fn), fmt=None)
    indptr, indices = paging_of(p["block_table"])
    o2 = hip.decode_plan(p8["q"], p8["k_cache"], p8["v_cache"], indptr, indices, p["lens"],
                         k_scale=p["k_scale"], v_scale=p["v_scale"], page_size=16,
                         max_kv_len=p["max_len"]).run(p["q"])
    assert torch.equal(o1, o2)


class CudaArrayOnly:
    """Nothing but __cuda_array_interface__ (torch's export behind it)."""

    def __init__(self, t):
        self.__cuda_array_interface__ = t.__cuda_array_interface__
        self.t = t


@pytest.mark.parametrize("wrap", [CudaArrayOnly, DLPackOnly])
def test_interchange_protocols(hip, wrap):
    """The same decode through __cuda_array_interface__ and DLPack: bf16 as
    int16 bits (the interface has no bf16 code), fp8 as uint8 + format."""
    p = make_paged(23)
    direct = plan_for(hip, p).run(p["q"])
    indptr, indices = paging_of(p["block_table"])
    w = {n: wrap(p[n]) for n in ("k_cache", "v_cache", "k_scale", "v_scale", "lens")}
    q = wrap(p["q"].view(torch.int16))
    out = torch.empty_like(p["q"])
    plan = hip.decode_plan(q, w["k_cache"], w["v_cache"], wrap(indptr), wrap(indices), w["lens"],
                           k_scale=w["k_scale"], v_scale=w["v_scale"], page_size=16,
                           max_kv_len=p["max_len"], kv_format="fp8_e4m3fn",
                           out=wrap(out.view(torch.int16)))
    plan.run(out=wrap(out.view(torch.int16)))
    torch.cuda.synchronize()
    assert torch.equal(out, direct)


def test_decode_on_a_side_stream(hip):
    p = make_paged(13)
    plan = plan_for(hip, p)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = plan.run(p["q"])
    torch.cuda.current_stream().wait_stream(s)
    assert_decode_close(out, decode_ref64(p), "side stream")


def test_cuda_graph_replay_with_fresh_inputs(hip):
    """Captured once; each replay reads what the static tensors hold then:
    new queries, new cache contents and new lengths up to max_kv_len."""
    p = make_paged(14, B=3, R=1)
    plan = plan_for(hip, p)
    out = torch.empty(p["q"].shape, dtype=torch.bfloat16, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up off the capture, as torch recommends
        plan.run(p["q"], out=out)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.run(p["q"], out=out)
    for seed in (15, 16, 17):
        fresh = make_paged(seed, B=3, R=1)
        for name in ("q", "k_cache", "v_cache", "k_scale", "v_scale", "lens"):
            p[name].copy_(fresh[name])
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert_decode_close(out, decode_ref64(p), "replay with inputs of seed %d" % seed)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_torch_compile_fullgraph(hip, backend):
    """fullgraph: any graph break fails. aot_eager checks tracing and the
    functionalized mutating op without code generation; inductor is the
    default backend (it needs Triton and a C compiler on the machine)."""
    torch._dynamo.reset()
    p = make_paged(18)
    plan = plan_for(hip, p)

    def step(q):
        return plan.run(q * 1.0).float() * 2.0  # ops around the opaque one

    compiled = torch.compile(step, fullgraph=True, backend=backend)
    got = compiled(p["q"])
    assert_decode_close(got / 2.0, decode_ref64(p), "torch.compile")
    q2 = torch.randn(p["q"].shape, device="cuda").to(torch.bfloat16)
    assert_decode_close(compiled(q2) / 2.0, decode_ref64(p, q2), "torch.compile, new q")


def test_custom_op_is_registered(hip):
    p = make_paged(19)
    plan = plan_for(hip, p)  # kept: the op finds it by plan.id while it lives
    for name in ("decode", "kv_store", "mqa_logits"):
        assert hasattr(torch.ops.qattn, name)
    torch.library.opcheck(torch.ops.qattn.decode.default, _decode_opcheck_args(plan, p),
                          test_utils=("test_schema", "test_faketensor"))


def _decode_opcheck_args(plan, p):
    indptr, indices = paging_of(p["block_table"])
    out = torch.empty(p["q"].shape, dtype=torch.bfloat16, device="cuda")
    return (p["q"], p["k_cache"], p["v_cache"], p["k_scale"], p["v_scale"], indptr, indices,
            p["lens"], None, out, None, plan.workspace, plan.id, 0)


def test_kv_store_torch(hip, cpu):
    g = gen(20)
    T, Hkv, D, n_blocks, P = 9, 8, 128, 8, 16
    k_new = torch.randn((T, Hkv, D), generator=g, device="cuda").to(torch.bfloat16)
    v_new = torch.randn((T, Hkv, D), generator=g, device="cuda").to(torch.bfloat16)
    slots = torch.randperm(n_blocks * P, generator=g, device="cuda")[:T].to(torch.int32)
    slots[2] = -1
    kc = torch.zeros((n_blocks, P, Hkv, D), dtype=torch.uint8, device="cuda")
    vc = torch.zeros_like(kc)
    ks = torch.zeros((n_blocks, P, Hkv), device="cuda")
    vs = torch.zeros_like(ks)
    hip.kv_store(k_new, v_new, slots, kc, vc, ks, vs, kv_format="fp8_e4m3fn")
    # the cpu backend, the spec's reference, on host copies: bit-identical
    h = {n: t.cpu() for n, t in dict(k=k_new, v=v_new, s=slots).items()}
    kc2, vc2 = np.zeros(kc.shape, np.uint8), np.zeros(vc.shape, np.uint8)
    ks2, vs2 = np.zeros(ks.shape, np.float32), np.zeros(vs.shape, np.float32)
    cpu.kv_store(h["k"].view(torch.int16).numpy().view(np.uint16),
                 h["v"].view(torch.int16).numpy().view(np.uint16), h["s"].numpy(), kc2, vc2,
                 ks2, vs2, kv_format="fp8_e4m3fn")
    assert (kc.cpu().numpy() == kc2).all() and (vc.cpu().numpy() == vc2).all()
    assert (ks.cpu().numpy().view(np.uint32) == ks2.view(np.uint32)).all()
    assert (ks.cpu().numpy() > 0).sum() == (T - 1) * Hkv


def test_mqa_logits_torch(hip):
    g = gen(21)
    S, H, D, Skv = 37, 16, 128, 1000
    q = random_codes((S, H, D), "fp8_e4m3fn", g)
    k = random_codes((Skv, D), "fp8_e4m3fn", g)
    k_scale = torch.rand(Skv, generator=g, device="cuda") * 0.1
    w = torch.randn((S, H), generator=g, device="cuda")
    ks = torch.randint(0, Skv, (S,), generator=g, device="cuda", dtype=torch.int32)
    ke = ks + torch.randint(0, 600, (S,), generator=g, device="cuda", dtype=torch.int32)
    plan = hip.mqa_logits_plan(q, k, k_scale, w, ks, ke, q_format="fp8_e4m3fn",
                               k_format="fp8_e4m3fn")
    out = plan.run()
    torch.cuda.synchronize()
    qf, kf = fp8_values(q, "fp8_e4m3fn"), fp8_values(k, "fp8_e4m3fn")
    dots = torch.einsum("shd,jd->shj", qf, kf) * k_scale.double()
    ref = torch.einsum("sh,shj->sj", w.double(), dots.clamp_min(0))
    mag = torch.einsum("sh,shj->sj", w.double().abs(),
                       torch.einsum("shd,jd->shj", qf.abs(), kf.abs()) * k_scale.double())
    cols = torch.arange(Skv, device="cuda")
    inside = (cols[None] >= ks[:, None]) & (cols[None] < ke[:, None].clamp_max(Skv))
    assert torch.isneginf(out[~inside]).all()
    err = (out.double() - ref).abs() - (4e-5 * mag + 1e-6)
    assert (err[inside] <= 0).all(), "logits off by %g" % err[inside].max().item()


def test_errors_on_torch_tensors(hip):
    p = make_paged(22)
    plan = plan_for(hip, p)
    with pytest.raises(qattn.QattnError) as e:
        plan.run(p["q"][:, :, :16])  # another head count than planned
    assert e.value.status_name.startswith("QATTN_ERR_")
    with pytest.raises(qattn.QattnError) as e:
        plan.run(p["q"].float())  # f32 queries: the plan was made for bf16
    assert e.value.status_name.startswith("QATTN_ERR_") and e.value.message


def test_arg_cache_torch(hip):
    """The argument cache on torch tensors: another layer's caches bound
    (plan.bind) and passed, another block table with the same q, and the
    planned operands again, alternating; each against the float64 reference."""
    p, p2 = make_paged(23), make_paged(24)  # the same shapes: p2 is another layer
    plan = plan_for(hip, p)
    layer2 = plan.bind(k_cache=p2["k_cache"], v_cache=p2["v_cache"], k_scale=p2["k_scale"],
                       v_scale=p2["v_scale"])
    q = p["q"]
    mixed = dict(p2, q=q, block_table=p["block_table"], lens=p["lens"])
    other = dict(p, block_table=p2["block_table"], lens=p2["lens"])
    refs = [decode_ref64(d) for d in (p, mixed, other)]
    assert (refs[0] - refs[1]).abs().max() > 0.1 and (refs[0] - refs[2]).abs().max() > 0.1
    out = torch.empty(q.shape, dtype=torch.bfloat16, device="cuda")
    indptr2, indices2 = paging_of(p2["block_table"])
    for _ in range(2):
        plan.run(q, out=out)
        assert_decode_close(out, refs[0], "planned")
        layer2.run(q, out=out)
        assert_decode_close(out, refs[1], "layer 2 bound")
        plan.run(q, p2["k_cache"], p2["v_cache"], p2["k_scale"], p2["v_scale"], out=out)
        assert_decode_close(out, refs[1], "layer 2 passed")
        plan.run(q, kv_indptr=indptr2, kv_indices=indices2, kv_lens=p2["lens"], out=out)
        assert_decode_close(out, refs[2], "another block table")


def test_threads_torch(hip):
    """Issue 24, item 1, on torch tensors: 8 threads run one plan (the
    cached path, device memory read in place) and make plans of their own
    on one HIP context; every output matches the float64 reference and no
    two calls are ever inside the context at once (libspy's watch)."""
    import threading
    from libspy import spy_on
    ctx = qattn.Context(backend="hip", device=torch.cuda.current_device())
    try:
        spy = spy_on(ctx, 0.0002)
        p = make_paged(31)
        ref = decode_ref64(p)
        plan = plan_for(ctx, p)
        assert_decode_close(plan.run(p["q"]), ref, "one thread")
        errors, start = [], threading.Barrier(8)

        def work(i):
            try:
                start.wait()
                for it in range(4):
                    o = plan.run(p["q"])
                    own = plan_for(ctx, p).run(p["q"])
                    torch.cuda.current_stream().synchronize()
                    assert_decode_close(o, ref, "thread %d call %d" % (i, it))
                    assert_decode_close(own, ref, "thread %d own plan %d" % (i, it))
            except BaseException as e:  # noqa: B902 (reported below)
                errors.append((i, repr(e)))
        threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[:3]
        assert spy.calls >= 8 * 4 * 2 and spy.max_in_use == 1, spy.max_in_use
    finally:
        torch.cuda.synchronize()
        ctx.close()


def test_bad_args_torch(hip):
    """Issue 24, items 4 and 5, on torch tensors: rank-0 operands and a
    scalar beyond int32 refused naming them; a plan of a closed context
    says so."""
    p = make_paged(32)
    indptr, indices = paging_of(p["block_table"])
    ops = dict(q=p["q"], k_cache=p["k_cache"], v_cache=p["v_cache"], kv_indptr=indptr,
               kv_indices=indices, kv_lens=p["lens"])
    kw = dict(k_scale=p["k_scale"], v_scale=p["v_scale"], page_size=16,
              max_kv_len=p["max_len"], kv_format="fp8_e4m3fn")
    for name in ("q", "k_cache", "v_cache", "kv_lens"):
        bad = dict(ops, **{name: ops[name].reshape(-1)[0]})  # rank 0
        assert bad[name].dim() == 0
        with pytest.raises(ValueError, match="^%s: " % name):
            hip.decode_plan(**bad, **kw)
    with pytest.raises(ValueError, match="^k_scale: rank 0"):
        hip.decode_plan(**ops, **dict(kw, k_scale=p["k_scale"].reshape(-1)[0]))
    for name in ("page_size", "max_kv_len", "window_left", "num_splits"):
        with pytest.raises(ValueError, match="^%s: 4294967312 is outside" % name):
            hip.decode_plan(**ops, **dict(kw, **{name: 2**32 + 16}))
    ctx = qattn.Context(backend="hip", device=torch.cuda.current_device())
    plan = plan_for(ctx, p)
    plan.run(p["q"])
    torch.cuda.synchronize()
    ctx.close()
    with pytest.raises(qattn.QattnError, match="DecodePlan: the context is closed"):
        plan.run(p["q"])


# ---- On CPU tensors (the cpu backend), and each op on both devices -------
# A CPU tensor is an input like a numpy array: the cpu backend reads and
# writes it in place. CI runs these with Debian's CPU torch.
DEVICES = ["cpu", "cuda"]


@pytest.fixture(scope="module", params=DEVICES)
def tdev(request):
    """(device, context): the cpu backend on CPU tensors, HIP on CUDA ones."""
    if request.param == "cpu":
        ctx = qattn.Context(backend="cpu")
        yield "cpu", ctx
        ctx.close()
    else:
        yield "cuda", request.getfixturevalue("hip")


def cpu_paged(seed, **kw):
    return make_paged(seed, device="cpu", **kw)


@pytest.mark.parametrize("fmt", ["fp8_e4m3fn", "fp8_e4m3fnuz"])
def test_cpu_decode_in_place(cpu, fmt):
    """CPU tensors in vLLM's layout: read where they are (the cpu backend
    wraps their memory), matching the float64 reference."""
    p = cpu_paged(31, R=2, fmt=fmt)
    plan = plan_for(cpu, p)
    out = torch.full(p["q"].shape, float("nan"), dtype=torch.bfloat16)
    assert plan.run(p["q"], out=out) is out
    wrapped = {lo for (lo, span) in cpu._wrapped}
    for name in ("k_cache", "v_cache", "k_scale", "v_scale", "block_table"):
        assert p[name].data_ptr() in wrapped, "%s was not read in place" % name
    assert_decode_close(out, decode_ref64(p), "cpu decode " + fmt)
    o2 = plan.run(p["q"])  # allocated by the plan: a CPU tensor
    assert o2.device.type == "cpu" and o2.dtype == torch.bfloat16 and torch.equal(o2, out)


# ---- issue 27: f16 q and o, e5m2 caches, head dims 80/96/192, Dv != D ----
@pytest.mark.parametrize("q_dtype", ["bfloat16", "float16"])
@pytest.mark.parametrize("fmt,torch_fp8", [("fp8_e5m2", True), ("fp8_e5m2", False),
                                           ("fp8_e4m3fn", False)])
@pytest.mark.parametrize("D,Dv", [(128, 128), (96, 96), (80, 80), (192, 128), (64, 128)])
def test_decode_f16_e5m2_head_dims(tdev, q_dtype, fmt, torch_fp8, D, Dv):
    """f16 or bf16 q over fn or e5m2 caches (torch.float8_e5m2 tensors, or
    uint8 codes with kv_format="fp8_e5m2") of head dims D / Dv: the output
    the plan allocates has q's dtype and matches the float64 reference; a
    caller's o of the other dtype (given at planning) is written in its own."""
    dev, ctx = tdev
    qdt = getattr(torch, q_dtype)
    p = make_paged(41, B=3, R=2, Hq=8, Hkv=2, D=D, Dv=Dv, max_len=200, fmt=fmt, device=dev,
                   q_dtype=qdt)
    kc, vc, kw = p["k_cache"], p["v_cache"], dict(kv_format=fmt)
    if torch_fp8:
        kc, vc, kw = kc.view(torch.float8_e5m2), vc.view(torch.float8_e5m2), {}
    indptr, indices = paging_of(p["block_table"])
    plan = ctx.decode_plan(p["q"], kc, vc, indptr, indices, p["lens"], k_scale=p["k_scale"],
                           v_scale=p["v_scale"], page_size=16, max_kv_len=p["max_len"], **kw)
    out = plan.run(p["q"])
    assert out.dtype == qdt and out.shape == (3, 2, 8, Dv) and out.device.type == dev
    ref = decode_ref64(p)
    what = "%s q, %s cache, D %d Dv %d" % (q_dtype, fmt, D, Dv)
    assert_decode_close(out, ref, what)
    # o of the other dtype, given at planning (a plan is made for o's dtype)
    other = torch.bfloat16 if qdt == torch.float16 else torch.float16
    o2 = torch.full(out.shape, float("nan"), dtype=other, device=dev)
    plan2 = ctx.decode_plan(p["q"], kc, vc, indptr, indices, p["lens"], k_scale=p["k_scale"],
                            v_scale=p["v_scale"], page_size=16, max_kv_len=p["max_len"], out=o2,
                            **kw)
    assert plan2.run(p["q"], out=o2) is o2
    assert_decode_close(o2, ref, what + ", o " + str(other))
    o3 = plan2.run(p["q"])  # allocated in the dtype of the out it was planned with
    assert o3.dtype == other and torch.equal(o3, o2)


@pytest.mark.parametrize("src", ["bfloat16", "float16"])
@pytest.mark.parametrize("D,Dv", [(128, 128), (192, 128)])
def test_kv_store_e5m2_matches_torch_cast(tdev, src, D, Dv):
    """KV store from bf16 or f16 tokens into torch.float8_e5m2 caches: scale =
    amax / 57344 per token and head, code = torch's own round-to-nearest-even
    cast of x / scale (an independent encoder), skipped slots (-1) untouched."""
    dev, ctx = tdev
    g = gen(42, dev)
    T, Hkv, n_blocks, P = 11, 4, 6, 16
    sdt = getattr(torch, src)
    k_new = (torch.randn((T, Hkv, D), generator=g, device=dev) * 4).to(sdt)
    v_new = torch.randn((T, Hkv, Dv), generator=g, device=dev).to(sdt)
    slots = torch.randperm(n_blocks * P, generator=g, device=dev)[:T].to(torch.int32)
    slots[4] = -1
    kc = torch.zeros((n_blocks, P, Hkv, D), dtype=torch.uint8, device=dev).view(torch.float8_e5m2)
    vc = torch.zeros((n_blocks, P, Hkv, Dv), dtype=torch.uint8, device=dev).view(torch.float8_e5m2)
    ks, vs = torch.zeros((n_blocks, P, Hkv), device=dev), torch.zeros((n_blocks, P, Hkv), device=dev)
    ctx.kv_store(k_new, v_new, slots, kc, vc, ks, vs)
    if dev == "cuda":
        torch.cuda.synchronize()
    for new, c, sc in ((k_new, kc, ks), (v_new, vc, vs)):
        flat_c, flat_s = c.view(torch.uint8).view(-1, Hkv, new.shape[-1]), sc.view(-1, Hkv)
        for t in range(T):
            if slots[t] < 0:
                continue
            x = new[t].float()
            amax = x.abs().amax(-1)
            # A tensor divisor: torch's CUDA division by a Python scalar
            # multiplies by its reciprocal, which is not the correctly
            # rounded quotient the spec asks for.
            scale = amax / torch.full_like(amax, 57344.0)
            assert torch.equal(flat_s[slots[t]], scale), "scale of token %d" % t
            want = (x / scale[:, None]).to(torch.float8_e5m2).view(torch.uint8)
            assert torch.equal(flat_c[slots[t]], want), "codes of token %d" % t
    assert int((ks > 0).sum()) == (T - 1) * Hkv
    assert int((kc.view(torch.uint8) != 0).sum()) > (T - 1) * Hkv * D // 2


def test_cpu_kv_store_matches_torch_fp8_cast(cpu):
    """KV store on CPU tensors: scale = amax / 448 per token and head, code =
    torch's own round-to-nearest-even cast of x / scale (an independent
    encoder), skipped slots (-1) untouched."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("skipped: this torch has no float8_e4m3fn")
    g = gen(32, "cpu")
    T, Hkv, D, n_blocks, P = 11, 4, 128, 6, 16
    k_new = torch.randn((T, Hkv, D), generator=g).to(torch.bfloat16)
    v_new = torch.randn((T, Hkv, D), generator=g).to(torch.bfloat16) * 3
    slots = torch.randperm(n_blocks * P, generator=g)[:T].to(torch.int32)
    slots[4] = -1
    kc = torch.zeros((n_blocks, P, Hkv, D), dtype=torch.uint8)
    vc, ks, vs = torch.zeros_like(kc), torch.zeros((n_blocks, P, Hkv)), torch.zeros((n_blocks, P, Hkv))
    cpu.kv_store(k_new, v_new, slots, kc, vc, ks, vs, kv_format="fp8_e4m3fn")
    for new, c, sc in ((k_new, kc, ks), (v_new, vc, vs)):
        flat_c, flat_s = c.view(-1, Hkv, D), sc.view(-1, Hkv)
        for t in range(T):
            if slots[t] < 0:
                continue
            x = new[t].float()
            scale = x.abs().amax(-1) / 448.0
            assert torch.equal(flat_s[slots[t]], scale), "scale of token %d" % t
            want = (x / scale[:, None]).to(torch.float8_e4m3fn).view(torch.uint8)
            assert torch.equal(flat_c[slots[t]], want), "codes of token %d" % t
    assert int((ks > 0).sum()) == (T - 1) * Hkv


def test_cpu_mqa_logits(cpu):
    g = gen(33, "cpu")
    S, H, D, Skv = 9, 8, 128, 300
    q = random_codes((S, H, D), "fp8_e4m3fn", g)
    k = random_codes((Skv, D), "fp8_e4m3fn", g)
    k_scale = torch.rand(Skv, generator=g) * 0.1
    w = torch.randn((S, H), generator=g)
    ks = torch.randint(0, Skv, (S,), generator=g, dtype=torch.int32)
    ke = ks + torch.randint(0, 200, (S,), generator=g, dtype=torch.int32)
    out = cpu.mqa_logits_plan(q, k, k_scale, w, ks, ke, q_format="fp8_e4m3fn",
                              k_format="fp8_e4m3fn").run()
    assert out.device.type == "cpu" and out.shape == (S, Skv)
    qf, kf = fp8_values(q, "fp8_e4m3fn"), fp8_values(k, "fp8_e4m3fn")
    ref = torch.einsum("sh,shj->sj", w.double(),
                       (torch.einsum("shd,jd->shj", qf, kf) * k_scale.double()).clamp_min(0))
    mag = torch.einsum("sh,shj->sj", w.double().abs(),
                       torch.einsum("shd,jd->shj", qf.abs(), kf.abs()) * k_scale.double())
    cols = torch.arange(Skv)
    inside = (cols[None] >= ks[:, None]) & (cols[None] < ke[:, None].clamp_max(Skv))
    assert torch.isneginf(out[~inside]).all()
    err = (out.double() - ref).abs() - (4e-5 * mag + 1e-6)
    assert (err[inside] <= 0).all()


def _op_args(dev, ctx):
    """Arguments of each custom op, on `dev` tensors, for `ctx`."""
    p = make_paged(34, device=dev)
    plan = plan_for(ctx, p)
    ws = plan.workspace
    if ws is not None and not isinstance(ws, torch.Tensor):
        pytest.fail("the plan's workspace on %s tensors is a %s, not a tensor: the custom op "
                    "cannot take it" % (dev, type(ws).__name__))
    indptr, indices = paging_of(p["block_table"])
    out = torch.empty(p["q"].shape, dtype=torch.bfloat16, device=dev)
    decode = (p["q"], p["k_cache"], p["v_cache"], p["k_scale"], p["v_scale"], indptr, indices,
              p["lens"], None, out, None, ws, plan.id, 0)
    g = gen(35, dev)
    T, Hkv, D = 5, 8, 128
    kv = (torch.randn((T, Hkv, D), generator=g, device=dev).to(torch.bfloat16),
          torch.randn((T, Hkv, D), generator=g, device=dev).to(torch.bfloat16),
          torch.arange(3, 3 + T, dtype=torch.int32, device=dev),
          torch.zeros((4, 16, Hkv, D), dtype=torch.uint8, device=dev),
          torch.zeros((4, 16, Hkv, D), dtype=torch.uint8, device=dev),
          torch.zeros((4, 16, Hkv), device=dev), torch.zeros((4, 16, Hkv), device=dev),
          ctx.id, "fp8_e4m3fn", 0)
    S, H, Skv = 5, 4, 256  # logits rows of 256: unpadded, as the functionalized clone is
    q8 = random_codes((S, H, D), "fp8_e4m3fn", g)  # uint8 codes: opcheck does arithmetic
    k8 = random_codes((Skv, D), "fp8_e4m3fn", g)    # on inputs, which fp8 dtypes lack on CPU
    ksc = torch.rand(Skv, generator=g, device=dev)
    w = torch.randn((S, H), generator=g, device=dev)
    ks = torch.zeros(S, dtype=torch.int32, device=dev)
    ke = torch.full((S,), Skv, dtype=torch.int32, device=dev)
    mplan = ctx.mqa_logits_plan(q8, k8, ksc, w, ks, ke, q_format="fp8_e4m3fn",
                                k_format="fp8_e4m3fn")
    mout = torch.empty((S, 256), device=dev)[:, :Skv]
    mqa = (q8, k8, ksc, w, ks, ke, mout, mplan.workspace, mplan.id, 0)
    # issue 27: f16 q and o over an e5m2 cache of D 192, Dv 128; a KV store of
    # f16 tokens into e5m2 caches of the same head dims
    p16 = make_paged(37, Hq=8, Hkv=2, D=192, Dv=128, fmt="fp8_e5m2", device=dev,
                     q_dtype=torch.float16)
    plan16 = plan_for(ctx, p16)
    indptr16, indices16 = paging_of(p16["block_table"])
    out16 = torch.empty((4, 1, 8, 128), dtype=torch.float16, device=dev)
    decode16 = (p16["q"], p16["k_cache"], p16["v_cache"], p16["k_scale"], p16["v_scale"],
                indptr16, indices16, p16["lens"], None, out16, None, plan16.workspace, plan16.id, 0)
    kv16 = (torch.randn((T, 2, 192), generator=g, device=dev).to(torch.float16),
            torch.randn((T, 2, 128), generator=g, device=dev).to(torch.float16),
            torch.arange(3, 3 + T, dtype=torch.int32, device=dev),
            torch.zeros((4, 16, 2, 192), dtype=torch.uint8, device=dev),
            torch.zeros((4, 16, 2, 128), dtype=torch.uint8, device=dev),
            torch.zeros((4, 16, 2), device=dev), torch.zeros((4, 16, 2), device=dev),
            ctx.id, "fp8_e5m2", 0)
    return {"decode": (decode, plan), "kv_store": (kv, None), "mqa_logits": (mqa, mplan),
            "decode_f16_e5m2": (decode16, plan16), "kv_store_f16_e5m2": (kv16, None)}


def _op_of(key):
    """The custom op of an _op_args key ("decode_f16_e5m2" is decode's)."""
    return getattr(torch.ops.qattn, key.replace("_f16_e5m2", ""))


@pytest.mark.parametrize("op", ["decode", "kv_store", "mqa_logits", "decode_f16_e5m2",
                                "kv_store_f16_e5m2"])
def test_opcheck_each_op(tdev, op):
    """torch.library.opcheck with every check it has: the schema (mutated
    arguments declared), autograd registration, the fake implementation
    against the real one, and AOT dispatch (static and dynamic shapes)."""
    dev, ctx = tdev
    args, keep = _op_args(dev, ctx)[op]
    torch.library.opcheck(_op_of(op).default, args)


def test_fake_implementations(tdev):
    """Under FakeTensorMode each op runs its fake implementation: no data is
    read or written, no library call is made, and outputs keep their shapes."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    dev, ctx = tdev
    calls = _op_args(dev, ctx)
    mode = FakeTensorMode()
    for op, (args, keep) in calls.items():
        fake = [mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        with mode:
            assert _op_of(op)(*fake) is None
    # the real tensors are untouched: the decode output is still empty memory
    # (NaN-filled here so a write would show)
    args, plan = calls["decode"]
    args[9].fill_(float("nan"))
    with FakeTensorMode() as m:
        torch.ops.qattn.decode(*[m.from_tensor(a) if isinstance(a, torch.Tensor) else a
                                 for a in args])
    assert torch.isnan(args[9]).all()


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_cpu_torch_compile_fullgraph(cpu, backend):
    """torch.compile(fullgraph=True) over CPU tensors: a KV store then a
    decode with ops around them, traced as the custom ops (any graph break
    fails). inductor generates C++ for the surrounding ops (it needs a C++
    compiler and Python's headers, which the CI root has)."""
    torch._dynamo.reset()
    p = cpu_paged(36)
    plan = plan_for(cpu, p)
    slot = torch.tensor([5], dtype=torch.int32)  # a slot no request reads

    def step(q, k_new):
        cpu.kv_store(k_new * 1.0, k_new, slot, p["k_cache"], p["v_cache"], p["k_scale"],
                     p["v_scale"], kv_format=p["fmt"])
        return plan.run(q * 1.0).float() * 2.0

    compiled = torch.compile(step, fullgraph=True, backend=backend)
    k_new = torch.randn((1, 8, 128)).to(torch.bfloat16)
    got = compiled(p["q"], k_new)
    assert_decode_close(got / 2.0, decode_ref64(p), "cpu torch.compile " + backend)
    q2 = torch.randn(p["q"].shape).to(torch.bfloat16)
    assert_decode_close(compiled(q2, k_new) / 2.0, decode_ref64(p, q2),
                        "cpu torch.compile %s, new q" % backend)
    print("torch.compile(fullgraph=True, backend=%r) ran on CPU tensors (torch %s)" %
          (backend, torch.__version__))


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_cpu_torch_compile_f16_e5m2(cpu, backend):
    """The same with f16 q and tokens, torch.float8_e5m2 caches and Dv != D:
    the output traced through the custom op (allocated by plan.run in q's
    dtype) is f16 and matches the float64 reference."""
    torch._dynamo.reset()
    p = cpu_paged(38, Hq=8, Hkv=2, D=192, Dv=128, fmt="fp8_e5m2", q_dtype=torch.float16)
    kc, vc = p["k_cache"].view(torch.float8_e5m2), p["v_cache"].view(torch.float8_e5m2)
    indptr, indices = paging_of(p["block_table"])
    plan = cpu.decode_plan(p["q"], kc, vc, indptr, indices, p["lens"], k_scale=p["k_scale"],
                           v_scale=p["v_scale"], page_size=16, max_kv_len=p["max_len"])
    slot = torch.tensor([5], dtype=torch.int32)  # a slot no request reads

    def step(q, k_new, v_new):
        cpu.kv_store(k_new * 1.0, v_new, slot, kc, vc, p["k_scale"], p["v_scale"])
        return plan.run(q * 1.0)

    compiled = torch.compile(step, fullgraph=True, backend=backend)
    k_new = torch.randn((1, 2, 192)).to(torch.float16)
    v_new = torch.randn((1, 2, 128)).to(torch.float16)
    got = compiled(p["q"], k_new, v_new)
    assert got.dtype == torch.float16 and got.shape == (4, 1, 8, 128)
    assert_decode_close(got, decode_ref64(p), "cpu torch.compile f16/e5m2 " + backend)
    assert kc.view(torch.uint8)[0, 5].any(), "the compiled KV store wrote nothing"
