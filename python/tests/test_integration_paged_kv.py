"""qattn.integrations.paged_kv, the framework-free part of the transformers
integration, on torch tensors: CPU tensors through the cpu backend (CI), and
CUDA tensors through the HIP backend where a GPU is (the H200 step).

A small Llama-style decoder written here in torch (RMSNorm, RoPE, GQA 4,
head dim 128, SwiGLU, random weights) decodes greedily twice: with a bf16
cache and SDPA, and with PagedKV (fp8 e4m3fn, qattn's KV store and decode).
At every step the logits agree within the fp8 tolerance and the greedy
tokens agree wherever the bf16 top-2 margin exceeds twice it; a corrupted cache
breaks that tolerance, so the check can fail."""
import math

import pytest

from conftest import REQUIRED

if "torch" in REQUIRED:  # CI: Debian's CPU torch is in the tool root
    import torch
else:
    torch = pytest.importorskip("torch", reason="skipped: torch is not installed")

import qattn  # noqa: E402
from qattn.integrations.paged_kv import PagedKV  # noqa: E402

# |logits - bf16 logits| <= tolerance * max|bf16 logits| at every step: the
# format's relative rounding error (fp8 e4m3: 3 mantissa bits, half an ulp is
# 2^-4; int8 with per-token scales: 2^-5 covers it with room)
LOGIT_RTOL = {"fp8_e4m3fn": 2.0 ** -4, "int8": 2.0 ** -5}


def devices():
    out = ["cpu"]
    if torch.cuda.is_available():
        out.append("cuda")
    return out


@pytest.fixture(scope="module", params=devices())
def dev(request):
    d = request.param
    try:
        PagedKV(1, 1, 1, 64, 16, device=d)
    except qattn.QattnError as e:
        if ("hip" if d == "cuda" else "cpu") in REQUIRED:
            pytest.fail("%s: %s" % (d, e))
        pytest.skip("skipped: no qattn backend for %s tensors: %s" % (d, e))
    return d


class MiniLlama(torch.nn.Module):
    """Llama's decoder layer math, small: the attention goes through `attend`."""

    def __init__(self, vocab=512, hidden=512, layers=2, heads=8, kv_heads=2, head_dim=128,
                 inter=1024, seed=0):
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        r = lambda *s, std=0.05: torch.nn.Parameter(torch.randn(*s, generator=g) * std)
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.embed = r(vocab, hidden, std=1.0)
        self.layers = torch.nn.ModuleList()
        for _ in range(layers):
            m = torch.nn.Module()
            m.q, m.k, m.v = r(heads * head_dim, hidden), r(kv_heads * head_dim, hidden), \
                r(kv_heads * head_dim, hidden)
            m.o = r(hidden, heads * head_dim)
            m.gate, m.up, m.down = r(inter, hidden), r(inter, hidden), r(hidden, inter)
            self.layers.append(m)
        self.head = r(vocab, hidden)
        inv = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv)

    @staticmethod
    def norm(x):
        xf = x.float()
        return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6)).to(x.dtype)

    def rope(self, x, pos):
        f = pos[:, None].float() * self.inv_freq[None, :]
        emb = torch.cat([f, f], dim=-1)
        cos, sin = emb.cos().to(x.dtype), emb.sin().to(x.dtype)
        x1, x2 = x[..., :x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return x * cos + torch.cat([-x2, x1], dim=-1) * sin

    def forward(self, ids, start, attend):
        B, S = ids.shape
        x = self.embed[ids]
        pos = torch.arange(start, start + S, device=ids.device)
        for i, m in enumerate(self.layers):
            h = self.norm(x)
            q = (h @ m.q.T).view(B, S, self.heads, self.head_dim).transpose(1, 2)
            k = (h @ m.k.T).view(B, S, self.kv_heads, self.head_dim).transpose(1, 2)
            v = (h @ m.v.T).view(B, S, self.kv_heads, self.head_dim).transpose(1, 2)
            q, k = self.rope(q, pos), self.rope(k, pos)
            a = attend(i, q, k, v)  # [B, S, Hq, D]
            x = x + a.reshape(B, S, -1) @ m.o.T
            h = self.norm(x)
            x = x + (torch.nn.functional.silu(h @ m.gate.T) * (h @ m.up.T)) @ m.down.T
        return self.norm(x).float() @ self.head.float().T


def sdpa(q, k, v):
    G = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
    o = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=q.shape[2] > 1)
    return o.transpose(1, 2)


class Bf16Cache:
    def __init__(self):
        self.k, self.v = {}, {}

    def __call__(self, i, q, k, v):
        if i in self.k:
            k, v = torch.cat([self.k[i], k], 2), torch.cat([self.v[i], v], 2)
        self.k[i], self.v[i] = k, v
        if q.shape[2] == k.shape[2]:
            return sdpa(q, k, v)
        # decode: the new row sees every cached key
        G = q.shape[1] // k.shape[1]
        return torch.nn.functional.scaled_dot_product_attention(
            q, k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)).transpose(1, 2)


