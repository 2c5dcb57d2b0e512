#version 450
// Paged FP8 MQA logits (spec 5) without matrix units: the path for any
// Vulkan 1.3 device. The planner (core/src/plan_paged_mqa_logits.c) fixes
// the geometry; backend_vulkan/vk_paged_mqa_logits.c turns it into the
// specialization constants and push block below.
//
// Workgroup (split x, request y, grid-stride over requests): the context
// positions [x * KPS, x * KPS + KPS) below max_kv_len, a tile of NTH
// positions at a time (the push block and the index rules are
// paged_mqa_common.glsl's, shared with the HIP kernels). Per tile:
//   1. each thread resolves its position's slot through the page table
//      (spec 2: an entry outside the request's pages or the table, or a
//      slot outside the cache, makes the position invisible) and its key's
//      offset in the cache (the page's base in 64 bits: caches of any size);
//   2. the workgroup reads the tile's keys once, each key's D codes by
//      consecutive threads in 16-byte loads, and keeps them as f16 (exact
//      for fp8) with their scales in shared memory;
//   3. thread j scores position j of the tile for every row of the request:
//      sum_h w[t, h] * max(0, scale * q[t, h] . k), f32 throughout. With
//      QSTAGE (the plan's q_staged) the workgroup first decodes the row's q
//      once into shared memory as f16 (exact), so no thread decodes q
//      itself; without it (q too large for the device's shared memory)
//      every thread decodes q from its 16-byte loads.
// Every column of the split no row sees gets -inf when clean_logits is set.
// Positions past the request's length are never read: a split that starts
// past it only writes its -inf.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "paged_mqa_common.glsl"

layout(local_size_x_id = 0) in;

layout(constant_id = 0) const int NTH = 128;        // threads = positions per tile
layout(constant_id = 1) const int D = 128;          // head dim
layout(constant_id = 2) const int NROWS = 1;        // N rows per request
layout(constant_id = 3) const int H = 64;           // heads
layout(constant_id = 4) const int P = 64;           // page size
layout(constant_id = 5) const int B = 1;            // requests
layout(constant_id = 6) const bool Q_FNUZ = false;  // q codes are e4m3fnuz
layout(constant_id = 7) const bool K_FNUZ = false;  // k codes are e4m3fnuz
layout(constant_id = 8) const bool ALIGN16 = true;  // q and key rows start 16-byte aligned
layout(constant_id = 9) const bool QSTAGE = false;  // a row's q decoded once per tile into shared memory

const int D16 = D / 16;
shared uint sk[(D / 2) * NTH]; // f16 pairs, pair-major: sk[pair * NTH + position]
shared float ss[NTH];          // scales
shared uint64_t soff[NTH];     // the key's element offset in the cache (64 bits: caches of any size)
shared int sok[NTH];           // 1: the position has a slot
shared uint sq[QSTAGE ? H * D / 2 : 1]; // QSTAGE: one row's q as f16 pairs, [head][pair]

// 16 codes at byte address a.
uvec4 load16(uint64_t a) {
    if (ALIGN16) return RefU32x4(a).v[0];
    uvec4 r = uvec4(0u);
    [[unroll]] for (int i = 0; i < 16; ++i) r[i >> 2] |= uint(RefU8(a).v[i]) << (8 * (i & 3));
    return r;
}

