"""The C API through ctypes: library loading, struct layouts, prototypes.

The layouts mirror core/include/qattn/qattn.h of the same MAJOR.MINOR; the
loader refuses a library of another one, since the plan and argument
structs may differ between minor versions while the major is 0. CI compares
every struct here with what the C compiler says of the header
(python/tests/test_layout.py): change both together.
"""
import ctypes
import glob
import math
import operator
import os

# The C version this binding's struct layouts were written against.
ABI_MAJOR, ABI_MINOR = 0, 1

# ---- enums --------------------------------------------------------------
DTYPE_INVALID, BF16, F16, F32, I32, I8, FP8_E4M3FN, FP8_E4M3FNUZ, FP8_E5M2 = range(9)
DTYPE_NAMES = {BF16: "bf16", F16: "f16", F32: "f32", I32: "i32", I8: "i8",
               FP8_E4M3FN: "fp8_e4m3fn", FP8_E4M3FNUZ: "fp8_e4m3fnuz", FP8_E5M2: "fp8_e5m2"}
DTYPE_BY_NAME = {v: k for k, v in DTYPE_NAMES.items()}
DTYPE_SIZE = {BF16: 2, F16: 2, F32: 4, I32: 4, I8: 1, FP8_E4M3FN: 1, FP8_E4M3FNUZ: 1,
              FP8_E5M2: 1}

DECODE_VARIANTS = {"auto": 0, "simt": 1, "matrix": 2, "regs": 3}
MQA_VARIANTS = {"auto": 0, "direct": 1, "staged": 2, "coopmat": 3}

MAX_RANK = 4
REASON_BYTES = 256
MAX_MATRIX_SHAPES = 16


# ---- scalars into C fields ------------------------------------------------
# ctypes stores a Python int into an int32 / uint64 field or argument modulo
# 2^32 / 2^64 and a float beyond FLT_MAX into a float as inf, silently (a
# page_size of 2^32 + 2 would run as 2). Every scalar the package hands to C
# goes through these first, with the C field's range and the argument's name.
INT32 = ("int32", -(1 << 31), (1 << 31) - 1)
UINT32 = ("uint32", 0, (1 << 32) - 1)
INT64 = ("int64", -(1 << 63), (1 << 63) - 1)
UINT64 = ("uint64", 0, (1 << 64) - 1)


def c_int(value, name, kind=INT32):
    """value as an int within the C type `kind`, else TypeError / ValueError
    naming `name`. Integral floats (16.0) pass; 16.5 does not."""
    try:
        v = operator.index(value)
    except TypeError:
        if isinstance(value, float) and value.is_integer():
            v = int(value)
        else:
            raise TypeError("%s: %r is not an integer" % (name, value)) from None
    ctype, lo, hi = kind
    if not lo <= v <= hi:
        raise ValueError("%s: %d is outside the range of its C field (%s: %d..%d)" %
                         (name, v, ctype, lo, hi))
    return v


