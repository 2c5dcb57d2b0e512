#version 450
// Decode attention, stage 1, "stream" kernel: built to keep the memory
// system busy on wide GPUs (few registers, many resident workgroups, every
// K/V byte loaded once per workgroup with wide loads, little work per byte).
// See core/src/plan_decode.c for the geometry the planner picks.
//
// One workgroup of WG threads = one (split, kv head, block of QH query
// heads, request) and all R query rows of those heads: ROWS = QH * R rows
// (NP = ROWS rounded up to a power of two, at most 16). q is staged once
// into shared memory as f32. The split's keys are walked in tiles of TK keys:
//   1. scores: key groups of 8 lanes; a lane holds DPL = D / 8 elements of
//      a key (one contiguous run: one 16-byte load for D 128 fp8) and dots
//      them with every row's q slice read from shared memory (the same
//      address for every group: a broadcast). The 8 partial sums of each
//      row are reduced with a transposed butterfly (reduce-scatter: about
//      one shuffle per row instead of three), so each lane ends with whole
//      sums of a few rows and writes them, scaled, soft-capped and masked,
//      as S[key][row] to shared memory.
//   2. softmax: 8 lanes per row walk the tile's scores: tile max, rescale
//      factor of the running output, p = exp2(s - m) times the key's v
//      scale written back over S.
//   3. PV: a lane owns 4 output dims of every row; lane groups of D / 4
//      lanes (one V row, coalesced) take the tile's keys in turn and add
//      p * v; the groups are combined once at the end through shared memory.
// The next tile's K rows are loaded right after the scores are written and
// its V rows right after the PV step, so the loads overlap the rest of the
// tile's work; the page table is read two tiles ahead (one thread per key)
// into shared memory. Registers hold 16 words of K and 16 of V codes per
// lane whatever D and the dtype (TK = 8192 / (D * element size) keys by
// default), raw until used.
//
// Defines: KV_BF16 | KV_FP8FN | KV_FP8FNUZ | KV_I8 (cache dtype).
// Spec constants: 0 WG (threads, a multiple of 8 and of D / 4), 1 D (= Dv),
// 2 R, 3 QH, 4 NP, 5 KPG (keys per key group and tile), 6 VEC (widest load
// every K/V row start allows: 16, 8, 4, 2 or 1 bytes).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "common_decode.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int D = 128;
layout(constant_id = 2) const int R = 1;
layout(constant_id = 3) const int QH = 4;
layout(constant_id = 4) const int NP = 4;
layout(constant_id = 5) const int KPG = 4;
layout(constant_id = 6) const int VEC = 16;
layout(constant_id = 7) const int WGC = 128; // = local size x, usable in constant expressions

#if defined(KV_BF16)
const int ES = 2;
#else
const int ES = 1;
#endif
const int ROWS = QH * R;
const int RP = NP < 4 ? 4 : NP;      // row stride of S (whole vec4s)
const int LPK = 8;                   // lanes per key in the score phase
const int NKG = WGC / LPK;           // key groups in the score phase
const int DPL = D / LPK;             // elements per lane and key (score phase)
const int NQK = DPL / 4;             // quads (4 elements) per lane and key
const int TK = NKG * KPG;            // keys per tile
const int LPV = D / 4;               // lanes per V row in the PV phase
const int NPG = WGC / LPV;           // key groups in the PV phase
const int KPV = TK / NPG;            // keys per PV group and tile
const int WPQ = ES;                  // 32-bit words per quad
const int NWK = NQK * WPQ;           // words per lane and key (K)
const int SMK = TK / 8;              // keys per lane in the softmax phase
const int NQS = (NP * D + WGC - 1) / WGC; // q elements each thread stages

#if defined(KV_FP8FNUZ)
const bool FNUZ = true;
#else
const bool FNUZ = false;
#endif

shared vec4 sh_q[NP * D / 4];        // q rows, f32; reused to combine PV groups
shared vec4 sh_s[2][TK * RP / 4];    // scores, then p * v scale, [key][row]
shared float sh_vs[TK];
shared float sh_alpha[NP];
shared float sh_m[NP], sh_l[NP];
shared int sh_slot[2][TK];

