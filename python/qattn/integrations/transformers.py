"""Hugging Face transformers on qattn: a KV cache that keeps each layer's K/V
in a paged fp8 (or int8) cache written by qattn's KV store, and an attention
function, registered with transformers' AttentionInterface as "qattn", that
runs qattn's decode for decode steps.

    import qattn.integrations.transformers as qt       # registers "qattn"
    model = AutoModelForCausalLM.from_config(cfg, attn_implementation="qattn",
                                             dtype=torch.bfloat16).cuda()
    cache = qt.QattnCache(model.config, batch_size=B, max_cache_len=4096,
                          device="cuda", kv_format="fp8_e4m3fn")
    out = model(input_ids, past_key_values=cache, use_cache=True)  # prefill
    out = model(next_ids, past_key_values=cache, use_cache=True)   # decode (qattn)
    # or model.generate(input_ids, past_key_values=cache, ...)

What runs where:
  prefill (more than 8 new tokens, or an empty cache): the new tokens' bf16
      K/V are stored (quantized) and the framework's own SDPA attention runs
      over bf16 K/V: the new ones, after the cached ones read back
      (dequantized) when the cache was not empty;
  decode (1-8 new tokens after cached ones): the new K/V are stored and
      qattn's decode reads the paged cache (torch.ops.qattn custom ops under
      torch.compile; CUDA-graph safe).
Limits: every sequence of the batch holds the same number of tokens (no
padding: the decode attends to every cached token); no sliding-window
layers; no beam search (reorder/select of rows). transformers is imported by
this module, never by `import qattn`.
"""
import threading

import torch
import transformers  # noqa: F401 (this module is the transformers integration)

from .paged_kv import MAX_DECODE_ROWS, PagedKV

try:
    from transformers import AttentionInterface
except ImportError:  # older layouts
    from transformers.modeling_utils import AttentionInterface
from transformers.cache_utils import Cache

try:
    from transformers.cache_utils import CacheLayerMixin as _LayerBase
except ImportError:
    _LayerBase = object

NAME = "qattn"
_last = threading.local()  # the decode update whose K/V the next attention call reads


def _sdpa():
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS
    return ALL_ATTENTION_FUNCTIONS["sdpa"]


def qattn_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0,
                    **kwargs):
    """The attention function registered as "qattn": query [B, Hq, S, D] and
    the key/value that QattnCache.update returned. For a decode step of a
    QattnCache it runs qattn's decode over the layer's paged cache; anything
    else (prefill, or no QattnCache) goes to transformers' SDPA. Returns
    ([B, S, Hq, D], None) as transformers' attention functions do."""
    pending = getattr(_last, "pending", None)
    if pending is not None and pending[0] is key:
        _last.pending = None
        _, paged, layer = pending
        out = paged.decode(layer, query, scaling)
        return out.to(query.dtype), None
    return _sdpa()(module, query, key, value, attention_mask, scaling=scaling, dropout=dropout,
                   **kwargs)


def register(name=NAME):
    """Registers qattn_attention (and SDPA's mask builder) under `name`."""
    AttentionInterface.register(name, qattn_attention)
    try:
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
        AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    except (ImportError, KeyError, AttributeError):
        pass  # an older transformers without per-implementation mask builders


class QattnLayer(_LayerBase):
    """One layer's view of the QattnCache (what transformers' Cache helpers read)."""
    is_compileable = False
    is_sliding = False

    def __init__(self, paged, index):
        if _LayerBase is not object:
            super().__init__()
        self.paged, self.index = paged, index
        self.keys = self.values = None
        self.is_initialized = False
        self.max_batch_size, self.max_cache_len = paged.batch_size, paged.max_len
        self.dtype, self.device = torch.bfloat16, paged.device

    def lazy_initialization(self, *args, **kwargs):
        self.is_initialized = True

    def update(self, key_states, value_states, cache_kwargs=None):
        raise NotImplementedError("QattnCache.update stores the layers' K/V")

    def get_seq_length(self, *args, **kwargs):
        return self.paged.seq_len(self.index)

    def get_mask_sizes(self, cache_position=None, *args, **kwargs):
        if cache_position is None:
            cache_position = kwargs.get("query_length", 0)
        q = cache_position if isinstance(cache_position, int) else cache_position.shape[0]
        return self.paged.seq_len(self.index) + q, 0

    def get_max_cache_shape(self, *args, **kwargs):
        return -1

    def get_max_length(self, *args, **kwargs):
        # transformers 5.17's CacheLayerMixin makes it abstract (h200-s6-7):
        # unbounded, as a dynamic layer answers
        return -1

    def reset(self):
        self.paged.reset()

    def _unsupported(self, *args, **kwargs):
        raise NotImplementedError("QattnCache keeps every row's tokens: no beam search, "
                                  "crop or row selection")

    reorder_cache = crop = batch_repeat_interleave = batch_select_indices = _unsupported
    offload = prefetch = lambda self, *a, **k: None


