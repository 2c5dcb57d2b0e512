"""A transformers model decoding through qattn: a Llama-architecture model
made from a config (random weights, nothing downloaded; GQA 4, head dim
128), its K/V in a paged fp8 cache written by qattn's KV store, each decode
step's attention run by qattn's decode. The same prompt through the model's
default bf16 cache and SDPA gives the reference tokens.

    python3 python/examples/transformers_decode.py [--arch llama|qwen2|qwen3]
        [--batch 4] [--prompt 64] [--new 24] [--kv-format fp8_e4m3fn|int8]

On a GPU: torch CUDA tensors through qattn's HIP backend; else CPU tensors
through the cpu backend (slow but the same calls). Prints the tokens of both
runs and "transformers_decode: PASS" when they agree on every step whose
bf16 top-2 logit margin exceeds twice the format's rounding error."""
import argparse
import sys

import torch
import transformers

import qattn.integrations.transformers as qt  # registers attn_implementation "qattn"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--arch", default="llama", choices=["llama", "qwen2", "qwen3"])
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--prompt", type=int, default=64)
    ap.add_argument("--new", type=int, default=24)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--kv-format", default="fp8_e4m3fn")
    a = ap.parse_args()
    dev = "cuda" if torch.cuda.is_available() else "cpu"
    cls = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "qwen3": "Qwen3Config"}[a.arch]
    cfg = getattr(transformers, cls)(
        vocab_size=4096, hidden_size=2048, intermediate_size=4096, num_hidden_layers=a.layers,
        num_attention_heads=16, num_key_value_heads=4, head_dim=128, initializer_range=0.05,
        max_position_embeddings=8192)
    torch.manual_seed(0)
    model = transformers.AutoModelForCausalLM.from_config(cfg).to(dev, torch.bfloat16).eval()
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    prompt = torch.randint(3, cfg.vocab_size, (a.batch, a.prompt)).to(dev)
    ones = torch.ones_like(prompt)
    with torch.no_grad():
        # the reference: the default bf16 cache and SDPA, with every step's logits
        model.set_attn_implementation("sdpa")
        ref = model.generate(prompt, attention_mask=ones, max_new_tokens=a.new, do_sample=False,
                             output_logits=True, return_dict_in_generate=True)
        # qattn: a paged fp8 cache, qattn's KV store and decode
        model.set_attn_implementation(qt.NAME)
        cache = qt.QattnCache(model.config, a.batch, a.prompt + a.new, device=dev,
                              kv_format=a.kv_format)
        got = model.generate(prompt, attention_mask=ones, past_key_values=cache,
                             max_new_tokens=a.new, do_sample=False)
    print("%s, %d layers, GQA %d, head dim 128, on %s (qattn backend %s, cache %s, %.1f MiB)" %
          (a.arch, a.layers, cfg.num_attention_heads // cfg.num_key_value_heads, dev,
           cache.paged.ctx.backend, a.kv_format, cache.paged.nbytes() / 2**20))
    tol = 2.0 ** -4 if a.kv_format.startswith("fp8") else 2.0 ** -5
    ok = True
    for b in range(a.batch):
        r, q = ref.sequences[b, a.prompt:], got[b, a.prompt:]
        print("  bf16 + SDPA: %s\n  qattn fp8:   %s" % (r.tolist(), q.tolist()))
        for s, logits in enumerate(ref.logits):
            top2 = logits[b].float().topk(2).values
            if top2[0] - top2[1] <= 2 * tol * logits[b].float().abs().max():
                print("  row %d: step %d has no clear bf16 margin; compared up to it" % (b, s))
                break
            if r[s] != q[s]:
                print("  row %d: step %d differs" % (b, s))
                ok = False
                break
    print("transformers_decode: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