uint kraw[KPG][NWK];                 // K codes of this lane's keys (score layout)
float ksc[KPG], vscl[KPG];
uint vraw[KPV][WPQ];                 // V codes of this lane's keys (PV layout)
vec4 acc[NP];                        // this lane's 4 output dims of every row

int g_b, g_g, g_h0, g_L, g_first, g_kend, g_tid;
// This lane's K and V row starts at slot 0 (kv head and lane offset
// folded in). Slot offsets are added in 32-bit arithmetic: the core checks
// that every tensor spans fewer than 2^31 elements (< 2^32 bytes) and that
// strides are not negative.
uint64_t g_kb, g_vb;

#if !defined(KV_BF16) && !defined(KV_I8)
// Power of two the f16 trick leaves out of an fp8 value (folded into the
// scales): 2^-8 for fn, 2^-7 for fnuz (see qa_fp8x4_f16trick).
const float FP8_SCALE = FNUZ ? 128.0 : 256.0;
#else
const float FP8_SCALE = 1.0;
#endif

// One quad of raw words -> 4 values (fp8: times 2^-8 / 2^-7).
vec4 decode_quad(uint w0, uint w1) {
#if defined(KV_BF16)
    return vec4(uintBitsToFloat(w0 << 16), uintBitsToFloat(w0 & 0xFFFF0000u), uintBitsToFloat(w1 << 16),
                uintBitsToFloat(w1 & 0xFFFF0000u));
#elif defined(KV_I8)
    const int s = int(w0);
    return vec4(float(bitfieldExtract(s, 0, 8)), float(bitfieldExtract(s, 8, 8)),
                float(bitfieldExtract(s, 16, 8)), float(bitfieldExtract(s, 24, 8)));
#else
    return qa_fp8x4_f16trick(w0);
#endif
}

// One 32-bit word of codes at byte address a (4-byte aligned when VEC >= 4).
uint load_word(uint64_t a) {
    if (VEC >= 4) return RefU32(a).v[0];
#if defined(KV_BF16)
    return uint(RefU16(a).v[0]) | (uint(RefU16(a + 2ul).v[0]) << 16);
#else
    return uint(RefU8(a).v[0]) | (uint(RefU8(a + 1ul).v[0]) << 8) | (uint(RefU8(a + 2ul).v[0]) << 16) |
           (uint(RefU8(a + 3ul).v[0]) << 24);
#endif
}

float kv_scale(uint64_t base, int ss_, int sh, int slot) {
#if defined(KV_BF16)
    return 1.0;
#else
    const uint e = uint(slot) * uint(ss_) + uint(g_g) * uint(sh);
    return RefF32(base + uint64_t(e) * 4ul).v[0] * FP8_SCALE;
#endif
}

// Slot of key p; keys past the split's range read the last key of the
// range instead (called only while the range is not empty), so their codes
// and scales are real data: their scores are masked and their p is 0, and
// no load result is consumed before its phase (a select on a loaded value
// would stall the lane until the data arrives).
int slot_of(int p) { return qa_slot(g_first, min(p, g_kend - 1)); }

// K rows (and the k and v scales) of the tile whose slots are in
// sh_slot[buf] into kraw, ksc, vscl.
void load_k(const int buf) {
    const int kg = g_tid / LPK;
    [[unroll]] for (int u = 0; u < KPG; ++u) {
        const int kk = u * NKG + kg;
        const int slot = sh_slot[buf][kk];
        const uint64_t row = g_kb + uint64_t(uint(slot) * uint(pc.k_ss) * uint(ES));
        if (VEC >= 16 && NWK % 4 == 0) {
            [[unroll]] for (int w = 0; w < NWK; w += 4) {
                const uvec4 x = RefU32x4(row + uint64_t(4 * w)).v[0];
                kraw[u][w] = x.x;
                kraw[u][w + 1] = x.y;
                kraw[u][w + 2] = x.z;
                kraw[u][w + 3] = x.w;
            }
        } else if (VEC >= 8 && NWK % 2 == 0) {
            [[unroll]] for (int w = 0; w < NWK; w += 2) {
                const uvec2 x = RefU32x2(row + uint64_t(4 * w)).v[0];
                kraw[u][w] = x.x;
                kraw[u][w + 1] = x.y;
            }
        } else {
            [[unroll]] for (int w = 0; w < NWK; ++w) kraw[u][w] = load_word(row + uint64_t(4 * w));
        }
        ksc[u] = kv_scale(pc.ks, pc.ks_ss, pc.ks_sh, slot);
        vscl[u] = kv_scale(pc.vs, pc.vs_ss, pc.vs_sh, slot);
    }
}

