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
// One workgroup barrier per tile. Key tiles are double-buffered: tile t+1's
// codes are loaded into registers before tile t's products and decoded into
// the other buffer after them, so the barrier at the top of the next tile
// both publishes tile t+1 and retires tile t.
//
// Epilogue, per tile: acc[pair, col] becomes w[pair] * max(0, acc)
// element-wise against an accumulator-shaped matrix of the weights (no
// knowledge of the implementation's element layout is needed) and the
// m-tiles of one row are summed element-wise. The subgroup stores that TM x
// BN partial in its own slice of shared memory and its lanes add the TM
// rows and scale by |k_scale| (subgroup-scope synchronisation only). When a
// row lives in one subgroup (SPLIT false) the lanes write the logits directly;
// when it is spread over SPR subgroups each stores its row partial in a
// double-buffered array and the sum over subgroups runs after the next
// tile's barrier. A negative k_scale is folded into the decoded key's sign,
// since max(0, s x) = |s| max(0, sign(s) x).
//
// Every loop that indexes an array of cooperative matrices is unrolled, so
// no matrix is ever addressed dynamically, and no loop holding a workgroup
// barrier is unrolled.
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
// Defaults: the H = 64, D = 128 preset geometry. Every quantity that would
// need a comparison or a select between specialization constants (rows per
// subgroup, subgroups per row, buffer sizes, whether rows are split) comes
// from the host instead: on the H200 (driver 580.159.04) such derived
// constants behaved as if evaluated from the defaults, so only geometries
// matching the defaults' were right (docs/perf_mqa_notes.md).
layout(constant_id = 10) const int MT = 4;     // 16-pair m-groups per subgroup
layout(constant_id = 11) const int NT = 2;     // 16-column n-groups per tile (KT = 16 NT)
layout(constant_id = 12) const int HEADS = 64; // H (pairs -> rows)
layout(constant_id = 13) const int TM = 16;    // hardware matrix shape
layout(constant_id = 14) const int TN = 16;
layout(constant_id = 15) const int TK = 16;
layout(constant_id = 16) const int SPR = 1;    // subgroups per row (H / (16 MT), or 1)
layout(constant_id = 17) const int RPSG = 1;   // rows per subgroup (16 MT / H, or 1)
layout(constant_id = 18) const int RPW = 4;    // rows per workgroup (NSG / SPR x RPSG)
layout(constant_id = 19) const int KBUF4 = 2176; // f16vec4 of kbuf: max(2 KB, NSG 16 QROW) / 4
layout(constant_id = 20) const bool SPLIT = false; // SPR > 1: rows summed across subgroups
layout(constant_id = 21) const int REDN = 1;   // floats of red: 2 NSG BN when SPLIT, else 1

const int NTH = NSG * SG;
const int PAIRS = 16 * MT;                 // (row, head) pairs per subgroup
const int BN = 16 * NT;                    // KV columns per tile (== KT)
const int KROW = D + 8;                    // f16 per key row in shared (padded)
const int QROW = 64 + 8;                   // f16 per q row of a staging chunk
const int MH = PAIRS / TM;                 // hardware m-tiles per subgroup
const int NH = BN / TN;                    // hardware n-tiles per tile
const int KH = D / TK;                     // hardware k-steps
const int MH_ROW = MH / RPSG;              // hardware m-tiles per row held

const int KB = BN * KROW;                  // f16 of one key-tile buffer
// Two key-tile buffers, or each subgroup's q chunk before the KV loop; f16
// in groups of 4 so a thread stores its 16 decoded codes with four 8-byte
// stores. Offsets and strides of the matrix loads are in these 4-half units.
shared f16vec4 kbuf[KBUF4];
// Per (subgroup, row held) 16 x BN partials (TM rows used), subgroup-private;
// also where a subgroup builds its weight matrices.
shared float scratch[NSG * RPSG * 16 * BN];
// Row partials of the subgroups sharing a row, two tiles (SPR > 1 only).
shared float red[REDN];
shared float sabs[2 * BN];                 // |k_scale| x 2^(qshift+kshift), two tiles
shared ivec2 swin[RPW];                    // the workgroup rows' windows

