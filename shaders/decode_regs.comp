#version 450
// Decode attention, stage 1: the register-resident design (docs/design.md,
// "Decode"; the instruction budget in docs/perf_decode_notes.md).
//
// One workgroup is one subgroup of 32 lanes and handles one (split, kv head,
// block of QH query heads, request), as the tiled kernel does, and writes
// the same partials for decode_merge.comp. What differs is the orientation
// and where data lives:
//   - the block's ROWS = QH * R query rows are the M side of 16x16x16 f16
//     fragments, the 16 keys of a tile the N side of S = Q K^T;
//   - every lane loads its own K and V bytes with 16-byte loads and builds
//     its B fragments from them in registers (exact fp8/int8 -> f16 with
//     two integer operations per pair of codes), so K and V never pass
//     through shared memory and the tile loop has no barrier (only q is
//     staged there, once);
//   - S's accumulator holds its elements where P's A fragment wants them,
//     so the softmax runs on the accumulator and P goes to the P V product
//     without leaving registers.
// This needs the element layout of the fragments, which
// VK_KHR_cooperative_matrix leaves to the implementation: the backend
// probes it at context creation (backend_vulkan/vk_fragment_probe.c) and
// the planner offers this kernel only where it is, for lane l, g = l / 4,
// t = l % 4 and element i of 8:
//   A, accumulator: row g + 8 * (i / 4), column 2t + i % 2 + 8 * ((i / 2) % 2)
//   B: row (k) 2t + i % 2 + 8 * ((i / 2) % 2), column (n) g + 8 * (i / 4)
//
// Dimension orders. A lane's K elements of one key are k = 2t, 2t+1, 2t+8,
// 2t+9 of every 16-dim block j; it reads the key's bytes
// [t * D / 4, (t + 1) * D / 4), word j of them for block j, whose codes
// c0..c3 decode to the pairs (c0, c2) and (c1, c3): physical dim
// t * D / 4 + 4j + c is logical k = 2t + (c >> 1) + 8 * (c & 1) of block j.
// q is loaded by the same rule into A, so S is exact whatever the order. A
// lane's V elements are keys 2t, 2t+1, 2t+8, 2t+9 at the output columns
// n = g and g + 8 of every block; it reads bytes [g * D / 8, (g + 1) * D / 8)
// of those four keys, dims 2j and 2j + 1 of them for block j (column g,
// then g + 8): output column n of block j is physical dim
// (n % 8) * D / 8 + 2j + n / 8, which the partial store undoes, so the
// partials are in dim order.
//
// e5m2 codes are the top byte of an f16 (one mask per pair, no power of two
// left); P carries v_scale * 2^8 (as in decode_tiled.comp: p * v_scale alone
// would fall among f16's subnormals at e5m2's scales) and the partials are
// stored times 2^-8. q is bf16 or f16 (pc.flags), read once.
//
// Defines: KV_FP8FN | KV_FP8FNUZ | KV_FP8E5M2 | KV_I8; HEAD_DIM (64, 128).
// Specialization constants as decode_tiled.comp's (the launch is built by
// the same code); NR = 16,
// SG = 32, TK = 16 and PAGED = 1 are what the planner gives this kernel.
//
// Indices read from memory are bounded as in decode_tiled.comp: a key
// exists only where its kv_indices entry lies in the request's entries and
// in the table, its page id is >= 0 and its slot inside the cache; a key
// that does not exist loads its head's first row (inside the cache) and
// gets no weight.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_vote : require
#extension GL_KHR_cooperative_matrix : require
#include "common.glsl"
#include "common_tiled.glsl"

layout(local_size_x_id = 0) in;
// The head dim is compiled in (HEAD_DIM, one variant each): the fragments'
// element indices and the per-lane arrays must be constants to stay in
// registers. Constants 1 and 9 (the plan's head dims, both equal to it)
// are not read.
const int D = HEAD_DIM;       // = Dv: 64 or 128
layout(constant_id = 2) const int R = 1;    // query rows per request
layout(constant_id = 3) const int QH = 1;   // query heads per workgroup
layout(constant_id = 4) const int NR = 16;  // row slots (the fragments' M)
layout(constant_id = 5) const int SG = 32;  // lanes
layout(constant_id = 6) const int VEC = 16; // bytes per load (16)
layout(constant_id = 7) const int TK = 16;  // keys per tile (the fragments' N)
layout(constant_id = 8) const int PAGED = 1;