// V rows (this lane's 4 dims) of the tile whose slots are in sh_slot[buf]
// into vraw.
void load_v(const int buf) {
    const int pg = g_tid / LPV;
    [[unroll]] for (int i = 0; i < KPV; ++i) {
        const int kk = pg + i * NPG;
        const int slot = sh_slot[buf][kk];
        const uint64_t a = g_vb + uint64_t(uint(slot) * uint(pc.v_ss) * uint(ES));
        if (WPQ == 2 && VEC >= 8) {
            const uvec2 x = RefU32x2(a).v[0];
            vraw[i][0] = x.x;
            vraw[i][WPQ - 1] = x.y;
        } else {
            [[unroll]] for (int w = 0; w < WPQ; ++w) vraw[i][w] = load_word(a + uint64_t(4 * w));
        }
    }
}

// Row r's visible keys [lo, hi] (spec 2), with the split's end.
bool visible(int p, int r) {
    int lo, hi;
    qa_visible(g_L, R, r, lo, hi);
    return p < g_kend && p >= lo && p <= hi;
}

// Phase 1: the scores of the tile at t0 into sh_s[sb] and the v scales.
void score_phase(const int sb, int t0) {
    const int kg = g_tid / LPK, li = g_tid % LPK;
    float sdot[KPG][NP];
    [[unroll]] for (int u = 0; u < KPG; ++u)
        [[unroll]] for (int row = 0; row < NP; ++row) sdot[u][row] = 0.0;
    [[unroll]] for (int qd = 0; qd < NQK; ++qd) {
        vec4 k4[KPG];
        [[unroll]] for (int u = 0; u < KPG; ++u) k4[u] = decode_quad(kraw[u][qd * WPQ], kraw[u][qd * WPQ + WPQ - 1]);
        [[unroll]] for (int row = 0; row < ROWS; ++row) {
            const vec4 qv = sh_q[(row * D + li * DPL) / 4 + qd];
            [[unroll]] for (int u = 0; u < KPG; ++u) sdot[u][row] += dot(qv, k4[u]);
        }
    }
    // Reduce-scatter over the 8 lanes of the group: at each level a lane
    // keeps one half of its rows (chosen by its lane bit) and adds the
    // partner's copy of that half; once one value is left the remaining
    // levels are a plain butterfly. Row of value i afterwards: i + base.
    const int n1 = NP > 1 ? NP / 2 : 1, n2 = n1 > 1 ? n1 / 2 : 1, n3 = n2 > 1 ? n2 / 2 : 1;
    const bool b2 = (li & 4) != 0, b1 = (li & 2) != 0, b0 = (li & 1) != 0;
    int base = 0;
    bool owner = true;
    if (NP > 1) base += b2 ? n1 : 0; else owner = owner && !b2;
    if (n1 > 1) base += b1 ? n2 : 0; else owner = owner && !b1;
    if (n2 > 1) base += b0 ? n3 : 0; else owner = owner && !b0;
    [[unroll]] for (int u = 0; u < KPG; ++u) {
        if (NP > 1) {
            [[unroll]] for (int i = 0; i < n1; ++i) {
                const float keep = b2 ? sdot[u][i + n1] : sdot[u][i];
                const float send = b2 ? sdot[u][i] : sdot[u][i + n1];
                sdot[u][i] = keep + subgroupShuffleXor(send, 4u);
            }
        } else {
            sdot[u][0] += subgroupShuffleXor(sdot[u][0], 4u);
        }
        if (n1 > 1) {
            [[unroll]] for (int i = 0; i < n2; ++i) {
                const float keep = b1 ? sdot[u][i + n2] : sdot[u][i];
                const float send = b1 ? sdot[u][i] : sdot[u][i + n2];
                sdot[u][i] = keep + subgroupShuffleXor(send, 2u);
            }
        } else {
            sdot[u][0] += subgroupShuffleXor(sdot[u][0], 2u);
        }
        if (n2 > 1) {
            [[unroll]] for (int i = 0; i < n3; ++i) {
                const float keep = b0 ? sdot[u][i + n3] : sdot[u][i];
                const float send = b0 ? sdot[u][i] : sdot[u][i + n3];
                sdot[u][i] = keep + subgroupShuffleXor(send, 1u);
            }
        } else {
            sdot[u][0] += subgroupShuffleXor(sdot[u][0], 1u);
        }
        const int kk = u * NKG + kg, p = t0 + kk;
        if (owner) {
            [[unroll]] for (int i = 0; i < n3; ++i) {
                const int row = base + i;
                if (row < ROWS) {
                    const float s = visible(p, row % R) ? qa_score2(sdot[u][i] * ksc[u]) : QA_NEG_INF;
                    sh_s[sb][(kk * RP + row) / 4][row % 4] = s;
                }
            }
        }
        if (li == 0) sh_vs[kk] = vscl[u];
    }
}

