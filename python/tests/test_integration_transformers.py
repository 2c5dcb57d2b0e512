"""qattn.integrations.transformers: Llama- and Qwen-architecture models made
from a config (random weights, 2 layers, GQA 4, head dim 128, nothing
downloaded) decode through QattnCache (paged fp8 e4m3fn, qattn's KV store)
and the "qattn" attention function (qattn's decode). Against the same model
with its default bf16 cache and SDPA, fed the same tokens: at every step the
logits agree within the fp8 tolerance, and the greedy tokens agree wherever
the bf16 top-2 margin exceeds twice it; model.generate() with a QattnCache
gives the bf16 model's tokens up to the first step without such a margin.
A corrupted cache breaks the tolerance (so the check can fail).

On CUDA tensors through the HIP backend (the H200 step,
scripts/device-steps/60-integration.sh), else on CPU tensors through the cpu
backend. Skipped (saying so) where transformers is absent: Debian has no
package of it, so CI covers the framework-free part
(test_integration_paged_kv.py) and the H200 step this file."""
import pytest

from conftest import REQUIRED

if "torch" in REQUIRED:
    import torch
else:
    torch = pytest.importorskip("torch", reason="skipped: torch is not installed")
if "transformers" in REQUIRED:
    import transformers
else:
    transformers = pytest.importorskip(
        "transformers", reason="skipped: transformers is not installed (Debian has no package "
        "of it; the H200 step runs this file)")

import qattn  # noqa: E402

# the fp8 e4m3 format's relative rounding error (3 mantissa bits: half an ulp)
LOGIT_RTOL = 2.0 ** -4
B, PROMPT, STEPS = 4, 45, 16


def device():
    if torch.cuda.is_available():
        return "cuda"
    if "hip" in REQUIRED:
        pytest.fail("QATTN_PYTEST_REQUIRE has hip but torch sees no GPU")
    return "cpu"


def make_config(arch):
    common = dict(vocab_size=2048, hidden_size=1024, intermediate_size=2048,
                  num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=2,
                  head_dim=128, max_position_embeddings=4096, rms_norm_eps=1e-6,
                  initializer_range=0.05, tie_word_embeddings=False)
    if arch == "llama":
        return transformers.LlamaConfig(**common)
    if arch == "qwen2":
        return transformers.Qwen2Config(**common, use_sliding_window=False)
    if arch == "qwen3":
        if not hasattr(transformers, "Qwen3Config"):
            pytest.skip("skipped: this transformers has no Qwen3")
        return transformers.Qwen3Config(**common, use_sliding_window=False)
    raise ValueError(arch)


def set_attn(model, name):
    try:
        model.set_attn_implementation(name)
    except (AttributeError, ValueError, TypeError, KeyError):
        model.config._attn_implementation = name
    assert model.config._attn_implementation == name


@pytest.fixture(scope="module")
def qt():
    import qattn.integrations.transformers as qt
    return qt


def build(arch, dev):
    torch.manual_seed(0)
    cfg = make_config(arch)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    model = model.to(device=dev, dtype=torch.bfloat16).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    return model


def greedy(model, prompt, steps, cache=None, forced=None):
    """Per-step last-position logits (float32) and the tokens fed."""
    out = model(input_ids=prompt, past_key_values=cache, use_cache=True)
    cache = out.past_key_values
    logits, toks = [], []
    x = out.logits[:, -1].float()
    for s in range(steps + 1):
        logits.append(x)
        if s == steps:
            break
        t = x.argmax(-1) if forced is None else forced[s]
        toks.append(t)
        out = model(input_ids=t[:, None], past_key_values=cache, use_cache=True)
        cache = out.past_key_values
        x = out.logits[:, -1].float()
    return logits, toks


