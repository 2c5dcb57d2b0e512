#version 450
// FP8 MQA logits (spec 3) on cooperative matrices: q.k as f16 x f16 -> f32
// matrix products. fp8 codes decode to f16 exactly (every e4m3 fn/fnuz value
// is an f16 normal or zero), so only the accumulation order differs from
// the reference.
//
// Layout. The workgroup's rows x heads form (row, head) pairs; subgroup s
// holds 16*MT consecutive pairs (MT m-groups of 16, never straddling a row)
// of q as A fragments in registers for the whole KV range. Each KV tile of
// 16*NT columns is decoded once into shared memory (f16, column-major for B)
// and every subgroup multiplies its pairs by all of it.
//
// Epilogue, per tile: acc[pair, col] is turned into w[pair] * max(0, acc)
// element-wise against an accumulator-shaped matrix of the weights (so no
// knowledge of the implementation's element layout is needed), the m-tiles
// of one row are summed element-wise, and the per-row TM x BN partials go to
// shared memory column-major (a column's TM values contiguous, columns CS
// floats apart) where one thread per (row, column) adds the TM rows with
// TM/4 vec4 loads (and the other subgroups of that row) and scales by
// |k_scale|. A negative k_scale is folded into the decoded key's sign,
// since max(0, s x) = |s| max(0, sign(s) x).
//
// Hardware tiles are TM x TN x TK (spec constants, dividing 16): 16x16x16 on
// NVIDIA/AMD, 8x8x8 on lavapipe; a logical 16-block is (16/TM) x (16/TN).
// Rows past S are zero in q and never written; windows, clean_logits and
// KV slices are handled as in mqa_logits_simt.comp.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
#include "mqa_logits_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 10) const int MT = 2;     // 16-pair m-groups per subgroup
layout(constant_id = 11) const int NT = 4;     // 16-column n-groups per tile (KT = 16 NT)
layout(constant_id = 12) const int HEADS = 64; // H (pairs -> rows)
layout(constant_id = 13) const int TM = 16;    // hardware matrix shape
layout(constant_id = 14) const int TN = 16;
layout(constant_id = 15) const int TK = 16;

const int NTH = NSG * SG;
const int PAIRS = 16 * MT;                 // (row, head) pairs per subgroup
const int SPR = HEADS > PAIRS ? HEADS / PAIRS : 1; // subgroups per row
const int RPSG = PAIRS > HEADS ? PAIRS / HEADS : 1; // rows per subgroup
const int RPW = NSG / SPR * RPSG;          // rows per workgroup
const int BN = 16 * NT;                    // KV columns per tile (== KT)
const int KROW = D + 8;                    // f16 per key row in shared (padded)
const int QROW = 64 + 8;                   // f16 per q row of a staging chunk
const int MH = PAIRS / TM;                 // hardware m-tiles per subgroup
const int NH = BN / TN;                    // hardware n-tiles per tile
const int KH = D / TK;                     // hardware k-steps
const int MH_ROW = MH / RPSG;              // hardware m-tiles per row held

const int KBUF = BN * KROW > NSG * 16 * QROW ? BN * KROW : NSG * 16 * QROW;
// Key tile, or q chunks before the KV loop; f16 in groups of 4 so a thread
// stores its 16 decoded codes with four 8-byte stores. Offsets and strides
// of the matrix loads below are in these 4-half units.
shared f16vec4 kbuf[KBUF / 4];
// Per (subgroup, row held) TM x BN partials, column-major with a column
// stride of CS floats: TM + 4 puts the vec4 reads of neighbouring columns in
// distinct banks. Also the weight matrices (row-major TM x TN) on their way
// into registers. In vec4 units, like kbuf.
const int CS = TM + 4;
const int SREG = BN * CS / 4; // vec4 of one (subgroup, row) partial
shared vec4 scratch[NSG * RPSG * SREG];
shared float sabs[2 * BN];                 // |k_scale| x 2^(qshift+kshift), two tiles
shared ivec2 swin[RPW];                    // the workgroup rows' windows

// Chunks of 16 codes each thread stages per tile (prefetched in registers).
const int PF = (BN * (D / 16) + NTH - 1) / NTH;