class QattnCache(Cache):
    """transformers Cache whose layers live in qattn's paged, quantized KV
    cache (PagedKV). config: the model's config (layers, kv heads, head dim);
    batch_size and max_cache_len fix its capacity; kv_format: fp8_e4m3fn
    (default), fp8_e4m3fnuz, int8 or bf16. device: the model's. The model
    must run with attn_implementation="qattn"."""

    is_compileable = False

    def __init__(self, config, batch_size, max_cache_len, *, device, kv_format="fp8_e4m3fn",
                 page_size=16, ctx=None):
        cfg = config.get_text_config() if hasattr(config, "get_text_config") else config
        types = getattr(cfg, "layer_types", None) or []
        if any(t != "full_attention" for t in types) or getattr(cfg, "use_sliding_window", False):
            raise NotImplementedError("QattnCache: sliding-window layers are not supported yet")
        n_heads = cfg.num_attention_heads
        head_dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // n_heads
        n_kv = getattr(cfg, "num_key_value_heads", None) or n_heads
        self.config = cfg
        self.paged = PagedKV(cfg.num_hidden_layers, batch_size, n_kv, head_dim, max_cache_len,
                             device=device, kv_format=kv_format, page_size=page_size, ctx=ctx)
        layers = [QattnLayer(self.paged, i) for i in range(cfg.num_hidden_layers)]
        self.offloading, self.layer_class_to_replicate = False, None
        try:
            super().__init__(layers=layers)
        except (TypeError, AttributeError):  # another Cache constructor
            pass
        self.layers = layers

    # ---- what the models call ----------------------------------------------
    def update(self, key_states, value_states, layer_idx, cache_kwargs=None):
        """Stores the new K/V ([B, Hkv, S, D]); returns what the attention
        function reads: for a decode step (1-8 new tokens after cached ones)
        the new K/V, marked for qattn_attention; for a prefill the bf16 K/V
        of every token so far (cached ones dequantized)."""
        if getattr(_last, "pending", None) is not None:
            _last.pending = None
            raise ValueError("QattnCache: the last decode step's attention did not run through "
                             "qattn: the model needs attn_implementation=%r" % NAME)
        paged = self.paged
        past = paged.seq_len(layer_idx)
        S = key_states.shape[2]
        paged.append(layer_idx, key_states, value_states)
        self.layers[layer_idx].is_initialized = True
        if past > 0 and S <= MAX_DECODE_ROWS:
            _last.pending = (key_states, paged, layer_idx)
            return key_states, value_states
        _last.pending = None
        if past == 0:
            return key_states, value_states
        k, v = paged.dequantize(layer_idx, past)
        return (torch.cat([k.to(key_states.dtype), key_states], dim=2),
                torch.cat([v.to(value_states.dtype), value_states], dim=2))

    def get_seq_length(self, layer_idx=0, *args, **kwargs):
        return self.paged.seq_len(layer_idx or 0)

    def get_mask_sizes(self, cache_position=None, layer_idx=0, *args, **kwargs):
        return self.layers[layer_idx or 0].get_mask_sizes(cache_position, **kwargs)

    def get_max_cache_shape(self, *args, **kwargs):
        return -1

    def reset(self):
        self.paged.reset()

    @property
    def is_sliding(self):
        return [False] * len(self.layers)

    @property
    def is_initialized(self):
        return self.paged.seq_len(0) > 0

    @property
    def max_batch_size(self):
        return self.paged.batch_size

    @property
    def max_cache_len(self):
        return self.paged.max_len

    def __len__(self):
        return len(self.layers)

    def reorder_cache(self, *args, **kwargs):
        self.layers[0]._unsupported()

    crop = batch_repeat_interleave = batch_select_indices = reorder_cache


register()