const int ROWS = QH * R;
const int NB = D / 16;        // 16-dim blocks
const int KW = D / 16;        // K words (4 codes) a lane reads per key
const int VW = D / 32;        // V words a lane reads per key
#if defined(KV_FP8FNUZ)
const float KF = 128.0;       // decoded code * KF = the fp8 value
#elif defined(KV_I8) || defined(KV_FP8E5M2)
const float KF = 1.0;
#else
const float KF = 256.0;
#endif
#if defined(KV_FP8E5M2)
const float VPF = 256.0;      // P = p * v_scale * VPF; partials stored times 1 / VPF
#else
const float VPF = 1.0;
#endif

const int LDQ = D + 8;         // f16 per staged q row (padded against bank conflicts)
shared float16_t sq[16 * LDQ];

#define FragA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FragB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FragC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// Four codes -> the f16 pairs (c0, c2) and (c1, c3), exactly (fp8: the
// value times 2^-8 or 2^-7; the power of two is KF).
void decode_word(uint x, out uint lo, out uint hi) {
#if defined(KV_I8)
    // (c ^ 0x80) | 0x6400 is the f16 1024 + c + 128; 1152 is subtracted in f16.
    lo = packFloat2x16(unpackFloat2x16((( x       & 0x00FF00FFu) ^ 0x00800080u) | 0x64006400u) - f16vec2(1152.0));
    hi = packFloat2x16(unpackFloat2x16((((x >> 8) & 0x00FF00FFu) ^ 0x00800080u) | 0x64006400u) - f16vec2(1152.0));
#elif defined(KV_FP8E5M2)
    lo = (x << 8) & 0xFF00FF00u;
    hi = x & 0xFF00FF00u;
#else
    lo = ((x << 7) & 0x3F803F80u) | ((x << 8) & 0x80008000u);
    hi = ((x >> 1) & 0x3F803F80u) | (x & 0x80008000u);
#endif
}

// Element offset of fragment row r's q row (request b, heads from h0); a
// padding row reads the last real row's.
int64_t q_row(int b, int h0, int r) {
    const int rc = min(r, ROWS - 1);
    return int64_t(b) * pc.q_sb + int64_t(rc % R) * pc.q_sr + int64_t(h0 + rc / R) * pc.q_sh;
}

