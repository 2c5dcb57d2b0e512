"""Contexts, device buffers, errors, and the binding of operands to
qattn_tensor descriptors."""
import ctypes
import threading
import weakref

from . import _lib as L
from ._tensors import CUDA, HOST, View, view

_AUTO_ORDER = ("hip", "vulkan", "cpu")


class QattnError(RuntimeError):
    """A qattn call failed. `status_name` is the C enumerator
    ("QATTN_ERR_SHAPE"), `status` its value, `message` the library's text
    naming the argument and the rule it broke."""

    def __init__(self, status, status_name, message):
        super().__init__("%s: %s" % (status_name, message))
        self.status, self.status_name, self.message = status, status_name, message


def _raise(status, message):
    lib = L.core()
    raise QattnError(status, lib.qattn_status_name(status).decode(), message)


_INVALID_ARGUMENT = 1  # QATTN_ERR_INVALID_ARGUMENT


def _raise_closed(what, whose="the context"):
    _raise(_INVALID_ARGUMENT, "%s: %s is closed (close() was called); make a new one" %
           (what, whose))


def backends():
    """The backends whose libraries load here, in 'auto' order."""
    return [n for n in _AUTO_ORDER if L.backend(n)]


class Context:
    """One backend instance on one device (qattn_context).

    backend: "auto" (hip, vulkan, then cpu: the first that opens a device),
    "cpu", "vulkan" or "hip". device: None (the backend's default), an index
    or a name substring. stream (hip): a hipStream_t / cudaStream_t as an
    int or an object with .cuda_stream; by default each torch call follows
    torch's current stream.

    Threads: a context, its plans and its DeviceArrays may be shared between
    threads. Every C call on the context (plan creation, runs, buffer
    operations, close) is made under the context's lock, so calls from
    several threads run one at a time (the C API allows a context on one
    thread at a time); a context per thread runs them in parallel."""

    def __init__(self, backend="auto", device=None, debug_validation=False, stream=None):
        # Held around every C call that takes the context (and the reading of
        # its last error after a failed one): ctypes releases the GIL in each.
        self._lock = threading.RLock()
        self._h = None
        # buffers of DeviceArrays collected while another thread held the
        # lock (a finalizer never waits for it): freed at the next call
        self._pending_free = []
        lib = L.core()
        names = _AUTO_ORDER if backend == "auto" else (backend,)
        reasons = []
        status = L.core().qattn_status_name  # keep a reference for messages below
        last = 13  # QATTN_ERR_BACKEND_UNAVAILABLE
        for name in names:
            table = L.backend(name)
            if not table:
                reasons.append("%s: library not loadable (%s)" % (name, L.backend_error(name)))
                continue
            o = L.ContextOptions(ctypes.sizeof(L.ContextOptions),
                                 None if device is None else str(device).encode(),
                                 int(bool(debug_validation)), _stream_handle(stream))
            h = ctypes.c_void_p()
            err = ctypes.create_string_buffer(512)
            rc = lib.qattn_context_create(table, ctypes.byref(o), ctypes.byref(h), err, 512)
            if rc == 0:
                self._h, self.backend = h.value, name
                break
            last = rc
            reasons.append("%s: %s" % (name, err.value.decode() or status(rc).decode()))
        if self._h is None:
            _raise(last, "; ".join(reasons))
        self._lib = lib
        self._wrapped = {}     # (address, bytes) -> qattn_buffer of wrapped memory
        self._wrap_gen = 0     # bumped when _wrapped is emptied: cached args refer to it
        self._stream = _stream_handle(stream)
        self._follow_torch = stream is None
        self._set_stream_to = None
        # DeviceArrays and plans of this context, held weakly: each is freed
        # when its last reference goes, and close() frees those still alive.
        self._live = weakref.WeakSet()
        self._kv_store = None  # the KV store's argument cache and id (_ops, on first use)

    # ---- lifetime ---------------------------------------------------------
    def close(self):
        """Frees every buffer the package made on this context (the live
        DeviceArrays and plans' workspaces), then the context. Idempotent;
        any later call on the context, its plans or its DeviceArrays raises
        QattnError saying the context is closed. Waits for a call another
        thread has in flight on it."""
        with self._lock:
            if self._h is None:
                return
            for obj in list(self._live):
                obj._release()
            self._free_pending()
            self._drop_wrapped()
            self._lib.qattn_context_free(self._h)
            self._h = None

    @property
    def closed(self):
        return self._h is None

    def _handle(self, what):
        """The context pointer for a call of `what`; raises when closed. Call
        with the lock held."""
        h = self._h
        if h is None:
            _raise_closed(what)
        if self._pending_free:
            self._free_pending()
        return h

    def _free_pending(self):
        # (with the lock held)
        while self._pending_free:
            b = self._pending_free.pop()
            if self._h is not None:
                self._lib.qattn_buffer_free(self._h, b)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _drop_wrapped(self):
        # (with the lock held)
        for b in self._wrapped.values():
            self._lib.qattn_buffer_free(self._h, b)
        self._wrapped.clear()
        self._wrap_gen += 1

    # ---- information ------------------------------------------------------
    @property
    def handle(self):
        """The qattn_context pointer, for C code sharing this context."""
        return self._h

    @property
    def lock(self):
        """The context's lock (re-entrant), held around every C call the
        package makes on it: C code using `handle` while other threads use
        the context takes it too."""
        return self._lock

    @property
    def caps(self):
        c = L.DeviceCaps()
        with self._lock:
            self.check(self._lib.qattn_get_caps(self._handle("caps"), ctypes.byref(c)))
        return {"arch": c.arch.decode(), "device_name": c.device_name.decode(),
                "compute_units": c.compute_units,
                "subgroup_size": (c.subgroup_size_min, c.subgroup_size_max),
                "max_shared_bytes": c.max_shared_bytes, "features": c.features}

    def __repr__(self):
        if self._h is None:
            return "qattn.Context(closed)"
        return "qattn.Context(backend=%r, device=%r)" % (self.backend, self.caps["device_name"])

    def check(self, rc):
        """Raises QattnError for a non-zero status, with the context's last
        error. Call it with the context's lock held since the call that
        returned rc, so that no other thread's call replaced that error."""
        if rc:
            with self._lock:
                h = self._h
                msg = self._lib.qattn_last_error(h).decode() if h is not None else ""
            _raise(rc, msg or "(the library left no message)")

    def synchronize(self):
        with self._lock:
            self.check(self._lib.qattn_synchronize(self._handle("synchronize")))

    def last_op_time_ms(self):
        """Device time of the last op, from the backend's own timer (waits for it)."""
        ms = ctypes.c_double()
        with self._lock:
            self.check(self._lib.qattn_last_op_time_ms(self._handle("last_op_time_ms"),
                                                       ctypes.byref(ms)))
        return ms.value

    def set_stream(self, stream):
        """HIP: enqueue later calls on `stream` (int handle or .cuda_stream
        object); None returns to following torch's current stream."""
        with self._lock:
            self._handle("set_stream")
            self._follow_torch = stream is None
            self._stream = _stream_handle(stream)
            self._apply_stream(self._stream)

    def _apply_stream(self, handle):
        # (with the lock held)
        if self.backend == "hip" and handle != self._set_stream_to:
            self.check(self._lib.qattn_hip_set_stream(self._h, handle))
            self._set_stream_to = handle

    # ---- device buffers ---------------------------------------------------
    def buffer(self, array, format=None):
        """A DeviceArray on this context holding a copy of `array` (its dtype,
        shape; uint8/uint16 need `format` as in the ops)."""
        v = view(array, "array", format)
        if v.mem != HOST:
            raise TypeError("array: ctx.buffer copies host arrays; wrap device memory by "
                            "passing the tensor to an op")
        src = _contiguous_bytes(array, v)
        with self._lock:
            self._handle("buffer")
            d = DeviceArray(self, v.shape, v.dtype)
            if d.nbytes:
                self.check(self._lib.qattn_buffer_upload(self._handle("buffer"), d._buf, 0, src,
                                                         d.nbytes))
        return d

    def empty(self, shape, dtype):
        """An uninitialised DeviceArray of `shape` and qattn dtype name `dtype`."""
        dt = L.DTYPE_BY_NAME.get(dtype)
        if dt is None:
            raise ValueError("dtype: %r is not one of %s" %
                             (dtype, ", ".join(sorted(L.DTYPE_BY_NAME))))
        return DeviceArray(self, tuple(shape), dt)

    # ---- binding operands -------------------------------------------------
    def _bind(self, pairs, outputs=()):
        """Fills each (operand name, struct field, View or None); returns a Binding whose
        finish(ok) writes staged outputs back and frees staged buffers. With
        the lock held, from binding to finish()."""
        b = _Binding(self)
        try:
            b.group([v for _, _, v in pairs if v is not None])
            for name, t, v in pairs:
                if v is None:
                    ctypes.memset(ctypes.addressof(t), 0, ctypes.sizeof(t))
                    continue
                _check_view(v, name)
                buf, off = b.place(v, v in outputs, name)
                _fill(t, buf, off, v)
        except BaseException:
            b.finish(False)  # frees what was staged before the refused operand
            raise
        return b

    def _wrap(self, lo, span):
        # (with the lock held)
        key = (lo, span)
        h = self._wrapped.get(key)
        if h is None:
            if len(self._wrapped) >= 4096:
                self._drop_wrapped()
            out = ctypes.c_void_p()
            self.check(self._lib.qattn_buffer_wrap(self._h, lo, span, ctypes.byref(out)))
            h = self._wrapped[key] = out.value
        return h


