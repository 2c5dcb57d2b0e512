"""End-to-end decode speed of a transformers model through qattn (issue 28
item 4): tokens/s of greedy decode steps at batch 16 over a 32K context,
GQA 4, head dim 128, a few layers, with

  qattn        QattnCache (paged fp8 e4m3fn, qattn's KV store) and the
               "qattn" attention function (qattn's decode, HIP backend);
  bf16-dynamic transformers' default: DynamicCache (bf16, grown by torch.cat
               every step) and SDPA;
  bf16-static  StaticCache (bf16, preallocated, written in place) and SDPA:
               the default cache's fair twin, without the per-step copy;

and for each the share of the step's GPU time spent in the attention
function and in the cache update (CUDA events around each call, in a
separate instrumented pass so the throughput pass carries no events).

The model is a Llama-architecture model from a config (random weights,
nothing downloaded; by default 4 layers of an 8B-class shape: hidden 4096,
32 query heads, 8 kv heads, MLP 14336, vocab 32000). The caches are filled
with random K/V of the context length rather than by a prefill (a 32K x 16
prefill's activations would need tens of GB and time that says nothing of
decode). Eager mode, no CUDA graphs.

    python3 bench/e2e_transformers.py [--batch 16] [--context 32768]
        [--layers 4] [--steps 32] [--json OUT.json]

Needs torch with a GPU, transformers and qattn's HIP library
(QATTN_LIBRARY_DIR). Prints a table; --json writes every number.
"""
import argparse
import gc
import json
import sys
import time

import torch
import transformers

import qattn
import qattn.integrations.transformers as qt


def make_model(a):
    cfg = transformers.LlamaConfig(
        vocab_size=a.vocab, hidden_size=a.hidden, intermediate_size=a.inter,
        num_hidden_layers=a.layers, num_attention_heads=a.heads, num_key_value_heads=a.kv_heads,
        head_dim=a.head_dim, max_position_embeddings=a.context + 4096, rms_norm_eps=1e-5,
        initializer_range=0.02, tie_word_embeddings=False)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to("cuda", torch.bfloat16).eval()
    return model, cfg


def random_kv(a, g, n):
    k = torch.randn((a.batch, a.kv_heads, n, a.head_dim), generator=g, device="cuda",
                    dtype=torch.bfloat16)
    v = torch.randn((a.batch, a.kv_heads, n, a.head_dim), generator=g, device="cuda",
                    dtype=torch.bfloat16)
    return k, v


def fill(cache, a, kind):
    """The context's K/V, random, written through the cache's own update
    (chunks of 2048 tokens: what a chunked prefill would store)."""
    g = torch.Generator(device="cuda").manual_seed(1)
    chunk = 2048
    for layer in range(a.layers):
        for start in range(0, a.context, chunk):
            n = min(chunk, a.context - start)
            k, v = random_kv(a, g, n)
            pos = torch.arange(start, start + n, device="cuda")
            if kind == "qattn":
                cache.paged.append(layer, k, v)
            else:
                cache.update(k, v, layer, {"cache_position": pos})
    torch.cuda.synchronize()


def make_cache(kind, model, a):
    max_len = a.context + a.steps + a.warmup + 8
    if kind == "qattn":
        return qt.QattnCache(model.config, a.batch, max_len, device="cuda")
    if kind == "bf16-dynamic":
        return transformers.DynamicCache()
    for kw in (dict(config=model.config, max_cache_len=max_len),
               dict(config=model.config, max_batch_size=a.batch, max_cache_len=max_len,
                    device="cuda", dtype=torch.bfloat16)):
        try:
            return transformers.StaticCache(**kw)
        except TypeError:
            continue
    raise RuntimeError("cannot construct a StaticCache with this transformers")


class Timer:
    """CUDA events around every call of the wrapped functions."""

    def __init__(self):
        self.spans = {"attention": [], "cache update": []}
        self.on = False

    def wrap(self, what, fn):
        def timed(*args, **kw):
            if not self.on:
                return fn(*args, **kw)
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            r = fn(*args, **kw)
            e.record()
            self.spans[what].append((s, e))
            return r
        return timed

    def total_ms(self, what):
        return sum(s.elapsed_time(e) for s, e in self.spans[what])


