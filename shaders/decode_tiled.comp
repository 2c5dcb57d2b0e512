#version 450
// Decode attention, stage 1: the tiled design (docs/design.md, "Decode").
//
// One workgroup is one subgroup of SG lanes and handles one (split, kv head,
// block of QH query heads, request). Its ROWS = QH * R query rows are the N
// columns of the matrix products (NR >= ROWS; padding columns are computed
// and never read). Keys stream through in tiles of TK:
//   1. the tile's K and V rows (16-byte loads, issued one tile ahead) are
//      decoded to f16 into shared memory (fp8 and int8 exactly, two codes per
//      integer operation; the power of two the fp8 trick leaves is folded
//      into the per-key scales), bf16 stays raw (SIMT only);
//   2. S^T = K Q^T (TK keys x NR rows, 16 at a time): on the matrix unit (MATRIX) or by
//      lanes (SIMT), q held as f16 with a per-row power of two;
//   3. online softmax by lanes: per-key scales, softcap, masks, running max
//      m and partial sums l, P^T = p * v_scale in f16, and per row the factor
//      alpha the running output must be multiplied by;
//   4. O^T = O^T * alpha + V^T P^T (16 dims x NR rows per fragment).
// TK (a spec constant) is a multiple of 16: each tile is KT fragments.
// Every workgroup writes its unnormalised O^T, m and l to the workspace
// (padding rows included, they have their own slots) and decode_merge.comp
// combines the splits. All launch decisions come from the plan
// (core/src/plan_decode.c); shared memory must match tiled_shared() there.
//
// Indices read from memory are bounded here before anything is addressed
// (spec 2): key p of a request exists only where its kv_indices entry
// (kv_indptr[b] + p / P) lies in [kv_indptr[b], kv_indptr[b + 1]) and in
// [0, n_indices), a page id outside the cache hides the key, and kv_lens
// beyond max_kv_len is computed exactly (the last split runs to the end).
//
// Layout convention (PERM): a word of four fp8/int8 codes decodes to the f16
// pairs (c0, c2) and (c1, c3), so positions 1 and 2 of every group of four
// dims are swapped in shared memory. q is staged with the same swap (a dot
// product does not care) and the merge swaps the output dims back.
//
// e5m2 codes are the top byte of an f16, so they decode by one mask per pair
// and leave no power of two; P^T carries v_scale * 2^8 instead (P = p *
// v_scale in f16 would fall among f16's subnormals for e5m2's scales, 2^7
// smaller than e4m3's for the same data) and the partials are stored times
// 2^-8, both exact (the HIP kernels' PSF).
//
// Head dims: D (q and K, spec constant 1) and DV (V and o, constant 9), each
// a multiple of 16; a K tile row is D dims, a V tile row DV. q is bf16 or f16
// (pc.flags & QA_TILE_Q_F16), read once before the tile loop.
//
// Defines: KV_BF16 | KV_FP8FN | KV_FP8FNUZ | KV_FP8E5M2 | KV_I8; MATRIX (0/1).
//
// Two ways of finding a tile's rows (spec constant PAGED, the plan's
// page_tiled): where page_size is a multiple of TK and tiles start at
// multiples of TK, a tile is TK consecutive rows of one page, so it needs one
// page id (the same for every lane), one 64-bit base per tensor and per lane
// a fixed offset; otherwise (pages of fewer rows, e.g. 1) every key has its
// own page id and row, and the lane that holds it shuffles its row offset to
// the lanes loading its chunks.
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_KHR_shader_subgroup_ballot : require
#extension GL_KHR_shader_subgroup_vote : require
#if MATRIX
#extension GL_KHR_cooperative_matrix : require
#endif
#include "common.glsl"
#include "common_tiled.glsl"

// The matrix variant's loops over fragments must unroll (cooperative-matrix
// arrays are indexed by them); the vector variant leaves its loops over
// dims and keys to the driver (forced unrolling made lavapipe's LLVM take
// ~10 s per pipeline). Loops over query rows unroll in both: per-row
// arrays indexed by a loop the driver keeps live in local memory, and the
// reductions in them must stay in converged control flow.
#if MATRIX
#define UNROLL [[unroll]]
#else
#define UNROLL
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const int D = 128;  // head dim of q and K
layout(constant_id = 2) const int R = 1;    // query rows per request
layout(constant_id = 3) const int QH = 1;   // query heads per workgroup
layout(constant_id = 4) const int NR = 8;   // matrix N: row slots (>= QH * R)
layout(constant_id = 5) const int SG = 32;  // lanes (= workgroup size = subgroup size)
layout(constant_id = 6) const int VEC = 16; // bytes per load: what every K/V row start allows
layout(constant_id = 7) const int TK = 16;  // keys per tile: a multiple of 16
layout(constant_id = 8) const int PAGED = 0; // 1: every tile lies in one page (page_size % TK == 0)
layout(constant_id = 9) const int DV = 128; // head dim of V and o