// Phase 2: online softmax of the tile's scores, 8 lanes per row. m, l: the
// row's running max (log2 units) and sum, kept by that row's lanes.
void softmax_phase(const int sb, inout float m, inout float l) {
    const int sr = g_tid / 8, sl = g_tid % 8;
    if (sr >= ROWS) return;
    float sv[SMK];
    float tmax = QA_NEG_INF;
    [[unroll]] for (int i = 0; i < SMK; ++i) {
        const int kk = sl + 8 * i;
        sv[i] = sh_s[sb][(kk * RP + sr) / 4][sr % 4];
        tmax = max(tmax, sv[i]);
    }
    tmax = max(tmax, subgroupShuffleXor(tmax, 4u));
    tmax = max(tmax, subgroupShuffleXor(tmax, 2u));
    tmax = max(tmax, subgroupShuffleXor(tmax, 1u));
    const float mnew = max(m, tmax);
    const float alpha = qa_exp2_diff(m, mnew);
    float lsum = 0.0;
    [[unroll]] for (int i = 0; i < SMK; ++i) {
        const int kk = sl + 8 * i;
        // mnew is -inf only while nothing was visible: then p = 0.
        const float p = mnew == QA_NEG_INF ? 0.0 : qa_exp2_diff(sv[i], mnew);
        lsum += p;
        sh_s[sb][(kk * RP + sr) / 4][sr % 4] = p * sh_vs[kk];
    }
    lsum += subgroupShuffleXor(lsum, 4u);
    lsum += subgroupShuffleXor(lsum, 2u);
    lsum += subgroupShuffleXor(lsum, 1u);
    l = l * alpha + lsum;
    m = mnew;
    if (sl == 0) sh_alpha[sr] = alpha;
}

// Phase 3: acc += p * v over the tile, this lane's 4 dims of every row.
void pv_phase(const int sb) {
    const int pg = g_tid / LPV;
    [[unroll]] for (int row = 0; row < ROWS; ++row) acc[row] *= sh_alpha[row];
    [[unroll]] for (int i = 0; i < KPV; ++i) {
        const int kk = pg + i * NPG;
        const vec4 v = decode_quad(vraw[i][0], vraw[i][WPQ - 1]);
        [[unroll]] for (int r4 = 0; r4 < RP / 4; ++r4) {
            if (r4 * 4 < ROWS) {
                const vec4 p4 = sh_s[sb][(kk * RP) / 4 + r4];
                [[unroll]] for (int c = 0; c < 4; ++c)
                    if (r4 * 4 + c < ROWS) acc[r4 * 4 + c] += p4[c] * v;
            }
        }
    }
}

