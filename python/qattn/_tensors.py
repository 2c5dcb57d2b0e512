"""Tensors in: the numpy array interface, torch tensors, DLPack and
__cuda_array_interface__, all read without a copy into one description
(_View) that the context turns into a qattn_tensor.

dtype mapping (explicit; anything else is refused with the operand's name):
  bf16   torch.bfloat16, ml_dtypes.bfloat16, DLPack bfloat16, or uint16 bits
  f16    float16
  f32    float32;  i32: int32;  i8: int8
  fp8    torch.float8_e4m3fn(uz) / float8_e5m2, ml_dtypes.float8_e4m3fn(uz) /
         float8_e5m2, DLPack fp8, or a uint8 view with the operand's format
         given (e.g. kv_format="fp8_e4m3fn" or "fp8_e5m2")
"""
import ctypes

from . import _lib as L

HOST, CUDA = "host", "cuda"

# numpy / array-interface type strings and names
_NP_NAMES = {"float32": L.F32, "int32": L.I32, "int8": L.I8, "float16": L.F16,
             "bfloat16": L.BF16, "float8_e4m3fn": L.FP8_E4M3FN,
             "float8_e4m3fnuz": L.FP8_E4M3FNUZ, "float8_e5m2": L.FP8_E5M2}
_TYPESTR = {"<f4": L.F32, "<i4": L.I32, "|i1": L.I8, "<f2": L.F16}
_RAW = {"uint8": 1, "uint16": 2, "int16": 2, "|u1": 1, "<u2": 2, "<i2": 2}

# DLPack (dlpack.h, DLDataTypeCode and DLDeviceType)
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BFLOAT = 0, 1, 2, 4
_DL_FP8_E4M3FN, _DL_FP8_E4M3FNUZ, _DL_FP8_E5M2 = 10, 11, 12
_DL_CPU, _DL_CUDA, _DL_CUDA_HOST, _DL_ROCM = 1, 2, 3, 10


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_capsule_ptr = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_ptr.restype = ctypes.c_void_p
_capsule_ptr.argtypes = [ctypes.py_object, ctypes.c_char_p]


class View:
    """One operand: where its element [0, ...] is (ptr), the bytes it spans
    [lo, lo + span), its qattn dtype, shape and strides in elements, and the
    memory it lives in (HOST or CUDA, device index). `keep` holds what must
    stay alive while the view is used (a DLPack capsule, the array)."""
    __slots__ = ("ptr", "lo", "span", "dtype", "shape", "strides", "mem", "device", "keep",
                 "readonly", "buffer")

    def __init__(self, ptr, dtype, shape, strides, mem, device, keep, readonly=False,
                 buffer=None):
        self.ptr, self.dtype, self.shape, self.strides = ptr, dtype, tuple(shape), tuple(strides)
        self.mem, self.device, self.keep, self.readonly, self.buffer = mem, device, keep, \
            readonly, buffer
        size = L.DTYPE_SIZE[dtype]
        lo = hi = 0
        for n, s in zip(self.shape, self.strides):
            if n == 0:
                lo = hi = 0
                break
            if s < 0:
                lo += s * (n - 1)
            else:
                hi += s * (n - 1)
        self.lo = ptr + lo * size
        self.span = (hi - lo + 1) * size if all(self.shape) else 0


# A format for operands that are raw bytes (a workspace): any 1-byte
# elements, read as int8.
BYTES = "bytes"


def _resolve(name, kind, raw_bytes, fmt):
    """The qattn dtype of an operand whose element is `kind` (a qattn dtype)
    or raw bits of raw_bytes bytes, given the format the caller named."""
    if fmt == BYTES:
        if (L.DTYPE_SIZE[kind] if kind else raw_bytes) != 1:
            raise TypeError("%s: raw bytes need a 1-byte element type" % name)
        return L.I8
    if fmt is not None:
        want = L.DTYPE_BY_NAME.get(fmt)
        if want is None:
            raise ValueError("%s: format %r is not one of %s" %
                             (name, fmt, ", ".join(sorted(L.DTYPE_BY_NAME))))
        have = L.DTYPE_SIZE[kind] if kind else raw_bytes
        if have != L.DTYPE_SIZE[want]:
            raise TypeError("%s: format %r needs %d-byte elements, the tensor has %d-byte ones" %
                            (name, fmt, L.DTYPE_SIZE[want], have))
        if kind and kind != want and {kind, want} != {L.FP8_E4M3FN, L.FP8_E4M3FNUZ}:
            raise TypeError("%s: a %s tensor cannot be read as %s" %
                            (name, L.DTYPE_NAMES[kind], fmt))
        return want
    if kind:
        return kind
    if raw_bytes == 2:
        return L.BF16  # uint16 bits: bf16 unless the format says f16
    raise TypeError("%s: uint8 needs its format: fp8_e4m3fn, fp8_e4m3fnuz or fp8_e5m2 (the op's "
                    "*_format=)" % name)


_torch = None
_torch_dtypes = None


def _torch_mod():
    """torch once the program has imported it (qattn never imports it)."""
    global _torch, _torch_dtypes
    if _torch is None:
        import sys
        t = sys.modules.get("torch")
        if t is None:
            return None
        d = {t.bfloat16: (L.BF16, 0), t.float16: (L.F16, 0), t.float32: (L.F32, 0),
             t.int32: (L.I32, 0), t.int8: (L.I8, 0), t.uint8: (0, 1), t.int16: (0, 2)}
        for n, q in (("float8_e4m3fn", L.FP8_E4M3FN), ("float8_e4m3fnuz", L.FP8_E4M3FNUZ),
                     ("float8_e5m2", L.FP8_E5M2), ("uint16", None)):
            if hasattr(t, n):
                d[getattr(t, n)] = (q, 0) if q else (0, 2)
        _torch_dtypes, _torch = d, t
    return _torch