class QattnKV:
    def __init__(self, paged):
        self.paged = paged

    def __call__(self, i, q, k, v):
        past = self.paged.seq_len(i)
        self.paged.append(i, k, v)
        if past == 0:
            return sdpa(q, k, v)  # prefill: the framework's attention over bf16 K/V
        return self.paged.decode(i, q)


def greedy(model, prompt, steps, attend, forced=None):
    """Logits of every step ([steps+1] x [B, vocab]) and the tokens fed."""
    logits, toks = [], []
    x = model(prompt, 0, attend)[:, -1]
    pos = prompt.shape[1]
    for s in range(steps + 1):
        logits.append(x)
        if s == steps:
            break
        t = x.argmax(-1) if forced is None else forced[s]
        toks.append(t)
        x = model(t[:, None], pos, attend)[:, -1]
        pos += 1
    return logits, toks


def compare(ref_logits, got_logits, rtol):
    """(worst |diff| / max|ref| over steps, tokens checked, tokens agreeing)."""
    worst, checked, agree = 0.0, 0, 0
    for r, g in zip(ref_logits, got_logits):
        tol = rtol * r.abs().max().item()
        worst = max(worst, (g - r).abs().max().item() / r.abs().max().item())
        top2 = r.topk(2, dim=-1).values
        clear = (top2[:, 0] - top2[:, 1]) > 2 * tol
        checked += int(clear.sum())
        agree += int((g.argmax(-1) == r.argmax(-1))[clear].sum())
    return worst, checked, agree


@pytest.mark.parametrize("fmt", ["fp8_e4m3fn", "int8"])
def test_mini_llama_decodes_through_qattn(dev, fmt):
    torch.manual_seed(0)
    model = MiniLlama().to(dev).to(torch.bfloat16)
    B, T, steps = 3, 37, 12
    prompt = torch.randint(0, 512, (B, T), generator=torch.Generator().manual_seed(1)).to(dev)
    with torch.no_grad():
        ref_logits, ref_toks = greedy(model, prompt, steps, Bf16Cache())
        paged = PagedKV(len(model.layers), B, 2, 128, T + steps + 5, device=dev, kv_format=fmt)
        got_logits, _ = greedy(model, prompt, steps, QattnKV(paged), forced=ref_toks)
    rtol = LOGIT_RTOL[fmt]
    worst, checked, agree = compare(ref_logits, got_logits, rtol)
    print("%s %s: worst |logit diff| %.4f of max|logit| (tolerance %.2f); greedy tokens %d/%d "
          "agree where the bf16 top-2 margin exceeds twice the tolerance" %
          (dev, fmt, worst, rtol, agree, checked))
    assert worst <= rtol, "logits off by %.4f of their max" % worst
    assert checked >= (steps + 1) * B // 4, "too few tokens with a clear margin to check"
    assert agree == checked
    # teeth: the same run over a cache whose older half is scaled wrong fails
    with torch.no_grad():
        paged.reset()
        bad = QattnKV(paged)
        x = model(prompt, 0, bad)
        for i in range(len(model.layers)):
            paged.v_scale[i][:, :8].mul_(3.0) if paged.v_scale[i] is not None else None
        y = model(ref_toks[0][:, None], T, bad)[:, -1]
    r = ref_logits[1]
    bad_err = (y - r).abs().max().item() / r.abs().max().item()
    print("  a corrupted cache: off by %.4f of max|logit|" % bad_err)
    assert bad_err > rtol, \
        "a corrupted cache still passes: the tolerance is too loose to mean anything"


def test_paged_decode_matches_its_dequantized_cache(dev):
    """Decode equals SDPA over exactly the values the cache holds (bf16 rounding)."""
    g = torch.Generator().manual_seed(3)
    B, Hq, Hkv, D, L = 2, 8, 2, 128, 70
    paged = PagedKV(2, B, Hkv, D, 96, device=dev)
    for i in range(2):
        k = torch.randn((B, Hkv, L, D), generator=g).to(dev, torch.bfloat16)
        v = torch.randn((B, Hkv, L, D), generator=g).to(dev, torch.bfloat16)
        paged.append(i, k[:, :, :50], v[:, :, :50])  # a prefill
        for t in range(50, L):  # then single tokens
            paged.append(i, k[:, :, t:t + 1], v[:, :, t:t + 1])
    assert paged.seq_len(1) == L and paged.lens[:, :B].tolist() == [[L, L], [L, L]]
    for R in (1, 4):
        q = torch.randn((B, Hq, R, D), generator=g).to(dev, torch.bfloat16)
        for i in range(2):
            kd, vd = paged.dequantize(i)
            G = Hq // Hkv
            s = torch.einsum("bhrd,bhld->bhrl", q.double(), kd.repeat_interleave(G, 1).double())
            s = s / math.sqrt(D)
            causal = torch.arange(L, device=dev)[None, :] > (L - R + torch.arange(R, device=dev))[:, None]
            s = s.masked_fill(causal, float("-inf"))
            ref = torch.einsum("bhrl,bhld->brhd", s.softmax(-1), vd.repeat_interleave(G, 1).double())
            out = paged.decode(i, q)
            assert out.shape == (B, R, Hq, D)
            err = (out.double() - ref).abs().max().item()
            assert err < 2e-2, "layer %d, %d rows: off by %g" % (i, R, err)
