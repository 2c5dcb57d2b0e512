/*
 * Matrix-unit fragments. Each primitive states its lane layout, taken from
 * AMD's matrix instruction calculator (docs/hip.md lists what was checked):
 *
 * MFMA 16x16x32 fp8 x fp8 -> f32, wave64 (gfx942, V_MFMA_F32_16X16X32_FP8_FP8,
 *   operands E4M3 FNUZ):
 *   lane l, g = l / 16 (0..3), c = l % 16
 *   A: lane holds row i = c, 8 bytes = k 8*g .. 8*g + 7 (byte b is k = 8g + b)
 *   B: lane holds column j = c, same k bytes
 *   C/D: lane holds column j = c, VGPR v is row i = 4*g + v
 *   The gfx942 host simulation emulates it lane by lane from this layout.
 */
#ifndef QH_MATRIX_H
#define QH_MATRIX_H

#include "qh_device.h"
#include "qh_fp8.h"

/* ---- MFMA fp8 16x16x32 (gfx942, wave64) ---- */
#if defined(QH_GFX942)
/* a, b: 8 fnuz codes each (byte b is k = 8*g + b); c: 4 rows 4g..4g+3. */
QH_DEV void qh_mfma_fp8(uint64_t a, uint64_t b, float c[4]) {
#if defined(QH_AMD)
    typedef float v4f __attribute__((ext_vector_type(4)));
    v4f vc = {c[0], c[1], c[2], c[3]};
    vc = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8((long)a, (long)b, vc, 0, 0, 0);
    c[0] = vc[0];
    c[1] = vc[1];
    c[2] = vc[2];
    c[3] = vc[3];
#else
    /* Emulation: lane (g, c) computes D[4g + v][c], v = 0..3. Column c of B
     * is in lanes c + 16g' (k = 8g' ..), row i of A in lanes i + 16g'. */
    uint64_t aw[64], bw[64];
    qhsim_wave_gather_u64(a, aw);
    qhsim_wave_gather_u64(b, bw);
    const uint32_t lane = qh_lane(), g = lane >> 4, col = lane & 15u;
    for (int v = 0; v < 4; ++v) {
        const uint32_t row = 4u * g + (uint32_t)v;
        float acc = c[v];
        for (uint32_t gg = 0; gg < 4; ++gg) {
            const uint64_t av = aw[row + 16u * gg], bv = bw[col + 16u * gg];
            for (int i = 0; i < 8; ++i)
                acc += qh_fp8_decode_bits<QH_FNUZ>((uint32_t)(av >> (8 * i)) & 0xFFu) *
                       qh_fp8_decode_bits<QH_FNUZ>((uint32_t)(bv >> (8 * i)) & 0xFFu);
        }
        c[v] = acc;
    }
#endif
}
#endif

/* ---- f16 16x16x16 -> f32 (the tiled decode) ----
 * gfx942, V_MFMA_F32_16X16X16_F16 (wave64): lane l, g = l / 16, c = l % 16
 *   A: row c, 4 f16 = k 4g .. 4g + 3 (a[0] low half is k = 4g)
 *   B: column c, the same k; C/D: column c, VGPR v is row 4g + v
 * gfx12, V_WMMA_F32_16X16X16_F16 (wave32): lane l, g = l / 16, c = l % 16
 *   A: row c, 8 f16 slots e: k = 8 (e / 4) + 4g + e % 4 (slot e in word e/2,
 *      low half for even e)
 *   B: column c, the same k; C/D: column c, VGPR v is row 8g + v
 *   A and B share the slot-to-k map, so a kernel may assign any bijection
 *   between (g, e) slots and its reduction index, as long as it feeds both
 *   operands through the same one (the decode kernel does).
 * The host simulations emulate both from these layouts. */
#if defined(QH_GFX942)
QH_DEV void qh_mfma_f16(const uint32_t a[2], const uint32_t b[2], float c[4]) {
#if defined(QH_AMD)
    typedef _Float16 v4h __attribute__((ext_vector_type(4)));
    typedef float v4f __attribute__((ext_vector_type(4)));
    typedef uint32_t v2u __attribute__((ext_vector_type(2)));
    const v2u ua = {a[0], a[1]}, ub = {b[0], b[1]};
    v4f vc = {c[0], c[1], c[2], c[3]};
    vc = __builtin_amdgcn_mfma_f32_16x16x16f16(__builtin_bit_cast(v4h, ua), __builtin_bit_cast(v4h, ub), vc, 0,
                                               0, 0);
    for (int v = 0; v < 4; ++v) c[v] = vc[v];
#else
    uint64_t aw[64], bw[64];
    qhsim_wave_gather_u64((uint64_t)a[0] | ((uint64_t)a[1] << 32), aw);
    qhsim_wave_gather_u64((uint64_t)b[0] | ((uint64_t)b[1] << 32), bw);
    const uint32_t lane = qh_lane(), g = lane >> 4, col = lane & 15u;
    for (int v = 0; v < 4; ++v) {
        const uint32_t row = 4u * g + (uint32_t)v;
        float acc = c[v];
        for (uint32_t gg = 0; gg < 4; ++gg) {
            const uint64_t av = aw[row + 16u * gg], bv = bw[col + 16u * gg];
            for (int i = 0; i < 4; ++i)
                acc += qh_f16_to_f32((uint16_t)(av >> (16 * i))) * qh_f16_to_f32((uint16_t)(bv >> (16 * i)));
        }
        c[v] = acc;
    }
#endif
}
#endif