def c_float(value, name):
    """value as a float a C float holds: a finite value beyond FLT_MAX (which
    ctypes would store as inf) raises ValueError naming `name`. inf and nan
    pass as themselves (the library's rules judge them)."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise TypeError("%s: %r is not a number" % (name, value)) from None
    if math.isfinite(v) and math.isinf(ctypes.c_float(v).value):
        raise ValueError("%s: %r is outside the range of its C field (float: |x| <= %.9g)" %
                         (name, value, FLT_MAX))
    return v


FLT_MAX = 3.4028234663852886e38


class Tensor(ctypes.Structure):
    _fields_ = [("buffer", ctypes.c_void_p), ("offset", ctypes.c_uint64),
                ("dtype", ctypes.c_int), ("rank", ctypes.c_int32),
                ("shape", ctypes.c_int64 * MAX_RANK), ("strides", ctypes.c_int64 * MAX_RANK)]


class ContextOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("device", ctypes.c_char_p),
                ("debug_validation", ctypes.c_int), ("stream", ctypes.c_void_p)]


class MatrixShape(ctypes.Structure):
    _fields_ = [("m", ctypes.c_uint16), ("n", ctypes.c_uint16), ("k", ctypes.c_uint16),
                ("a_type", ctypes.c_int), ("c_type", ctypes.c_int)]


class DeviceCaps(ctypes.Structure):
    _fields_ = [("arch", ctypes.c_char * 96), ("device_name", ctypes.c_char * 128),
                ("compute_units", ctypes.c_int32), ("subgroup_size_min", ctypes.c_uint32),
                ("subgroup_size_max", ctypes.c_uint32), ("max_shared_bytes", ctypes.c_uint32),
                ("max_workgroup_size", ctypes.c_uint32), ("features", ctypes.c_uint32),
                ("n_matrix_shapes", ctypes.c_int32),
                ("matrix_shapes", MatrixShape * MAX_MATRIX_SHAPES)]


class DecodeArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in ("q", "k_cache", "v_cache", "k_scale", "v_scale",
                                      "kv_indptr", "kv_indices", "kv_lens", "sinks", "o",
                                      "lse")] + [
        ("page_size", ctypes.c_int32), ("max_kv_len", ctypes.c_int32),
        ("sm_scale", ctypes.c_float), ("window_left", ctypes.c_int32),
        ("logit_softcap", ctypes.c_float)]


class DecodeOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("variant", ctypes.c_int),
                ("num_splits", ctypes.c_int32)]


_u32x3 = ctypes.c_uint32 * 3


class DecodePlan(ctypes.Structure):
    _fields_ = [("variant", ctypes.c_int)] + [
        (n, ctypes.c_int32) for n in ("batch", "rows", "q_heads", "kv_heads", "head_dim",
                                      "head_dim_v")] + [
        ("kv_dtype", ctypes.c_int), ("max_kv_len", ctypes.c_int32)] + [
        (n, ctypes.c_int32) for n in ("subgroup_size", "workgroup_size", "keys_per_tile",
                                      "page_tiled", "load_bytes", "q_heads_per_workgroup",
                                      "row_slots", "head_blocks")] + [
        ("matrix_shape", MatrixShape), ("shared_bytes", ctypes.c_uint32), ("grid", _u32x3),
        ("num_splits", ctypes.c_int32), ("keys_per_split", ctypes.c_int32),
        ("merge_grid", _u32x3), ("merge_workgroup_size", ctypes.c_int32),
        ("merge_dims", ctypes.c_int32),
        ("partial_o_offset", ctypes.c_uint64), ("partial_ml_offset", ctypes.c_uint64),
        ("workspace_bytes", ctypes.c_uint64), ("reason", ctypes.c_char * REASON_BYTES),
        ("args_layout", ctypes.c_uint64), ("integrity", ctypes.c_uint64)]


class KvStoreArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in ("k_new", "v_new", "slot_mapping", "k_cache", "v_cache",
                                      "k_scale", "v_scale")]


class MqaLogitsArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in ("q", "k", "k_scale", "weights", "ks", "ke",
                                      "logits")] + [("clean_logits", ctypes.c_int32)]


class MqaLogitsOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("variant", ctypes.c_int),
                ("rows_per_subgroup", ctypes.c_int32), ("kv_slices", ctypes.c_int32)]


class MqaLogitsPlan(ctypes.Structure):
    _fields_ = [("variant", ctypes.c_int)] + [
        (n, ctypes.c_int32) for n in ("rows", "kv_len", "heads", "head_dim")] + [
        ("q_dtype", ctypes.c_int), ("k_dtype", ctypes.c_int)] + [
        (n, ctypes.c_int32) for n in ("rows_per_subgroup", "subgroups_per_workgroup",
                                      "rows_per_workgroup", "kv_tile", "kv_slices",
                                      "kv_per_slice", "grid_x", "grid_y")] + [
        ("shared_bytes", ctypes.c_uint32), ("workspace_bytes", ctypes.c_uint64),
        ("subgroup_size", ctypes.c_int32), ("index64", ctypes.c_int32)] + [
        (n, ctypes.c_int32) for n in ("m_tiles", "subgroups_per_row", "n_tiles", "row_blocks",
                                      "kv_tiles", "load_bytes")] + [
        ("matrix_shape", MatrixShape), ("reason", ctypes.c_char * REASON_BYTES),
        ("args_layout", ctypes.c_uint64), ("integrity", ctypes.c_uint64)]


class PagedMqaLogitsArgs(ctypes.Structure):
    _fields_ = [(n, Tensor) for n in ("q", "k_cache", "k_scale", "weights", "kv_indptr",
                                      "kv_indices", "kv_lens", "logits")] + [
        ("page_size", ctypes.c_int32), ("max_kv_len", ctypes.c_int32),
        ("clean_logits", ctypes.c_int32)]


class PagedMqaLogitsOptions(ctypes.Structure):
    _fields_ = [("size", ctypes.c_size_t), ("variant", ctypes.c_int),
                ("keys_per_split", ctypes.c_int32)]


class PagedMqaLogitsPlan(ctypes.Structure):
    _fields_ = [("variant", ctypes.c_int)] + [
        (n, ctypes.c_int32) for n in ("batch", "rows", "heads", "head_dim")] + [
        ("q_dtype", ctypes.c_int), ("k_dtype", ctypes.c_int)] + [
        (n, ctypes.c_int32) for n in ("page_size", "max_kv_len", "workgroup_size", "kv_tile",
                                      "load_bytes", "q_staged", "q_stage_bytes", "num_splits",
                                      "keys_per_split")] + [
        ("grid", _u32x3), ("shared_bytes", ctypes.c_uint32),
        ("workspace_bytes", ctypes.c_uint64)] + [
        (n, ctypes.c_int32) for n in ("subgroup_size", "subgroups", "key_tiles", "head_slots",
                                      "pass_rows", "passes", "fragment_layout", "q_row_halves")] + [
        ("matrix_shape", MatrixShape), ("reason", ctypes.c_char * REASON_BYTES),
        ("args_layout", ctypes.c_uint64), ("integrity", ctypes.c_uint64)]


def paged_mqa_variants():
    """{name: value} of qattn_paged_mqa_variant, read from the library's own
    names (qattn_paged_mqa_variant_name), so a variant the library adds is
    accepted by name without a copy here."""
    lib = core()
    out = {}
    for v in range(64):
        name = lib.qattn_paged_mqa_variant_name(v).decode()
        if name == "invalid":
            break
        out[name] = v
    return out


# ---- loading ------------------------------------------------------------
def _search_dirs():
    """Where the libraries are looked for, in order: QATTN_LIBRARY_DIR (a
    path list), the prefix this package was installed into by the C build
    (_install.py, written by cmake --install), then the dynamic loader's
    own search (ldconfig, LD_LIBRARY_PATH)."""
    dirs = [d for d in os.environ.get("QATTN_LIBRARY_DIR", "").split(os.pathsep) if d]
    try:
        from . import _install  # generated at install time; absent in the source tree
        dirs.append(os.path.normpath(os.path.join(os.path.dirname(__file__), _install.LIBDIR)))
    except ImportError:
        pass
    return dirs


def _find(stem):
    """The path of lib<stem>.so in the search dirs, else the soname for the
    dynamic loader. Versioned names of the binding's MAJOR.MINOR only."""
    want = "lib%s.so.%d.%d" % (stem, ABI_MAJOR, ABI_MINOR)
    for d in _search_dirs():
        for name in (want, "lib%s.so" % stem):
            p = os.path.join(d, name)
            if os.path.exists(p):
                return p
        hits = sorted(glob.glob(os.path.join(d, want + "*")))
        if hits:
            return hits[0]
    return want