// Chunks of 16 codes each thread stages per tile (prefetched in registers).
const int PF = (BN * (D / 16) + NTH - 1) / NTH;

// Four fp8 codes -> four f16 equal to value x 2^-8 (fn) or 2^-7 (fnuz),
// exactly: each code's exponent and mantissa bits become the low exponent
// and top mantissa bits of an f16 (subnormal codes land on f16
// subnormals), so decoding is a few bit operations. `negate` flips signs
// (the k_scale sign fold). NaN codes become an f16 NaN.
f16vec4 fp8x4_to_f16(uint w, bool fnuz, bool negate) {
    const uvec2 b = uvec2((w & 0xFFu) | ((w & 0xFF00u) << 8), ((w >> 16) & 0xFFu) | ((w >> 8) & 0xFF0000u));
    uvec2 h = ((b & 0x007F007Fu) << 7) | ((b & 0x00800080u) << 8);
    if (negate) h ^= uvec2(0x80008000u);
    const uint m = w & 0x7F7F7F7Fu;
    const uint nan = fnuz ? (w & 0x80808080u & ~(m + 0x7F7F7F7Fu)) : ((m + 0x01010101u) & 0x80808080u);
    if (nan != 0u) {
        [[unroll]] for (int i = 0; i < 4; ++i) {
            if ((nan & (0x80u << (8 * i))) == 0u) continue;
            const uint sh = 16u * uint(i & 1);
            h[i >> 1] = (h[i >> 1] & ~(0xFFFFu << sh)) | (0x7E00u << sh);
        }
    }
    return f16vec4(unpackFloat2x16(h.x), unpackFloat2x16(h.y));
}

// Thread -> (column, 16-code chunk) of a tile, chunk fastest so neighbours
// read neighbouring bytes of one key row. Columns past S_kv load zeros.
void load_tile(int t, int tid, out uvec4 pf[PF], out float pfs[PF]) {
    [[unroll]] for (int x = 0; x < PF; ++x) {
        const int idx = tid + x * NTH, col = idx / (D / 16), dc = idx % (D / 16), j = t * BN + col;
        pf[x] = uvec4(0u);
        pfs[x] = 0.0;
        if (idx < BN * (D / 16) && j < pc.S_kv) {
            pf[x] = mqa_load16(mqa_row(pc.k, j, pc.k_row, 1u) + uint64_t(dc * 16));
            pfs[x] = RefF32(mqa_row(pc.k_scale, j, pc.scale_stride, 4u)).v[0];
        }
    }
}

// Decodes the prefetched chunks into the key tile at f16 offset kb
// (column-major for B: column col's D halves at kb + col * KROW), negated where k_scale < 0, and
// stores |k_scale| x 2^(qshift + kshift) for the epilogue.
void store_tile(int tid, int kb, int sb, uvec4 pf[PF], float pfs[PF]) {
    [[unroll]] for (int x = 0; x < PF; ++x) {
        const int idx = tid + x * NTH, col = idx / (D / 16), dc = idx % (D / 16);
        if (idx >= BN * (D / 16)) continue;
        const bool neg = pfs[x] < 0.0;
        const int o = (kb + col * KROW + dc * 16) / 4;
        [[unroll]] for (int e = 0; e < 4; ++e) kbuf[o + e] = fp8x4_to_f16(pf[x][e], K_FNUZ, neg);
        // Decoded codes carry 2^-8 (fn) or 2^-7 (fnuz); products carry both.
        const float unshift = (Q_FNUZ ? 128.0 : 256.0) * (K_FNUZ ? 128.0 : 256.0);
        if (dc == 0) sabs[sb + col] = abs(pfs[x]) * unshift;
    }
}

#define ACC coopmat<float, gl_ScopeSubgroup, TM, TN, gl_MatrixUseAccumulator>
#define MATA coopmat<float16_t, gl_ScopeSubgroup, TM, TK, gl_MatrixUseA>
#define MATB coopmat<float16_t, gl_ScopeSubgroup, TK, TN, gl_MatrixUseB>

