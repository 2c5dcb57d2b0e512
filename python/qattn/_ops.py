"""The operations: decode (plan/run), KV store, MQA logits (plan/run) and
paged MQA logits (plan/run: the indexer at decode time, spec 5).

Each op accepts numpy arrays, torch tensors, DLPack/__cuda_array_interface__
objects and DeviceArrays. Plans hold their C plan, their workspace
(allocated once, at planning) and the operands given at planning, which
run() uses for any operand it is not given.
"""
import copy
import ctypes
import itertools
import math
import sys
import weakref

from . import _lib as L
from ._context import DeviceArray, _raise_closed, _stream_handle, numpy_dtype
from ._tensors import BYTES, CUDA, view

# Plans and contexts by id, for the torch custom ops (whose arguments can
# only be tensors and scalars). Weak: a plan lives as long as the caller
# keeps it.
_PLANS = weakref.WeakValueDictionary()
_CONTEXTS = weakref.WeakValueDictionary()
_ids = itertools.count(1)  # next() is atomic: threads making plans get distinct ids


def _register(table, obj):
    i = next(_ids)
    table[i] = obj
    return i


# torch, once a torch tensor has been seen (qattn never imports torch itself)
_T = [None]
# Called once, with torch, when the first torch tensor is seen: torch_ops
# puts its registration here (this module never imports torch_ops).
_ON_FIRST_TORCH = []


def _torch():
    return _T[0]


def _is_torch(x):
    t = _T[0]
    if t is None:
        t = sys.modules.get("torch")
        if t is None or not isinstance(x, t.Tensor):
            return False
        for hook in _ON_FIRST_TORCH:
            hook()
        _T[0] = t
    return isinstance(x, t.Tensor)


def _empty_like(ctx, ref, shape, dtype, pad_last=None):
    """A new output of `shape` and qattn dtype in the same kind of memory
    as `ref`: a torch tensor on ref's device, a DeviceArray, or a numpy
    array. pad_last: allocate the last dim that wide and return a view."""
    alloc = list(shape)
    if pad_last:
        alloc[-1] = pad_last
    if _is_torch(ref):
        t = _torch()
        tdt = {L.BF16: t.bfloat16, L.F16: t.float16, L.F32: t.float32}[dtype]
        out = t.empty(alloc, dtype=tdt, device=ref.device)
        return out[..., :shape[-1]] if pad_last else out
    if isinstance(ref, DeviceArray):
        if pad_last:
            raise ValueError("a padded output needs host or torch memory; pass out=")
        return DeviceArray(ctx, shape, dtype)
    import numpy as np
    out = np.empty(alloc, dtype=numpy_dtype(dtype))
    return out[..., :shape[-1]] if pad_last else out


def _half_dtype_of(q):
    """The dtype decode's output is allocated in: q's (f16 or bf16). A q of
    any other dtype gets bf16, and the library then refuses q naming it."""
    if _is_torch(q):
        return L.F16 if q.dtype == _torch().float16 else L.BF16
    if isinstance(q, DeviceArray):
        return L.F16 if q.dtype == L.F16 else L.BF16
    name = getattr(getattr(q, "dtype", None), "name", None)  # numpy and the like
    if name is not None:
        return L.F16 if name == "float16" else L.BF16
    try:
        return L.F16 if view(q, "q").dtype == L.F16 else L.BF16
    except (TypeError, ValueError):
        return L.BF16


def _out_dtype_of(out, q):
    """The qattn dtype of a caller's out (q's when it has none we know: the
    library then refuses out naming it)."""
    try:
        return view(out, "out").dtype
    except (TypeError, ValueError):
        return _half_dtype_of(q)


def _workspace(ctx, ref, nbytes):
    if not nbytes:
        return None
    # a torch tensor wherever the backend reads the memory in place (hip: GPU
    # memory, cpu: host memory), so the custom ops can take it as a Tensor
    if _is_torch(ref) and (ref.device.type != "cpu" or ctx.backend == "cpu"):
        t = _torch()
        return t.empty(nbytes, dtype=t.uint8, device=ref.device)
    return DeviceArray(ctx, (nbytes,), L.I8)


