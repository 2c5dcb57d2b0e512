"""qattn: attention kernels for LLM inference (decode over a quantized,
paged KV cache; KV store; FP8 MQA logits, prefill and paged) on numpy arrays, torch tensors
and anything with DLPack or __cuda_array_interface__.

    import qattn
    ctx = qattn.Context(backend="auto")          # hip, vulkan, then cpu
    plan = ctx.decode_plan(q, k_cache, v_cache, kv_indptr, kv_indices, kv_lens,
                           page_size=16, max_kv_len=4096, k_scale=ks, v_scale=vs)
    out = plan.run(q)                             # per layer / step

A thin binding over the C library through ctypes (docs/python.md says why).
"""
from . import _lib
from . import torch_ops  # noqa: F401 (hooks the custom ops' registration; imports no torch)
from ._context import Context, DeviceArray, QattnError, backends, numpy_dtype
from ._ops import DecodePlan, MqaLogitsPlan, PagedMqaLogitsPlan, _kv_store_of, \
    kv_store as _kv_store

__version__ = "0.1.0"

__all__ = ["Context", "DeviceArray", "QattnError", "DecodePlan", "MqaLogitsPlan",
           "PagedMqaLogitsPlan", "backends", "library_version", "numpy_dtype", "__version__"]


def library_version():
    """The version string of the C library actually loaded."""
    return _lib.core().qattn_version_string().decode()


def _decode_plan(self, q, k_cache, v_cache, kv_indptr, kv_indices, kv_lens, **kw):
    """A DecodePlan for these operands' shapes (see DecodePlan)."""
    return DecodePlan(self, q, k_cache, v_cache, kv_indptr, kv_indices, kv_lens, **kw)


def _mqa_logits_plan(self, q, k, k_scale, weights, ks, ke, **kw):
    """An MqaLogitsPlan for these operands' shapes (see MqaLogitsPlan)."""
    return MqaLogitsPlan(self, q, k, k_scale, weights, ks, ke, **kw)


def _paged_mqa_logits_plan(self, q, k_cache, k_scale, weights, kv_indptr, kv_indices, kv_lens,
                           **kw):
    """A PagedMqaLogitsPlan for these operands' shapes (see PagedMqaLogitsPlan)."""
    return PagedMqaLogitsPlan(self, q, k_cache, k_scale, weights, kv_indptr, kv_indices, kv_lens,
                              **kw)


def _kv_store_method(self, k_new, v_new, slot_mapping, k_cache, v_cache, k_scale=None,
                     v_scale=None, *, kv_format=None, stream=None):
    """Writes new tokens into the cache in its format, in place (spec 2)."""
    _kv_store(self, k_new, v_new, slot_mapping, k_cache, v_cache, k_scale, v_scale,
              kv_format=kv_format, stream=stream)


Context.decode_plan = _decode_plan
Context.mqa_logits_plan = _mqa_logits_plan
Context.paged_mqa_logits_plan = _paged_mqa_logits_plan
Context.kv_store = _kv_store_method
Context.id = property(lambda self: _kv_store_of(self).id,
                      doc="The context's id for torch.ops.qattn.kv_store.")