const int ROWS = QH * R;
const int KT = TK / 16;            // 16-key fragments per tile
#if defined(KV_BF16)
const int ES = 2;                  // bytes per cache element
const int PERM = 0;
const float KF = 1.0;              // staged value * KF = decoded value
#else
const int ES = 1;
const int PERM = 1;
#if defined(KV_FP8FNUZ)
const float KF = 128.0;
#elif defined(KV_I8) || defined(KV_FP8E5M2)
const float KF = 1.0;
#else
const float KF = 256.0;
#endif
#endif
#if defined(KV_FP8E5M2)
const float VPF = 256.0;           // P^T = p * v_scale * VPF; partials are stored times 1 / VPF
#else
const float VPF = 1.0;
#endif
const int CPK = D * ES / 16;       // 16-byte chunks per K row
const int CPKV = DV * ES / 16;     // and per V row
const int NCH = (TK * CPK + SG - 1) / SG;   // K chunks per lane per tile
const int NCHV = (TK * CPKV + SG - 1) / SG; // V chunks
const int NCM = NCH > NCHV ? NCH : NCHV;
const bool SAMEKV = CPK == CPKV;   // K and V chunks map to keys alike (D == DV)
const int LD4 = D / 8 + 1;         // uvec4 per staged q or K row (8 f16 or bf16 each, + 1 pad)
const int LD4V = DV / 8 + 1;       // per staged V row
const int LDP = TK + 8;            // f16 per row of P^T
const int C = SG < TK ? SG : TK;   // lanes per softmax row group
const int RG = SG / C;             // row groups
const int KPL = TK / C;            // keys per lane in the softmax
const int RPL = (NR + RG - 1) / RG; // rows per lane in the softmax
const int RPR = RPL < (ROWS + RG - 1) / RG ? RPL : (ROWS + RG - 1) / RG; // of them, groups that hold a real row
const int NSK = (TK + SG - 1) / SG; // keys per lane whose scales it loads
#if defined(KV_BF16)
const bool HAS_SCALES = false;
#else
const bool HAS_SCALES = true;
#endif

shared uvec4 sq[NR * LD4];         // q rows, f16, scaled per row by 2^e
shared float sqf[NR];              // 2^-e of each row
shared uvec4 skt[TK * LD4];        // K tile
shared uvec4 svt[TK * LD4V];       // V tile
shared float ss[TK * NR];          // S^T, then alpha per (key, row)
shared float16_t sp[NR * LDP];     // P^T: [row][key]
shared float sks[TK];              // k scale * KF of each key (0: not in the cache)
shared float svs[TK];              // v scale of each key
shared int spos[TK];               // absolute key position, -1 = does not exist

// 16 cache bytes -> two uvec4 of f16 (fp8, int8: the PERM order) or one of
// raw bf16 (lo only).
void decode16(uvec4 w, out uvec4 lo, out uvec4 hi) {
#if defined(KV_BF16)
    lo = w;
    hi = uvec4(0);
#else
    uint o[8];
    UNROLL for (int j = 0; j < 4; ++j) {
        uint x = w[j];
#if defined(KV_I8)
        // (c ^ 0x80) | 0x6400 is the f16 1024 + c + 128: exact; 1152 is
        // subtracted in f16 (exact too).
        f16vec2 a = unpackFloat2x16((( x       & 0x00FF00FFu) ^ 0x00800080u) | 0x64006400u);
        f16vec2 b = unpackFloat2x16((((x >> 8) & 0x00FF00FFu) ^ 0x00800080u) | 0x64006400u);
        o[2 * j] = packFloat2x16(a - f16vec2(1152.0));
        o[2 * j + 1] = packFloat2x16(b - f16vec2(1152.0));
#elif defined(KV_FP8E5M2)
        o[2 * j] = (x << 8) & 0xFF00FF00u;                               // codes 0, 2
        o[2 * j + 1] = x & 0xFF00FF00u;                                  // codes 1, 3
#else
        o[2 * j] = ((x << 7) & 0x3F803F80u) | ((x << 8) & 0x80008000u);  // codes 0, 2
        o[2 * j + 1] = ((x >> 1) & 0x3F803F80u) | (x & 0x80008000u);     // codes 1, 3
#endif
    }
    lo = uvec4(o[0], o[1], o[2], o[3]);
    hi = uvec4(o[4], o[5], o[6], o[7]);
#endif
}

// 16 bytes of a K/V row at addr (VEC-aligned) in loads of VEC bytes.
uvec4 load16(uint64_t addr) {
    if (VEC >= 16) return RoU32x4(addr).v[0];
    if (VEC == 8) {
        RoU32x2 r = RoU32x2(addr);
        return uvec4(r.v[0], r.v[1]);
    }
    uint w[4];
    UNROLL for (int j = 0; j < 4; ++j) {
        const uint64_t a = addr + uint64_t(4 * j);
        if (VEC == 4) {
            w[j] = RoU32(a).v[0];
        } else if (VEC == 2) {
            RoU16 r = RoU16(a);
            w[j] = uint(r.v[0]) | (uint(r.v[1]) << 16);
        } else {
            RoU8 r = RoU8(a);
            w[j] = uint(r.v[0]) | (uint(r.v[1]) << 8) | (uint(r.v[2]) << 16) | (uint(r.v[3]) << 24);
        }
    }
    return uvec4(w[0], w[1], w[2], w[3]);
}

// Two staged elements of a word as f32 (f16 pairs, or raw bf16 pairs).
vec2 unpack2(uint w) {
#if defined(KV_BF16)
    return vec2(uintBitsToFloat(w << 16), uintBitsToFloat(w & 0xFFFF0000u));
#else
    return unpackHalf2x16(w);
#endif
}

// The workgroup is one subgroup, so a subgroup barrier is the whole
// synchronisation. It orders shared memory only, all the tile loop needs
// (GLSL's subgroupBarrier() would also order buffer memory, which the next
// tile's loads in flight across it do not need).
void sync_shared() {
    controlBarrier(gl_ScopeSubgroup, gl_ScopeSubgroup, gl_StorageSemanticsShared,
                       gl_SemanticsAcquireRelease);
}