def _stream_now(ctx, stream, device):
    """The stream a call enqueues on: `stream`, else the context's, else
    (HIP with torch) torch's current stream of `device`."""
    if stream is not None:
        return _stream_handle(stream)
    if ctx.backend != "hip" or not ctx._follow_torch:
        return ctx._stream
    t = _torch()
    if t is None:
        return None
    # torch's raw-stream query takes a device index, never None.
    if device is None:
        index = t.cuda.current_device()
    elif type(device) is int:
        index = device
    else:
        index = device.index if isinstance(device, t.device) else int(device)
        if index is None:
            index = t.cuda.current_device()
    raw = getattr(t._C, "_cuda_getCurrentRawStream", None)
    return raw(index) if raw else t.cuda.current_stream(index).cuda_stream


def _shape_of(x, name, fmt=None):
    s = getattr(x, "shape", None)
    if s is not None:
        return tuple(s)
    return view(x, name, fmt).shape


class _Plan:
    """Shared by the plan classes and the per-context KV store: the call,
    with its argument cache.

    A subclass sets _args_type (the C argument struct), _names (its tensor
    fields, in the order run() passes operands), _outputs and _per_step (the
    operands keyed on every call); _bind_defaults() sets the rest.

    The cache (backends that read the memory in place: cpu, hip) maps a key
    to the filled C struct. The key has one entry per operand: an operand of
    _per_step, an output, a DeviceArray, or any object other than the one
    bound at planning contributes what identifies its memory and layout
    (_key); the very object bound at planning contributes None and is not
    read again, since the plan holds it (its memory cannot be freed or
    reused) and its layout was read when it was bound. Changing a bound
    operand's layout in place needs refresh()."""

    _per_step = ()
    _bound = ()
    _closed = False
    _what = "plan"
    _arg_names = {}  # C field -> the argument's name in Python, where they differ

    def _bind_defaults(self, defaults):
        """The operands run() uses when not given one; what the cache key
        skips: every bound operand except per-step ones and DeviceArrays
        (which can be freed while the plan holds them)."""
        self._defaults = defaults
        slots = []
        for n in self._names:
            b = defaults.get(n)
            keyed = (n in self._per_step or n in self._outputs or isinstance(b, DeviceArray) or
                     (b is not None and _key(b) is _NOKEY))
            slots.append(_KEYED if keyed else b)
        self._bound = tuple(slots)
        self._args_cache = {}

    def bind(self, **operands):
        """A plan sharing this one's C plan and workspace with other operands
        bound (e.g. bind(k_cache=, v_cache=, k_scale=, v_scale=) per layer):
        its run() reads those once, where passing them to this plan's run()
        reads them on every call. Calls through either share the workspace,
        so they must not overlap (one stream), as with one plan."""
        unknown = sorted(set(operands) - set(self._defaults))
        if unknown:
            raise TypeError("bind: %s: not operands of this plan (%s)" %
                            (", ".join(unknown), ", ".join(self._defaults)))
        if self._closed or self.ctx._h is None:
            self._raise_closed()
        other = copy.copy(self)
        other._bind_defaults(dict(self._defaults, **operands))
        other._register_live()
        return other

    def refresh(self):
        """Forgets the filled arguments: needed after changing a bound
        operand (one given at planning) in place, e.g. torch resize_(),
        set_() or as_strided_(), or assigning a numpy array's shape,
        strides or dtype. Other changes never need it (see docs/python.md)."""
        self._args_cache.clear()

    def _cache_key(self, objs, fmt_key):
        key = list(fmt_key)
        t = _T[0]
        tensor = _NoTensor if t is None else t.Tensor
        for o, b in zip(objs, self._bound):
            if o is b:
                key.append(None)
            elif isinstance(o, tensor):  # _key's first case, inline: the hot one
                key.append((o.data_ptr(), o.shape, o.stride(), o.dtype))
            else:
                k = _key(o)
                if k is _NOKEY:
                    return None
                key.append(k)
        return tuple(key)

    def _call(self, objs, formats, fn, stream, ref, fmt_key=()):
        """Binds the operands (objs, in _names order), runs fn(byref(args))
        and checks it. Keeps the filled struct when every operand is memory
        the backend reads in place (cpu: host memory, hip: device memory,
        and DeviceArrays), so a repeated call only builds the key."""
        ctx = self.ctx
        with ctx._lock:  # every C call on ctx, from binding to writeback
            if ctx._h is None or self._closed:
                self._raise_closed()
            if ctx._pending_free:
                ctx._free_pending()
            key = None
            if self._cacheable:
                key = self._cache_key(objs, fmt_key)
                if key is not None:
                    hit = self._args_cache.get(key)
                    if hit is not None and hit[0] == ctx._wrap_gen:
                        ctx._apply_stream(_stream_now(ctx, stream, hit[2]))
                        ctx.check(fn(hit[3]))
                        return
            self._call_uncached(ctx, key, objs, formats, fn, stream, ref)

    def _raise_closed(self):
        if self.ctx._h is None:
            _raise_closed(self._what)
        _raise_closed(self._what, "the plan")

    def _register_live(self):
        """Makes the plan known to its context (weakly) and to the custom ops."""
        self.id = _register(_PLANS, self)
        with self.ctx._lock:
            if self.ctx._h is None:
                self._raise_closed()
            self.ctx._live.add(self)

    def _call_uncached(self, ctx, key, objs, formats, fn, stream, ref):
        device = _device_of(ref)
        args = self._args_type()
        pairs, out_views = [], []
        outputs = self._outputs
        for n, o in zip(self._names, objs):
            v = None if o is None else view(o, self._arg_names.get(n, n), formats.get(n))
            if v is not None and n in outputs:
                out_views.append(v)
            pairs.append((self._arg_names.get(n, n), getattr(args, n), v))
        self._fill_scalars(args)
        b = ctx._bind(pairs, out_views)
        ok = False
        aref = ctypes.byref(args)
        try:
            ctx._apply_stream(_stream_now(ctx, stream, device))
            ctx.check(fn(aref))
            ok = True
        finally:
            b.finish(ok)
        if key is not None and not b.staged_any:
            if len(self._args_cache) > 64:
                self._args_cache.clear()
            # (wrap generation, struct, device of the first operand, its byref)
            self._args_cache[key] = (ctx._wrap_gen, args, device, aref)

    def _fill_scalars(self, args):
        pass

    # ---- inspection and lifetime, for the plan classes -------------------
    @property
    def reason(self):
        return self._plan.reason.decode()

    @property
    def workspace_bytes(self):
        return self._plan.workspace_bytes

    def info(self):
        """Every field of the C plan, as a dict."""
        return _struct_dict(self._plan, {"variant": self.variant})

    def close(self):
        """Frees what the plan holds: its workspace (once no plan made from it
        by bind() uses it), its argument cache and the operands it was given.
        Idempotent; run() afterwards raises QattnError saying the plan is
        closed. A plan no longer referenced is freed the same way without it;
        Context.close() closes the plans still alive."""
        with self.ctx._lock:
            self._release()

    def _release(self):
        # (with the context's lock held) Drops the references: the workspace
        # DeviceArray frees itself when no plan (bind() shares it) holds it.
        self._closed = True
        self.workspace = None
        self.__dict__.pop("_ws_bound", None)
        self._args_cache = {}
        self._defaults = dict.fromkeys(self._defaults)
        self._bound = ()
        self.ctx._live.discard(self)
        _PLANS.pop(getattr(self, "id", None), None)

    @property
    def closed(self):
        return self._closed

    def _bound_workspace(self, ws):
        """(qattn_buffer, offset) of the workspace; the plan's own is bound
        once. With the context's lock held."""
        if self._closed or self.ctx._h is None:
            self._raise_closed()
        if ws is None:
            return None, 0
        if ws is self.workspace:
            b = self.__dict__.get("_ws_bound")
            if b is None or b[0] != self.ctx._wrap_gen:
                b = self._ws_bound = (self.ctx._wrap_gen,) + _workspace_buffer(self.ctx, ws)
            return b[1], b[2]
        return _workspace_buffer(self.ctx, ws)