def run(kind, model, a, timer):
    attn = {"qattn": "qattn_timed", "bf16-dynamic": "sdpa_timed", "bf16-static": "sdpa_timed"}[kind]
    try:
        model.set_attn_implementation(attn)
    except (AttributeError, ValueError, TypeError, KeyError):
        model.config._attn_implementation = attn
    cache = make_cache(kind, model, a)
    fill(cache, a, kind)
    cache.update = timer.wrap("cache update", cache.update)
    tok = torch.randint(3, a.vocab, (a.batch, 1), device="cuda")
    pos = a.context

    def step():
        nonlocal tok, pos
        cp = torch.tensor([pos], device="cuda")
        out = model(input_ids=tok, past_key_values=cache, cache_position=cp, use_cache=True)
        tok = out.logits[:, -1:].argmax(-1)
        pos += 1

    with torch.no_grad():
        for _ in range(a.warmup):
            step()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        s0, e0 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s0.record()
        for _ in range(a.steps):
            step()
        e0.record()
        torch.cuda.synchronize()
        wall = time.perf_counter() - t0
        gpu_ms = s0.elapsed_time(e0)
        # the instrumented pass: events around attention and cache updates
        n_inst = max(4, a.steps // 4)
        if pos + n_inst > a.context + a.steps + a.warmup + 8:
            n_inst = 0
        timer.on = True
        s1, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s1.record()
        for _ in range(n_inst):
            step()
        e1.record()
        torch.cuda.synchronize()
        timer.on = False
    inst_ms = s1.elapsed_time(e1) if n_inst else float("nan")
    attn_ms, upd_ms = timer.total_ms("attention"), timer.total_ms("cache update")
    for v in timer.spans.values():
        v.clear()
    res = {
        "cache": kind, "steps": a.steps, "wall_s": wall,
        "tokens_per_s": a.batch * a.steps / wall,
        "step_ms_wall": 1e3 * wall / a.steps, "step_ms_gpu": gpu_ms / a.steps,
        "instrumented_steps": n_inst,
        "attention_ms_per_step": attn_ms / n_inst if n_inst else None,
        "cache_update_ms_per_step": upd_ms / n_inst if n_inst else None,
        "attention_share": attn_ms / inst_ms if n_inst else None,
        "cache_update_share": upd_ms / inst_ms if n_inst else None,
        "kv_cache_bytes": (cache.paged.nbytes() if kind == "qattn" else
                           2 * a.layers * a.batch * a.kv_heads * a.head_dim * 2 *
                           (a.context + (0 if kind == "bf16-dynamic" else a.steps + a.warmup + 8))),
    }
    del cache, step
    gc.collect()  # the timed update wrapper holds the cache in a cycle
    torch.cuda.empty_cache()
    return res


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--context", type=int, default=32768)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=4096)
    ap.add_argument("--inter", type=int, default=14336)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--head-dim", type=int, default=128)
    ap.add_argument("--vocab", type=int, default=32000)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--warmup", type=int, default=4)
    ap.add_argument("--caches", default="qattn,bf16-static,bf16-dynamic")
    ap.add_argument("--json", help="write the results here")
    a = ap.parse_args()
    if not torch.cuda.is_available():
        print("e2e_transformers: needs a GPU (torch sees none)")
        return 2
    timer = Timer()
    from transformers import AttentionInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    AttentionInterface.register("qattn_timed", timer.wrap("attention", qt.qattn_attention))
    AttentionInterface.register("sdpa_timed", timer.wrap("attention", ALL_ATTENTION_FUNCTIONS["sdpa"]))
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
        for n in ("qattn_timed", "sdpa_timed"):
            AttentionMaskInterface.register(n, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    except (ImportError, KeyError, AttributeError):
        pass
    model, cfg = make_model(a)
    info = {
        "gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
        "cuda": torch.version.cuda, "transformers": transformers.__version__,
        "qattn": qattn.__version__, "qattn_library": qattn.library_version(),
        "model": "llama, %d layers, hidden %d, %d query heads, %d kv heads (GQA %d), head dim %d, "
                 "MLP %d, vocab %d, random weights, bf16" %
                 (a.layers, a.hidden, a.heads, a.kv_heads, a.heads // a.kv_heads, a.head_dim,
                  a.inter, a.vocab),
        "batch": a.batch, "context": a.context, "steps": a.steps, "warmup": a.warmup,
        "command": " ".join(["python3", "bench/e2e_transformers.py"] + sys.argv[1:]),
    }
    results = []
    for kind in a.caches.split(","):
        try:
            r = run(kind, model, a, timer)
        except Exception as e:  # report and go on with the other caches
            r = {"cache": kind, "error": "%s: %s" % (type(e).__name__, e)}
            torch.cuda.empty_cache()
        results.append(r)
        print(json.dumps(r), flush=True)
    print()
    print("%s; batch %d, context %d, %s" % (info["gpu"], a.batch, a.context, info["model"]))
    print("torch %s, CUDA %s, transformers %s, qattn %s" % (info["torch"], info["cuda"],
                                                           info["transformers"], info["qattn"]))
    print()
    print("| cache + attention | tokens/s | step (ms) | attention (ms, share) | "
          "cache update (ms, share) | KV cache (GiB) |")
    print("| --- | --- | --- | --- | --- | --- |")
    names = {"qattn": "qattn: paged fp8 + qattn decode", "bf16-static": "StaticCache bf16 + SDPA",
             "bf16-dynamic": "DynamicCache bf16 + SDPA (default)"}
    for r in results:
        if "error" in r:
            print("| %s | failed: %s | | | | |" % (names.get(r["cache"], r["cache"]), r["error"]))
            continue
        print("| %s | %.0f | %.2f | %.2f (%.0f %%) | %.2f (%.0f %%) | %.2f |" % (
            names.get(r["cache"], r["cache"]), r["tokens_per_s"], r["step_ms_wall"],
            r["attention_ms_per_step"], 100 * r["attention_share"],
            r["cache_update_ms_per_step"], 100 * r["cache_update_share"],
            r["kv_cache_bytes"] / 2**30))
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"info": info, "results": results}, f, indent=1)
    return 0 if all("error" not in r for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