// fp8 codes -> f16 equal to value x 2^-8 (fn) or 2^-7 (fnuz), exactly:
// each code's exponent and mantissa bits become the low exponent and top
// mantissa bits of an f16 (subnormal codes land on f16 subnormals). Four
// codes c0..c3 of one word come out as f16 pairs (c0, c2) and (c1, c3): two
// shifts and masks put each code's seven low bits at 13..7 of its half and
// its sign at bit 14, and adding bit 14 to itself moves the sign to bit 15.
// The dimension order within each group of four is thus (0, 2, 1, 3), for q
// and k alike, which leaves every q.k sum the same. `neg` (0 or 0x40004000)
// flips the signs before they move (the k_scale sign fold). NaN codes are
// patched by fp8x4_nan_fix (rare; one test per 16 codes).
uvec2 fp8x4_to_f16_bits(uint w, uint neg) {
    const uvec2 x = (uvec2(w << 7, w >> 1) & uvec2(0x7F807F80u)) ^ uvec2(neg);
    return x + (x & uvec2(0x40004000u));
}

// Bit 7 of each byte set where the code is NaN (fn: S.1111.111; fnuz: 0x80).
uint fp8x4_nan(uint w, bool fnuz) {
    const uint m = w & 0x7F7F7F7Fu;
    return fnuz ? (w & 0x80808080u & ~(m + 0x7F7F7F7Fu)) : ((m + 0x01010101u) & 0x80808080u);
}

// An f16 NaN in the half of each NaN code (c0, c2 in h.x; c1, c3 in h.y).
uvec2 fp8x4_nan_fix(uvec2 h, uint nan) {
    [[unroll]] for (int i = 0; i < 4; ++i) {
        if ((nan & (0x80u << (8 * i))) == 0u) continue;
        const uint sh = 16u * uint(i >> 1);
        h[i & 1] = (h[i & 1] & ~(0xFFFFu << sh)) | (0x7E00u << sh);
    }
    return h;
}

// 16 codes -> their f16 values, as four f16vec4 in the order above.
void fp8x16_to_f16(uvec4 w, bool fnuz, bool negate, out f16vec4 v[4]) {
    const uint neg = negate ? 0x40004000u : 0u;
    uvec2 h[4];
    [[unroll]] for (int e = 0; e < 4; ++e) h[e] = fp8x4_to_f16_bits(w[e], neg);
    const uvec4 nan = uvec4(fp8x4_nan(w.x, fnuz), fp8x4_nan(w.y, fnuz), fp8x4_nan(w.z, fnuz), fp8x4_nan(w.w, fnuz));
    if ((nan.x | nan.y | nan.z | nan.w) != 0u) {
        [[unroll]] for (int e = 0; e < 4; ++e) h[e] = fp8x4_nan_fix(h[e], nan[e]);
    }
    [[unroll]] for (int e = 0; e < 4; ++e) v[e] = f16vec4(unpackFloat2x16(h[e].x), unpackFloat2x16(h[e].y));
}

// Thread -> (column, 16-code chunk) of a tile, chunk fastest so neighbours
// read neighbouring bytes of one key row. Columns past S_kv load zeros.
// `kt`/`st` are the tile's first key row and scale (advanced by the caller
// one tile at a time); the chunk's offset inside the tile is int32 (the
// planner checks kv_tile x k row stride + D), so no 64-bit product is
// formed per chunk.
void load_tile(int t, int tid, uint64_t kt, uint64_t st, out uvec4 pf[PF], out float pfs[PF]) {
    [[unroll]] for (int x = 0; x < PF; ++x) {
        const int idx = tid + x * NTH, col = idx / (D / 16), dc = idx % (D / 16), j = t * BN + col;
        pf[x] = uvec4(0u);
        pfs[x] = 0.0;
        if (idx < BN * (D / 16) && j < pc.S_kv) {
            pf[x] = mqa_load16(kt + uint64_t(uint(col * pc.k_row + dc * 16)));
            pfs[x] = RefF32(mqa_row(st, col, pc.scale_stride, 4u)).v[0];
        }
    }
}