# The cache-key slot of an operand keyed on every call: an object no
# caller's operand is. _ABSENT: the key of a missing operand; _NOKEY: an
# operand without one (the call is not cached).
_KEYED = object()
_ABSENT = ("no operand",)
_NOKEY = ("no cache key",)


class _NoTensor:
    """Stands for torch.Tensor before torch is seen: nothing is one."""


def _key(o):
    """What identifies an operand's memory and layout: its address, shape,
    strides and dtype (with, for the array interface, the read-only flag and
    the dtype object, since ml_dtypes types share type strings). _NOKEY for
    other protocols: an object's id says nothing of its memory."""
    if o is None:
        return _ABSENT
    t = _T[0] or sys.modules.get("torch")
    if t is not None and isinstance(o, t.Tensor):
        return (o.data_ptr(), o.shape, o.stride(), o.dtype)
    if isinstance(o, DeviceArray):
        return (id(o), o._buf, o.shape, o.dtype)
    ai = getattr(o, "__array_interface__", None)
    if ai is not None:
        return (ai["data"], ai["shape"], ai["strides"], ai["typestr"], getattr(o, "dtype", None))
    return _NOKEY


_DECODE_OPERANDS = ("q", "k_cache", "v_cache", "k_scale", "v_scale", "kv_indptr", "kv_indices",
                    "kv_lens", "sinks", "o", "lse")


