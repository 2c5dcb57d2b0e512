#version 450
// FP8 MQA logits (spec 3) on cooperative matrices, in DeepGEMM's
// orientation (docs/design.md, "FP8 MQA logits"): the keys are the M side of
// 16x16x16 f16 products and the workgroup's (row, head) pairs the N side.
//
//   - The workgroup holds RB rows (RB x H pairs, at most NPMAX): their q as
//     f16 in shared memory (the B operand, staged once per row block), their
//     weights and windows. Nothing else is shared: after staging, the tile
//     loop has no barrier and no shared-memory write.
//   - Each subgroup works on its own steps of KS = 16 MT keys (the plan's
//     kv_tile; steps of the workgroup's KV slice dealt round-robin to its
//     subgroups). A lane loads its own bytes of its keys with 16-byte loads
//     and builds the A fragments in registers (exact fp8 -> f16, two integer
//     operations per pair of codes), once per step; each A fragment then
//     meets every n-tile of every row (N / 8 matrix instructions on the
//     H200, each B fragment loaded from shared memory feeding MT of them).
//   - ReLU x weight on the accumulator: per element one max and one FMA into
//     per-(row, key) partial sums kept in registers across the row's
//     n-tiles; at the row's end a reduce-scatter over the four lanes of a key
//     (three shuffles) leaves every lane one key of the row, which it scales
//     by |k_scale| and stores (32 consecutive logits per subgroup store).
//     A negative k_scale flips the key's codes' signs before decoding, since
//     max(0, s x) = |s| max(0, sign(s) x).
//
// Fragment layout. The kernel writes A fragments and reads accumulators
// element by element, so it assumes the layout the Vulkan backend probes
// (backend_vulkan/vk_fragment_probe.c; QATTN_FEAT_FRAGMENT_LAYOUT, seen on
// NVIDIA's driver): lane l, g = l / 4, t = l % 4, element i of 8:
//   A, accumulator: row g + 8 (i / 4), column 2t + i % 2 + 8 ((i / 2) % 2).
// The backend refuses this variant on any other layout.
//
// Dimension order. A lane holds keys g and g + 8 of each m-tile, k-columns
// 2t, 2t+1, 2t+8, 2t+9 of every 16-dim block j. It reads bytes
// [t D/4, (t+1) D/4) of each of its keys; word j of them is block j, its
// codes c0..c3 decode to the f16 pairs (c0, c2) and (c1, c3): physical dim
// t D/4 + 4j + c is logical k = 16j + 2t + (c >> 1) + 8 (c & 1). q is staged
// in shared memory in logical order by the same rule, so every q.k sum is
// the exact dot product, in another order.
//
// The decode: each code's exponent and mantissa bits become the low
// exponent and top mantissa bits of an f16, its sign the sign: the f16 is
// the value x 2^-8 (fn) or 2^-7 (fnuz) exactly (subnormal codes land on f16
// subnormals); the powers of two are in the store's scale. NaN codes decode
// to finite values (spec 4 promises no NaN without a NaN input, nothing for
// a NaN input).
//
// Variants per head dim (HEAD_DIM 64, 128, 256: the per-lane arrays must
// have constant sizes to stay in registers); specialization constants as in
// mqa_logits_common.glsl, with RPS = rows per workgroup and HEADS = H.
#extension GL_GOOGLE_include_directive : require
#extension GL_KHR_cooperative_matrix : require
#extension GL_KHR_memory_scope_semantics : require
#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require
#include "common.glsl"
#include "mqa_logits_common.glsl"

layout(local_size_x_id = 0) in;
layout(constant_id = 12) const int HEADS = 64; // H, a multiple of 16

