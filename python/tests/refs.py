"""float64 references written from docs/ops.md, independent of
the C library, and the number-format and interchange helpers the tests need."""
import numpy as np

FMAX = {"fp8_e4m3fn": 448.0, "fp8_e4m3fnuz": 240.0, "fp8_e5m2": 57344.0}


def fp8_table(fmt):
    """The value of each of the 256 codes (spec 1), NaN codes as NaN (e5m2:
    its infinity codes as infinities)."""
    if fmt == "fp8_e5m2":  # s eeeee mm, bias 15: the top byte of an f16
        out = np.empty(256)
        for c in range(256):
            s, e, m = c >> 7, (c >> 2) & 31, c & 3
            v = 2.0 ** -14 * m / 4 if e == 0 else (np.inf if m == 0 else np.nan) if e == 31 \
                else 2.0 ** (e - 15) * (1 + m / 4)
            out[c] = -v if s else v
        return out
    bias = 7 if fmt == "fp8_e4m3fn" else 8
    out = np.empty(256)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 15, c & 7
        v = 2.0 ** (1 - bias) * m / 8 if e == 0 else 2.0 ** (e - bias) * (1 + m / 8)
        out[c] = -v if s else v
    if fmt == "fp8_e4m3fn":
        out[0x7F] = out[0xFF] = np.nan
    else:
        out[0x80] = np.nan
    return out


def random_fp8(rng, shape, fmt):
    """Random codes of finite values, no NaN (or infinity) code."""
    t = fp8_table(fmt)
    ok = np.flatnonzero(np.isfinite(t)).astype(np.uint8)
    return rng.choice(ok, size=shape)


def decode_codes(codes, fmt):
    if fmt == "bf16":
        return bf16_to_f64(codes)
    if fmt == "i8":
        return codes.astype(np.float64)
    return fp8_table(fmt)[codes]


def f32_to_bf16(x):
    """Round to nearest even, as uint16 bits."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16
    return b.astype(np.uint16)


def bf16_to_f64(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32) \
        .astype(np.float64)


def half_to_f64(x):
    """float16 values, or uint16 bf16 bits, as float64."""
    x = np.asarray(x)
    return x.astype(np.float64) if x.dtype == np.float16 else bf16_to_f64(x)


def decode_ref(q, k, v, ks, vs, indptr, indices, lens, page_size, sm_scale, kv_fmt,
               window_left=-1, softcap=0.0, sinks=None):
    """o [B, R, Hq, Dv] and lse [B, R, Hq] in float64 (spec 2); q bf16 bits
    (uint16) or float16; k, v are the [N_slots, Hkv, D] / [N_slots, Hkv, Dv]
    codes, ks/vs [N_slots, Hkv] (None for bf16)."""
    qf = half_to_f64(q)
    kf, vf = decode_codes(k, kv_fmt), decode_codes(v, kv_fmt)
    if ks is not None:
        kf = kf * np.asarray(ks, np.float64)[..., None]
        vf = vf * np.asarray(vs, np.float64)[..., None]
    B, R, Hq, D = q.shape
    Hkv = k.shape[1]
    o = np.zeros((B, R, Hq, v.shape[2]))
    lse = np.full((B, R, Hq), -np.inf)
    for b in range(B):
        L = int(lens[b])
        slots = np.array([indices[indptr[b] + p // page_size] * page_size + p % page_size
                          for p in range(L)], dtype=np.int64)
        for r in range(R):
            t = L - R + r
            lo = 0 if window_left < 0 else max(0, t - window_left)
            vis = slots[lo:t + 1] if t >= 0 else slots[:0]
            for h in range(Hq):
                g = h // (Hq // Hkv)
                s = sm_scale * (kf[vis, g, :] @ qf[b, r, h])
                if softcap > 0:
                    s = softcap * np.tanh(s / softcap)
                terms = list(s) + ([float(sinks[h])] if sinks is not None else [])
                if not terms:
                    continue
                m = max(terms)
                w = np.exp(s - m)
                z = w.sum() + (np.exp(float(sinks[h]) - m) if sinks is not None else 0.0)
                if len(vis):
                    o[b, r, h] = (w / z) @ vf[vis, g, :]
                lse[b, r, h] = m + np.log(z)
    return o, lse


def mqa_ref(q, k, k_scale, weights, ks, ke, q_fmt, k_fmt):
    """logits [S, S_kv] float64 with -inf outside each window, and the
    magnitude A of the spec's tolerance."""
    qf, kf = fp8_table(q_fmt)[q], fp8_table(k_fmt)[k]
    dots = np.einsum("shd,jd->shj", qf, kf)
    absd = np.einsum("shd,jd->shj", np.abs(qf), np.abs(kf))
    ksc = np.asarray(k_scale, np.float64)
    w = np.asarray(weights, np.float64)
    logits = np.einsum("sh,shj->sj", w, np.maximum(0.0, dots * ksc))
    mag = np.einsum("sh,shj->sj", np.abs(w), absd * ksc)
    S, Skv = logits.shape
    cols = np.arange(Skv)
    for i in range(S):
        lo, hi = max(0, int(ks[i])), min(Skv, int(ke[i]))
        logits[i, (cols < lo) | (cols >= hi)] = -np.inf
    return logits, mag


class DLPackOnly:
    """An object offering nothing but DLPack (its producer behind it)."""

    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__()

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()
