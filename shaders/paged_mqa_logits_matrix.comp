#version 450
// Paged FP8 MQA logits (spec 5) on cooperative matrices: the matrix variant
// of docs/design.md ("Paged MQA logits"), one design with
// backend_hip/kernels/paged_mqa_logits.hip's matrix kernels (the same
// stages in the same order, the same bounds). The plan
// (core/src/plan_paged_mqa_logits.c) fixes every number below; the push
// block and the index rules are paged_mqa_common.glsl's.
//
// Orientation: S^T = K Q^T. A step's keys are the M side of 16x16x16 f16
// products (fp8 codes decode to f16 exactly), q's columns the N side: a
// column is a (row, head slot) pair, HP head slots per row (H rounded up to
// 16; a padding slot has zero q and zero weight). Each 16-column block of a
// row is one accumulator tile per 16 keys, whose epilogue is
//   part[key] += sum over its columns of w[column] * max(0, acc[key, column])
// and after a row's last block logits[key] = part[key] * |scale[key]| *
// unshift (a negative scale is folded into the key's signs, since
// max(0, s x) = |s| max(0, sign(s) x)).
//
// Workgroup (split x, request y, grid-stride over requests): NSG subgroups
// of 32 lanes step through the split's positions KT = 16 KM NSG at a time;
// subgroup s holds keys [16 KM s, 16 KM (s + 1)) of the step as KM
// fragments per 16-dim block. Per step:
//   1. the fragments of the keys loaded in the previous step (the page id
//      of each key looked up through the page table, spec 2) are decoded
//      from the lanes' registers; a key that does not exist is zero;
//   2. the next step's keys are loaded (16-byte loads), in flight while
//   3. every pass (PASSES > 1: q re-staged around two barriers) multiplies
//      the fragments by each staged column block and runs the epilogue on
//      the accumulator; one store per (row, key).
// q is staged once per request when PASSES = 1 (the planner makes the
// passes as large as the shared memory allows, at most 128 columns).
//
// Lanes and bytes. Lane l, g = l / 4, t = l % 4 of a subgroup loads keys g
// and g + 8 of each of its 16-key tiles: chunk u (u < D / 64) of its 16
// bytes is bytes [64u + 16t, 64u + 16t + 16) of the key row, so the four
// lanes of a key read 64 consecutive bytes per load. Word w of chunk u is
// dim block j = 4u + w; its codes c0..c3 decode to the f16 pairs (c0, c2)
// and (c1, c3), which are the block's k = 2t, 2t + 1 and 2t + 8, 2t + 9:
//   physical dim 64 (j / 4) + 16t + 4 (j % 4) + c is k = 2t + (c >> 1) +
//   8 (c & 1) of block j
// (the q staging puts q's dims at the same k, so every q.k is the same sum
// in another order).
//
// LAYOUT (the plan's fragment_layout): 1 where the device reports the
// element layout QATTN_FEAT_FRAGMENT_LAYOUT names (backend_vulkan/
// vk_fragment_probe.c): for lane l, element i of 8,
//   A, accumulator: row g + 8 (i / 4), column 2t + i % 2 + 8 ((i / 2) % 2)
// so a lane's A elements 4a .. 4a + 3 are key g + 8a at k = 2t, 2t+1, 2t+8,
// 2t+9: the decoded pairs above, built in registers with no shared memory;
// and its accumulator elements are keys g, g + 8 at columns 2t, 2t + 1,
// 2t + 8, 2t + 9: the epilogue is 8 max + 8 FMA per tile in registers with
// the four weights of a lane's columns from one vec4 of shared memory, the
// head sum over the four lanes of a key is two shuffles per row.
// LAYOUT 0 (any other device): each subgroup stores its 16 keys' f16 rows
// to its own shared region and loads the A fragments from there, and
// stores each accumulator tile to shared memory, where lane l sums
// columns 8 (l / 16) .. + 8 of key l % 16 (a subgroup barrier each way, 16
// column loads per lane per tile): about twice the epilogue's instructions
// of LAYOUT 1, and TN 8 (the 16x8x16 shape) when the device lacks 16x16x16.
//
// NaN codes (spec 1): the exact bit decode maps them to finite values, so
// they are caught separately: a key with one makes its scale NaN (every
// row's logit is NaN), a q column with one makes its staged weight NaN
// (that row's logits are NaN), as the reference gives.
//
// Defines: HEAD_DIM (64, 128, 256), LAYOUT (0, 1).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_cooperative_matrix : require
#include "common.glsl"
#include "paged_mqa_common.glsl"