_I64 = 1 << 63


def _check_view(v, name):
    """Refuses, naming the operand, what a qattn_tensor cannot hold: a rank
    outside 1..MAX_RANK, extents or strides outside int64."""
    if not 1 <= len(v.shape) <= L.MAX_RANK:
        raise ValueError("%s: rank %d (shape %s): qattn tensors have rank 1..%d" %
                         (name, len(v.shape), v.shape, L.MAX_RANK))
    for n, st in zip(v.shape, v.strides):
        if not (0 <= n < _I64 and -_I64 <= st < _I64):
            raise ValueError("%s: shape %s / strides %s outside the int64 range of "
                             "qattn_tensor" % (name, v.shape, v.strides))


def _fill(t, buf, off, v):
    t.buffer, t.offset, t.dtype, t.rank = buf, off, v.dtype, len(v.shape)
    for i, (n, s) in enumerate(zip(v.shape, v.strides)):
        t.shape[i], t.strides[i] = n, s
    for i in range(len(v.shape), L.MAX_RANK):
        t.shape[i] = t.strides[i] = 0


class _Binding:
    """The buffers one call uses: wrapped (cached on the context), the
    package's DeviceArrays, or staging copies of host memory for backends
    that cannot read it (written back after a successful call)."""

    def __init__(self, ctx):
        self.ctx, self.staged, self.writeback = ctx, [], []
        self.staged_any = False
        self.groups = []  # [lo, hi, buffer or None, written back]

    def _staged(self, v):
        ctx = self.ctx
        native = (ctx.backend == "cpu" and v.mem == HOST) or (ctx.backend == "hip" and v.mem == CUDA)
        return v.buffer is None and v.mem == HOST and not native and v.span > 0 and v.lo >= 0

    def group(self, views):
        """Host ranges that overlap are staged as one buffer, so the core
        sees operands that share memory as sharing a buffer and answers as
        it does where it reads host memory itself (the cpu backend): an
        output over an input is refused on every backend."""
        for lo, hi in sorted((v.lo, v.lo + v.span) for v in views if self._staged(v)):
            if self.groups and lo < self.groups[-1][1]:
                self.groups[-1][1] = max(self.groups[-1][1], hi)
            else:
                self.groups.append([lo, hi, None, False])

    def place(self, v, is_output, name):
        ctx = self.ctx
        if v.buffer is not None:  # DeviceArray: v.ptr is the byte offset in it
            if v.buffer[0] is not ctx:
                raise ValueError("%s: a DeviceArray of another context" % name)
            return v.buffer[1], v.ptr
        if v.span == 0:
            raise ValueError("%s: an empty tensor (shape %s) has no memory to pass" %
                             (name, v.shape))
        if is_output and v.readonly:
            raise ValueError("%s: an output tensor is read-only" % name)
        if v.lo < 0 or v.lo + v.span > 1 << 64:
            raise ValueError("%s: address 0x%x (bytes from 0x%x, %d of them) is not a 64-bit "
                             "address range" % (name, v.ptr, v.lo, v.span))
        native = (ctx.backend == "cpu" and v.mem == HOST) or (ctx.backend == "hip" and v.mem == CUDA)
        if native:
            return ctx._wrap(v.lo, v.span), v.ptr - v.lo
        if v.mem != HOST:
            raise TypeError("device memory (%s) cannot be used by the %s backend" %
                            (v.mem, ctx.backend))
        g = next((g for g in self.groups if g[0] <= v.lo and v.lo + v.span <= g[1]), None)
        if g is None:  # not grouped (a direct call of place): its own range
            g = [v.lo, v.lo + v.span, None, False]
            self.groups.append(g)
        if g[2] is None:
            buf = ctypes.c_void_p()
            ctx.check(ctx._lib.qattn_buffer_alloc(ctx._h, g[1] - g[0], ctypes.byref(buf)))
            self.staged.append(buf.value)
            self.staged_any = True
            g[2] = buf.value
            ctx.check(ctx._lib.qattn_buffer_upload(ctx._h, buf.value, 0, g[0], g[1] - g[0]))
        if is_output and not g[3]:
            g[3] = True
            self.writeback.append((g[2], g[0], g[1] - g[0]))
        return g[2], v.ptr - g[0]

    def finish(self, ok):
        ctx = self.ctx
        try:
            if ok:
                for buf, lo, span in self.writeback:
                    ctx.check(ctx._lib.qattn_buffer_download(ctx._h, buf, 0, lo, span))
        finally:
            for buf in self.staged:
                ctx._lib.qattn_buffer_free(ctx._h, buf)
            self.staged = []