const int DH = HEAD_DIM;
const int MT = DH <= 128 ? 2 : 1;       // 16-key m-tiles per step
const int KS = 16 * MT;                 // keys per step (the plan's kv_tile)
const int KB = DH / 16;                 // 16-dim k-blocks
const int KW = DH / 64;                 // 16-byte words a lane reads per key (D / 4 bytes)
// Pairs a workgroup can stage: q of all of them within 44 KiB (ten n-tiles
// at D 128, so H 32 gets five rows), the weights and windows beside it.
const int NPMAX = DH == 64 ? 288 : DH == 128 ? 160 : 80;
const int RB = RPS;                     // rows per workgroup
const int HT = HEADS / 16;              // n-tiles per row
const int NTH = NSG * SG;
const int QROW = DH + 8;                // halves per staged pair: rows 16 bytes apart in banks

// q of the workgroup's pairs, f16 in logical dim order (pair n at n * QROW);
// the weights, per n-tile and lane column t, as the four columns that lane
// holds (2t, 2t+1, 2t+8, 2t+9); the rows' windows. Sized for the largest
// workgroup of the variant (the plan's shared_bytes).
shared f16vec2 qs[NPMAX * QROW / 2];
shared vec4 wsp[NPMAX / 4];
shared ivec2 swin[NPMAX / 16];

// Four codes -> the f16 pairs (c0, c2) and (c1, c3), exactly.
void fp8x4_to_f16(uint x, out uint lo, out uint hi) {
    lo = ((x << 7) & 0x3F803F80u) | ((x << 8) & 0x80008000u);
    hi = ((x >> 1) & 0x3F803F80u) | (x & 0x80008000u);
}

#define FragA coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseA>
#define FragB coopmat<float16_t, gl_ScopeSubgroup, 16, 16, gl_MatrixUseB>
#define FragC coopmat<float, gl_ScopeSubgroup, 16, 16, gl_MatrixUseAccumulator>

// The raw words and scales of one step, loaded one step ahead: key
// x = (mt, a) = k0 + 16 mt + g + 8 a, bytes [t D/4, (t+1) D/4), at byte
// koff[x] of the step's first key row and scale soff[x] (int32: the
// planner checks kv_tile x the k and k_scale row strides). A step past S_kv
// (the last) reads the last key instead (never stored).
uvec4 rk[MT * 2 * KW];
float rs[MT * 2];
uint koff[MT * 2], soff[MT * 2];

void load_step(int k0, int g, int t) {
    const uint64_t kb = mqa_row(pc.k, k0, pc.k_row, 1u);
    const uint64_t sb = mqa_row(pc.k_scale, k0, pc.scale_stride, 4u);
    if (k0 + KS <= pc.S_kv) {
        [[unroll]] for (int x = 0; x < MT * 2; ++x) {
            [[unroll]] for (int w = 0; w < KW; ++w) rk[x * KW + w] = mqa_load16(kb + uint64_t(koff[x] + 16 * w));
            rs[x] = RefF32(sb + uint64_t(soff[x]) * 4ul).v[0];
        }
    } else {
        [[unroll]] for (int x = 0; x < MT * 2; ++x) {
            const int key = min(16 * (x >> 1) + g + 8 * (x & 1), pc.S_kv - 1 - k0);
            const uint64_t at = kb + uint64_t(uint(key * pc.k_row + t * (DH / 4)));
            [[unroll]] for (int w = 0; w < KW; ++w) rk[x * KW + w] = mqa_load16(at + uint64_t(16 * w));
            rs[x] = RefF32(sb + uint64_t(uint(key * pc.scale_stride)) * 4ul).v[0];
        }
    }
}