#if defined(QH_GFX12)
QH_DEV void qh_wmma_f16(const uint32_t a[4], const uint32_t b[4], float c[8]) {
#if defined(QH_AMD)
    typedef _Float16 v8h __attribute__((ext_vector_type(8)));
    typedef float v8f __attribute__((ext_vector_type(8)));
    typedef uint32_t v4u __attribute__((ext_vector_type(4)));
    const v4u ua = {a[0], a[1], a[2], a[3]}, ub = {b[0], b[1], b[2], b[3]};
    v8f vc;
    for (int v = 0; v < 8; ++v) vc[v] = c[v];
    vc = __builtin_amdgcn_wmma_f32_16x16x16_f16_w32_gfx12(__builtin_bit_cast(v8h, ua), __builtin_bit_cast(v8h, ub),
                                                          vc);
    for (int v = 0; v < 8; ++v) c[v] = vc[v];
#else
    uint64_t a0[32], a1[32], b0[32], b1[32];
    qhsim_wave_gather_u64((uint64_t)a[0] | ((uint64_t)a[1] << 32), a0);
    qhsim_wave_gather_u64((uint64_t)a[2] | ((uint64_t)a[3] << 32), a1);
    qhsim_wave_gather_u64((uint64_t)b[0] | ((uint64_t)b[1] << 32), b0);
    qhsim_wave_gather_u64((uint64_t)b[2] | ((uint64_t)b[3] << 32), b1);
    const uint32_t lane = qh_lane(), g = lane >> 4, col = lane & 15u;
    for (int v = 0; v < 8; ++v) {
        const uint32_t row = 8u * g + (uint32_t)v;
        float acc = c[v];
        /* k = 8 (e / 4) + 4 gg + e % 4 lives in lane (row|col) + 16 gg, slot e */
        for (uint32_t gg = 0; gg < 2; ++gg)
            for (int e = 0; e < 8; ++e) {
                const uint64_t av = e < 4 ? a0[row + 16u * gg] : a1[row + 16u * gg];
                const uint64_t bv = e < 4 ? b0[col + 16u * gg] : b1[col + 16u * gg];
                const int sh = 16 * (e % 4);
                acc += qh_f16_to_f32((uint16_t)(av >> sh)) * qh_f16_to_f32((uint16_t)(bv >> sh));
            }
        c[v] = acc;
    }
#endif
}
#endif

/* ---- mma.sync m16n8k16 f16 -> f32 (the NVIDIA twin; the wave32 host
 * simulation emulates it for the twin's paths) ----
 * Lane l, g = l / 4, t = l % 4 (PTX ISA, "Matrix Fragments for
 * mma.m16n8k16"), each register two f16, the lower k (or column) in the low
 * half:
 *   A (16 x 16, row-major): a[0] row g, k 2t..2t+1; a[1] row g + 8, same k;
 *     a[2] row g, k 2t+8..2t+9; a[3] row g + 8, k 2t+8..2t+9
 *   B (16 x 8): b0 k 2t..2t+1, b1 k 2t+8..2t+9, both column g
 *   C/D (16 x 8): c[0], c[1] row g, columns 2t, 2t+1; c[2], c[3] row g + 8 */
#if defined(QH_NVIDIA) || (defined(QH_HOSTSIM) && QH_WAVE == 32)
QH_DEV void qh_mma16816(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
#if defined(QH_NVIDIA)
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
    /* A[row][k] is in lane 4 (row % 8) + (k % 8) / 2, register row / 8 +
     * 2 (k / 8), half k % 2; B[k][n] in lane 4n + (k % 8) / 2, register
     * k / 8, half k % 2; lane 4g + t computes D[g + 8 (i / 2)][2t + i % 2]. */
    uint64_t a01[32], a23[32], bw[32];
    qhsim_wave_gather_u64((uint64_t)a[0] | ((uint64_t)a[1] << 32), a01);
    qhsim_wave_gather_u64((uint64_t)a[2] | ((uint64_t)a[3] << 32), a23);
    qhsim_wave_gather_u64((uint64_t)b0 | ((uint64_t)b1 << 32), bw);
    const uint32_t lane = qh_lane(), g = lane >> 2, t = lane & 3u;
    for (uint32_t i = 0; i < 4; ++i) {
        const uint32_t row = g + 8u * (i >> 1), col = 2u * t + (i & 1u);
        float acc = c[i];
        for (uint32_t k = 0; k < 16; ++k) {
            const uint32_t al = 4u * (row % 8u) + (k % 8u) / 2u, ar = row / 8u + 2u * (k / 8u);
            const uint32_t areg = (uint32_t)((ar < 2 ? a01[al] : a23[al]) >> (32u * (ar & 1u)));
            const uint32_t breg = (uint32_t)(bw[4u * col + (k % 8u) / 2u] >> (32u * (k / 8u)));
            acc += qh_f16_to_f32((uint16_t)(areg >> (16u * (k % 2u)))) *
                   qh_f16_to_f32((uint16_t)(breg >> (16u * (k % 2u))));
        }
        c[i] = acc;
    }
#endif
}
#endif

#endif /* QH_MATRIX_H */
