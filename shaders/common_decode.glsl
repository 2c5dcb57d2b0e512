// Shared by the decode stage-1 kernels (decode.comp, decode_coopmat.comp):
// the push block, paging, visibility and the output epilogue. Mirrors
// backend_vulkan/vk_decode.c's decode_push.
#ifndef QATTN_COMMON_DECODE_GLSL
#define QATTN_COMMON_DECODE_GLSL

#define QA_FLAG_SINKS 1
#define QA_FLAG_LSE 2
#define QA_LOG2E 1.4426950408889634
#define QA_LN2 0.6931471805599453
#define QA_NEG_INF (-1.0 / 0.0)

layout(push_constant, std430) uniform Push {
    uint64_t q, k, v, ks, vs;          // tensors (ks/vs 0 for bf16 caches)
    uint64_t indptr, indices, lens;    // paging
    uint64_t sinks, o, lse;            // optional sinks/lse: 0 when absent
    uint64_t ws_o, ws_lse;             // split partials (num_splits > 1)
    int q_sb, q_sr, q_sh;              // strides in elements
    int k_ss, k_sh, v_ss, v_sh;
    int ks_ss, ks_sh, vs_ss, vs_sh;
    int o_sb, o_sr, o_sh;
    int lse_sb, lse_sr, lse_sh;
    int indptr_s, indices_s, lens_s, sinks_s;
    int hq, hkv, page_size, window_left;
    int num_splits, keys_per_split, flags, pad0;
    float sm_scale, softcap;
} pc;

// First kv_indices entry of request b.
int qa_first_page(int b) { return RefI32(qa_at(pc.indptr, int64_t(b) * pc.indptr_s, 4)).v[0]; }

// Slot of key p of a request whose pages start at kv_indices[first] (spec 2).
int qa_slot(int first, int p) {
    int page = RefI32(qa_at(pc.indices, int64_t(first + p / pc.page_size) * pc.indices_s, 4)).v[0];
    return page * pc.page_size + p % pc.page_size;
}

// Visible keys of row r of a request with L keys and R rows: [lo, hi].
void qa_visible(int L, int R_, int r, out int lo, out int hi) {
    int t = L - R_ + r;
    lo = pc.window_left >= 0 ? max(0, t - pc.window_left) : 0;
    hi = t;
}

// Overflow-safe tanh (GLSL's may form inf/inf for large arguments).
float qa_tanh(float x) {
    float e = exp(-2.0 * abs(x));
    float t = (1.0 - e) / (1.0 + e);
    return x < 0.0 ? -t : t;
}

// Score in the log2 domain from a raw dot product (scale factors applied).
float qa_score2(float dot) {
    float s = dot * pc.sm_scale;
    if (pc.softcap > 0.0) s = pc.softcap * qa_tanh(s / pc.softcap);
    return s * float(QA_LOG2E);
}

// exp2(a - b) that is 0 when a is -inf (b may be -inf too).
float qa_exp2_diff(float a, float b) { return a == QA_NEG_INF ? 0.0 : exp2(a - b); }

// Four fp8 codes of a word (byte 0 first) -> their values times 2^-8 (fn)
// or 2^-7 (fnuz): each code's sign/exponent/mantissa bits are placed into
// an f16 (bias 15), so the conversion is exact; callers fold the power of
// two into the scale. NaN codes do not decode to NaN.
vec4 qa_fp8x4_f16trick(uint w) {
    vec2 a = unpackHalf2x16(((w << 7) & 0x3F803F80u) | ((w << 8) & 0x80008000u)); // bytes 0, 2
    vec2 b = unpackHalf2x16(((w >> 1) & 0x3F803F80u) | (w & 0x80008000u));        // bytes 1, 3
    return vec4(a.x, b.x, a.y, b.y);
}

// Writes one output element of row (b, r, h): with one split the final
// bf16 output (sink folded in), else the split's partial. m2 is the row max
// in log2 units (-inf: nothing visible), l the sum of exp2(s - m2), acc the
// unnormalised output element. write_lse: this thread also writes the LSE.
void qa_epilogue(int b, int r, int h, int R_, int split, int d, int Dv, float m2, float l, float acc,
                 bool write_lse) {
    if (pc.num_splits == 1) {
        float mm = m2;
        float ll = l;
        float a = 1.0;
        if ((pc.flags & QA_FLAG_SINKS) != 0) {
            float s2 = RefF32(qa_at(pc.sinks, int64_t(h) * pc.sinks_s, 4)).v[0] * float(QA_LOG2E);
            mm = max(m2, s2);
            a = qa_exp2_diff(m2, mm);
            ll = l * a + exp2(s2 - mm);
        }
        float o = ll > 0.0 ? acc * a / ll : 0.0;
        int64_t oi = int64_t(b) * pc.o_sb + int64_t(r) * pc.o_sr + int64_t(h) * pc.o_sh + d;
        RefU16(qa_at(pc.o, oi, 2)).v[0] = uint16_t(qa_f32_to_bf16(o));
        if (write_lse && (pc.flags & QA_FLAG_LSE) != 0) {
            float lse = ll > 0.0 ? mm * float(QA_LN2) + log(ll) : QA_NEG_INF;
            int64_t li = int64_t(b) * pc.lse_sb + int64_t(r) * pc.lse_sr + int64_t(h) * pc.lse_sh;
            RefF32(qa_at(pc.lse, li, 4)).v[0] = lse;
        }
    } else {
        int64_t row = ((int64_t(b) * R_ + r) * pc.hq + h) * pc.num_splits + split;
        RefF32(qa_at(pc.ws_o, row * Dv + d, 4)).v[0] = l > 0.0 ? acc / l : 0.0;
        if (write_lse)
            RefF32(qa_at(pc.ws_lse, row, 4)).v[0] = l > 0.0 ? m2 * float(QA_LN2) + log(l) : QA_NEG_INF;
    }
}

#endif