void main() {
    const int tid = int(gl_LocalInvocationID.x);
    const int sub = int(gl_SubgroupID), lane = int(gl_SubgroupInvocationID);
    const int g = lane >> 2, t = lane & 3;
    const ivec2 st = mqa_slice_tiles(int(gl_WorkGroupID.y), int(gl_NumWorkGroups.y), pc.tiles);
    const int c_lo = st.x * KS, c_hi = min(st.y * KS, pc.S_kv);
    // The key this lane stores after the reduce-scatter (MT 1: lanes t < 2).
    const int skey = MT == 2 ? 16 * (t & 1) + g + 8 * (t >> 1) : g + 8 * (t & 1);
    const bool slane = MT == 2 || t < 2;
    // Decoded codes carry 2^-8 (fn) or 2^-7 (fnuz); products carry both.
    const float unshift = (Q_FNUZ ? 128.0 : 256.0) * (K_FNUZ ? 128.0 : 256.0);

    for (int rb = int(gl_WorkGroupID.x); rb < pc.row_blocks; rb += int(gl_NumWorkGroups.x)) {
        const int row0 = rb * RB;
        barrier(); // the previous block's readers of qs, wsp and swin are done
        for (int r = tid; r < RB; r += NTH) swin[r] = row0 + r < pc.S ? mqa_window(row0 + r) : ivec2(0);
        for (int x = tid; x < RB * HEADS; x += NTH) {
            const int row = row0 + x / HEADS, h = x % HEADS;
            const float w = row < pc.S ? RefF32(mqa_row(pc.weights, row, pc.w_row, 4u)).v[h * pc.w_head] : 0.0;
            const int c = x & 15; // column c of n-tile x / 16 = 2t' + e % 2 + 8 (e / 2)
            wsp[(x >> 4) * 4 + ((c & 7) >> 1)][(c & 1) + 2 * (c >> 3)] = w;
        }
        // q: 16 codes per thread and pass, decoded into logical order.
        for (int x = tid; x < RB * HEADS * (DH / 16); x += NTH) {
            const int n = x / (DH / 16), c16 = x % (DH / 16);
            const int row = row0 + n / HEADS, h = n % HEADS;
            uvec4 w = uvec4(0u);
            if (row < pc.S) w = mqa_load16(mqa_row(pc.q, row, pc.q_row, 1u) + uint64_t(h * pc.q_head + 16 * c16));
            [[unroll]] for (int e = 0; e < 4; ++e) {
                const int p = 16 * c16 + 4 * e; // physical dim of the word's first code
                const int tt = p / (DH / 4), j = (p % (DH / 4)) >> 2;
                uint lo, hi;
                fp8x4_to_f16(w[e], lo, hi);
                const int o = (n * QROW + 16 * j + 2 * tt) >> 1;
                qs[o] = unpackFloat2x16(lo);
                qs[o + 4] = unpackFloat2x16(hi);
            }
        }
        barrier();
        // Steps meeting the union of the rows' windows; -inf around them.
        int ulo = pc.S_kv, uhi = 0;
        for (int r = 0; r < RB; ++r) {
            if (swin[r].x < swin[r].y) {
                ulo = min(ulo, swin[r].x);
                uhi = max(uhi, swin[r].y);
            }
        }
        int tf = st.x, tl = st.x;
        if (ulo < uhi) {
            tf = max(st.x, ulo / KS);
            tl = max(tf, min(st.y, (uhi + KS - 1) / KS));
        }
        if (pc.clean != 0) {
            for (int r = 0; r < RB && row0 + r < pc.S; ++r) {
                mqa_fill_neg_inf(row0 + r, c_lo, min(tf * KS, c_hi), tid, NTH);
                mqa_fill_neg_inf(row0 + r, max(tl * KS, c_lo), c_hi, tid, NTH);
            }
        }

        [[unroll]] for (int x = 0; x < MT * 2; ++x) {
            const int kr = 16 * (x >> 1) + g + 8 * (x & 1);
            koff[x] = uint(kr * pc.k_row + t * (DH / 4));
            soff[x] = uint(kr * pc.scale_stride);
        }
        int s = tf + sub;
        if (s < tl) load_step(s * KS, g, t);
        for (; s < tl; s += NSG) {
            const int k0 = s * KS;
            // 1. A fragments from the loaded words (their first read), the
            // sign of k_scale folded into the codes.
            FragA ka[MT * KB];
            [[unroll]] for (int mt = 0; mt < MT; ++mt) {
                [[unroll]] for (int a = 0; a < 2; ++a) {
                    const uint neg = rs[mt * 2 + a] < 0.0 ? 0x80808080u : 0u;
                    [[unroll]] for (int j = 0; j < KB; ++j) {
                        uint lo, hi;
                        fp8x4_to_f16(rk[(mt * 2 + a) * KW + (j >> 2)][j & 3] ^ neg, lo, hi);
                        const f16vec2 x = unpackFloat2x16(lo), y = unpackFloat2x16(hi);
                        ka[mt * KB + j][4 * a + 0] = x.x;
                        ka[mt * KB + j][4 * a + 1] = x.y;
                        ka[mt * KB + j][4 * a + 2] = y.x;
                        ka[mt * KB + j][4 * a + 3] = y.y;
                    }
                }
            }
            // |k_scale| of the key this lane stores, with the decode's powers.
#if HEAD_DIM <= 128
            const float ssc = abs(rs[2 * (t & 1) + (t >> 1)]) * unshift;
#else
            const float ssc = abs(rs[t & 1]) * unshift;
#endif
            // 3. per row: products, ReLU x weight, the head sum, the store.
            // Kept a loop: unrolled, nvcc re-derives the fragments per row
            // instead of holding them (the twin's SASS), twice the decode.
            [[dont_unroll]] for (int r = 0; r < RB; ++r) {
                // 2. the next step's loads, in flight while this one
                // computes; issued inside the row loop so the compiler
                // cannot hoist them above the decode (nvcc then keeps both
                // steps' words and copies them at the step's end: the
                // twin's SASS)
                if (r == 0 && s + NSG < tl) load_step((s + NSG) * KS, g, t);
                const int row = row0 + r;
                if (row >= pc.S) break;
                const ivec2 win = swin[r];
                float val = 0.0;
                if (max(win.x, k0) < min(win.y, k0 + KS)) {
                    float part[MT * 2];
                    [[unroll]] for (int x = 0; x < MT * 2; ++x) part[x] = 0.0;
                    [[unroll]] for (int u = 0; u < HT; ++u) {
                        const int nt = r * HT + u;
                        FragC acc[MT];
                        [[unroll]] for (int mt = 0; mt < MT; ++mt) acc[mt] = FragC(0.0);
                        [[unroll]] for (int j = 0; j < KB; ++j) {
                            FragB b;
                            coopMatLoad(b, qs, (nt * 16 * QROW + 16 * j) >> 1, QROW >> 1,
                                        gl_CooperativeMatrixLayoutColumnMajor);
                            [[unroll]] for (int mt = 0; mt < MT; ++mt)
                                acc[mt] = coopMatMulAdd(ka[mt * KB + j], b, acc[mt]);
                        }
                        const vec4 wv = wsp[nt * 4 + t];
                        [[unroll]] for (int mt = 0; mt < MT; ++mt)
                            [[unroll]] for (int i = 0; i < 8; ++i)
                                part[mt * 2 + (i >> 2)] += wv[i & 3] * max(acc[mt][i], 0.0);
                    }
                    // Reduce-scatter over the key's four lanes (t): lane t
                    // ends with part[2 (t & 1) + (t >> 1)] (MT 1: part[t & 1]).
                    const bool odd = (t & 1) != 0;
#if HEAD_DIM <= 128
                    float k0v = odd ? part[2] : part[0], k1v = odd ? part[3] : part[1];
                    k0v += subgroupShuffleXor(odd ? part[0] : part[2], 1u);
                    k1v += subgroupShuffleXor(odd ? part[1] : part[3], 1u);
                    const bool hi2 = (t & 2) != 0;
                    val = (hi2 ? k1v : k0v) + subgroupShuffleXor(hi2 ? k0v : k1v, 2u);
#else
                    val = (odd ? part[1] : part[0]) + subgroupShuffleXor(odd ? part[0] : part[1], 1u);
                    val += subgroupShuffleXor(val, 2u);
#endif
                }
                const int j = k0 + skey;
                if (slane && j < c_hi) {
                    const bool seen = j >= win.x && j < win.y;
                    if (seen || pc.clean != 0)
                        RefF32(mqa_row(pc.logits, row, pc.l_row, 4u)).v[j] =
                            seen ? val * ssc : uintBitsToFloat(0xFF800000u);
                }
            }
        }
    }
}