// Decodes the prefetched chunks into the key tile (column-major for B:
// column col's D halves at col * KROW), negated where k_scale < 0, and
// stores |k_scale| x 2^(qshift + kshift) for the epilogue.
void store_tile(int tid, int sb, uvec4 pf[PF], float pfs[PF]) {
    [[unroll]] for (int x = 0; x < PF; ++x) {
        const int idx = tid + x * NTH, col = idx / (D / 16), dc = idx % (D / 16);
        if (idx >= BN * (D / 16)) continue;
        const bool neg = pfs[x] < 0.0;
        const int o = (col * KROW + dc * 16) / 4;
        f16vec4 v[4];
        fp8x16_to_f16(pf[x], K_FNUZ, neg, v);
        [[unroll]] for (int e = 0; e < 4; ++e) kbuf[o + e] = v[e];
        // Decoded codes carry 2^-8 (fn) or 2^-7 (fnuz); products carry both.
        const float unshift = (Q_FNUZ ? 128.0 : 256.0) * (K_FNUZ ? 128.0 : 256.0);
        if (dc == 0) sabs[sb + col] = abs(pfs[x]) * unshift;
    }
}

#define ACC coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>
#define MATA coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define MATB coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>

void main() {
    const int tid = int(gl_LocalInvocationID.x);
    const int sub = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
    const ivec2 st = mqa_slice_tiles(int(gl_WorkGroupID.y), int(gl_NumWorkGroups.y), pc.tiles);
    const int c_lo = st.x * BN, c_hi = min(st.y * BN, pc.S_kv);
    const int sbase = sub * RPSG * SREG; // this subgroup's scratch (vec4)

    MATA qa[MH * KH];
    ACC wm[MH];
    ACC acc[MH * NH];

    for (int rb = int(gl_WorkGroupID.x); rb < pc.row_blocks; rb += int(gl_NumWorkGroups.x)) {
        const int row0 = rb * RPW;
        barrier(); // the previous block's readers of swin/scratch/kbuf are done
        for (int r = tid; r < RPW; r += NTH)
            swin[r] = row0 + r < pc.S ? mqa_window(row0 + r) : ivec2(0);
        // q of this subgroup's pairs -> f16 A fragments, 16 pairs x 64 dims
        // at a time through shared memory.
        [[unroll]] for (int mg = 0; mg < MT; ++mg) {
            [[unroll]] for (int dc = 0; dc < D / 64; ++dc) {
                barrier();
                for (int idx = lane; idx < 16 * 4; idx += SG) {
                    const int i = idx >> 2, c16 = idx & 3;
                    const int p = sub * PAIRS + mg * 16 + i;
                    const int row = row0 + p / HEADS, head = p % HEADS;
                    uvec4 w = uvec4(0u);
                    if (row < pc.S)
                        w = mqa_load16(mqa_row(pc.q, row, pc.q_row, 1u) +
                                       uint64_t(head * pc.q_head + dc * 64 + c16 * 16));
                    const int o = (sub * 16 * QROW + i * QROW + c16 * 16) / 4;
                    f16vec4 v[4];
                    fp8x16_to_f16(w, Q_FNUZ, false, v);
                    [[unroll]] for (int e = 0; e < 4; ++e) kbuf[o + e] = v[e];
                }
                barrier();
                [[unroll]] for (int sm = 0; sm < 16 / TM; ++sm)
                    [[unroll]] for (int kk = 0; kk < 64 / TK; ++kk)
                        coopMatLoad(qa[(mg * (16 / TM) + sm) * KH + dc * (64 / TK) + kk], kbuf,
                                    (sub * 16 * QROW + sm * TM * QROW + kk * TK) / 4, QROW / 4,
                                    gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        // Weights as accumulator-shaped matrices: W[r][c] = w[pair r], four
        // equal columns per vec4.
        [[unroll]] for (int mh = 0; mh < MH; ++mh) {
            for (int x = lane; x < TM * TN / 4; x += SG) {
                const int p = sub * PAIRS + mh * TM + x / (TN / 4);
                const int row = row0 + p / HEADS, head = p % HEADS;
                scratch[sbase + x] =
                    vec4(row < pc.S ? RefF32(mqa_row(pc.weights, row, pc.w_row, 4u)).v[head * pc.w_head] : 0.0);
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            coopMatLoad(wm[mh], scratch, sbase, TN / 4, gl_CooperativeMatrixLayoutRowMajor);
            subgroupMemoryBarrierShared();
            subgroupBarrier();
        }
        barrier(); // swin visible
        // Tiles meeting the union of the rows' windows.
        int ulo = pc.S_kv, uhi = 0;
        for (int r = 0; r < RPW; ++r) {
            if (swin[r].x < swin[r].y) {
                ulo = min(ulo, swin[r].x);
                uhi = max(uhi, swin[r].y);
            }
        }
        int tf = st.x, tl = st.x;
        if (ulo < uhi) {
            tf = max(st.x, ulo / BN);
            tl = max(tf, min(st.y, (uhi + BN - 1) / BN));
        }
        if (pc.clean != 0) {
            for (int r = 0; r < RPW && row0 + r < pc.S; ++r) {
                mqa_fill_neg_inf(row0 + r, c_lo, min(tf * BN, c_hi), tid, NTH);
                mqa_fill_neg_inf(row0 + r, max(tl * BN, c_lo), c_hi, tid, NTH);
            }
        }
        // Key tiles: tile t+1's codes and scales are loaded into registers
        // while tile t is multiplied, then decoded into shared memory.
        uvec4 pf[PF];
        float pfs[PF];
        // The next tile's first key row and scale, advanced per tile.
        uint64_t kt = mqa_row(pc.k, tf * BN, pc.k_row, 1u);
        uint64_t kst = mqa_row(pc.k_scale, tf * BN, pc.scale_stride, 4u);
        const uint64_t kstep = uint64_t(uint(BN * pc.k_row));
        const uint64_t sstep = uint64_t(BN) * uint64_t(pc.scale_stride) * 4ul;
        if (tf < tl) load_tile(tf, tid, kt, kst, pf, pfs);
        for (int t = tf; t < tl; ++t) {
            const int sb = (t & 1) * BN; // this tile's half of sabs
            store_tile(tid, sb, pf, pfs);
            barrier(); // the tile is in shared memory
            kt += kstep;
            kst += sstep;
            if (t + 1 < tl) load_tile(t + 1, tid, kt, kst, pf, pfs);
            [[unroll]] for (int x = 0; x < MH * NH; ++x) acc[x] = ACC(0.0);
            [[unroll]] for (int kh = 0; kh < KH; ++kh) {
                MATB kb[NH];
                [[unroll]] for (int nh = 0; nh < NH; ++nh)
                    coopMatLoad(kb[nh], kbuf, (nh * TN * KROW + kh * TK) / 4, KROW / 4,
                                gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (int mh = 0; mh < MH; ++mh)
                    [[unroll]] for (int nh = 0; nh < NH; ++nh)
                        acc[mh * NH + nh] = coopMatMulAdd(qa[mh * KH + kh], kb[nh], acc[mh * NH + nh]);
            }
            // w * max(0, acc), summed over the m-tiles of each row held.
            [[unroll]] for (int rr = 0; rr < RPSG; ++rr) {
                [[unroll]] for (int nh = 0; nh < NH; ++nh) {
                    ACC part = ACC(0.0);
                    [[unroll]] for (int m = 0; m < MH_ROW; ++m) {
                        const int mh = rr * MH_ROW + m;
                        ACC a = acc[mh * NH + nh];
                        [[unroll]] for (int e = 0; e < a.length(); ++e) part[e] += wm[mh][e] * max(a[e], 0.0);
                    }
                    coopMatStore(part, scratch, sbase + rr * SREG + nh * TN * CS / 4, CS / 4,
                                 gl_CooperativeMatrixLayoutColumnMajor);
                }
            }
            barrier();
            // One thread per (row, column): add the TM partial rows of every
            // subgroup holding the row, scale by |k_scale|, apply the window.
            for (int x = tid; x < RPW * BN; x += NTH) {
                const int r = x / BN, col = x % BN, j = t * BN + col;
                if (row0 + r >= pc.S || j >= c_hi) continue;
                const ivec2 w = swin[r];
                float v;
                if (j >= w.x && j < w.y) {
                    // Row r lives in subgroups s0 .. s0+SPR-1 as their row rr.
                    const int s0 = (r / RPSG) * SPR, rr = r % RPSG;
                    vec4 s4 = vec4(0.0);
                    [[unroll]] for (int s = 0; s < SPR; ++s)
                        [[unroll]] for (int i = 0; i < TM / 4; ++i)
                            s4 += scratch[((s0 + s) * RPSG + rr) * SREG + col * (CS / 4) + i];
                    v = sabs[sb + col] * ((s4.x + s4.y) + (s4.z + s4.w));
                } else if (pc.clean != 0) {
                    v = uintBitsToFloat(0xFF800000u);
                } else {
                    continue;
                }
                RefF32(mqa_row(pc.logits, row0 + r, pc.l_row, 4u)).v[j] = v;
            }
        }
    }
}
