"""Per-layer paged KV caches in a quantized format, written by qattn's KV
store and read by qattn's decode, for a model written in torch. No model
framework is imported here (qattn.integrations.transformers builds on it).

    kv = PagedKV(num_layers, batch_size, num_kv_heads, head_dim, max_len,
                 device="cuda", kv_format="fp8_e4m3fn")
    kv.append(layer, k, v)          # k, v: [B, Hkv, S, D] bf16 (the new tokens)
    o = kv.decode(layer, q)         # q: [B, Hq, R, D] bf16, R <= 8; o: [B, R, Hq, D]
    k, v = kv.dequantize(layer)     # [B, Hkv, L, D] bf16: what decode reads

Layout (vLLM's): caches [num_pages, page_size, Hkv, D] (fp8 as uint8 codes,
int8, or bf16), scales [num_pages, page_size, Hkv] f32 (one per token and kv
head, written by the KV store), a block table [B, max_pages] int32 whose
pages are interleaved across the batch (page i of row b is i * B + b), so
decode really follows the table. Every row holds the same number of tokens
(an unpadded batch); decode attends to all of them, causally for R > 1 rows.

On CUDA/ROCm tensors the context is qattn's HIP backend on the tensors'
device (torch's current stream); on CPU tensors the cpu backend.
"""
import math

import torch

import qattn

FORMATS = {"fp8_e4m3fn": torch.uint8, "fp8_e4m3fnuz": torch.uint8, "int8": torch.int8,
           "bf16": torch.bfloat16}
MAX_DECODE_ROWS = 8


def context_for(device):
    """qattn's context for torch tensors on `device`: hip on a GPU, else cpu."""
    device = torch.device(device)
    if device.type == "cuda":
        return qattn.Context(backend="hip", device=device.index if device.index is not None
                             else torch.cuda.current_device())
    if device.type == "cpu":
        return qattn.Context(backend="cpu")
    raise ValueError("device %s: qattn reads torch tensors on cuda (HIP backend) or cpu" % device)