void main() {
    const int split = int(gl_WorkGroupID.x);
    const int G = pc.hq / pc.hkv;
    const int nrb = G / QH;
    const int kvh = int(gl_WorkGroupID.y) / nrb;
    const int rb = int(gl_WorkGroupID.y) % nrb;
    const int h0 = kvh * G + rb * QH;
    const int b = int(gl_WorkGroupID.z);
    const int lane = int(gl_SubgroupInvocationID);
    const int g = lane >> 2, t = lane & 3;

    // ---- the request's keys, bounded (as decode_tiled.comp) ----
    const int L = subgroupBroadcastFirst(qa_ld_i32(pc.lens, int64_t(b) * pc.lens_s));
    const int ip0 = subgroupBroadcastFirst(qa_ld_i32(pc.indptr, int64_t(b) * pc.indptr_s));
    const int ip1 = subgroupBroadcastFirst(min(qa_ld_i32(pc.indptr, int64_t(b + 1) * pc.indptr_s), pc.n_indices));
    const int64_t cap64 = pc.n_slots > 0 ? max(int64_t(ip1) - int64_t(ip0), int64_t(0)) * pc.page_size : 0;
    const int cap = int(min(cap64, int64_t(0x7FFFFFFF)));
    const int kfirst = int(min(ip0 < 0 ? -int64_t(ip0) * pc.page_size : int64_t(0), int64_t(0x7FFFFFFF)));
    int lo_all = 0x7FFFFFFF, hi_all = -1;
    for (int r = 0; r < R; ++r) {
        int lo, hi;
        qa_visible(L, R, r, lo, hi);
        lo_all = min(lo_all, max(lo, kfirst));
        hi_all = max(hi_all, min(hi, cap - 1));
    }
    const int s0 = split * pc.keys_per_split;
    const int s1 = split == pc.num_splits - 1 ? 0x7FFFFFFF : s0 + pc.keys_per_split;
    const int kb = max(s0, lo_all);
    const int ke = min(s1, hi_all + 1);

    // ---- this lane's two rows (g, g + 8): visibility and q ----
    int lo_r[2], hi_r[2];
    bool real[2];
    [[unroll]] for (int h = 0; h < 2; ++h) {
        const int r = g + 8 * h;
        real[h] = r < ROWS;
        int lo = 0, hi = -1;
        if (real[h]) {
            qa_visible(L, R, r % R, lo, hi);
            lo = max(lo, kfirst);
            hi = min(hi, cap - 1);
        }
        lo_r[h] = lo;
        hi_r[h] = hi;
    }
    // q -> f16 A fragments with a per-row power of two (bf16's range does
    // not fit f16, its precision does); the four lanes of a row group hold
    // the whole row, so its maximum is two shuffles away.
    FragA qa[NB];
    float cq[2]; // 2^-e * sm_scale per row
    {
        const bool qf16 = (pc.flags & QA_TILE_Q_F16) != 0;
        float qv[2][D / 4];
        float mx[2];
        [[unroll]] for (int h = 0; h < 2; ++h) {
            const int64_t qb = q_row(b, h0, g + 8 * h) + t * (D / 4);
            mx[h] = 0.0;
            [[unroll]] for (int d = 0; d < D / 4; ++d) {
                qv[h][d] = qa_ld_q(qb + d, qf16);
                mx[h] = max(mx[h], abs(qv[h][d]));
            }
        }
        [[unroll]] for (int h = 0; h < 2; ++h) {
            mx[h] = max(mx[h], subgroupShuffleXor(mx[h], 1u));
            mx[h] = max(mx[h], subgroupShuffleXor(mx[h], 2u));
        }
        float sc[2];
        [[unroll]] for (int h = 0; h < 2; ++h) {
            int e = 0;
            if (mx[h] > 0.0) {
                int ex;
                frexp(mx[h], ex);
                e = 15 - ex; // mx * 2^e in [2^14, 2^15)
            }
            sc[h] = real[h] ? ldexp(1.0, e) : 0.0;
            cq[h] = ldexp(1.0, -e) * pc.sm_scale;
        }
        // Staged once through shared memory and loaded as fragments: built
        // element by element instead, the compiler kept q in f32 and
        // converted it again in every tile. Physical dim t * D / 4 + 4j + c
        // goes to k = 2t + (c >> 1) + 8 * (c & 1) of block j.
        [[unroll]] for (int h = 0; h < 2; ++h)
            [[unroll]] for (int j = 0; j < NB; ++j)
                [[unroll]] for (int c = 0; c < 4; ++c)
                    sq[(g + 8 * h) * LDQ + 16 * j + 2 * t + (c >> 1) + 8 * (c & 1)] =
                        float16_t(qv[h][4 * j + c] * sc[h]);
        controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared, gl_SemanticsAcquireRelease);
        [[unroll]] for (int j = 0; j < NB; ++j)
            coopMatLoad(qa[j], sq, 16 * j, LDQ, gl_CooperativeMatrixLayoutRowMajor);
    }

    FragC oacc[NB];
    [[unroll]] for (int j = 0; j < NB; ++j) oacc[j] = FragC(0.0);
    float m[2] = {QA_NEG_INF, QA_NEG_INF}, l[2] = {0.0, 0.0};

    // ---- loads. A tile at t0 (a multiple of 16, so inside one page) is
    // rows crow .. crow + 15 of page kv_indices[ip0 + t0 / P]. This lane
    // loads K of keys g and g + 8 (bytes t * D / 4 ..), V of keys 2t, 2t+1,
    // 2t+8, 2t+9 (bytes g * D / 8 ..), and one scale: lanes 0-15 the k scale
    // of key lane, lanes 16-31 the v scale of key lane - 16. ----
    const uint64_t kbase = pc.k + uint64_t(kvh) * uint64_t(pc.k_hs);
    const uint64_t vbase = pc.v + uint64_t(kvh) * uint64_t(pc.v_hs);
    const uint64_t sbase = lane < 16 ? pc.ks + uint64_t(kvh) * uint64_t(pc.ks_hs) * 4u
                                     : pc.vs + uint64_t(kvh) * uint64_t(pc.vs_hs) * 4u;
    const int64_t s_ps = lane < 16 ? pc.ks_ps : pc.vs_ps;
    const uint s_rs = lane < 16 ? pc.ks_rs : pc.vs_rs;
    const int skey = lane & 15;
    int kkey[2], vkey[4];
    [[unroll]] for (int a = 0; a < 2; ++a) kkey[a] = g + 8 * a;
    [[unroll]] for (int a = 0; a < 4; ++a) vkey[a] = 2 * t + (a & 1) + 8 * (a >> 1);
    const uint koff = uint(t * (D / 4)), voff = uint(g * (D / 8));
    const uint psz = uint(pc.page_size);
    const int ta = kb - kb % TK;
    uint pe = uint(ta) / psz, prow = uint(ta) % psz; // entry and row of the tile PAGE_OF reads next
    int npage = -1, nrow = 0;
    int nklo = 0, nkhi = 0;                         // keys of the loaded tile that exist
    // Kept as the loads' own 16-byte vectors: split into words, the
    // compiler moved every loaded word into other registers for the next
    // tile (h200-s6-3's SASS).
    uvec4 rk[2][KW / 4], rv[4];
    float rs = 0.0;

    #define PAGE_OF()                                                                       \
    {                                                                                       \
        const int ent = clamp(ip0 + int(pe), max(ip0, 0), max(ip1 - 1, 0));                \
        npage = RoI32(pc.indices + uint64_t(uint(ent) * uint(pc.indices_s)) * 4u).v[0];      \
        nrow = int(prow);                                                                   \
        prow += uint(TK);                                                                   \
        if (prow >= psz) { prow = 0u; pe += 1u; }                                           \
    }
    #define LOAD_TILE(t0)                                                                   \
    {                                                                                       \
        const int64_t sl0 = int64_t(npage) * int64_t(pc.page_size) + int64_t(nrow);         \
        const int rows_ok = npage < 0 ? 0 : int(clamp(pc.n_slots - sl0, int64_t(0), int64_t(TK))); \
        nklo = max(kb - int(t0), 0);                                                        \
        nkhi = min(min(ke - int(t0), TK), rows_ok);                                         \
        const uint64_t pg = uint64_t(max(npage, 0));                                       \
        const uint64_t kt = kbase + pg * uint64_t(pc.k_ps) + uint64_t(uint(nrow) * pc.k_rs); \
        const uint64_t vt = vbase + pg * uint64_t(pc.v_ps) + uint64_t(uint(nrow) * pc.v_rs); \
        [[unroll]] for (int a = 0; a < 2; ++a) {                                            \
            const bool ok = kkey[a] >= nklo && kkey[a] < nkhi;                              \
            const uint64_t at = ok ? kt + uint64_t(uint(kkey[a]) * pc.k_rs + koff) : kbase; \
            [[unroll]] for (int w = 0; w < KW; w += 4) {                                    \
                rk[a][w / 4] = RoU32x4(at + uint64_t(4 * w)).v[0];                          \
            }                                                                               \
        }                                                                                   \
        [[unroll]] for (int a = 0; a < 4; ++a) {                                            \
            const bool ok = vkey[a] >= nklo && vkey[a] < nkhi;                              \
            const uint64_t at = ok ? vt + uint64_t(uint(vkey[a]) * pc.v_rs + voff) : vbase; \
            if (VW == 4) {                                                                  \
                rv[a] = RoU32x4(at).v[0];                                                   \
            } else {                                                                        \
                rv[a] = uvec4(RoU32x2(at).v[0], 0u, 0u);                                    \
            }                                                                               \
        }                                                                                   \
        {                                                                                   \
            const bool ok = skey >= nklo && skey < nkhi;                                    \
            const uint64_t so = ok ? pg * uint64_t(s_ps) + uint64_t(uint(nrow + skey) * s_rs) : 0ul; \
            rs = RoF32(sbase + so * 4ul).v[0];                                              \
        }                                                                                   \
    }

    if (kb < ke) {
        PAGE_OF();
        LOAD_TILE(ta);
        PAGE_OF();
    }
    // Unsigned: t0 + TK may pass INT32_MAX.
    for (uint t0 = uint(ta); t0 < uint(ke); t0 += uint(TK)) {
        const int klo = nklo, khi = nkhi;
        // 1. K fragments from the loaded words (the first read of them);
        // V's words and the scales are kept for later in this tile.
        FragB kf[NB];
        [[unroll]] for (int j = 0; j < NB; ++j) {
            [[unroll]] for (int a = 0; a < 2; ++a) {
                uint lo, hi;
                decode_word(rk[a][j / 4][j % 4], lo, hi);
                const f16vec2 x = unpackFloat2x16(lo), y = unpackFloat2x16(hi);
                kf[j][4 * a + 0] = x.x;
                kf[j][4 * a + 1] = x.y;
                kf[j][4 * a + 2] = y.x;
                kf[j][4 * a + 3] = y.y;
            }
        }
        // V fragments too, so the words' registers are free for the next
        // tile: dims 2j, 2j + 1 of the lane's chunk (byte pair j % 2 of word
        // j / 2) of keys (2t, 2t+1) and (2t+8, 2t+9) pair up into (key, key)
        // words.
        FragB vfr[NB];
        [[unroll]] for (int j = 0; j < NB; ++j) {
            [[unroll]] for (int a = 0; a < 2; ++a) {
                const uint w0 = rv[2 * a][j / 2], w1 = rv[2 * a + 1][j / 2]; // word j / 2 < VW
                const uint xw = (j & 1) == 0 ? (w0 & 0xFFFFu) | (w1 << 16) : (w0 >> 16) | (w1 & 0xFFFF0000u);
                uint lo, hi;
                decode_word(xw, lo, hi);
                const f16vec2 c0 = unpackFloat2x16(lo), c1 = unpackFloat2x16(hi);
                vfr[j][2 * a + 0] = c0.x; // keys (2t, 2t+1) or (2t+8, 2t+9) at column g
                vfr[j][2 * a + 1] = c0.y;
                vfr[j][2 * a + 4] = c1.x; // the same keys at column g + 8
                vfr[j][2 * a + 5] = c1.y;
            }
        }
        // This lane's keys: 2t, 2t+1, 2t+8, 2t+9 (as vkey): their k scale
        // times KF, zero for a key that does not exist, and v scale.
        float ksc[4], vsc[4];
        bool kex[4];
        [[unroll]] for (int a = 0; a < 4; ++a) {
            const float k_ = subgroupShuffle(rs, uint(vkey[a]));
            const float v_ = subgroupShuffle(rs, uint(16 + vkey[a]));
            kex[a] = vkey[a] >= klo && vkey[a] < khi;
            ksc[a] = kex[a] ? k_ * KF : 0.0;
            vsc[a] = kex[a] ? (VPF != 1.0 ? v_ * VPF : v_) : 0.0; // a scale read for no key may be anything
        }
        // 2. the next tile's loads and the page id of the one after, in
        // flight while this one is computed
        if (t0 + uint(TK) < uint(ke)) {
            LOAD_TILE(t0 + uint(TK));
            PAGE_OF();
        }
        // 3. S = Q K^T
        FragC s = FragC(0.0);
        [[unroll]] for (int j = 0; j < NB; ++j) s = coopMatMulAdd(qa[j], kf[j], s);
        // 4. online softmax on the accumulator: element i is row
        // g + 8 * (i / 4), key 2t + i % 2 + 8 * ((i / 2) % 2) = vkey[i % 4]
        float x[8];
        float tmax[2] = {QA_NEG_INF, QA_NEG_INF};
        [[unroll]] for (int i = 0; i < 8; ++i) {
            const int h = i >> 2, a = i & 3;
            x[i] = s[i] * cq[h] * ksc[a];
        }
        if (pc.softcap > 0.0) {
            [[unroll]] for (int i = 0; i < 8; ++i) x[i] = pc.softcap * qa_tanh(x[i] / pc.softcap);
        }
        // Masks only where some key of the tile is hidden from some real row
        // (one uniform branch; most tiles hide none).
        const bool whole = klo == 0 && khi == TK && (!real[0] || (int(t0) >= lo_r[0] && int(t0) + TK - 1 <= hi_r[0])) &&
                           (!real[1] || (int(t0) >= lo_r[1] && int(t0) + TK - 1 <= hi_r[1]));
        if (subgroupAll(whole)) {
            [[unroll]] for (int i = 0; i < 8; ++i) {
                const int h = i >> 2;
                x[i] = real[h] ? x[i] * float(QA_LOG2E) : QA_NEG_INF;
                tmax[h] = max(tmax[h], x[i]);
            }
        } else {
            [[unroll]] for (int i = 0; i < 8; ++i) {
                const int h = i >> 2, a = i & 3;
                const int p = int(t0) + vkey[a];
                const bool vis = real[h] && kex[a] && p >= lo_r[h] && p <= hi_r[h];
                x[i] = vis ? x[i] * float(QA_LOG2E) : QA_NEG_INF;
                tmax[h] = max(tmax[h], x[i]);
            }
        }
        [[unroll]] for (int h = 0; h < 2; ++h) {
            tmax[h] = max(tmax[h], subgroupShuffleXor(tmax[h], 1u));
            tmax[h] = max(tmax[h], subgroupShuffleXor(tmax[h], 2u));
        }
        float alpha[2];
        bool grew = false;
        [[unroll]] for (int h = 0; h < 2; ++h) {
            const float mn = max(m[h], tmax[h]);
            alpha[h] = mn == QA_NEG_INF ? 1.0 : exp2(m[h] - mn);
            grew = grew || alpha[h] != 1.0;
            m[h] = mn;
        }
        // The running output is rescaled only in tiles where some row's
        // maximum grew (alpha is exactly 1 otherwise, the common case once
        // the maxima settle): one vote, a uniform branch.
        if (subgroupAny(grew)) {
            [[unroll]] for (int j = 0; j < NB; ++j)
                [[unroll]] for (int i = 0; i < 8; ++i) oacc[j][i] *= alpha[i >> 2];
            l[0] *= alpha[0];
            l[1] *= alpha[1];
        }
        FragA pa;
        [[unroll]] for (int i = 0; i < 8; ++i) {
            const int h = i >> 2, a = i & 3;
            const float p = x[i] == QA_NEG_INF ? 0.0 : exp2(x[i] - m[h]);
            l[h] += p;
            pa[i] = float16_t(p * vsc[a]);
        }
        // 5. O += P V
        [[unroll]] for (int j = 0; j < NB; ++j) oacc[j] = coopMatMulAdd(pa, vfr[j], oacc[j]);
    }

    // ---- partials: unnormalised O (dim order), m and l per row slot ----
    const int S = pc.num_splits;
    const int64_t slot0 = ((int64_t(b) * pc.hkv + kvh) * nrb + rb) * NR;
    [[unroll]] for (int j = 0; j < NB; ++j) {
        [[unroll]] for (int i = 0; i < 8; ++i) {
            const int h = i >> 2, n = 2 * t + (i & 1) + 8 * ((i >> 1) & 1);
            const int d = (n & 7) * (D / 8) + 2 * j + (n >> 3);
            if (real[h]) {
                const int64_t at = ((slot0 + g + 8 * h) * S + split) * D + d;
                RefF32(qa_at(pc.ws_o, at, 4)).v[0] = VPF != 1.0 ? oacc[j][i] * float(1.0 / VPF) : oacc[j][i];
            }
        }
    }
    [[unroll]] for (int h = 0; h < 2; ++h) {
        float lt = l[h];
        lt += subgroupShuffleXor(lt, 1u);
        lt += subgroupShuffleXor(lt, 2u);
        if (t == 0) {
            const int64_t at = ((slot0 + g + 8 * h) * S + split) * 2;
            RefF32(qa_at(pc.ws_ml, at, 4)).v[0] = m[h];
            RefF32(qa_at(pc.ws_ml, at + 1, 4)).v[0] = lt;
        }
    }
}
