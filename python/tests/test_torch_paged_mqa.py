"""Paged FP8 MQA logits (spec 5, the indexer at decode time) on torch
tensors, tested as decode's torch op is (test_torch.py): the custom op
torch.ops.qattn.paged_mqa_logits under torch.library.opcheck with every
check, its fake implementation under FakeTensorMode, torch.compile
(fullgraph=True) with aot_eager and inductor, and, on a GPU through the HIP
backend, a side stream and CUDA-graph capture replayed with fresh inputs
(new queries, weights, cache contents, page table and lengths up to
max_kv_len).

The cache is DeepGEMM's fused layout, read in place: per page, P rows of D
fp8 codes followed by the page's P f32 scales, in one uint8 tensor
[num_blocks, P * (D + 4)], passed as the views [num_blocks, P, D] and
[num_blocks, P]; the block table [B, max_blocks] is kv_indices itself.

CPU tensors run through the cpu backend (CI, with Debian's CPU torch);
CUDA ones through HIP on the GPU machine, skipped (saying so) without a
GPU or the HIP library."""
import pytest

import qattn
from conftest import REQUIRED
from test_torch import fp8_values, gen, hip, paging_of, random_codes  # noqa: F401 (hip: a fixture)

if "torch" in REQUIRED:
    import torch
else:
    torch = pytest.importorskip("torch", reason="skipped: torch is not installed")

FMT = "fp8_e4m3fn"


def make_indexer(seed, device, B=3, N=2, H=16, D=128, P=64, max_len=300, fmt=FMT, spare=3,
                 fused=True):
    """q [B, N, H, D] codes, weights [B, N, H], the fused cache and its two
    views (fused=False: two dense tensors), a shuffled block table and
    lengths (one of max_len exactly)."""
    g = gen(seed, device)
    max_blocks = (max_len + P - 1) // P
    n_blocks = B * max_blocks + spare
    if fused:
        whole = torch.zeros((n_blocks, P * (D + 4)), dtype=torch.uint8, device=device)
        k_cache = whole[:, :P * D].view(n_blocks, P, D)
        k_scale = whole[:, P * D:].view(torch.float32)  # [n_blocks, P], row stride P * (D + 4) / 4
    else:
        k_cache = torch.zeros((n_blocks, P, D), dtype=torch.uint8, device=device)
        k_scale = torch.zeros((n_blocks, P), device=device)
        whole = None
    k_cache.copy_(random_codes((n_blocks, P, D), fmt, g))
    k_scale.copy_(torch.rand((n_blocks, P), generator=g, device=device) * 0.09 + 0.01)
    table = torch.randperm(n_blocks, generator=g, device=device)[:B * max_blocks]
    table = table.to(torch.int32).reshape(B, max_blocks)
    lens = torch.randint(N, max_len + 1, (B,), generator=g, device=device, dtype=torch.int32)
    lens[int(torch.randint(0, B, (1,), generator=g, device=device))] = max_len
    q = random_codes((B, N, H, D), fmt, g)
    w = torch.randn((B, N, H), generator=g, device=device)
    return dict(q=q, weights=w, fused=whole, k_cache=k_cache, k_scale=k_scale,
                block_table=table, lens=lens, page_size=P, max_len=max_len, fmt=fmt)