float shfl_add(float x) {
    for (int o = 1; o < C; o <<= 1) x += subgroupShuffleXor(x, uint(o));
    return x;
}

// Element offset of row slot n's q row (request b, heads from h0); a
// padding slot reads the last real row's.
int64_t q_row(int b, int h0, int n) {
    const int nc = min(n, ROWS - 1);
    return int64_t(b) * pc.q_sb + int64_t(nc % R) * pc.q_sr + int64_t(h0 + nc / R) * pc.q_sh;
}

void main() {
    const int split = int(gl_WorkGroupID.x);
    const int G = pc.hq / pc.hkv;
    const int nrb = G / QH;
    const int g = int(gl_WorkGroupID.y) / nrb;
    const int rb = int(gl_WorkGroupID.y) % nrb;
    const int h0 = g * G + rb * QH;
    const int b = int(gl_WorkGroupID.z);
    const int lane = int(gl_LocalInvocationID.x);

    // ---- the request's pages and keys, bounded ----
    // Every lane reads the same words; broadcast, the driver knows that the
    // values, the loop bounds and so the tile loop's control flow are
    // uniform (the SASS handled the loop's exit as a divergent one).
    const int L = subgroupBroadcastFirst(qa_ld_i32(pc.lens, int64_t(b) * pc.lens_s));
    // Key p's page id is kv_indices[ip0 + p / P]; the key exists only where
    // that entry lies in [ip0, ip1) and in [0, n_indices).
    const int ip0 = subgroupBroadcastFirst(qa_ld_i32(pc.indptr, int64_t(b) * pc.indptr_s));
    const int ip1 = subgroupBroadcastFirst(min(qa_ld_i32(pc.indptr, int64_t(b + 1) * pc.indptr_s), pc.n_indices));
    // Keys that may exist: positions below the request's entries' capacity
    // (those whose entry is negative are hidden per key below); none in an
    // empty cache, whose first slot the loads of hidden keys could not read.
    const int64_t cap64 = pc.n_slots > 0 ? max(int64_t(ip1) - int64_t(ip0), int64_t(0)) * pc.page_size : 0;
    const int cap = int(min(cap64, int64_t(0x7FFFFFFF)));
    // Keys whose entry would precede kv_indices[0] do not exist either: the
    // first key that may exist (so a negative kv_indptr row costs nothing).
    const int kfirst = int(min(ip0 < 0 ? -int64_t(ip0) * pc.page_size : int64_t(0), int64_t(0x7FFFFFFF)));
    // Visible range of the union of this workgroup's rows (rows differ by r).
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

    // ---- q rows -> f16 with a per-row power of two (bf16's range does not
    // fit f16, its precision does; f16 rows are scaled alike). Branch-free
    // and unrolled over the rows so every row's loads are in flight together
    // (padding rows read a real row's addresses and stage zeros). ----
    const bool qf16 = (pc.flags & QA_TILE_Q_F16) != 0;
    const int QPL = (D + SG - 1) / SG;      // dims per lane in the max pass
    const int QCL = (D / 8 + SG - 1) / SG;  // 8-dim chunks per lane in the staging pass
    float qmx[NR];
    [[unroll]] for (int n = 0; n < NR; ++n) {
        const int64_t qb = q_row(b, h0, n);
        float mx = 0.0;
        [[unroll]] for (int k = 0; k < QPL; ++k) {
            const int d = lane + SG * k;
            const float x = qa_ld_q(qb + min(d, D - 1), qf16);
            mx = max(mx, d < D ? abs(x) : 0.0);
        }
        qmx[n] = mx;
    }
    // The rows' maxima over the subgroup, interleaved: subgroupMax became a
    // call per row to a routine that first votes whether every lane is
    // active (the H200's SASS); the workgroup is one full subgroup, so a
    // butterfly of shuffles is exact.
    [[unroll]] for (int o = 1; o < SG; o <<= 1) {
        [[unroll]] for (int n = 0; n < NR; ++n) qmx[n] = max(qmx[n], subgroupShuffleXor(qmx[n], uint(o)));
    }
    [[unroll]] for (int n = 0; n < NR; ++n) {
        const bool real = n < ROWS;
        const int64_t qb = q_row(b, h0, n);
        const float mx = qmx[n];
        int e = 0;
        if (mx > 0.0) {
            int ex;
            frexp(mx, ex);
            e = 15 - ex; // mx * 2^e in [2^14, 2^15)
        }
        if (lane == 0) sqf[n] = real ? ldexp(1.0, -e) : 0.0;
        [[unroll]] for (int k = 0; k < QCL; ++k) {
            const int c = lane + SG * k;
            const int cc = min(c, D / 8 - 1);
            uint wq[4];
            [[unroll]] for (int j = 0; j < 4; ++j) {
                float x[2];
                [[unroll]] for (int u = 0; u < 2; ++u) {
                    // Staged position cc*8 + 2j + u holds dim pos(...) under PERM.
                    const int sp_ = cc * 8 + 2 * j + u;
                    const int dm = PERM != 0 ? ((sp_ & ~3) | ((sp_ & 1) << 1) | ((sp_ >> 1) & 1)) : sp_;
                    const float y = ldexp(qa_ld_q(qb + dm, qf16), e);
                    x[u] = real ? y : 0.0;
                }
                wq[j] = packHalf2x16(vec2(x[0], x[1]));
            }
            if (c < D / 8) sq[n * LD4 + c] = uvec4(wq[0], wq[1], wq[2], wq[3]);
        }
    }

    // Per lane and softmax row: running max (log2 units), partial sum.
    float m[RPL], l[RPL], qf_r[RPL];
    int lo_r[RPL], hi_r[RPL];
    [[unroll]] for (int i = 0; i < RPL; ++i) {
        const int n = lane / C + RG * i;
        m[i] = QA_NEG_INF;
        l[i] = 0.0;
        int lo = 0, hi = -1;
        if (n < ROWS) {
            qa_visible(L, R, n % R, lo, hi);
            lo = max(lo, kfirst);
            hi = min(hi, cap - 1);
        }
        lo_r[i] = lo;
        hi_r[i] = hi;
        qf_r[i] = 0.0;
    }
    sync_shared();
    [[unroll]] for (int i = 0; i < RPL; ++i) {
        const int n = lane / C + RG * i;
        qf_r[i] = n < NR ? sqf[n] * pc.sm_scale : 0.0;
    }

#if MATRIX
    coopmat<float16_t, gl_ScopeSubgroup, 16, NR, gl_MatrixUseB> qb_[D / 16];
    UNROLL for (int j = 0; j < D / 16; ++j)
        coopMatLoad(qb_[j], sq, j * 2, LD4, gl_CooperativeMatrixLayoutColumnMajor);
    coopmat<float, gl_ScopeSubgroup, 16, NR, gl_MatrixUseAccumulator> oacc[DV / 16];
    UNROLL for (int j = 0; j < DV / 16; ++j)
        oacc[j] = coopmat<float, gl_ScopeSubgroup, 16, NR, gl_MatrixUseAccumulator>(0.0);
#else
    // Lanes own groups of 8 output dims of one row: group e = lane + SG * i.
    const int OG = (DV / 8) * NR;
    const int OPL = (OG + SG - 1) / SG;
    float oacc[OPL * 8];
    UNROLL for (int i = 0; i < OPL * 8; ++i) oacc[i] = 0.0;
#endif

    // ---- the tile loop. Loads are software-pipelined: the page ids of
    // tile t + 2 and the data of tile t + 1 are in flight while tile t is
    // computed. Nothing reads a loaded register before the next iteration's
    // staging: the masks that zero the words of keys that do not exist are
    // applied there, not where the loads are issued (a select right behind a
    // load makes the subgroup wait for the memory at once). Every address is
    // formed from bounded indices (a clamp or select, not a branch), so loads
    // issue back to back; a key that does not exist loads its head's first
    // row (inside the cache, which holds a slot whenever a tile runs).
    //
    // Addresses: the head's base in 64 bits once; PAGED: a page's base in
    // 64 bits (page id times page stride) once per tile and offsets inside a
    // page (rows, the chunk's bytes) in 32 bits, which the core guarantees
    // (qattn_cache_kernel_view), so a cache may span any size; PAGED == 0:
    // a key's row offset from the head's base in 32 bits, exact modulo 2^32,
    // so the planner gives caches of more than 2^32 elements the PAGED path
    // only.
    const uint64_t kbase = pc.k + uint64_t(g) * uint64_t(pc.k_hs) * uint(ES);
    const uint64_t vbase = pc.v + uint64_t(g) * uint64_t(pc.v_hs) * uint(ES);
    const uint64_t ksbase = pc.ks + uint64_t(g) * uint64_t(pc.ks_hs) * 4u;
    const uint64_t vsbase = pc.vs + uint64_t(g) * uint64_t(pc.vs_hs) * 4u;
    const uint psz = uint(pc.page_size);
    uvec4 rk[NCH], rv[NCHV];              // loaded words, raw
    bool rok[NCH], rokv[NCHV];            // whether a chunk's key exists (its words are zeroed at staging otherwise)
    float rks[NSK], rvs[NSK];             // loaded scales, raw
    bool rsok[NSK];
    int rpos[NSK];                        // PAGED == 0: a key's position, -1: does not exist

    // PAGED: the tile at t0 (a multiple of TK) is rows row0 .. row0 + TK - 1
    // of page kv_indices[ip0 + t0 / P]. Its keys in [klo, khi) exist: at or
    // after kb, before ke, in a page id >= 0, in a slot < n_slots.
    // A lane's K chunk i is c = lane + SG * i: key c / CPK, bytes
    // (c % CPK) * 16 of its row; where a subgroup covers whole rows (AFFINE),
    // that is key lane / CPK + CK * i, so the offsets are a per-lane base
    // plus i steps. V chunks likewise with CPKV (the same when D == DV).
    const bool AFFINE = SG % CPK == 0, AFFINEV = SG % CPKV == 0;
    const int CK = max(SG / CPK, 1), CKV = max(SG / CPKV, 1); // keys one chunk index covers (AFFINE)
    const uint k_loff = uint(lane / CPK) * uint(pc.k_rs) * uint(ES) + uint(lane % CPK) * 16u;
    const uint v_loff = uint(lane / CPKV) * uint(pc.v_rs) * uint(ES) + uint(lane % CPKV) * 16u;
    const uint k_step = uint(CK) * uint(pc.k_rs) * uint(ES), v_step = uint(CKV) * uint(pc.v_rs) * uint(ES);
    const int ta = kb - kb % TK;          // first tile (kb >= 0)
    uint pe = 0u, prow = 0u;              // page entry (from ip0) and row of the next tile whose page id PAGE_OF reads
    int npage = -1;                       // its page id
    int cpage = -1, crow = 0, ct0 = 0;    // the tile being loaded: page, row, first position
    int klo = 0, khi = 0, nklo = 0, nkhi = 0; // keys that exist: of the tile computed now, of the one loaded
    if (PAGED != 0) {
        pe = uint(ta) / psz;
        prow = uint(ta) - pe * psz;
    }
    // PAGED: the page id of the next tile (entry clamped into the request's
    // and the table's entries; a key past them does not exist anyway).
    #define PAGE_OF()                                                                       \
    {                                                                                       \
        const int ent = clamp(ip0 + int(pe), max(ip0, 0), max(ip1 - 1, 0));                 \
        npage = RoI32(pc.indices + uint64_t(uint(ent) * uint(pc.indices_s)) * 4u).v[0];      \
        crow = int(prow);                                                                   \
        prow += uint(TK);                                                                   \
        if (prow >= psz) { prow = 0u; pe += 1u; }                                           \
    }
    // PAGED: issues the data and scale loads of the tile at t0 whose page
    // id PAGE_OF read.
    #define LOAD_PAGE_TILE(t0)                                                              \
    {                                                                                       \
        cpage = npage;                                                                      \
        const int64_t sl0 = int64_t(cpage) * int64_t(pc.page_size) + int64_t(crow);         \
        const int rows_ok = cpage < 0 ? 0 : int(clamp(pc.n_slots - sl0, int64_t(0), int64_t(TK))); \
        nklo = max(kb - int(t0), 0);                                                        \
        nkhi = min(min(ke - int(t0), TK), rows_ok);                                         \
        const bool full = nklo == 0 && nkhi == TK;                                          \
        const uint64_t pg = uint64_t(max(cpage, 0));                                        \
        const uint64_t kt = (pg * uint64_t(pc.k_ps) + uint64_t(uint(crow) * uint(pc.k_rs))) * uint(ES); \
        const uint64_t vt = (pg * uint64_t(pc.v_ps) + uint64_t(uint(crow) * uint(pc.v_rs))) * uint(ES); \
        UNROLL for (int i = 0; i < NCM; ++i) {                                              \
            const int c = lane + SG * i;                                                    \
            const int key = c / CPK;                                                        \
            const bool ok = c < TK * CPK && (full || (key >= nklo && key < nkhi));          \
            if (SAMEKV || i < NCH) {                                                        \
                const uint ko = AFFINE ? k_loff + uint(i) * k_step                          \
                                       : uint(key) * uint(pc.k_rs) * uint(ES) + uint(c % CPK) * 16u; \
                rk[i] = load16(kbase + (ok ? kt + uint64_t(ko) : 0ul));                     \
                rok[i] = ok;                                                                \
            }                                                                               \
            if (SAMEKV || i < NCHV) {                                                       \
                const int keyv = SAMEKV ? key : c / CPKV;                                   \
                const bool okv = SAMEKV ? ok : c < TK * CPKV && (full || (keyv >= nklo && keyv < nkhi)); \
                const uint vo = AFFINEV ? v_loff + uint(i) * v_step                         \
                                        : uint(keyv) * uint(pc.v_rs) * uint(ES) + uint(c % CPKV) * 16u; \
                rv[i] = load16(vbase + (okv ? vt + uint64_t(vo) : 0ul));                    \
                if (!SAMEKV) rokv[i] = okv;                                                 \
            }                                                                               \
        }                                                                                   \
        UNROLL for (int i = 0; i < NSK; ++i) {                                              \
            const int key = lane + SG * i;                                                  \
            const bool ok = key >= nklo && key < nkhi;                                      \
            rsok[i] = ok;                                                                   \
            rks[i] = 0.0;                                                                   \
            rvs[i] = 0.0;                                                                   \
            if (HAS_SCALES) {                                                               \
                const uint r_ = uint(crow + min(key, TK - 1));                              \
                const uint64_t so = ok ? pg * uint64_t(pc.ks_ps) + uint64_t(r_ * uint(pc.ks_rs)) : 0ul; \
                const uint64_t vo = ok ? pg * uint64_t(pc.vs_ps) + uint64_t(r_ * uint(pc.vs_rs)) : 0ul; \
                rks[i] = RoF32(ksbase + so * 4ul).v[0];                                     \
                rvs[i] = RoF32(vsbase + vo * 4ul).v[0];                                     \
            }                                                                               \
        }                                                                                   \
    }

    // PAGED == 0: a key's page entry and row advance by TK per tile (no
    // division in the loop). Entries are clamped to the request's last one
    // (a key past ke only needs an address that is inside kv_indices).
    const uint k_ps = uint(pc.k_ps), v_ps = uint(pc.v_ps), ks_ps = uint(pc.ks_ps), vs_ps = uint(pc.vs_ps);
    const uint step_e = uint(TK) / psz, step_r = uint(TK) % psz;
    const uint last_e = ip1 > ip0 ? uint(ip1) - uint(ip0) - 1u : 0u;
    uint ce[NSK], cr[NSK];                // entry (from ip0) and row of key lane + SG*i of the next tile KEYS_OF describes
    int kpg[NSK], nrow[NSK], nok[NSK];    // what it described
    if (PAGED == 0) {
        UNROLL for (int i = 0; i < NSK; ++i) {
            const uint p = uint(max(kb, 0)) + uint(lane + SG * i);
            ce[i] = p / psz;
            cr[i] = p - ce[i] * psz;
        }
    }
    // Page id, row and existence of key lane + SG*i of the tile at t0 (the
    // tiles after the last one described, in order); then one tile on.
    #define KEYS_OF(t0)                                                                     \
    {                                                                                       \
        UNROLL for (int i = 0; i < NSK; ++i) {                                              \
            const int key = lane + SG * i;                                                  \
            const uint pos = uint(t0) + uint(key);                                          \
            const int ent = ip0 + int(min(ce[i], last_e));                                  \
            const uint at = uint(max(ent, 0)) * uint(pc.indices_s);                         \
            kpg[i] = RoI32(pc.indices + uint64_t(at) * 4u).v[0];                            \
            nrow[i] = int(cr[i]);                                                           \
            nok[i] = (key < TK && pos < uint(ke) && ent >= 0) ? 1 : 0;                      \
            const uint r2 = cr[i] + step_r;                                                 \
            const bool wrap = r2 >= psz;                                                    \
            cr[i] = wrap ? r2 - psz : r2;                                                   \
            ce[i] += step_e + (wrap ? 1u : 0u);                                             \
        }                                                                                   \
    }
    // Issues the data and scale loads of the tile at t0 whose keys KEYS_OF
    // described. Row offsets are elements in 32 bits (caches below 2^32
    // elements, plan_decode.c); their bytes are formed in 64 (bf16 past 4 GiB).
    #define LOAD_KEY_TILE(t0)                                                               \
    {                                                                                       \
        uint kro[NSK], vro[NSK]; /* a key's K and V row offsets (elements), ~0u: no key */  \
        UNROLL for (int i = 0; i < NSK; ++i) {                                              \
            const int kp = kpg[i], kr = nrow[i];                                            \
            const bool listed = nok[i] != 0;                                                \
            const bool page_ok = kp >= 0;                                                   \
            const bool slot_ok = int64_t(kp) * pc.page_size + kr < pc.n_slots;              \
            const bool kk = listed && page_ok && slot_ok;                                   \
            kro[i] = kk ? uint(kp) * k_ps + uint(kr) * uint(pc.k_rs) : ~0u;                 \
            vro[i] = kk ? uint(kp) * v_ps + uint(kr) * uint(pc.v_rs) : ~0u;                 \
            rsok[i] = kk;                                                                   \
            rpos[i] = kk ? int(uint(t0) + uint(lane + SG * i)) : -1;                        \
            rks[i] = 0.0;                                                                   \
            rvs[i] = 0.0;                                                                   \
            if (HAS_SCALES) {                                                               \
                const uint so = kk ? uint(kp) * ks_ps + uint(kr) * uint(pc.ks_rs) : 0u;     \
                const uint vo = kk ? uint(kp) * vs_ps + uint(kr) * uint(pc.vs_rs) : 0u;     \
                rks[i] = RoF32(ksbase + uint64_t(so) * 4u).v[0];                            \
                rvs[i] = RoF32(vsbase + uint64_t(vo) * 4u).v[0];                            \
            }                                                                               \
        }                                                                                   \
        UNROLL for (int i = 0; i < NCM; ++i) {                                              \
            const int c = lane + SG * i;                                                    \
            const int key = min(c / CPK, TK - 1);                                           \
            const int keyv = SAMEKV ? key : min(c / CPKV, TK - 1);                          \
            uint ko = ~0u, vo = ~0u;                                                        \
            UNROLL for (int j = 0; j < NSK; ++j) {                                          \
                const uint a_ = subgroupShuffle(kro[j], uint(key % SG));                    \
                const uint b_ = subgroupShuffle(vro[j], uint(keyv % SG));                   \
                if (SAMEKV) {                                                               \
                    if (key / SG == j) { ko = a_; vo = b_; }                                \
                } else {                                                                    \
                    if (key / SG == j) ko = a_;                                             \
                    if (keyv / SG == j) vo = b_;                                            \
                }                                                                           \
            }                                                                               \
            const bool ok = c < TK * CPK && ko != ~0u;                                      \
            const bool okv = SAMEKV ? ok : c < TK * CPKV && vo != ~0u;                      \
            const uint part = uint(c % CPK) * 16u;                                          \
            const uint partv = SAMEKV ? part : uint(c % CPKV) * 16u;                        \
            if (SAMEKV || i < NCH) {                                                        \
                const uint64_t kbo = ok ? uint64_t(ko) * uint(ES) + part : 0ul;             \
                rk[i] = load16(kbase + uint64_t(kbo));                                      \
                rok[i] = ok;                                                                \
            }                                                                               \
            if (SAMEKV || i < NCHV) {                                                       \
                const uint64_t vbo = okv ? uint64_t(vo) * uint(ES) + partv : 0ul;           \
                rv[i] = load16(vbase + uint64_t(vbo));                                      \
                if (!SAMEKV) rokv[i] = okv;                                                 \
            }                                                                               \
        }                                                                                   \
    }

    // Decodes 16 cache bytes w (chunk `part` of key `key`'s row) into the
    // staged tile `dst` of row stride LDX.
#if defined(KV_BF16)
    #define STAGE16(dst, LDX, key, part, w) { dst[(key) * (LDX) + (part)] = (w); }
#else
    #define STAGE16(dst, LDX, key, part, w)                                                 \
    {                                                                                       \
        uvec4 lo_, hi_;                                                                     \
        decode16(w, lo_, hi_);                                                              \
        dst[(key) * (LDX) + 2 * (part)] = lo_;                                              \
        dst[(key) * (LDX) + 2 * (part) + 1] = hi_;                                          \
    }
#endif

    const int t_first = PAGED != 0 ? ta : kb;
    if (kb < ke) {
        if (PAGED != 0) {
            PAGE_OF();
            LOAD_PAGE_TILE(t_first);
            PAGE_OF();
        } else {
            KEYS_OF(kb);
            LOAD_KEY_TILE(kb);
            KEYS_OF(kb + TK);
        }
    }
    bool rescale = false; // whether this tile's alpha is not 1 for some row (uniform)
    // Unsigned: t0 + 2 TK may pass INT32_MAX.
    for (uint t0 = uint(t_first); t0 < uint(ke); t0 += uint(TK)) {
        klo = nklo;
        khi = nkhi;
        // 1. stage the loaded tile (the first read of its registers)
        UNROLL for (int i = 0; i < NCM; ++i) {
            const int c = lane + SG * i;
            if (SAMEKV) { // K and V chunk i hold the same key and part
                if (c < TK * CPK) {
                    const uvec4 mk = uvec4(rok[i] ? ~0u : 0u);
                    const int key = c / CPK, part = c % CPK;
                    STAGE16(skt, LD4, key, part, rk[i] & mk);
                    STAGE16(svt, LD4V, key, part, rv[i] & mk);
                }
            } else {
                if (i < NCH && c < TK * CPK)
                    STAGE16(skt, LD4, c / CPK, c % CPK, rk[i] & uvec4(rok[i] ? ~0u : 0u));
                if (i < NCHV && c < TK * CPKV)
                    STAGE16(svt, LD4V, c / CPKV, c % CPKV, rv[i] & uvec4(rokv[i] ? ~0u : 0u));
            }
        }
        UNROLL for (int i = 0; i < NSK; ++i) {
            const int key = lane + SG * i;
            if (key < TK) {
                sks[key] = rsok[i] ? (HAS_SCALES ? KF * rks[i] : KF) : 0.0;
                svs[key] = rsok[i] ? (HAS_SCALES ? (VPF != 1.0 ? rvs[i] * VPF : rvs[i]) : 1.0) : 0.0;
                if (PAGED == 0) spos[key] = rpos[i];
            }
        }
        sync_shared();
        // Next tile's data and the page ids of the one after, in flight
        // while this one is computed.
        if (t0 + uint(TK) < uint(ke)) {
            if (PAGED != 0) {
                LOAD_PAGE_TILE(t0 + uint(TK));
                PAGE_OF();
            } else {
                LOAD_KEY_TILE(t0 + uint(TK));
                KEYS_OF(t0 + uint(2 * TK));
            }
        }
        // 2. S^T = K Q^T
#if MATRIX
        UNROLL for (int kt = 0; kt < KT; ++kt) {
            coopmat<float, gl_ScopeSubgroup, 16, NR, gl_MatrixUseAccumulator> sacc =
                coopmat<float, gl_ScopeSubgroup, 16, NR, gl_MatrixUseAccumulator>(0.0);
            UNROLL for (int j = 0; j < D / 16; ++j) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> ka;
                coopMatLoad(ka, skt, kt * 16 * LD4 + j * 2, LD4, gl_CooperativeMatrixLayoutRowMajor);
                sacc = coopMatMulAdd(ka, qb_[j], sacc);
            }
            coopMatStore(sacc, ss, kt * 16 * NR, NR, gl_CooperativeMatrixLayoutRowMajor);
        }
#else
        for (int e = lane; e < TK * NR; e += SG) {
            const int key = e / NR, n = e % NR;
            float acc = 0.0;
            if (n < ROWS) {
                for (int c = 0; c < D / 8; ++c) {
                    const uvec4 kw = skt[key * LD4 + c], qw = sq[n * LD4 + c];
                    UNROLL for (int j = 0; j < 4; ++j) {
                        const vec2 kk = unpack2(kw[j]), qq = unpackHalf2x16(qw[j]);
                        acc += kk.x * qq.x + kk.y * qq.y;
                    }
                }
            }
            ss[key * NR + n] = acc;
        }
#endif
        sync_shared();

        // 3. online softmax; lane: keys kq + C*j, rows lane/C + RG*i for
        // the RPR row groups that hold a real row. Unrolled and branch-free
        // up to the stores: the row loop indexes the per-row arrays (a loop
        // the driver does not unroll puts them in local memory), and the
        // reductions must run in converged control flow (NVIDIA turns a
        // shuffle under a divergent branch into a call to a slow path).
        // Every row's reads come before any row's stores (a store to ss may
        // alias the next row's read as far as the compiler knows, which
        // serialised the rows' latency chains in the SASS), the per-key
        // values are read once for all rows, the soft cap is one uniform
        // branch and the rows' shuffle reductions are interleaved. Padding
        // rows compute on -inf and store nothing.
        {
            const int kq = lane % C;
            int kpos[KPL];
            float kscale[KPL], vscale[KPL];
            [[unroll]] for (int j = 0; j < KPL; ++j) {
                const int key = kq + C * j;
                kpos[j] = PAGED != 0 ? (key >= klo && key < khi ? int(t0) + key : -1) : spos[key];
                kscale[j] = sks[key];
                vscale[j] = svs[key];
            }
            float s[RPR * KPL], tmax[RPR];
            [[unroll]] for (int i = 0; i < RPR; ++i) {
                const int nn = min(lane / C + RG * i, NR - 1);
                [[unroll]] for (int j = 0; j < KPL; ++j)
                    s[i * KPL + j] = ss[(kq + C * j) * NR + nn] * qf_r[i] * kscale[j];
            }
            if (pc.softcap > 0.0) {
                [[unroll]] for (int e = 0; e < RPR * KPL; ++e) s[e] = pc.softcap * qa_tanh(s[e] / pc.softcap);
            }
            [[unroll]] for (int i = 0; i < RPR; ++i) {
                const bool real = lane / C + RG * i < ROWS;
                tmax[i] = QA_NEG_INF;
                [[unroll]] for (int j = 0; j < KPL; ++j) {
                    const int p = kpos[j];
                    const bool vis = real && p >= 0 && p >= lo_r[i] && p <= hi_r[i];
                    const float x = vis ? s[i * KPL + j] * float(QA_LOG2E) : QA_NEG_INF;
                    s[i * KPL + j] = x;
                    tmax[i] = max(tmax[i], x);
                }
            }
            [[unroll]] for (int o = 1; o < C; o <<= 1) {
                [[unroll]] for (int i = 0; i < RPR; ++i) tmax[i] = max(tmax[i], subgroupShuffleXor(tmax[i], uint(o)));
            }
            // The running output is rescaled only in tiles where some row's
            // maximum grew (alpha is exactly 1 otherwise, the common case
            // once the maxima settle): one vote, a uniform branch.
            float alpha[RPR];
            bool grew = false;
            [[unroll]] for (int i = 0; i < RPR; ++i) {
                const float mn = max(m[i], tmax[i]);
                alpha[i] = mn == QA_NEG_INF ? 1.0 : exp2(m[i] - mn);
                grew = grew || (lane / C + RG * i < ROWS && alpha[i] != 1.0);
                m[i] = mn;
            }
            rescale = subgroupAny(grew);
            [[unroll]] for (int i = 0; i < RPR; ++i) {
                const int n = lane / C + RG * i;
                const bool real = n < ROWS;
                float ps = 0.0;
                [[unroll]] for (int j = 0; j < KPL; ++j) {
                    const int key = kq + C * j;
                    const float x = s[i * KPL + j];
                    const float p = x == QA_NEG_INF ? 0.0 : exp2(x - m[i]);
                    ps += p;
                    if (real) sp[n * LDP + key] = float16_t(p * vscale[j]);
                    if (real && rescale) ss[key * NR + n] = alpha[i];
                }
                l[i] = l[i] * alpha[i] + ps;
            }
        }
        sync_shared();
        // 4. O^T = O^T * alpha + V^T P^T
#if MATRIX
        {
            if (rescale) {
                coopmat<float, gl_ScopeSubgroup, 16, NR, gl_MatrixUseAccumulator> am;
                coopMatLoad(am, ss, 0, NR, gl_CooperativeMatrixLayoutRowMajor);
                UNROLL for (int j = 0; j < DV / 16; ++j) oacc[j] = oacc[j] * am;
            }
            UNROLL for (int kt = 0; kt < KT; ++kt) {
                coopmat<float16_t, gl_ScopeSubgroup, 16, NR, gl_MatrixUseB> pb;
                coopMatLoad(pb, sp, kt * 16, LDP, gl_CooperativeMatrixLayoutColumnMajor);
                UNROLL for (int j = 0; j < DV / 16; ++j) {
                    coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA> va;
                    coopMatLoad(va, svt, kt * 16 * LD4V + j * 2, LD4V, gl_CooperativeMatrixLayoutColumnMajor);
                    oacc[j] = coopMatMulAdd(va, pb, oacc[j]);
                }
            }
        }
#else
        UNROLL for (int i = 0; i < OPL; ++i) {
            const int e = lane + SG * i;
            if (e < OG) {
                const int n = e / (DV / 8), c = e % (DV / 8);
                const float alpha = rescale ? ss[n] : 1.0;
                float a[8];
                UNROLL for (int u = 0; u < 8; ++u) a[u] = oacc[i * 8 + u] * alpha;
                for (int key = 0; key < TK; ++key) {
                    const float p = float(sp[n * LDP + key]);
                    const uvec4 vw = svt[key * LD4V + c];
                    UNROLL for (int j = 0; j < 4; ++j) {
                        const vec2 vv = unpack2(vw[j]);
                        a[2 * j] += p * vv.x;
                        a[2 * j + 1] += p * vv.y;
                    }
                }
                UNROLL for (int u = 0; u < 8; ++u) oacc[i * 8 + u] = a[u];
            }
        }
#endif
        sync_shared();
    }

    // ---- partials: unnormalised O^T (staged dims), m and l per row slot ----
    const int S = pc.num_splits;
    const int64_t slot0 = ((int64_t(b) * pc.hkv + g) * nrb + rb) * NR; // first row slot