layout(local_size_x_id = 0) in;
const int D = HEAD_DIM;                            // compiled in: the fragments' arrays are constants
layout(constant_id = 1) const int NROWS = 1;       // N rows per request
layout(constant_id = 2) const int H = 64;          // heads
layout(constant_id = 3) const int HP = 64;         // head slots per row (H rounded up to 16)
layout(constant_id = 4) const int PR = 1;          // rows staged per pass
layout(constant_id = 5) const int PASSES = 1;
layout(constant_id = 6) const int P = 64;          // page size
layout(constant_id = 7) const int B = 1;           // requests
layout(constant_id = 8) const bool Q_FNUZ = false;
layout(constant_id = 9) const bool K_FNUZ = false;
layout(constant_id = 10) const int KM = 2;         // 16-key fragments per subgroup per step
layout(constant_id = 11) const int NSG = 4;        // subgroups
layout(constant_id = 12) const int TN = 16;        // the product's N (16, or 8 with LAYOUT 0)
layout(constant_id = 13) const int QR = D + 8;     // f16 per staged q column (plan.q_row_halves)

const int NTH = NSG * 32;
const int KT = 16 * KM * NSG;   // keys per step
const int NB = D / 16;          // 16-dim blocks
const int NU = D / 64;          // 16-byte chunks a lane loads per key
const int HT = HP / 16;         // 16-column blocks per row
const int NH = 16 / TN;         // products per 16-column block

#define FragA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FragB coopmat<float16_t, gl_ScopeSubgroup, 16, TN, gl_MatrixUseB>
#define FragC coopmat<float, gl_ScopeSubgroup, 16, TN, gl_MatrixUseAccumulator>

// q columns of a pass, column c at halves [c QR, c QR + D), as f16 pairs.
shared f16vec2 qs[PR * HP * QR / 2];
// The pass's weights: LAYOUT 1 per (row, block, t) the vec4 of columns
// 2t, 2t + 1, 2t + 8, 2t + 9; LAYOUT 0 in column order. NaN where that
// column's q has a NaN code; 0 for padding slots.
shared vec4 wsm[PR * HP / 4];
#if LAYOUT == 0
shared f16vec2 kst[NSG * 16 * QR / 2]; // per subgroup: its 16 keys' f16 rows (A's source)
shared float acs[NSG * 16 * 16];       // per subgroup: one accumulator tile, row-major
#endif

// Four codes -> the f16 pairs (c0, c2) and (c1, c3), exactly (value x 2^-8
// fn, 2^-7 fnuz; unshift undoes both factors of a product).
void decode_word(uint x, out uint lo, out uint hi) {
    lo = ((x << 7) & 0x3F803F80u) | ((x << 8) & 0x80008000u);
    hi = ((x >> 1) & 0x3F803F80u) | (x & 0x80008000u);
}

// Bit 7 of each byte set where that code is NaN (fn: S.1111.111; fnuz: 0x80).
uint nan_bytes(uint w, bool fnuz) {
    const uint m = w & 0x7F7F7F7Fu;
    return fnuz ? (w & 0x80808080u & ~(m + 0x7F7F7F7Fu)) : ((m + 0x01010101u) & 0x80808080u);
}