// Writes column col of tile t for workgroup row r: the logit inside the
// row's window, -inf outside it when clean (nothing otherwise).
void put(int row0, int r, int t, int col, int c_hi, float v) {
    const int j = t * BN + col;
    if (row0 + r >= pc.S || j >= c_hi) return;
    const ivec2 w = swin[r];
    if (j >= w.x && j < w.y) {
        RefF32(mqa_row(pc.logits, row0 + r, pc.l_row, 4u)).v[j] = v;
    } else if (pc.clean != 0) {
        RefF32(mqa_row(pc.logits, row0 + r, pc.l_row, 4u)).v[j] = uintBitsToFloat(0xFF800000u);
    }
}

// Sum over the SPR subgroups holding each row of their tile-t partials
// (buffer t & 1); one thread per (row, column).
void cross_reduce(int row0, int t, int c_hi, int tid) {
    const int rb = (t & 1) * NSG * BN;
    for (int x = tid; x < RPW * BN; x += NTH) {
        const int r = x / BN, col = x % BN;
        float sum = 0.0;
        for (int s = r * SPR; s < r * SPR + SPR; ++s) sum += red[rb + s * BN + col];
        put(row0, r, t, col, c_hi, sum);
    }
}

void main() {
    const int tid = int(gl_LocalInvocationID.x);
    const int sub = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
    const ivec2 st = mqa_slice_tiles(int(gl_WorkGroupID.y), int(gl_NumWorkGroups.y), pc.tiles);
    const int c_lo = st.x * BN, c_hi = min(st.y * BN, pc.S_kv);
    const int sbase = sub * RPSG * 16 * BN; // this subgroup's scratch
    const int qbase = sub * 16 * QROW;      // this subgroup's q chunk in kbuf

    MATA qa[MH * KH];
    ACC wm[MH];
    ACC acc[MH * NH];

    for (int rb = int(gl_WorkGroupID.x); rb < pc.row_blocks; rb += int(gl_NumWorkGroups.x)) {
        const int row0 = rb * RPW;
        barrier(); // the previous block's readers of swin, red, kbuf are done
        for (int r = tid; r < RPW; r += NTH)
            swin[r] = row0 + r < pc.S ? mqa_window(row0 + r) : ivec2(0);
        // q of this subgroup's pairs -> f16 A fragments, 16 pairs x 64 dims
        // at a time through this subgroup's own part of kbuf.
        [[unroll]] for (int mg = 0; mg < MT; ++mg) {
            [[unroll]] for (int dc = 0; dc < D / 64; ++dc) {
                subgroupMemoryBarrierShared();
                subgroupBarrier(); // the previous chunk's matrix loads are done
                for (int idx = lane; idx < 16 * 4; idx += SG) {
                    const int i = idx >> 2, c16 = idx & 3;
                    const int p = sub * PAIRS + mg * 16 + i;
                    const int row = row0 + p / HEADS, head = p % HEADS;
                    uvec4 w = uvec4(0u);
                    if (row < pc.S)
                        w = mqa_load16(mqa_row(pc.q, row, pc.q_row, 1u) +
                                       uint64_t(head * pc.q_head + dc * 64 + c16 * 16));
                    const int o = (qbase + i * QROW + c16 * 16) / 4;
                    [[unroll]] for (int e = 0; e < 4; ++e) kbuf[o + e] = fp8x4_to_f16(w[e], Q_FNUZ, false);
                }
                subgroupMemoryBarrierShared();
                subgroupBarrier();
                [[unroll]] for (int sm = 0; sm < 16 / TM; ++sm)
                    [[unroll]] for (int kk = 0; kk < 64 / TK; ++kk)
                        coopMatLoad(qa[(mg * (16 / TM) + sm) * KH + dc * (64 / TK) + kk], kbuf,
                                    (qbase + sm * TM * QROW + kk * TK) / 4, QROW / 4,
                                    gl_CooperativeMatrixLayoutRowMajor);
            }
        }
        // Weights as accumulator-shaped matrices: W[r][c] = w[pair r].
        [[unroll]] for (int mh = 0; mh < MH; ++mh) {
            subgroupMemoryBarrierShared();
            subgroupBarrier(); // the previous matrix load is done
            for (int x = lane; x < TM * TN; x += SG) {
                const int p = sub * PAIRS + mh * TM + x / TN;
                const int row = row0 + p / HEADS, head = p % HEADS;
                scratch[sbase + x] =
                    row < pc.S ? RefF32(mqa_row(pc.weights, row, pc.w_row, 4u)).v[head * pc.w_head] : 0.0;
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier();
            coopMatLoad(wm[mh], scratch, sbase, TN, gl_CooperativeMatrixLayoutRowMajor);
        }
        barrier(); // swin visible; every subgroup's q loads from kbuf are done
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
        uvec4 pf[PF];
        float pfs[PF];
        if (tf < tl) {
            load_tile(tf, tid, pf, pfs);
            store_tile(tid, (tf & 1) * KB, (tf & 1) * BN, pf, pfs);
        }
        for (int t = tf; t < tl; ++t) {
            const int kb = (t & 1) * KB, sb = (t & 1) * BN;
            // Tile t (and its |k_scale|) is in shared memory; every subgroup
            // is done with tile t-1's buffer and has stored its partials.
            barrier();
            if (SPLIT && t > tf) cross_reduce(row0, t - 1, c_hi, tid);
            if (t + 1 < tl) load_tile(t + 1, tid, pf, pfs);
            [[unroll]] for (int x = 0; x < MH * NH; ++x) acc[x] = ACC(0.0);
            [[unroll]] for (int kh = 0; kh < KH; ++kh) {
                MATB kb16[NH];
                [[unroll]] for (int nh = 0; nh < NH; ++nh)
                    coopMatLoad(kb16[nh], kbuf, (kb + nh * TN * KROW + kh * TK) / 4, KROW / 4,
                                gl_CooperativeMatrixLayoutColumnMajor);
                [[unroll]] for (int mh = 0; mh < MH; ++mh)
                    [[unroll]] for (int nh = 0; nh < NH; ++nh)
                        acc[mh * NH + nh] = coopMatMulAdd(qa[mh * KH + kh], kb16[nh], acc[mh * NH + nh]);
            }
            // w * max(0, acc), summed over the m-tiles of each row held.
            [[unroll]] for (int rr = 0; rr < RPSG; ++rr) {
                [[unroll]] for (int nh = 0; nh < NH; ++nh) {
                    ACC part = ACC(0.0);
                    [[unroll]] for (int m = 0; m < MH_ROW; ++m) {
                        const int mh = rr * MH_ROW + m;
                        [[unroll]] for (int e = 0; e < part.length(); ++e)
                            part[e] += wm[mh][e] * max(acc[mh * NH + nh][e], 0.0);
                    }
                    coopMatStore(part, scratch, sbase + rr * 16 * BN + nh * TN, BN,
                                 gl_CooperativeMatrixLayoutRowMajor);
                }
            }
            subgroupMemoryBarrierShared();
            subgroupBarrier(); // the partials are in this subgroup's scratch
            // Lanes add the TM partial rows per (row held, column).
            for (int x = lane; x < RPSG * BN; x += SG) {
                const int rr = x / BN, col = x % BN;
                float sum = 0.0;
                [[unroll]] for (int i = 0; i < TM; ++i) sum += scratch[sbase + rr * 16 * BN + i * BN + col];
                sum *= sabs[sb + col];
                if (SPLIT) red[(t & 1) * NSG * BN + sub * BN + col] = sum;
                else put(row0, sub * RPSG + rr, t, col, c_hi, sum);
            }
            if (t + 1 < tl) store_tile(tid, ((t + 1) & 1) * KB, ((t + 1) & 1) * BN, pf, pfs);
        }
        if (SPLIT && tf < tl) {
            barrier(); // the last tile's row partials are in red
            cross_reduce(row0, tl - 1, c_hi, tid);
        }
    }
}