def view(x, name, fmt=None):
    """A View of x (an operand named `name` in messages), without a copy."""
    if isinstance(x, View):
        return x
    dev_view = getattr(x, "_qattn_view", None)
    if dev_view is not None:  # a DeviceArray of this package
        return dev_view(name, fmt)
    t = _torch_mod()
    if t and isinstance(x, t.Tensor):
        return _from_torch(x, name, fmt)
    ai = getattr(x, "__array_interface__", None)
    if ai is not None:
        return _from_array_interface(x, ai, HOST, -1, name, fmt)
    cai = getattr(x, "__cuda_array_interface__", None)
    if cai is not None:
        return _from_array_interface(x, cai, CUDA, None, name, fmt)
    if hasattr(x, "__dlpack__"):
        return _from_dlpack(x, name, fmt)
    raise TypeError("%s: %s is not a tensor (numpy array interface, DLPack, "
                    "__cuda_array_interface__ or a qattn DeviceArray)" % (name, type(x).__name__))


def _from_torch(x, name, fmt):
    kind, raw = _torch_dtypes.get(x.dtype, (None, None))
    if kind is None:
        raise TypeError("%s: torch dtype %s has no qattn dtype" % (name, x.dtype))
    dt = _resolve(name, kind, raw, fmt)
    dev = x.device
    mem = HOST if dev.type == "cpu" else CUDA
    return View(x.data_ptr(), dt, x.shape, x.stride(), mem,
                -1 if mem == HOST else (dev.index or 0), x)


def _from_array_interface(x, ai, mem, device, name, fmt):
    typestr = ai["typestr"]
    ptr, readonly = ai["data"]
    shape = ai["shape"]
    kind = _TYPESTR.get(typestr)
    raw = _RAW.get(typestr)
    dt_obj = getattr(x, "dtype", None)
    if dt_obj is not None and getattr(dt_obj, "name", None) in _NP_NAMES:
        kind = _NP_NAMES[dt_obj.name]
    elif dt_obj is not None and getattr(dt_obj, "name", None) in _RAW:
        raw = _RAW[dt_obj.name]
    if kind is None and raw is None:
        raise TypeError("%s: element type %s has no qattn dtype" %
                        (name, getattr(dt_obj, "name", typestr)))
    dt = _resolve(name, kind, raw, fmt)
    size = L.DTYPE_SIZE[dt]
    bstrides = ai.get("strides")
    if bstrides is None:
        st, acc = [], 1
        for n in reversed(shape):
            st.append(acc)
            acc *= n
        strides = tuple(reversed(st))
    else:
        if any(s % size for s in bstrides):
            raise ValueError("%s: byte strides %s are not multiples of the element size %d" %
                             (name, tuple(bstrides), size))
        strides = tuple(s // size for s in bstrides)
    if mem == CUDA and device is None:
        device = -1
    return View(ptr or 0, dt, shape, strides, mem, device, x, bool(readonly))


def _from_dlpack(x, name, fmt):
    cap = x.__dlpack__()
    p = _capsule_ptr(cap, b"dltensor")
    # DLManagedTensor starts with its DLTensor
    dl = _DLTensor.from_address(p)
    code, bits, lanes = dl.dtype.code, dl.dtype.bits, dl.dtype.lanes
    if lanes != 1:
        raise TypeError("%s: DLPack vector types (lanes %d) have no qattn dtype" % (name, lanes))
    kind, raw = {(_DL_FLOAT, 32): (L.F32, 0), (_DL_FLOAT, 16): (L.F16, 0),
                 (_DL_BFLOAT, 16): (L.BF16, 0), (_DL_INT, 32): (L.I32, 0),
                 (_DL_INT, 8): (L.I8, 0), (_DL_UINT, 8): (0, 1), (_DL_UINT, 16): (0, 2),
                 (_DL_INT, 16): (0, 2),
                 (_DL_FP8_E4M3FN, 8): (L.FP8_E4M3FN, 0),
                 (_DL_FP8_E4M3FNUZ, 8): (L.FP8_E4M3FNUZ, 0),
                 (_DL_FP8_E5M2, 8): (L.FP8_E5M2, 0)}.get((code, bits), (None, None))
    if kind is None:
        raise TypeError("%s: DLPack type code %d, %d bits has no qattn dtype" % (name, code, bits))
    dt = _resolve(name, kind, raw, fmt)
    n = dl.ndim
    shape = tuple(dl.shape[i] for i in range(n))
    if dl.strides:
        strides = tuple(dl.strides[i] for i in range(n))
    else:
        st, acc = [], 1
        for d in reversed(shape):
            st.append(acc)
            acc *= d
        strides = tuple(reversed(st))
    dtype_dev = dl.device.device_type
    mem = HOST if dtype_dev in (_DL_CPU, _DL_CUDA_HOST) else CUDA
    if dtype_dev not in (_DL_CPU, _DL_CUDA_HOST, _DL_CUDA, _DL_ROCM):
        raise TypeError("%s: DLPack device type %d is neither host, CUDA nor ROCm memory" %
                        (name, dtype_dev))
    return View((dl.data or 0) + dl.byte_offset, dt, shape, strides, mem,
                dl.device.device_id if mem == CUDA else -1, (cap, x))