def _stream_handle(stream):
    if stream is None:
        return None
    if isinstance(stream, int):
        return L.c_int(stream, "stream", L.UINT64) or None
    h = getattr(stream, "cuda_stream", None)
    if h is None:
        raise TypeError("stream: an int handle or an object with .cuda_stream, not %s" %
                        type(stream).__name__)
    return L.c_int(h, "stream", L.UINT64) or None


def _contiguous_bytes(array, v):
    """A host address of v's elements in row-major order (a copy if needed)."""
    if _is_c_contiguous(v):
        return v.ptr
    import numpy as np
    a = np.ascontiguousarray(array)
    v.keep = (v.keep, a)
    return a.__array_interface__["data"][0]


def _is_c_contiguous(v):
    acc = 1
    for n, s in zip(reversed(v.shape), reversed(v.strides)):
        if n != 1 and s != acc:
            return False
        acc *= n
    return True


class DeviceArray:
    """Device memory the package owns on one context (qattn_buffer), with a
    shape and a qattn dtype; pass it to any op of that context, read it back
    with .numpy(). Contiguous, row-major."""

    def __init__(self, ctx, shape, dtype):
        self.ctx, self.dtype = ctx, dtype
        self.shape = tuple(L.c_int(n, "shape[%d]" % i, L.INT64) for i, n in enumerate(shape))
        n = 1
        for d in self.shape:
            n *= d
        if min(self.shape, default=0) < 0:
            raise ValueError("shape: %s has a negative extent" % (self.shape,))
        self.nbytes = L.c_int(n * L.DTYPE_SIZE[dtype], "shape %s: the bytes" % (self.shape,),
                              L.INT64)
        self._buf = None
        with ctx._lock:
            h = ctx._handle("DeviceArray")
            if self.nbytes:
                b = ctypes.c_void_p()
                ctx.check(ctx._lib.qattn_buffer_alloc(h, self.nbytes, ctypes.byref(b)))
                self._buf = b.value
            ctx._live.add(self)

    @property
    def dtype_name(self):
        return L.DTYPE_NAMES[self.dtype]

    def _qattn_view(self, name, fmt):
        if self._buf is None:
            raise ValueError("%s: a freed or empty DeviceArray" % name)
        st, acc = [], 1
        for d in reversed(self.shape):
            st.append(acc)
            acc *= d
        dt = self.dtype
        if fmt is not None and L.DTYPE_BY_NAME.get(fmt) != dt:
            raise TypeError("%s: a %s DeviceArray passed with format %r" %
                            (name, self.dtype_name, fmt))
        return View(0, dt, self.shape, tuple(reversed(st)), "qattn", -1, self, False,
                    (self.ctx, self._buf))

    def numpy(self):
        """A host copy: float32/int32/int8 as such, bf16 as uint16 bits, fp8
        as uint8 codes (see numpy_dtype)."""
        import numpy as np
        out = np.empty(self.shape, dtype=numpy_dtype(self.dtype))
        ctx = self.ctx
        with ctx._lock:
            h = ctx._handle("DeviceArray.numpy")
            if self.nbytes:
                self._check_buf("DeviceArray.numpy")
                ctx.check(ctx._lib.qattn_buffer_download(h, self._buf, 0, out.ctypes.data,
                                                         self.nbytes))
        return out

    def upload(self, array, format=None):
        """Overwrites the contents with `array` (same shape and dtype)."""
        v = view(array, "array", format)
        if v.shape != self.shape or v.dtype != self.dtype:
            raise ValueError("array: %s %s into a DeviceArray of %s %s" %
                             (L.DTYPE_NAMES[v.dtype], v.shape, self.dtype_name, self.shape))
        src = _contiguous_bytes(array, v)
        ctx = self.ctx
        with ctx._lock:
            h = ctx._handle("DeviceArray.upload")
            if self.nbytes:
                self._check_buf("DeviceArray.upload")
                ctx.check(ctx._lib.qattn_buffer_upload(h, self._buf, 0, src, self.nbytes))

    def _check_buf(self, what):
        if self._buf is None:
            raise ValueError("%s: the DeviceArray was freed" % what)

    def _release(self):
        ctx = self.ctx
        with ctx._lock:
            if self._buf is not None and ctx._h is not None:
                ctx._lib.qattn_buffer_free(ctx._h, self._buf)
            self._buf = None
            ctx._live.discard(self)

    free = _release

    def __del__(self):
        try:
            ctx = self.ctx
            if ctx._lock.acquire(blocking=False):
                try:
                    self._release()
                finally:
                    ctx._lock.release()
            elif self._buf is not None:
                # Another thread is inside the context: a finalizer (run by
                # the garbage collector in any thread, perhaps one holding
                # another context's lock) must not wait for it.
                ctx._pending_free.append(self._buf)
                self._buf = None
        except Exception:
            pass

    def __repr__(self):
        return "qattn.DeviceArray(%s, %s, %s)" % (self.shape, self.dtype_name, self.ctx.backend)


def numpy_dtype(dt):
    """The numpy dtype a qattn dtype comes back as: raw bits for the types
    numpy lacks (bf16 as uint16, fp8 as uint8 codes; `.view(ml_dtypes.bfloat16)`
    reads them as values where ml_dtypes is installed)."""
    import numpy as np
    return np.dtype({L.BF16: np.uint16, L.F16: np.float16, L.F32: np.float32, L.I32: np.int32,
                     L.I8: np.int8, L.FP8_E4M3FN: np.uint8, L.FP8_E4M3FNUZ: np.uint8,
                     L.FP8_E5M2: np.uint8}[dt])