class DecodePlan(_Plan):
    """A decode plan (qattn_decode_plan) for one shape, with its workspace.

    Inspect: variant, num_splits, keys_per_split, reason, workspace_bytes,
    info() (every field). Run with run(); operands not given to run() are
    the ones given at planning."""

    _args_type = L.DecodeArgs
    _names = _DECODE_OPERANDS
    _outputs = ("o", "lse")
    _what = "DecodePlan"
    _arg_names = {"o": "out"}
    # keyed on every call even when they are the objects given at planning
    _per_step = ("q", "kv_indptr", "kv_indices", "kv_lens")

    def __init__(self, ctx, q, k_cache, v_cache, kv_indptr, kv_indices, kv_lens, *, page_size,
                 max_kv_len, k_scale=None, v_scale=None, sinks=None, sm_scale=None,
                 window_left=-1, logit_softcap=0.0, return_lse=False, kv_format=None,
                 variant="auto", num_splits=0, out=None, lse=None, workspace=None):
        self.ctx = ctx
        qs = _shape_of(q, "q")
        if len(qs) != 4:
            raise ValueError("q: shape %s, want [B, R, Hq, D]" % (qs,))
        vs = _shape_of(v_cache, "v_cache", kv_format)
        if len(vs) not in (3, 4):
            raise ValueError("v_cache: shape %s (rank %d), want [N_slots, Hkv, Dv] or "
                             "[N_pages, P, Hkv, Dv]" % (vs, len(vs)))
        self.out_shape = (qs[0], qs[1], qs[2], vs[-1])
        self.return_lse = bool(return_lse)
        self.page_size = L.c_int(page_size, "page_size")
        self.max_kv_len = L.c_int(max_kv_len, "max_kv_len")
        self.sm_scale = 1.0 / math.sqrt(qs[3]) if sm_scale is None else \
            L.c_float(sm_scale, "sm_scale")
        self.window_left = L.c_int(window_left, "window_left")
        self.logit_softcap = L.c_float(logit_softcap, "logit_softcap")
        num_splits = L.c_int(num_splits, "num_splits")
        self.kv_format = kv_format
        self._fmts = {"k_cache": kv_format, "v_cache": kv_format}
        if variant not in L.DECODE_VARIANTS:
            raise ValueError("variant: %r is not one of %s" % (variant, tuple(L.DECODE_VARIANTS)))
        # o's dtype is part of what the plan is made for: q's (f16 or bf16)
        # unless the caller gives out; run() allocates outputs in it
        if out is None:
            self.out_dtype = _half_dtype_of(q)
            out = _empty_like(ctx, q, self.out_shape, self.out_dtype)
        else:
            self.out_dtype = _out_dtype_of(out, q)
        if self.return_lse and lse is None:
            lse = _empty_like(ctx, q, self.out_shape[:3], L.F32)
        self._plan = L.DecodePlan()
        opts = L.DecodeOptions(ctypes.sizeof(L.DecodeOptions), L.DECODE_VARIANTS[variant],
                               num_splits)
        objs = [q, k_cache, v_cache, k_scale, v_scale, kv_indptr, kv_indices, kv_lens, sinks,
                out, lse if self.return_lse else None]
        self._cacheable = False
        lib = ctx._lib
        self._call(objs, self._fmts, lambda a: lib.qattn_decode_plan_create(
            ctx._h, a, ctypes.byref(opts), ctypes.byref(self._plan)), None, None)
        self._plan_ref = ctypes.byref(self._plan)
        self._bind_defaults(dict(q=q, k_cache=k_cache, v_cache=v_cache, k_scale=k_scale,
                                 v_scale=v_scale, kv_indptr=kv_indptr, kv_indices=kv_indices,
                                 kv_lens=kv_lens, sinks=sinks))
        self._cacheable = ctx.backend in ("cpu", "hip")
        self.workspace = workspace if workspace is not None else \
            _workspace(ctx, q, self._plan.workspace_bytes)
        self._register_live()

    def _fill_scalars(self, a):
        a.page_size, a.max_kv_len, a.sm_scale = self.page_size, self.max_kv_len, self.sm_scale
        a.window_left, a.logit_softcap = self.window_left, self.logit_softcap

    # ---- inspection -------------------------------------------------------
    @property
    def variant(self):
        return self.ctx._lib.qattn_decode_variant_name(self._plan.variant).decode()

    @property
    def num_splits(self):
        return self._plan.num_splits

    @property
    def keys_per_split(self):
        return self._plan.keys_per_split

    def __repr__(self):
        return ("qattn.DecodePlan(variant=%r, num_splits=%d, workspace_bytes=%d, reason=%r)" %
                (self.variant, self.num_splits, self.workspace_bytes, self.reason))

    # ---- run --------------------------------------------------------------
    def run(self, q=None, k_cache=None, v_cache=None, k_scale=None, v_scale=None, *,
            kv_indptr=None, kv_indices=None, kv_lens=None, sinks=None, out=None, lse=None,
            workspace=None, stream=None):
        """Runs the plan; returns out (allocated when not given, in the dtype
        the plan was made for: q's, or that of the out given at planning), or
        (out, lse) for a plan made with return_lse. Never allocates on the
        device beyond the outputs it is not given."""
        if self._closed or self.ctx._h is None:
            self._raise_closed()
        d = self._defaults
        q = d["q"] if q is None else q
        ops = [q, d["k_cache"] if k_cache is None else k_cache,
               d["v_cache"] if v_cache is None else v_cache,
               d["k_scale"] if k_scale is None else k_scale,
               d["v_scale"] if v_scale is None else v_scale,
               d["kv_indptr"] if kv_indptr is None else kv_indptr,
               d["kv_indices"] if kv_indices is None else kv_indices,
               d["kv_lens"] if kv_lens is None else kv_lens,
               d["sinks"] if sinks is None else sinks]
        if out is None:
            out = _empty_like(self.ctx, q, self.out_shape, self.out_dtype)
        if self.return_lse and lse is None:
            lse = _empty_like(self.ctx, q, self.out_shape[:3], L.F32)
        ws = self.workspace if workspace is None else workspace
        if _is_torch(q):
            t = _torch()
            sh = 0 if stream is None else _stream_int(stream)
            if t.compiler.is_compiling():
                t.ops.qattn.decode(*ops, out, lse, ws, self.id, sh)
            else:
                self._launch(ops, out, lse, ws, sh)
        else:
            self._launch(ops, out, lse, ws, stream)
        return (out, lse) if self.return_lse else out

    def _launch(self, ops, out, lse, ws, stream):
        """The C call; the torch custom op's implementation calls this too."""
        ctx, plan = self.ctx, self._plan_ref
        run = ctx._lib.qattn_decode_run
        with ctx._lock:
            ws_buf, ws_off = self._bound_workspace(ws)
            self._call(list(ops) + [out, lse], self._fmts,
                       lambda a: run(ctx._h, plan, a, ws_buf, ws_off), stream or None, ops[0])