#if MATRIX
    UNROLL for (int j = 0; j < DV / 16; ++j) {
        if (VPF != 1.0) oacc[j] = oacc[j] * float(1.0 / VPF);
        coopMatStore(oacc[j], RefF32(pc.ws_o).v, uint((slot0 * S + split) * DV + j * 16), uint(S * DV),
                     gl_CooperativeMatrixLayoutColumnMajor);
    }
#else
    UNROLL for (int i = 0; i < OPL; ++i) {
        const int e = lane + SG * i;
        if (e < OG) {
            const int n = e / (DV / 8), c = e % (DV / 8);
            const int64_t at = ((slot0 + n) * S + split) * DV + c * 8;
            UNROLL for (int u = 0; u < 8; ++u)
                RefF32(qa_at(pc.ws_o, at + u, 4)).v[0] = VPF != 1.0 ? oacc[i * 8 + u] * float(1.0 / VPF) : oacc[i * 8 + u];
        }
    }
#endif
    [[unroll]] for (int i = 0; i < RPL; ++i) {
        const int n = lane / C + RG * i;
        const float lt = shfl_add(l[i]);
        if (n < NR && lane % C == 0) {
            const int64_t at = ((slot0 + n) * S + split) * 2;
            RefF32(qa_at(pc.ws_ml, at, 4)).v[0] = m[i];
            RefF32(qa_at(pc.ws_ml, at + 1, 4)).v[0] = lt;
        }
    }
}