class PagedKV:
    def __init__(self, num_layers, batch_size, num_kv_heads, head_dim, max_len, *, device,
                 kv_format="fp8_e4m3fn", page_size=16, ctx=None, interleave_pages=True):
        if kv_format not in FORMATS:
            raise ValueError("kv_format %r: one of %s" % (kv_format, ", ".join(FORMATS)))
        self.device = torch.device(device)
        if self.device.type == "cuda" and self.device.index is None:
            self.device = torch.device("cuda", torch.cuda.current_device())
        self.ctx = ctx if ctx is not None else context_for(self.device)
        self.num_layers, self.batch_size = int(num_layers), int(batch_size)
        self.num_kv_heads, self.head_dim = int(num_kv_heads), int(head_dim)
        self.max_len, self.page_size, self.kv_format = int(max_len), int(page_size), kv_format
        B, P, H, D = self.batch_size, self.page_size, self.num_kv_heads, self.head_dim
        M = -(-self.max_len // P)
        n_pages = B * M
        if interleave_pages:
            table = torch.arange(M, dtype=torch.int32)[None, :] * B + torch.arange(B)[:, None]
        else:
            table = torch.arange(n_pages, dtype=torch.int32).reshape(B, M)
        self.block_table = table.to(torch.int32).to(self.device).contiguous()
        self.kv_indptr = torch.arange(0, (B + 1) * M, M, dtype=torch.int32, device=self.device)
        self.kv_indices = self.block_table.view(-1)
        dt = FORMATS[kv_format]
        quant = kv_format != "bf16"
        self.k_cache, self.v_cache, self.k_scale, self.v_scale = [], [], [], []
        for _ in range(self.num_layers):
            self.k_cache.append(torch.zeros((n_pages, P, H, D), dtype=dt, device=self.device))
            self.v_cache.append(torch.zeros((n_pages, P, H, D), dtype=dt, device=self.device))
            self.k_scale.append(torch.zeros((n_pages, P, H), device=self.device) if quant else None)
            self.v_scale.append(torch.zeros((n_pages, P, H), device=self.device) if quant else None)
        # one kv_lens row per layer, each 64-byte aligned like the first (a
        # plan binds operands of the alignment it was made for)
        row = -(-B // 16) * 16
        self.lens = torch.zeros((self.num_layers, row), dtype=torch.int32, device=self.device)
        self._lens_rows = [self.lens[i, :B] for i in range(self.num_layers)]
        self._seq = [0] * self.num_layers
        self._slots = None   # (start, count, slot_mapping): shared by the layers of a step
        self._plans = {}     # (R, Hq, sm_scale) -> [plan bound to each layer]
        self._fmt = None if kv_format in ("int8", "bf16") else kv_format

    # ---- state -------------------------------------------------------------
    def seq_len(self, layer=0):
        return self._seq[layer]

    def reset(self):
        self._seq = [0] * self.num_layers
        self.lens.zero_()
        self._slots = None

    def nbytes(self):
        """Bytes the caches and scales of all layers take."""
        n = 0
        for ts in (self.k_cache, self.v_cache, self.k_scale, self.v_scale):
            n += sum(t.numel() * t.element_size() for t in ts if t is not None)
        return n

    def _slot_mapping(self, start, count):
        s = self._slots
        if s is not None and s[0] == start and s[1] == count:
            return s[2]
        P = self.page_size
        pos = torch.arange(start, start + count, device=self.device)
        slots = self.block_table[:, pos // P].long() * P + (pos % P)  # [B, count]
        slots = slots.reshape(-1).to(torch.int32)
        self._slots = (start, count, slots)
        return slots

    # ---- write -------------------------------------------------------------
    def append(self, layer, k, v):
        """Stores the new tokens k, v ([B, Hkv, S, D], bf16) after the
        layer's cached ones (qattn's KV store: quantized per token and head)."""
        B, H, S, D = k.shape
        if (B, H, D) != (self.batch_size, self.num_kv_heads, self.head_dim):
            raise ValueError("k: shape %s, the cache holds [%d, %d, S, %d]" %
                             (tuple(k.shape), self.batch_size, self.num_kv_heads, self.head_dim))
        start = self._seq[layer]
        if start + S > self.max_len:
            raise ValueError("layer %d: %d + %d tokens exceed the cache's max_len %d" %
                             (layer, start, S, self.max_len))
        slots = self._slot_mapping(start, S)
        k_new = k.transpose(1, 2).reshape(B * S, H, D).to(torch.bfloat16)
        v_new = v.transpose(1, 2).reshape(B * S, H, D).to(torch.bfloat16)
        self.ctx.kv_store(k_new, v_new, slots, self.k_cache[layer], self.v_cache[layer],
                          self.k_scale[layer], self.v_scale[layer], kv_format=self._fmt)
        self._seq[layer] = start + S
        self._lens_rows[layer].fill_(start + S)

    # ---- read --------------------------------------------------------------
    def _plan(self, layer, q, sm_scale):
        key = (q.shape[1], q.shape[2], sm_scale)
        plans = self._plans.get(key)
        if plans is None:
            base = self.ctx.decode_plan(
                q, self.k_cache[0], self.v_cache[0], self.kv_indptr, self.kv_indices,
                self._lens_rows[0], k_scale=self.k_scale[0], v_scale=self.v_scale[0],
                page_size=self.page_size, max_kv_len=self.max_len, sm_scale=sm_scale,
                kv_format=self._fmt)
            plans = [base] + [base.bind(k_cache=self.k_cache[i], v_cache=self.v_cache[i],
                                        k_scale=self.k_scale[i], v_scale=self.v_scale[i])
                              for i in range(1, self.num_layers)]
            self._plans[key] = plans
        return plans[layer]

    def decode(self, layer, q, sm_scale=None, out=None):
        """Attention of q ([B, Hq, R, D], the framework's layout, R <= 8 new
        rows whose keys are the last R cached ones) over the layer's cache:
        [B, R, Hq, D] bf16."""
        B, Hq, R, D = q.shape
        if R > MAX_DECODE_ROWS:
            raise ValueError("decode: %d query rows, qattn decodes at most %d" % (R, MAX_DECODE_ROWS))
        if sm_scale is None:
            sm_scale = 1.0 / math.sqrt(D)
        qr = q.transpose(1, 2).to(torch.bfloat16).contiguous()
        plan = self._plan(layer, qr, float(sm_scale))
        return plan.run(qr, kv_lens=self._lens_rows[layer], out=out)

    def dequantize(self, layer, length=None):
        """The layer's first `length` (default: all) cached tokens as the
        values decode reads, [B, Hkv, L, D] bf16."""
        L = self._seq[layer] if length is None else int(length)
        P, H, D = self.page_size, self.num_kv_heads, self.head_dim
        pos = torch.arange(L, device=self.device)
        slots = self.block_table[:, pos // P].long() * P + (pos % P)  # [B, L]
        out = []
        for cache, scale in ((self.k_cache[layer], self.k_scale[layer]),
                             (self.v_cache[layer], self.v_scale[layer])):
            c = cache.view(-1, H, D)[slots]  # [B, L, H, D]
            if self.kv_format.startswith("fp8"):
                fp8 = getattr(torch, "float8_e4m3fn" if self.kv_format == "fp8_e4m3fn"
                              else "float8_e4m3fnuz")
                x = c.view(fp8).float() * scale.view(-1, H)[slots][..., None]
            elif self.kv_format == "int8":
                x = c.float() * scale.view(-1, H)[slots][..., None]
            else:
                x = c
            out.append(x.to(torch.bfloat16).transpose(1, 2))
        return out[0], out[1]