// Stages rows [r0, r0 + PR) of request b: q columns as f16 (the dim order
// of the header), their weights. One thread per column (loops when a pass
// has more columns than threads), so a column's NaN test and its weight
// are one thread's. Rows past N are zero.
void stage_q(int b, int r0, int tid) {
    barrier(); // the previous pass's readers are done
    for (int c = tid; c < PR * HP; c += NTH) {
        const int r = c / HP, h = c % HP, row = r0 + r;
        const bool real = row < NROWS && h < H;
        uint nan = 0u;
        const uint64_t qa = pc.q + uint64_t(int64_t(b) * pc.q_sb + int64_t(row) * pc.q_sr + int64_t(h) * pc.q_sh);
        [[unroll]] for (int u = 0; u < D / 16; ++u) {
            const uvec4 x = real ? RefU32x4(qa + uint64_t(16 * u)).v[0] : uvec4(0u);
            // chunk u of the row is lane t = u % 4's chunk u / 4
            const int t = u & 3, uu = u >> 2;
            [[unroll]] for (int w = 0; w < 4; ++w) {
                nan |= nan_bytes(x[w], Q_FNUZ);
                uint lo, hi;
                decode_word(x[w], lo, hi);
                const int at = c * QR + 16 * (4 * uu + w) + 2 * t;
                qs[at / 2] = unpackFloat2x16(lo);
                qs[at / 2 + 4] = unpackFloat2x16(hi);
            }
        }
        float wv = 0.0;
        if (real)
            wv = nan != 0u ? uintBitsToFloat(0x7FC00000u)
                           : RefF32(qa_at(pc.w, int64_t(b) * pc.w_sb + int64_t(row) * pc.w_sr + h, 4u)).v[0];
#if LAYOUT == 1
        // block h / 16, lane t = (h % 8) / 2, component (h & 1) + 2 ((h % 16) / 8)
        const int hb = h % 16;
        wsm[((r * HT + h / 16) * 4) + (hb & 7) / 2][(hb & 1) + 2 * (hb >> 3)] = wv;
#else
        wsm[c / 4][c % 4] = wv;
#endif
    }
    barrier();
}

void fill_neg_inf(int b, int from, int to, int tid) {
    for (int t = 0; t < NROWS; ++t) {
        const int64_t row = int64_t(b) * pc.l_sb + int64_t(t) * pc.l_sr;
        for (int p = from + tid; p < to; p += NTH)
            RefF32(qa_at(pc.logits, row + p, 4u)).v[0] = uintBitsToFloat(PM_NEG_INF);
    }
}

