"""Decode over a vLLM-layout paged fp8 cache, in place.

vLLM keeps each layer's cache as [num_blocks, block_size, num_kv_heads,
head_size] (fp8 codes in a uint8 tensor, or a float8 dtype), per-token-head
scales [num_blocks, block_size, num_kv_heads] and a block table
[num_seqs, max_blocks] int32 with the context lengths [num_seqs]. qattn
reads all of them where they are: the cache is passed as it is (rank 4, the
block size as page size), and the block table itself serves as kv_indices
(row b holds request b's pages; kv_indptr steps by max_blocks). Nothing is
copied; the script checks that through the addresses the library wrapped
and the allocator's count, and checks the result against float64.

    QATTN_LIBRARY_DIR=<dir of libqattn_core.so, libqattn_hip.so> python3 vllm_decode.py
"""
import math
import sys

import torch

import qattn


def fp8_e4m3fn_values(codes):
    c = codes.long()
    s = torch.where(c >= 128, -1.0, 1.0).double()
    e, m = (c >> 3) & 15, (c & 7).double()
    v = torch.where(e == 0, 2.0 ** -6 * m / 8, torch.pow(2.0, (e - 7).double()) * (1 + m / 8))
    return s * v


def main():
    torch.manual_seed(0)
    dev = "cuda"
    num_seqs, num_heads, num_kv_heads, head_size, block_size = 8, 32, 8, 128, 16
    max_len = 2000
    max_blocks = (max_len + block_size - 1) // block_size
    num_blocks = num_seqs * max_blocks + 16
    codes = torch.randint(0, 256, (2, num_blocks, block_size, num_kv_heads, head_size),
                          device=dev, dtype=torch.int32) & 0xB7  # finite, |x| < 2
    kv = codes.to(torch.uint8)
    k_cache, v_cache = kv[0], kv[1]  # two views of one allocation, like vLLM's kv_cache[0/1]
    k_scale = torch.rand((num_blocks, block_size, num_kv_heads), device=dev) * 0.02 + 0.01
    v_scale = torch.rand((num_blocks, block_size, num_kv_heads), device=dev) * 0.02 + 0.01
    block_table = torch.randperm(num_blocks, device=dev)[:num_seqs * max_blocks]
    block_table = block_table.to(torch.int32).view(num_seqs, max_blocks)
    seq_lens = torch.randint(1, max_len + 1, (num_seqs,), device=dev, dtype=torch.int32)
    q = torch.randn((num_seqs, 1, num_heads, head_size), device=dev).to(torch.bfloat16)

    ctx = qattn.Context(backend="hip", device=torch.cuda.current_device())
    kv_indptr = torch.arange(0, (num_seqs + 1) * max_blocks, max_blocks, device=dev,
                             dtype=torch.int32)
    plan = ctx.decode_plan(q, k_cache, v_cache, kv_indptr, block_table.view(-1), seq_lens,
                           k_scale=k_scale, v_scale=v_scale, page_size=block_size,
                           max_kv_len=max_len, kv_format="fp8_e4m3fn")
    print(plan)
    out = torch.empty_like(q)
    torch.cuda.synchronize()
    allocated = torch.cuda.memory_allocated()
    plan.run(q, out=out)  # per layer and step: the current stream, no allocation
    torch.cuda.synchronize()
    grew = torch.cuda.memory_allocated() - allocated
    wrapped = {lo for lo, _ in ctx._wrapped}
    in_place = all(t.data_ptr() in wrapped for t in (k_cache, v_cache, k_scale, v_scale,
                                                     block_table))
    print("cache read in place: %s (k_cache at 0x%x; allocator grew by %d bytes)" %
          (in_place, k_cache.data_ptr(), grew))

    # float64 reference
    kf = (fp8_e4m3fn_values(k_cache) * k_scale.double()[..., None]).flatten(0, 1)
    vf = (fp8_e4m3fn_values(v_cache) * v_scale.double()[..., None]).flatten(0, 1)
    g = num_heads // num_kv_heads
    worst = 0.0
    for b in range(num_seqs):
        L = int(seq_lens[b])
        pos = torch.arange(L, device=dev)
        slots = block_table[b].long()[pos // block_size] * block_size + pos % block_size
        k = kf[slots].repeat_interleave(g, 1)
        v = vf[slots].repeat_interleave(g, 1)
        s = torch.einsum("hd,lhd->hl", q[b, 0].double(), k) / math.sqrt(head_size)
        ref = torch.einsum("hl,lhd->hd", torch.softmax(s, -1), v)
        err = (out[b, 0].double() - ref).abs() - (2e-3 + 2e-2 * ref.abs())
        worst = max(worst, err.max().item())
    ok = in_place and grew == 0 and worst <= 0
    print("matches the float64 reference within 2e-3 + 2e-2|ref|: %s (worst margin %.3g)" %
          (worst <= 0, worst))
    print("vllm_decode: %s" % ("PASS" if ok else "FAIL"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