def _stream_int(stream):
    return _stream_handle(stream) or 0


def _device_of(x):
    if _is_torch(x) and x.device.type != "cpu":
        return x.device.index or 0
    return None


def _workspace_buffer(ctx, ws):
    """(qattn_buffer, byte offset) of a workspace: a DeviceArray or device
    memory the backend wraps."""
    if isinstance(ws, DeviceArray):
        if ws.ctx is not ctx:
            raise ValueError("workspace: a DeviceArray of another context")
        return ws._buf, 0
    v = view(ws, "workspace", fmt=BYTES)
    native = (ctx.backend == "cpu" and v.mem != CUDA) or (ctx.backend == "hip" and v.mem == CUDA)
    if not native:
        raise TypeError("workspace: the %s backend needs a DeviceArray (ctx.empty) here" %
                        ctx.backend)
    return ctx._wrap(v.lo, v.span), v.ptr - v.lo


def _struct_dict(s, override):
    out = {}
    for name, typ in s._fields_:
        val = getattr(s, name)
        if isinstance(val, bytes):
            val = val.decode()
        elif isinstance(val, ctypes.Array):
            val = list(val)
        elif isinstance(val, ctypes.Structure):
            val = _struct_dict(val, {})
        out[name] = val
    out.update(override)
    return out