void main() {
    const int tid = int(gl_LocalInvocationID.x);
    const int sub = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
    const int g = lane >> 2, t = lane & 3;
    const int c0 = pmi_split_begin(int(gl_WorkGroupID.x), pc.keys_per_split, pc.M);
    const int c1 = pmi_split_end(c0, pc.keys_per_split, pc.M);
#if LAYOUT == 0
    const int kreg = sub * 16 * QR; // this subgroup's key rows (halves)
    const int areg = sub * 16 * 16; // its accumulator tile (floats)
#endif

    for (int b = int(gl_WorkGroupID.y); b < B; b += int(gl_NumWorkGroups.y)) {
        const pm_request rq = pm_request_of(b);
        const int L = rq.L;
        const int t_end = max(c0, min(c1, rq.lim));
        if (pc.clean != 0) fill_neg_inf(b, t_end, c1, tid);
        if (t_end <= c0) continue; // uniform: the request has nothing here
        if (PASSES == 1) stage_q(b, 0, tid);

        // The keys a lane loads: key g + 8a of tile m of the step, its
        // page id (< 0: none), scale and 16-byte chunks.
        int kpage[KM][2];
        float ksc[KM][2];
        uvec4 kraw[KM][2][NU];
        #define LOAD_STEP(s0)                                                                        \
        {                                                                                            \
            [[unroll]] for (int m = 0; m < KM; ++m)                                                  \
                [[unroll]] for (int a = 0; a < 2; ++a) {                                             \
                    const int p = (s0) + 16 * (KM * sub + m) + g + 8 * a;                            \
                    ivec2 pr = ivec2(-1, 0);                                                         \
                    if (p < t_end) pr = pm_slot(rq, p);                                              \
                    kpage[m][a] = pr.x;                                                              \
                    ksc[m][a] = 0.0;                                                                 \
                    [[unroll]] for (int u = 0; u < NU; ++u) kraw[m][a][u] = uvec4(0u);               \
                    if (pr.x >= 0) {                                                                 \
                        const uint64_t ka = pc.k + pmi_elem(pr.x, pr.y, pc.k_ps, pc.k_rs);           \
                        [[unroll]] for (int u = 0; u < NU; ++u)                                      \
                            kraw[m][a][u] = RefU32x4(ka + uint64_t(64 * u + 16 * t)).v[0];           \
                        ksc[m][a] = RefF32(pc.ks + pmi_elem(pr.x, pr.y, pc.ks_ps, pc.ks_rs) * 4ul).v[0]; \
                    }                                                                                \
                }                                                                                    \
        }
        LOAD_STEP(c0);

        for (int base = c0; base < t_end; base += KT) {
            // 1. fragments of this step's keys (sign folded, NaN caught)
            FragA ka[KM][NB];
            float kscale[KM][2]; // |scale| x unshift, NaN for a key with a NaN code
            bool kex[KM][2];
            [[unroll]] for (int m = 0; m < KM; ++m) {
#if LAYOUT == 0
                controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                               gl_SemanticsAcquireRelease); // the previous loads of kst are done
#endif
                [[unroll]] for (int a = 0; a < 2; ++a) {
                    const uint flip = ksc[m][a] < 0.0 ? 0x80808080u : 0u;
                    uint nan = 0u;
                    [[unroll]] for (int u = 0; u < NU; ++u)
                        [[unroll]] for (int w = 0; w < 4; ++w) {
                            const uint x = kraw[m][a][u][w];
                            nan |= nan_bytes(x, K_FNUZ);
                            uint lo, hi;
                            decode_word(x ^ flip, lo, hi);
                            const f16vec2 xl = unpackFloat2x16(lo), xh = unpackFloat2x16(hi);
#if LAYOUT == 1
                            ka[m][4 * u + w][4 * a + 0] = xl.x;
                            ka[m][4 * u + w][4 * a + 1] = xl.y;
                            ka[m][4 * u + w][4 * a + 2] = xh.x;
                            ka[m][4 * u + w][4 * a + 3] = xh.y;
#else
                            const int at = kreg + (g + 8 * a) * QR + 16 * (4 * u + w) + 2 * t;
                            kst[at / 2] = xl;
                            kst[at / 2 + 4] = xh;
#endif
                        }
                    // the four lanes of a key hold its bytes: one flag for all
                    nan |= subgroupShuffleXor(nan, 1u);
                    nan |= subgroupShuffleXor(nan, 2u);
                    const bool knan = nan != 0u;
                    kex[m][a] = kpage[m][a] >= 0;
                    kscale[m][a] = knan ? uintBitsToFloat(0x7FC00000u) : abs(ksc[m][a]) * pc.unshift;
                }
#if LAYOUT == 0
                controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                               gl_SemanticsAcquireRelease);
                [[unroll]] for (int j = 0; j < NB; ++j)
                    coopMatLoad(ka[m][j], kst, (kreg + 16 * j) / 2, QR / 2, gl_CooperativeMatrixLayoutRowMajor);
#endif
            }
            // 2. the next step's keys, in flight during the products
            if (base + KT < t_end) LOAD_STEP(base + KT);

            // 3. every pass: products and epilogue, one store per (row, key)
            for (int pass = 0; pass < PASSES; ++pass) {
                const int r0 = pass * PR;
                if (PASSES > 1) stage_q(b, r0, tid);
                for (int rr = 0; rr < PR && r0 + rr < NROWS; ++rr) {
                    const int row = r0 + rr;
                    const int last = pmi_last(L, NROWS, row);
                    const int64_t lrow = int64_t(b) * pc.l_sb + int64_t(row) * pc.l_sr;
                    if (base > last) { // uniform: the row sees none of the step
                        if (pc.clean != 0) {
                            for (int p = base + tid; p < min(base + KT, t_end); p += NTH)
                                RefF32(qa_at(pc.logits, lrow + p, 4u)).v[0] = uintBitsToFloat(PM_NEG_INF);
                        }
                        continue;
                    }
#if LAYOUT == 1
                    float part[KM][2];
                    [[unroll]] for (int m = 0; m < KM; ++m) part[m][0] = part[m][1] = 0.0;
                    for (int hb = 0; hb < HT; ++hb) {
                        const int col = rr * HP + 16 * hb;
                        FragC acc[KM];
                        [[unroll]] for (int m = 0; m < KM; ++m) acc[m] = FragC(0.0);
                        [[unroll]] for (int j = 0; j < NB; ++j) {
                            FragB qb;
                            coopMatLoad(qb, qs, (col * QR + 16 * j) / 2, QR / 2, gl_CooperativeMatrixLayoutColumnMajor);
                            [[unroll]] for (int m = 0; m < KM; ++m) acc[m] = coopMatMulAdd(ka[m][j], qb, acc[m]);
                        }
                        const vec4 w4 = wsm[(rr * HT + hb) * 4 + t];
                        [[unroll]] for (int m = 0; m < KM; ++m)
                            [[unroll]] for (int i = 0; i < 8; ++i) part[m][i >> 2] += w4[i & 3] * max(acc[m][i], 0.0);
                    }
                    // the head sum: the four lanes of a key hold its columns
                    [[unroll]] for (int m = 0; m < KM; ++m)
                        [[unroll]] for (int a = 0; a < 2; ++a) {
                            part[m][a] += subgroupShuffleXor(part[m][a], 1u);
                            part[m][a] += subgroupShuffleXor(part[m][a], 2u);
                        }
                    // lane t stores (tile, key) pair t
                    [[unroll]] for (int m = 0; m < KM; ++m)
                        [[unroll]] for (int a = 0; a < 2; ++a) {
                            if (2 * m + a != t) continue;
                            const int p = base + 16 * (KM * sub + m) + g + 8 * a;
                            if (p >= t_end) continue;
                            if (kex[m][a] && p <= last)
                                RefF32(qa_at(pc.logits, lrow + p, 4u)).v[0] = part[m][a] * kscale[m][a];
                            else if (pc.clean != 0)
                                RefF32(qa_at(pc.logits, lrow + p, 4u)).v[0] = uintBitsToFloat(PM_NEG_INF);
                        }
#else
                    // lane l sums columns 8 (l / 16) .. of key l % 16 (KM = 1)
                    const int mykey = lane & 15, hf = lane >> 4;
                    float part = 0.0;
                    for (int hb = 0; hb < HT; ++hb) {
                        const int col = rr * HP + 16 * hb;
                        [[unroll]] for (int nh = 0; nh < NH; ++nh) {
                            FragC acc = FragC(0.0);
                            [[unroll]] for (int j = 0; j < NB; ++j) {
                                FragB qb;
                                coopMatLoad(qb, qs, ((col + nh * TN) * QR + 16 * j) / 2, QR / 2,
                                            gl_CooperativeMatrixLayoutColumnMajor);
                                acc = coopMatMulAdd(ka[0][j], qb, acc);
                            }
                            coopMatStore(acc, acs, areg + nh * TN, 16, gl_CooperativeMatrixLayoutRowMajor);
                        }
                        controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                                       gl_SemanticsAcquireRelease);
                        const vec4 wa = wsm[(col + 8 * hf) / 4], wb = wsm[(col + 8 * hf) / 4 + 1];
                        [[unroll]] for (int n = 0; n < 4; ++n) {
                            part += wa[n] * max(acs[areg + mykey * 16 + 8 * hf + n], 0.0);
                            part += wb[n] * max(acs[areg + mykey * 16 + 8 * hf + 4 + n], 0.0);
                        }
                        controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                                       gl_SemanticsAcquireRelease); // readers done before the next store
                    }
                    part += subgroupShuffleXor(part, 16u);
                    // lanes 0..15 store key lane; its existence and scale
                    // are lane (key % 8) * 4's (key g + 8a, a = key / 8)
                    const int src = (mykey & 7) * 4;
                    const int e0 = subgroupShuffle(kex[0][0] ? 1 : 0, uint(src));
                    const int e8 = subgroupShuffle(kex[0][1] ? 1 : 0, uint(src));
                    const float s0 = subgroupShuffle(kscale[0][0], uint(src));
                    const float s8 = subgroupShuffle(kscale[0][1], uint(src));
                    const bool ex = (mykey < 8 ? e0 : e8) != 0;
                    const float sc = mykey < 8 ? s0 : s8;
                    const int p = base + 16 * sub + mykey;
                    if (hf == 0 && p < t_end) {
                        if (ex && p <= last)
                            RefF32(qa_at(pc.logits, lrow + p, 4u)).v[0] = part * sc;
                        else if (pc.clean != 0)
                            RefF32(qa_at(pc.logits, lrow + p, 4u)).v[0] = uintBitsToFloat(PM_NEG_INF);
                    }
#endif
                }
            }
        }
        #undef LOAD_STEP
    }
}