@pytest.mark.parametrize("arch", ["llama", "qwen2", "qwen3"])
def test_model_decodes_through_qattn(qt, arch):
    dev = device()
    model = build(arch, dev)
    g = torch.Generator().manual_seed(1)
    prompt = torch.randint(3, model.config.vocab_size, (B, PROMPT), generator=g).to(dev)
    with torch.no_grad():
        set_attn(model, "sdpa")
        ref_logits, ref_toks = greedy(model, prompt, STEPS)
        set_attn(model, qt.NAME)
        cache = qt.QattnCache(model.config, B, PROMPT + STEPS + 8, device=dev)
        assert cache.paged.ctx.backend == ("hip" if dev == "cuda" else "cpu")
        got_logits, _ = greedy(model, prompt, STEPS, cache=cache, forced=ref_toks)
        assert cache.get_seq_length() == PROMPT + STEPS
    worst, checked, agree, first_unclear = 0.0, 0, 0, STEPS + 1
    for s, (r, q) in enumerate(zip(ref_logits, got_logits)):
        scale = r.abs().max().item()
        worst = max(worst, (q - r).abs().max().item() / scale)
        top2 = r.topk(2, dim=-1).values
        clear = (top2[:, 0] - top2[:, 1]) > 2 * LOGIT_RTOL * scale
        if not clear.all():
            first_unclear = min(first_unclear, s)
        checked += int(clear.sum())
        agree += int((q.argmax(-1) == r.argmax(-1))[clear].sum())
    print("%s on %s: worst |logit diff| %.4f of max|logit| (tolerance %.4f) over %d steps; "
          "greedy tokens %d/%d agree where the bf16 top-2 margin exceeds twice it" %
          (arch, dev, worst, LOGIT_RTOL, STEPS + 1, agree, checked))
    assert worst <= LOGIT_RTOL, "%s: logits off by %.4f of their max" % (arch, worst)
    assert checked >= (STEPS + 1) * B // 4, "too few clear-margin tokens to check"
    assert agree == checked

    # generate() with a QattnCache: the bf16 model's tokens while margins are clear
    with torch.no_grad():
        cache = qt.QattnCache(model.config, B, PROMPT + STEPS + 8, device=dev)
        gen = model.generate(prompt, attention_mask=torch.ones_like(prompt), past_key_values=cache,
                             max_new_tokens=STEPS, do_sample=False)
    new = gen[:, PROMPT:]
    ref = torch.stack(ref_toks, dim=1)
    n = min(first_unclear, STEPS)
    print("%s: generate() agrees with the bf16 greedy tokens on the first %d steps (all with "
          "a clear margin)" % (arch, n))
    assert new.shape == (B, STEPS)
    assert torch.equal(new[:, :n], ref[:, :n])

    # teeth: the same decode step over a corrupted cache (K scales zeroed:
    # uniform attention; V scales tripled) is far outside the tolerance
    with torch.no_grad():
        cache = qt.QattnCache(model.config, B, PROMPT + 8, device=dev)
        model(input_ids=prompt, past_key_values=cache, use_cache=True)
        for i in range(model.config.num_hidden_layers):
            cache.paged.k_scale[i].zero_()
            cache.paged.v_scale[i].mul_(3.0)
        y = model(input_ids=ref_toks[0][:, None], past_key_values=cache,
                  use_cache=True).logits[:, -1].float()
    r = ref_logits[1]
    bad = (y - r).abs().max().item() / r.abs().max().item()
    print("%s: a corrupted cache is off by %.4f of max|logit|" % (arch, bad))
    assert bad > LOGIT_RTOL


def test_cache_without_qattn_attention_is_refused(qt):
    """A QattnCache under another attention implementation would attend to
    the new token only: the next update says so instead."""
    dev = device()
    model = build("llama", dev)
    prompt = torch.randint(3, 2048, (2, 9)).to(dev)
    set_attn(model, "sdpa")
    cache = qt.QattnCache(model.config, 2, 32, device=dev)
    with torch.no_grad():
        model(input_ids=prompt, past_key_values=cache, use_cache=True)
        with pytest.raises(ValueError, match="attn_implementation"):
            model(input_ids=prompt[:, :1], past_key_values=cache, use_cache=True)


def test_import_qattn_does_not_import_transformers():
    import subprocess
    import sys
    code = ("import sys, qattn; assert 'transformers' not in sys.modules; "
            "import qattn.integrations; assert 'transformers' not in sys.modules; print('ok')")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