# ---- KV store ------------------------------------------------------------
_KV_STORE_OPERANDS = ("k_new", "v_new", "slot_mapping", "k_cache", "v_cache", "k_scale",
                      "v_scale")


class _KvStore(_Plan):
    """A context's KV store: its argument cache (every operand keyed on
    every call: nothing is bound) and its id for torch.ops.qattn.kv_store."""
    _args_type = L.KvStoreArgs
    _names = _KV_STORE_OPERANDS
    _outputs = ("k_cache", "v_cache", "k_scale", "v_scale")
    _what = "kv_store"

    def __init__(self, ctx):
        self.ctx = weakref.proxy(ctx)
        self._cacheable = ctx.backend in ("cpu", "hip")
        self._bind_defaults({})
        self.id = _register(_CONTEXTS, ctx)


def _kv_store_of(ctx):
    """The context's _KvStore, made on first use."""
    ks = ctx._kv_store
    if ks is None:
        with ctx._lock:
            ks = ctx._kv_store
            if ks is None:
                ks = ctx._kv_store = _KvStore(ctx)
    return ks


def kv_store(ctx, k_new, v_new, slot_mapping, k_cache, v_cache, k_scale=None, v_scale=None, *,
             kv_format=None, stream=None):
    """Writes new tokens into the cache in its format (spec 2, KV store);
    the cache and scales are written in place."""
    ops = [k_new, v_new, slot_mapping, k_cache, v_cache, k_scale, v_scale]
    if _is_torch(k_new):
        t = _torch()
        if t.compiler.is_compiling():
            t.ops.qattn.kv_store(*ops, _kv_store_of(ctx).id, kv_format or "",
                                 0 if stream is None else _stream_int(stream))
            return
        stream = stream or None
    _kv_store_launch(ctx, ops, kv_format, stream)


def _kv_store_launch(ctx, ops, kv_format, stream):
    ks = _kv_store_of(ctx)
    store = ctx._lib.qattn_kv_store
    fmt = kv_format or None
    ks._call(ops, {"k_cache": fmt, "v_cache": fmt}, lambda a: store(ctx._h, a), stream, ops[0],
             (fmt,))


# ---- MQA logits ----------------------------------------------------------
_MQA_OPERANDS = ("q", "k", "k_scale", "weights", "ks", "ke", "logits")