class LibraryNotFound(OSError):
    pass


def _proto(lib, name, restype, *argtypes):
    f = getattr(lib, name)
    f.restype = restype
    f.argtypes = list(argtypes)
    return f


_core = None
_backends = {}
_backend_errors = {}


def core():
    """The loaded libqattn_core with every prototype set (loaded once)."""
    global _core
    if _core is not None:
        return _core
    path = _find("qattn_core")
    try:
        lib = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError as e:
        raise LibraryNotFound(
            "qattn: cannot load libqattn_core (%s): build and install the C library "
            "(README, 'Python'), or set QATTN_LIBRARY_DIR to the directory holding it" % e)
    P, c_int, vp = ctypes.POINTER, ctypes.c_int, ctypes.c_void_p
    _proto(lib, "qattn_version_number", ctypes.c_uint)
    _proto(lib, "qattn_version_string", ctypes.c_char_p)
    v = lib.qattn_version_number()
    if (v // 10000, v // 100 % 100) != (ABI_MAJOR, ABI_MINOR):
        raise LibraryNotFound("qattn: %s is version %s; this package binds %d.%d" %
                              (path, lib.qattn_version_string().decode(), ABI_MAJOR, ABI_MINOR))
    _proto(lib, "qattn_status_name", ctypes.c_char_p, c_int)
    _proto(lib, "qattn_status_text", ctypes.c_char_p, c_int)
    _proto(lib, "qattn_dtype_name", ctypes.c_char_p, c_int)
    _proto(lib, "qattn_backend_cpu", vp)
    _proto(lib, "qattn_context_create", c_int, vp, P(ContextOptions), P(vp), ctypes.c_char_p,
           ctypes.c_size_t)
    _proto(lib, "qattn_context_free", None, vp)
    _proto(lib, "qattn_last_error", ctypes.c_char_p, vp)
    _proto(lib, "qattn_backend_name", ctypes.c_char_p, vp)
    _proto(lib, "qattn_buffer_alloc", c_int, vp, ctypes.c_uint64, P(vp))
    _proto(lib, "qattn_buffer_wrap", c_int, vp, vp, ctypes.c_uint64, P(vp))
    _proto(lib, "qattn_buffer_free", None, vp, vp)
    _proto(lib, "qattn_buffer_upload", c_int, vp, vp, ctypes.c_uint64, vp, ctypes.c_uint64)
    _proto(lib, "qattn_buffer_download", c_int, vp, vp, ctypes.c_uint64, vp, ctypes.c_uint64)
    _proto(lib, "qattn_synchronize", c_int, vp)
    _proto(lib, "qattn_last_op_time_ms", c_int, vp, P(ctypes.c_double))
    _proto(lib, "qattn_get_caps", c_int, vp, P(DeviceCaps))
    _proto(lib, "qattn_decode_variant_name", ctypes.c_char_p, c_int)
    _proto(lib, "qattn_mqa_variant_name", ctypes.c_char_p, c_int)
    _proto(lib, "qattn_decode_plan_create", c_int, vp, P(DecodeArgs), P(DecodeOptions),
           P(DecodePlan))
    _proto(lib, "qattn_decode_run", c_int, vp, P(DecodePlan), P(DecodeArgs), vp, ctypes.c_uint64)
    _proto(lib, "qattn_kv_store", c_int, vp, P(KvStoreArgs))
    _proto(lib, "qattn_mqa_logits_plan_create", c_int, vp, P(MqaLogitsArgs),
           P(MqaLogitsOptions), P(MqaLogitsPlan))
    _proto(lib, "qattn_mqa_logits_run", c_int, vp, P(MqaLogitsPlan), P(MqaLogitsArgs), vp,
           ctypes.c_uint64)
    _proto(lib, "qattn_paged_mqa_variant_name", ctypes.c_char_p, c_int)
    _proto(lib, "qattn_paged_mqa_logits_plan_create", c_int, vp, P(PagedMqaLogitsArgs),
           P(PagedMqaLogitsOptions), P(PagedMqaLogitsPlan))
    _proto(lib, "qattn_paged_mqa_logits_run", c_int, vp, P(PagedMqaLogitsPlan),
           P(PagedMqaLogitsArgs), vp, ctypes.c_uint64)
    _proto(lib, "qattn_fp8_to_f32", ctypes.c_float, ctypes.c_uint8, c_int)
    _proto(lib, "qattn_f32_to_fp8", ctypes.c_uint8, ctypes.c_float, c_int)
    _proto(lib, "qattn_f32_to_bf16", ctypes.c_uint16, ctypes.c_float)
    _proto(lib, "qattn_bf16_to_f32", ctypes.c_float, ctypes.c_uint16)
    _core = lib
    return lib


def backend(name):
    """The backend table pointer of `name` ("cpu", "vulkan", "hip"), or None
    when its library cannot be loaded (the reason in backend_error(name))."""
    if name in _backends:
        return _backends[name]
    lib = core()
    table = None
    if name == "cpu":
        table = lib.qattn_backend_cpu()
    elif name in ("vulkan", "hip"):
        try:
            blib = ctypes.CDLL(_find("qattn_" + name), mode=ctypes.RTLD_GLOBAL)
            getter = _proto(blib, "qattn_backend_" + name, ctypes.c_void_p)
            if name == "hip":
                _proto(blib, "qattn_hip_set_stream", ctypes.c_int, ctypes.c_void_p,
                       ctypes.c_void_p)
                lib.qattn_hip_set_stream = blib.qattn_hip_set_stream
            table = getter()
        except (OSError, AttributeError) as e:
            _backend_errors[name] = str(e)
    else:
        raise ValueError("backend: %r is not one of 'auto', 'cpu', 'vulkan', 'hip'" % (name,))
    _backends[name] = table
    return table


def backend_error(name):
    return _backend_errors.get(name, "")