vec4 decode4(uint w, bool fnuz) {
    return vec4(qa_fp8_to_f32(w & 0xFFu, fnuz), qa_fp8_to_f32((w >> 8) & 0xFFu, fnuz),
                qa_fp8_to_f32((w >> 16) & 0xFFu, fnuz), qa_fp8_to_f32(w >> 24, fnuz));
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
    const int c0 = pmi_split_begin(int(gl_WorkGroupID.x), pc.keys_per_split, pc.M);
    const int c1 = pmi_split_end(c0, pc.keys_per_split, pc.M);
    for (int b = int(gl_WorkGroupID.y); b < B; b += int(gl_NumWorkGroups.y)) {
        const pm_request rq = pm_request_of(b);
        const int L = rq.L;
        const int t_end = max(c0, min(c1, rq.lim));
        if (pc.clean != 0) fill_neg_inf(b, t_end, c1, tid);
        for (int base = c0; base < t_end; base += NTH) {
            // 1. this thread's position: its slot, key offset and scale
            const int p = base + tid;
            bool ok = false;
            uint64_t off = 0ul;
            float sc = 0.0;
            if (p < t_end) {
                const ivec2 pr = pm_slot(rq, p);
                ok = pr.x >= 0;
                if (ok) {
                    off = pmi_elem(pr.x, pr.y, pc.k_ps, pc.k_rs);
                    sc = RefF32(pc.ks + pmi_elem(pr.x, pr.y, pc.ks_ps, pc.ks_rs) * 4ul).v[0];
                }
            }
            barrier(); // the previous tile's readers are done
            sok[tid] = ok ? 1 : 0;
            soff[tid] = off;
            ss[tid] = sc;
            barrier();
            // 2. the tile's keys once, consecutive threads on one key's chunks
            for (int idx = tid; idx < NTH * D16; idx += NTH) {
                const int key = idx / D16, dc = idx % D16;
                uvec4 w = uvec4(0u);
                if (sok[key] != 0) w = load16(pc.k + soff[key] + uint64_t(dc * 16));
                [[unroll]] for (int i = 0; i < 4; ++i) {
                    const vec4 v = decode4(w[i], K_FNUZ);
                    sk[(dc * 8 + 2 * i) * NTH + key] = packHalf2x16(v.xy);
                    sk[(dc * 8 + 2 * i + 1) * NTH + key] = packHalf2x16(v.zw);
                }
            }
            barrier();
            // 3. position p for every row of the request
            const bool live = p < t_end;
            for (int t = 0; t < NROWS; ++t) {
                const int last = pmi_last(L, NROWS, t); // the row sees positions <= last
                if (base > last && pc.clean == 0) continue; // uniform: nothing of the tile to write
                const uint64_t qrow = pc.q + uint64_t(int64_t(b) * pc.q_sb + int64_t(t) * pc.q_sr);
                if (QSTAGE && base <= last) {
                    barrier(); // the previous row's readers are done
                    for (int idx = tid; idx < H * D / 4; idx += NTH) {
                        const int h = idx / (D / 4), c = idx % (D / 4);
                        const uint64_t a = qrow + uint64_t(h * pc.q_sh + 4 * c);
                        const uint w = ALIGN16 ? RefU32(a).v[0]
                                               : uint(RefU8(a).v[0]) | (uint(RefU8(a).v[1]) << 8) |
                                                     (uint(RefU8(a).v[2]) << 16) | (uint(RefU8(a).v[3]) << 24);
                        const vec4 v = decode4(w, Q_FNUZ);
                        sq[h * (D / 2) + 2 * c] = packHalf2x16(v.xy);
                        sq[h * (D / 2) + 2 * c + 1] = packHalf2x16(v.zw);
                    }
                    barrier();
                }
                if (!live) continue;
                const int64_t lrow = int64_t(b) * pc.l_sb + int64_t(t) * pc.l_sr;
                if (ok && p <= last) {
                    const uint64_t wrow = qa_at(pc.w, int64_t(b) * pc.w_sb + int64_t(t) * pc.w_sr, 4u);
                    float outv = 0.0;
                    for (int h = 0; h < H; ++h) {
                        float acc = 0.0;
                        if (QSTAGE) {
                            for (int j = 0; j < D / 2; j += 2) {
                                const vec4 qv = vec4(unpackHalf2x16(sq[h * (D / 2) + j]), unpackHalf2x16(sq[h * (D / 2) + j + 1]));
                                acc += dot(qv, vec4(unpackHalf2x16(sk[j * NTH + tid]), unpackHalf2x16(sk[(j + 1) * NTH + tid])));
                            }
                        } else {
                            for (int dc = 0; dc < D16; ++dc) {
                                const uvec4 w = load16(qrow + uint64_t(h * pc.q_sh + dc * 16));
                                [[unroll]] for (int i = 0; i < 4; ++i) {
                                    const vec4 qv = decode4(w[i], Q_FNUZ);
                                    const vec2 k0 = unpackHalf2x16(sk[(dc * 8 + 2 * i) * NTH + tid]);
                                    const vec2 k1 = unpackHalf2x16(sk[(dc * 8 + 2 * i + 1) * NTH + tid]);
                                    acc += dot(qv, vec4(k0, k1));
                                }
                            }
                        }
                        outv += RefF32(wrow).v[h] * max(0.0, ss[tid] * acc);
                    }
                    RefF32(qa_at(pc.logits, lrow + p, 4u)).v[0] = outv;
                } else if (pc.clean != 0) {
                    RefF32(qa_at(pc.logits, lrow + p, 4u)).v[0] = uintBitsToFloat(PM_NEG_INF);
                }
            }
        }
    }
}