class MqaLogitsPlan(_Plan):
    """An FP8 MQA logits plan (qattn_mqa_logits_plan) for one shape.
    Outputs are [S, S_kv] f32 views of rows padded to a multiple of 256."""

    _args_type = L.MqaLogitsArgs
    _names = _MQA_OPERANDS
    _outputs = ("logits",)
    _what = "MqaLogitsPlan"
    _arg_names = {"logits": "out"}
    _per_step = ("q", "weights", "ks", "ke")

    def __init__(self, ctx, q, k, k_scale, weights, ks, ke, *, clean_logits=True,
                 q_format=None, k_format=None, variant="auto", rows_per_subgroup=0,
                 kv_slices=0, out=None):
        self.ctx = ctx
        qs, kshape = _shape_of(q, "q", q_format), _shape_of(k, "k", k_format)
        if len(qs) != 3:
            raise ValueError("q: shape %s (rank %d), want [S, H, D]" % (qs, len(qs)))
        if len(kshape) != 2:
            raise ValueError("k: shape %s (rank %d), want [S_kv, D]" % (kshape, len(kshape)))
        rows_per_subgroup = L.c_int(rows_per_subgroup, "rows_per_subgroup")
        kv_slices = L.c_int(kv_slices, "kv_slices")
        self.out_shape = (qs[0], kshape[0])
        self.clean_logits = bool(clean_logits)
        self.q_format, self.k_format = q_format, k_format
        if variant not in L.MQA_VARIANTS:
            raise ValueError("variant: %r is not one of %s" % (variant, tuple(L.MQA_VARIANTS)))
        if out is None:
            out = self._new_out(q)
        self._plan = L.MqaLogitsPlan()
        opts = L.MqaLogitsOptions(ctypes.sizeof(L.MqaLogitsOptions), L.MQA_VARIANTS[variant],
                                  rows_per_subgroup, kv_slices)
        lib = ctx._lib
        self._fmts = {"q": q_format, "k": k_format}
        self._cacheable = False
        self._call([q, k, k_scale, weights, ks, ke, out], self._fmts,
                   lambda a: lib.qattn_mqa_logits_plan_create(ctx._h, a, ctypes.byref(opts),
                                                              ctypes.byref(self._plan)),
                   None, None)
        self._plan_ref = ctypes.byref(self._plan)
        self._bind_defaults(dict(q=q, k=k, k_scale=k_scale, weights=weights, ks=ks, ke=ke))
        self._cacheable = ctx.backend in ("cpu", "hip")
        self.workspace = _workspace(ctx, q, self._plan.workspace_bytes)
        self._register_live()

    def _new_out(self, ref):
        pad = -(-self.out_shape[1] // 256) * 256
        return _empty_like(self.ctx, ref, self.out_shape, L.F32,
                           pad_last=None if isinstance(ref, DeviceArray) else pad)

    def _fill_scalars(self, a):
        a.clean_logits = int(self.clean_logits)

    @property
    def variant(self):
        return self.ctx._lib.qattn_mqa_variant_name(self._plan.variant).decode()

    def __repr__(self):
        return "qattn.MqaLogitsPlan(variant=%r, workspace_bytes=%d, reason=%r)" % (
            self.variant, self.workspace_bytes, self.reason)

    def run(self, q=None, k=None, k_scale=None, weights=None, ks=None, ke=None, *, out=None,
            workspace=None, stream=None):
        """Runs the plan; returns the logits (allocated when not given)."""
        if self._closed or self.ctx._h is None:
            self._raise_closed()
        d = self._defaults
        ops = [d[n] if o is None else o for n, o in
               zip(("q", "k", "k_scale", "weights", "ks", "ke"), (q, k, k_scale, weights, ks, ke))]
        if out is None:
            out = self._new_out(ops[0])
        ws = self.workspace if workspace is None else workspace
        if _is_torch(ops[0]):
            t = _torch()
            sh = 0 if stream is None else _stream_int(stream)
            if t.compiler.is_compiling():
                t.ops.qattn.mqa_logits(*ops, out, ws, self.id, sh)
                return out
            stream = sh
        self._launch(ops, out, ws, stream)
        return out

    def _launch(self, ops, out, ws, stream):
        ctx, plan = self.ctx, self._plan_ref
        run = ctx._lib.qattn_mqa_logits_run
        with ctx._lock:
            ws_buf, ws_off = self._bound_workspace(ws)
            self._call(list(ops) + [out], self._fmts,
                       lambda a: run(ctx._h, plan, a, ws_buf, ws_off), stream or None, ops[0])



# ---- paged MQA logits (the indexer at decode time) --------------------------
_PAGED_MQA_OPERANDS = ("q", "k_cache", "k_scale", "weights", "kv_indptr", "kv_indices",
                       "kv_lens", "logits")


class PagedMqaLogitsPlan(_Plan):
    """A paged FP8 MQA logits plan (qattn_paged_mqa_logits_plan, spec 5) for
    one shape: each of B requests scores its own paged context with its N
    new rows. Outputs are [B, N, max_kv_len] f32 views of rows padded to a
    multiple of 256 (torch and numpy; a DeviceArray's rows are unpadded).

    The plan is made from max_kv_len (a static bound), never from kv_lens,
    so one plan serves every decode step of the shape and a captured graph
    replays with any lengths up to it. Inspect: variant, num_splits,
    keys_per_split, reason, info() (every field)."""

    _args_type = L.PagedMqaLogitsArgs
    _names = _PAGED_MQA_OPERANDS
    _outputs = ("logits",)
    _what = "PagedMqaLogitsPlan"
    _arg_names = {"logits": "out"}
    # keyed on every call even when they are the objects given at planning
    _per_step = ("q", "weights", "kv_indptr", "kv_indices", "kv_lens")

    def __init__(self, ctx, q, k_cache, k_scale, weights, kv_indptr, kv_indices, kv_lens, *,
                 page_size, max_kv_len, clean_logits=True, q_format=None, k_format=None,
                 variant="auto", keys_per_split=0, out=None):
        self.ctx = ctx
        qs = _shape_of(q, "q", q_format)
        if len(qs) != 4:
            raise ValueError("q: shape %s (rank %d), want [B, N, H, D]" % (qs, len(qs)))
        self.page_size = L.c_int(page_size, "page_size")
        self.max_kv_len = L.c_int(max_kv_len, "max_kv_len")
        keys_per_split = L.c_int(keys_per_split, "keys_per_split")
        self.out_shape = (qs[0], qs[1], self.max_kv_len)
        self.clean_logits = bool(clean_logits)
        self.q_format, self.k_format = q_format, k_format
        variants = L.paged_mqa_variants()
        if variant not in variants:
            raise ValueError("variant: %r is not one of %s" % (variant, tuple(variants)))
        if out is None:
            out = self._new_out(q)
        self._plan = L.PagedMqaLogitsPlan()
        opts = L.PagedMqaLogitsOptions(ctypes.sizeof(L.PagedMqaLogitsOptions), variants[variant],
                                       keys_per_split)
        lib = ctx._lib
        self._fmts = {"q": q_format, "k_cache": k_format}
        self._cacheable = False
        self._call([q, k_cache, k_scale, weights, kv_indptr, kv_indices, kv_lens, out], self._fmts,
                   lambda a: lib.qattn_paged_mqa_logits_plan_create(
                       ctx._h, a, ctypes.byref(opts), ctypes.byref(self._plan)), None, None)
        self._plan_ref = ctypes.byref(self._plan)
        self._bind_defaults(dict(q=q, k_cache=k_cache, k_scale=k_scale, weights=weights,
                                 kv_indptr=kv_indptr, kv_indices=kv_indices, kv_lens=kv_lens))
        self._cacheable = ctx.backend in ("cpu", "hip")
        self.workspace = _workspace(ctx, q, self._plan.workspace_bytes)
        self._register_live()

    def _new_out(self, ref):
        pad = -(-self.out_shape[2] // 256) * 256
        return _empty_like(self.ctx, ref, self.out_shape, L.F32,
                           pad_last=None if isinstance(ref, DeviceArray) else pad)

    def _fill_scalars(self, a):
        a.page_size, a.max_kv_len = self.page_size, self.max_kv_len
        a.clean_logits = int(self.clean_logits)

    # ---- inspection -------------------------------------------------------
    @property
    def variant(self):
        return self.ctx._lib.qattn_paged_mqa_variant_name(self._plan.variant).decode()

    @property
    def num_splits(self):
        return self._plan.num_splits

    @property
    def keys_per_split(self):
        return self._plan.keys_per_split

    def __repr__(self):
        return ("qattn.PagedMqaLogitsPlan(variant=%r, num_splits=%d, keys_per_split=%d, "
                "workspace_bytes=%d, reason=%r)" % (self.variant, self.num_splits,
                                                    self.keys_per_split, self.workspace_bytes,
                                                    self.reason))

    # ---- run --------------------------------------------------------------
    def run(self, q=None, k_cache=None, k_scale=None, weights=None, *, kv_indptr=None,
            kv_indices=None, kv_lens=None, out=None, workspace=None, stream=None):
        """Runs the plan; returns the logits (allocated when not given: give
        out= at planning too when run() gets outputs of another layout,
        since the plan is made for one)."""
        if self._closed or self.ctx._h is None:
            self._raise_closed()
        d = self._defaults
        ops = [d[n] if o is None else o for n, o in
               zip(_PAGED_MQA_OPERANDS[:7],
                   (q, k_cache, k_scale, weights, kv_indptr, kv_indices, kv_lens))]
        if out is None:
            out = self._new_out(ops[0])
        ws = self.workspace if workspace is None else workspace
        if _is_torch(ops[0]):
            t = _torch()
            sh = 0 if stream is None else _stream_int(stream)
            if t.compiler.is_compiling():
                t.ops.qattn.paged_mqa_logits(*ops, out, ws, self.id, sh)
                return out
            stream = sh
        self._launch(ops, out, ws, stream)
        return out

    def _launch(self, ops, out, ws, stream):
        """The C call; the torch custom op's implementation calls this too."""
        ctx, plan = self.ctx, self._plan_ref
        run = ctx._lib.qattn_paged_mqa_logits_run
        with ctx._lock:
            ws_buf, ws_off = self._bound_workspace(ws)
            self._call(list(ops) + [out], self._fmts,
                       lambda a: run(ctx._h, plan, a, ws_buf, ws_off), stream or None, ops[0])
