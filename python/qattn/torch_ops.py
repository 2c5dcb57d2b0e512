"""torch.library custom ops over qattn, registered only when torch is
importable (qattn itself never imports torch: the first torch tensor given
to an op, or torch_ops.register(), registers them).

  torch.ops.qattn.decode(q, k_cache, v_cache, k_scale, v_scale, kv_indptr,
                         kv_indices, kv_lens, sinks, out, lse, workspace,
                         plan_id, stream) -> ()
  torch.ops.qattn.kv_store(k_new, v_new, slot_mapping, k_cache, v_cache,
                           k_scale, v_scale, ctx_id, kv_format, stream) -> ()
  torch.ops.qattn.mqa_logits(q, k, k_scale, weights, ks, ke, out, workspace,
                             plan_id, stream) -> ()
  torch.ops.qattn.paged_mqa_logits(q, k_cache, k_scale, weights, kv_indptr,
                                   kv_indices, kv_lens, out, workspace,
                                   plan_id, stream) -> ()

Each writes its outputs in place and returns nothing; the fake
implementations do nothing, which is exactly their effect on shapes and
dtypes, so torch.compile(fullgraph=True) sees one opaque op per call.
DecodePlan.run() allocates `out` (when not given) before calling the op, in
the dtype the plan was made for (q's, f16 or bf16, unless out was given at
planning), so a traced output follows q's dtype as an eager one does. plan_id is
DecodePlan.id / MqaLogitsPlan.id / PagedMqaLogitsPlan.id and ctx_id is
Context.id: plans are kept
by the caller, as a captured graph keeps the plan's workspace address.
stream 0 means torch's current stream. Plan.run() calls these ops while
torch.compile traces and the implementations directly in eager mode, which
saves the dispatcher's cost per call.
"""
import threading
from typing import Optional

from . import _ops

_registered = []
_registering = threading.Lock()  # threads seeing their first torch tensor at once


def register():
    if _registered:
        return
    with _registering:
        if not _registered:
            _register()


def _register():
    import torch
    from torch import Tensor

    @torch.library.custom_op("qattn::decode", mutates_args=("out", "lse", "workspace"))
    def decode(q: Tensor, k_cache: Tensor, v_cache: Tensor, k_scale: Optional[Tensor],
               v_scale: Optional[Tensor], kv_indptr: Tensor, kv_indices: Tensor,
               kv_lens: Tensor, sinks: Optional[Tensor], out: Tensor, lse: Optional[Tensor],
               workspace: Optional[Tensor], plan_id: int, stream: int) -> None:
        plan = _lookup(_ops._PLANS, plan_id, "plan_id")
        plan._launch([q, k_cache, v_cache, k_scale, v_scale, kv_indptr, kv_indices, kv_lens,
                      sinks], out, lse, workspace, stream)

    @decode.register_fake
    def _decode_fake(q, k_cache, v_cache, k_scale, v_scale, kv_indptr, kv_indices, kv_lens,
                     sinks, out, lse, workspace, plan_id, stream):
        return None

    @torch.library.custom_op("qattn::kv_store",
                             mutates_args=("k_cache", "v_cache", "k_scale", "v_scale"))
    def kv_store(k_new: Tensor, v_new: Tensor, slot_mapping: Tensor, k_cache: Tensor,
                 v_cache: Tensor, k_scale: Optional[Tensor], v_scale: Optional[Tensor],
                 ctx_id: int, kv_format: str, stream: int) -> None:
        ctx = _lookup(_ops._CONTEXTS, ctx_id, "ctx_id")
        _ops._kv_store_launch(ctx, [k_new, v_new, slot_mapping, k_cache, v_cache, k_scale,
                                    v_scale], kv_format or None, stream or None)

    @kv_store.register_fake
    def _kv_store_fake(k_new, v_new, slot_mapping, k_cache, v_cache, k_scale, v_scale, ctx_id,
                       kv_format, stream):
        return None

    @torch.library.custom_op("qattn::mqa_logits", mutates_args=("out", "workspace"))
    def mqa_logits(q: Tensor, k: Tensor, k_scale: Tensor, weights: Tensor, ks: Tensor,
                   ke: Tensor, out: Tensor, workspace: Optional[Tensor], plan_id: int,
                   stream: int) -> None:
        plan = _lookup(_ops._PLANS, plan_id, "plan_id")
        plan._launch([q, k, k_scale, weights, ks, ke], out, workspace, stream)

    @mqa_logits.register_fake
    def _mqa_fake(q, k, k_scale, weights, ks, ke, out, workspace, plan_id, stream):
        return None

    @torch.library.custom_op("qattn::paged_mqa_logits", mutates_args=("out", "workspace"))
    def paged_mqa_logits(q: Tensor, k_cache: Tensor, k_scale: Tensor, weights: Tensor,
                         kv_indptr: Tensor, kv_indices: Tensor, kv_lens: Tensor, out: Tensor,
                         workspace: Optional[Tensor], plan_id: int, stream: int) -> None:
        plan = _lookup(_ops._PLANS, plan_id, "plan_id")
        plan._launch([q, k_cache, k_scale, weights, kv_indptr, kv_indices, kv_lens], out,
                     workspace, stream)

    @paged_mqa_logits.register_fake
    def _paged_mqa_fake(q, k_cache, k_scale, weights, kv_indptr, kv_indices, kv_lens, out,
                        workspace, plan_id, stream):
        return None

    _registered.append((decode, kv_store, mqa_logits, paged_mqa_logits))


def _lookup(table, key, name):
    obj = table.get(key)
    if obj is None:
        raise ValueError("%s: %d names no live qattn object (keep the plan or context alive "
                         "as long as a graph or compiled function uses it)" % (name, key))
    return obj


# qattn's package import loads this module (which imports no torch) so that
# _ops, which never imports it, registers the ops on the first torch tensor.
_ops._ON_FIRST_TORCH.append(register)