def ref64(p, q=None, weights=None):
    """float64 logits [B, N, max_len] (-inf where not visible) and the
    tolerance's magnitude A, from spec 5, in torch."""
    q = p["q"] if q is None else q
    w = (p["weights"] if weights is None else weights).double()
    qf = fp8_values(q, p["fmt"])
    B, N, H, D = qf.shape
    P, M = p["page_size"], p["max_len"]
    kf = fp8_values(p["k_cache"], p["fmt"]).reshape(-1, D)
    ks = p["k_scale"].double().reshape(-1)
    out = torch.full((B, N, M), float("-inf"), dtype=torch.float64, device=q.device)
    mag = torch.zeros((B, N, M), dtype=torch.float64, device=q.device)
    for b in range(B):
        L = int(p["lens"][b])
        pos = torch.arange(min(L, M), device=q.device)
        slots = p["block_table"][b].long()[pos // P] * P + pos % P
        dots = torch.einsum("thd,ld->thl", qf[b], kf[slots]) * ks[slots]
        absd = torch.einsum("thd,ld->thl", qf[b].abs(), kf[slots].abs()) * ks[slots]
        val = torch.einsum("th,thl->tl", w[b], dots.clamp_min(0))
        t = torch.arange(N, device=q.device)
        seen = pos[None, :] <= L - N + t[:, None]
        out[b, :, :len(pos)] = torch.where(seen, val, torch.full_like(val, float("-inf")))
        mag[b, :, :len(pos)] = torch.einsum("th,thl->tl", w[b].abs(), absd)
    return out, mag


def assert_logits_close(out, ref_mag, what):
    ref, mag = ref_mag
    inf = torch.isneginf(ref)
    assert inf.any() and (~inf).any(), "%s: a reference that cannot fail" % what
    assert (ref[~inf].abs() > 1e-3).any(), "%s: a reference of zeros" % what
    assert torch.equal(torch.isneginf(out), inf), "%s: -inf where the contract does not say" % what
    got = out.double()[~inf]
    assert not torch.isnan(got).any(), "%s: NaN in a visible column" % what
    err = (got - ref[~inf]).abs() - (4e-5 * mag[~inf] + 1e-6)
    assert (err <= 0).all(), "%s: off by %g beyond the tolerance" % (what, err.max().item())


def plan_for(ctx, p, **kw):
    indptr, indices = paging_of(p["block_table"])
    return ctx.paged_mqa_logits_plan(p["q"], p["k_cache"], p["k_scale"], p["weights"], indptr,
                                     indices, p["lens"], page_size=p["page_size"],
                                     max_kv_len=p["max_len"], q_format=p["fmt"],
                                     k_format=p["fmt"], **kw)


@pytest.fixture(scope="module", params=["cpu", "cuda"])
def tdev(request):
    """(device, context): the cpu backend on CPU tensors, HIP on CUDA ones."""
    if request.param == "cpu":
        ctx = qattn.Context(backend="cpu")
        yield "cpu", ctx
        ctx.close()
    else:
        yield "cuda", request.getfixturevalue("hip")


def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()


# ---- results on both devices ------------------------------------------------
def test_paged_mqa_deepgemm_layout_in_place(tdev):
    """The fused cache and the block table read where they are (their
    addresses are the ones the library wrapped), no device memory
    allocated by the run, the logits within the spec's tolerance."""
    dev, ctx = tdev
    p = make_indexer(41, dev)
    full = torch.full((3, 2, 512), float("nan"), device=dev)
    out = full[:, :, :p["max_len"]]
    plan = plan_for(ctx, p, out=out)
    before = torch.cuda.memory_allocated() if dev == "cuda" else None
    assert plan.run(out=out) is out
    sync(dev)
    if dev == "cuda":
        assert torch.cuda.memory_allocated() == before, "the run allocated device memory"
    wrapped = {lo for (lo, span) in ctx._wrapped}
    for name in ("fused", "block_table"):
        assert p[name].data_ptr() in wrapped, "%s was not read in place" % name
    assert torch.isnan(full[:, :, 300:]).all(), "a write past max_kv_len"
    assert_logits_close(out, ref64(p), "%s, fused layout" % dev)
    o2 = plan_for(ctx, p).run()  # allocated by the plan: rows padded to 256
    assert o2.device.type == dev and o2.shape == (3, 2, 300) and o2.stride(1) == 512
    sync(dev)
    assert torch.equal(o2, out)


def test_paged_mqa_torch_fp8_dtype(tdev):
    """torch.float8_e4m3fn tensors need no format: the same logits as the
    uint8 codes with the format."""
    if not hasattr(torch, "float8_e4m3fn"):
        pytest.skip("skipped: this torch has no float8_e4m3fn")
    dev, ctx = tdev
    p = make_indexer(42, dev, N=1, P=16)
    o1 = plan_for(ctx, p).run()
    indptr, indices = paging_of(p["block_table"])
    plan = ctx.paged_mqa_logits_plan(p["q"].view(torch.float8_e4m3fn),
                                     p["k_cache"].view(torch.float8_e4m3fn), p["k_scale"],
                                     p["weights"], indptr, indices, p["lens"], page_size=16,
                                     max_kv_len=p["max_len"])
    o2 = plan.run()
    sync(dev)
    assert torch.equal(o1.isneginf(), o2.isneginf()) and torch.equal(o1[o1.isfinite()],
                                                                      o2[o2.isfinite()])
    assert_logits_close(o2, ref64(p), "float8 dtypes")


def _op_args(dev, ctx):
    """Arguments of torch.ops.qattn.paged_mqa_logits on `dev` tensors, with
    max_kv_len 256 (logits rows unpadded) and dense caches, since opcheck's
    AOT checks run the op on clones, which are dense (the plan is made for
    one layout), and uint8 codes (opcheck does arithmetic on inputs, which
    fp8 dtypes lack on CPU)."""
    p = make_indexer(43, dev, max_len=256, fused=False)
    plan = plan_for(ctx, p)
    if plan.workspace is not None and not isinstance(plan.workspace, torch.Tensor):
        pytest.fail("the plan's workspace on %s tensors is a %s, not a tensor"
                    % (dev, type(plan.workspace).__name__))
    indptr, indices = paging_of(p["block_table"])
    out = torch.empty((3, 2, 256), device=dev)
    return (p["q"], p["k_cache"], p["k_scale"], p["weights"], indptr, indices, p["lens"], out,
            plan.workspace, plan.id, 0), plan, p


def test_paged_mqa_opcheck(tdev):
    """torch.library.opcheck with every check it has: the schema (out and
    workspace declared mutated), autograd registration, the fake against
    the real implementation, and AOT dispatch (static and dynamic)."""
    dev, ctx = tdev
    args, plan, p = _op_args(dev, ctx)
    assert hasattr(torch.ops.qattn, "paged_mqa_logits")
    torch.library.opcheck(torch.ops.qattn.paged_mqa_logits.default, args)
    # and the op itself computes: called directly, into a poisoned output
    args[7].fill_(float("nan"))
    torch.ops.qattn.paged_mqa_logits(*args)
    sync(dev)
    assert_logits_close(args[7], ref64(p), "%s custom op called directly" % dev)


def test_paged_mqa_fake(tdev):
    """Under FakeTensorMode the op runs its fake: no library call, nothing
    written (the real output, NaN-filled, stays NaN), None returned."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    dev, ctx = tdev
    args, plan, p = _op_args(dev, ctx)
    args[7].fill_(float("nan"))
    with FakeTensorMode() as m:
        fake = [m.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        assert torch.ops.qattn.paged_mqa_logits(*fake) is None
        assert fake[7].shape == (3, 2, 256)
    assert torch.isnan(args[7]).all()


def test_paged_mqa_dropped_plan_named(tdev):
    """A compiled function's op names its plan by id: once the plan is gone
    the op says so instead of running something else."""
    dev, ctx = tdev
    args, plan, p = _op_args(dev, ctx)
    args = list(args)
    plan.close()
    with pytest.raises(ValueError, match="plan_id: %d names no live qattn object" % plan.id):
        torch.ops.qattn.paged_mqa_logits(*args)


@pytest.mark.parametrize("backend", ["aot_eager", "inductor"])
def test_paged_mqa_compile_fullgraph(tdev, backend):
    """torch.compile(fullgraph=True) of a step calling plan.run() between
    ops of its own (any graph break fails): traced as the custom op, run
    with the planned q and with new q and weights. inductor generates C++
    (CPU) or Triton (GPU) for the surrounding ops."""
    dev, ctx = tdev
    torch._dynamo.reset()
    p = make_indexer(44, dev)
    plan = plan_for(ctx, p)

    def step(q, w):
        return plan.run(q, weights=w * 1.0) * 2.0

    compiled = torch.compile(step, fullgraph=True, backend=backend)
    got = compiled(p["q"], p["weights"])
    sync(dev)
    assert_logits_close(got / 2.0, ref64(p), "%s torch.compile %s" % (dev, backend))
    g = gen(45, dev)
    q2 = random_codes(p["q"].shape, FMT, g)
    w2 = torch.randn(p["weights"].shape, generator=g, device=dev)
    got = compiled(q2, w2)
    sync(dev)
    assert_logits_close(got / 2.0, ref64(p, q2, w2), "%s torch.compile %s, new q" % (dev, backend))


# ---- CUDA only: streams and graphs ------------------------------------------------
def test_paged_mqa_side_stream(hip):
    p = make_indexer(46, "cuda")
    plan = plan_for(hip, p)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        out = plan.run()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    assert_logits_close(out, ref64(p), "side stream")


def test_paged_mqa_cuda_graph_replay(hip):
    """Captured once; each replay reads what the static tensors hold then:
    new q, weights and cache contents, another block table and new lengths
    up to max_kv_len (the plan's splits come from max_kv_len, not from the
    lengths at capture)."""
    p = make_indexer(47, "cuda", B=4, N=1, max_len=700)
    p["lens"].fill_(5)  # short at capture: the replays must see past them
    out = torch.empty((4, 1, 768), device="cuda")[:, :, :700]
    plan = plan_for(hip, p, out=out)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up off the capture
        plan.run(out=out)
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        plan.run(out=out)
    for seed in (48, 49, 50):
        fresh = make_indexer(seed, "cuda", B=4, N=1, max_len=700)
        for name in ("q", "weights", "fused", "block_table", "lens"):
            p[name].copy_(fresh[name])
        out.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        assert int(p["lens"].max()) == 700
        assert_logits_close(out, ref64(p), "replay with inputs of seed %d" % seed)