void main() {
    const int split = int(gl_WorkGroupID.x);
    const int G = pc.hq / pc.hkv;
    const int nqb = G / QH;
    g_g = int(gl_WorkGroupID.y) / nqb;
    g_h0 = g_g * G + (int(gl_WorkGroupID.y) % nqb) * QH;
    g_b = int(gl_WorkGroupID.z);
    g_tid = int(gl_LocalInvocationID.x);
    g_kb = pc.k + uint64_t(uint(g_g) * uint(pc.k_sh) * uint(ES) + uint((g_tid % LPK) * DPL * ES));
    g_vb = pc.v + uint64_t(uint(g_g) * uint(pc.v_sh) * uint(ES) + uint((g_tid % LPV) * 4 * ES));
    // q rows (row = head-in-block * R + query row; padding rows zero) are
    // read first, so their latency overlaps the page-table reads below.
    float qv[NQS];
    [[unroll]] for (int i = 0; i < NQS; ++i) {
        const int idx = g_tid + i * WGC, row = idx / D, d = idx % D;
        qv[i] = 0.0;
        if (row < ROWS) {
            const int h = g_h0 + row / R, r = row % R;
            const int64_t qi = int64_t(g_b) * pc.q_sb + int64_t(r) * pc.q_sr + int64_t(h) * pc.q_sh + d;
            qv[i] = qa_bf16_to_f32(uint(RefU16(qa_at(pc.q, qi, 2)).v[0]));
        }
    }
    g_L = RefI32(qa_at(pc.lens, int64_t(g_b) * pc.lens_s, 4)).v[0];
    g_first = qa_first_page(g_b);
    // Keys any row of this workgroup can see, within this split.
    int lo0, hi0, loR, hiR;
    qa_visible(g_L, R, 0, lo0, hi0);
    qa_visible(g_L, R, R - 1, loR, hiR);
    const int k_begin = max(split * pc.keys_per_split, lo0);
    g_kend = min(min(split * pc.keys_per_split + pc.keys_per_split, g_L), hiR + 1);
    [[unroll]] for (int i = 0; i < NQS; ++i) {
        const int idx = g_tid + i * WGC;
        if (idx < NP * D) sh_q[idx / 4][idx % 4] = qv[i];
    }
    [[unroll]] for (int row = 0; row < NP; ++row) acc[row] = vec4(0.0);
    float m = QA_NEG_INF, l = 0.0;

    // Slots of tiles 0 (published) and 1 (pending in a register).
    int pending = 0;
    if (g_tid < TK && k_begin < g_kend) {
        sh_slot[0][g_tid] = slot_of(k_begin + g_tid);
        pending = slot_of(k_begin + TK + g_tid);
    }
    barrier();
    if (k_begin < g_kend) {
        load_k(0);
        load_v(0);
    }
    int it = 0;
    for (int t0 = k_begin; t0 < g_kend; t0 += TK, ++it) {
        const int sb = it & 1, nb = (it + 1) & 1;
        const bool more = t0 + TK < g_kend;
        // Publish the next tile's slots and start reading the one after.
        if (g_tid < TK) {
            sh_slot[nb][g_tid] = pending;
            pending = slot_of(t0 + 2 * TK + g_tid);
        }
        score_phase(sb, t0);
        barrier();
        if (more) load_k(nb);
        softmax_phase(sb, m, l);
        barrier();
        pv_phase(sb);
        if (more) load_v(nb);
    }

    // Combine the PV groups (group 0 ends with the sums) through sh_q, and
    // publish each row's m and l.
    barrier();
    if (g_tid / 8 < ROWS && g_tid % 8 == 0) {
        sh_m[g_tid / 8] = m;
        sh_l[g_tid / 8] = l;
    }
    const int pg = g_tid / LPV, pl = g_tid % LPV;
    for (int grp = 1; grp < NPG; ++grp) {
        if (pg == grp)
            [[unroll]] for (int row = 0; row < ROWS; ++row) sh_q[row * LPV + pl] = acc[row];
        barrier();
        if (pg == 0)
            [[unroll]] for (int row = 0; row < ROWS; ++row) acc[row] += sh_q[row * LPV + pl];
        barrier();
    }
    if (pg == 0) {
        [[unroll]] for (int row = 0; row < ROWS; ++row) {
            const int h = g_h0 + row / R, r = row % R;
            [[unroll]] for (int c = 0; c < 4; ++c) {
                const int d = pl * 4 + c;
                qa_epilogue(g_b, r, h, R, split, d, D, sh_m[row], sh_l[row], acc[row][c], d == 0);
            }
        }
    }
}
