#version 450
// FP8 MQA logits (spec 3) without matrix units: the path for any Vulkan 1.3
// device. Two variants from this source (mqa_logits.variants.cmake):
//
// MQA_STAGED=0, direct: the workgroup's rows (RPS of them) are shared by all
//   threads; each thread owns CPL columns of a KV tile and reads their keys
//   straight from memory. No shared memory.
// MQA_STAGED=1, staged: the workgroup decodes each KV tile once into shared
//   memory as f16 (exact for fp8) with its k_scale; subgroup s keeps rows
//   s*RPS .. s*RPS+RPS-1 and each of its lanes owns KT/SG columns.
//
// Both: grid.x walks row blocks (grid-stride, so any S fits the 65535 grid
// limit), grid.y is the KV slice. A workgroup computes the tiles of its slice
// that meet the union of its rows' windows; per (row, column) it writes the
// logit inside the row's window and -inf outside when clean_logits is set.
// Rows past S (the short last block) are masked, never padded.
//
// Per column: logit = sum_h w[h] * max(0, k_scale * (q_h . k)), f32
// throughout, heads taken HC at a time so each decoded key chunk serves
// RPS * HC dot products and each decoded q chunk serves CPL columns.
// "Subgroup" here is a layout unit of SG threads; no subgroup operations are
// used, so the real hardware width does not matter.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"
#include "mqa_logits_common.glsl"

layout(local_size_x_id = 0) in;

const int NTH = NSG * SG; // threads per workgroup
const int HC = 4;         // heads per chunk
const int D16 = D / 16;   // 16-code chunks per key row
#if MQA_STAGED
const int RPW = NSG * RPS;
const int CPL = KT / SG;
// Key tile as f16 pairs, d-pair major so lanes (consecutive columns) read
// consecutive words; and the tile's k_scale.
shared uint sk[(D / 2) * KT];
shared float ss[KT];
#else
const int RPW = RPS;
const int CPL = KT / NTH;
#endif

// The 16 key values of column slot c (tile column col, global column j) at
// dims [16 * dc, 16 * dc + 16).
void key_chunk(int col, int j, int dc, out vec4 kv[4]) {
#if MQA_STAGED
    [[unroll]] for (int p = 0; p < 8; p += 2) {
        const vec2 a = unpackHalf2x16(sk[(dc * 8 + p) * KT + col]);
        const vec2 b = unpackHalf2x16(sk[(dc * 8 + p + 1) * KT + col]);
        kv[p >> 1] = vec4(a, b);
    }
#else
    if (j < pc.S_kv) {
        const uvec4 w = mqa_load16(mqa_row(pc.k, j, pc.k_row, 1u) + uint64_t(dc * 16));
        [[unroll]] for (int i = 0; i < 4; ++i) kv[i] = mqa_decode4(w[i], K_FNUZ);
    } else {
        [[unroll]] for (int i = 0; i < 4; ++i) kv[i] = vec4(0.0);
    }
#endif
}

float key_scale(int col, int j) {
#if MQA_STAGED
    return ss[col];
#else
    return j < pc.S_kv ? RefF32(mqa_row(pc.k_scale, j, pc.scale_stride, 4u)).v[0] : 0.0;
#endif
}

#if MQA_STAGED
// Decodes tile t's keys and scales into shared memory (zeros past S_kv).
// Thread -> (column, chunk) with the column fastest, so a lane group writes
// consecutive words.
void stage_tile(int t, int tid) {
    for (int idx = tid; idx < KT * D16; idx += NTH) {
        const int col = idx % KT, dc = idx / KT, j = t * KT + col;
        uvec4 w = uvec4(0u);
        if (j < pc.S_kv) w = mqa_load16(mqa_row(pc.k, j, pc.k_row, 1u) + uint64_t(dc * 16));
        [[unroll]] for (int i = 0; i < 4; ++i) {
            const vec4 v = mqa_decode4(w[i], K_FNUZ);
            sk[(dc * 8 + 2 * i) * KT + col] = packHalf2x16(v.xy);
            sk[(dc * 8 + 2 * i + 1) * KT + col] = packHalf2x16(v.zw);
        }
    }
    for (int col = tid; col < KT; col += NTH) {
        const int j = t * KT + col;
        ss[col] = j < pc.S_kv ? RefF32(mqa_row(pc.k_scale, j, pc.scale_stride, 4u)).v[0] : 0.0;
    }
}
#endif

void main() {
    const int tid = int(gl_LocalInvocationID.x);
#if MQA_STAGED
    const int sub = tid / SG, lane = tid % SG;
#else
    const int sub = 0, lane = tid;
    const int SGW = NTH; // column stride between a thread's slots
#endif
    const ivec2 st = mqa_slice_tiles(int(gl_WorkGroupID.y), int(gl_NumWorkGroups.y), pc.tiles);
    const int c_lo = st.x * KT, c_hi = min(st.y * KT, pc.S_kv);

    for (int rb = int(gl_WorkGroupID.x); rb < pc.row_blocks; rb += int(gl_NumWorkGroups.x)) {
        const int row0 = rb * RPW;
        // Union of the workgroup's windows decides the tiles to compute.
        int ulo = pc.S_kv, uhi = 0;
        for (int r = 0; r < RPW && row0 + r < pc.S; ++r) {
            const ivec2 w = mqa_window(row0 + r);
            if (w.x < w.y) {
                ulo = min(ulo, w.x);
                uhi = max(uhi, w.y);
            }
        }
        int tf = st.x, tl = st.x;
        if (ulo < uhi) {
            tf = max(st.x, ulo / KT);
            tl = max(tf, min(st.y, (uhi + KT - 1) / KT));
        }
        // This thread's rows (masked past S) and their windows.
        int lo[4], hi[4];
        bool ok[4];
        [[unroll]] for (int r = 0; r < 4; ++r) {
            const int i = row0 + sub * RPS + r;
            ok[r] = r < RPS && i < pc.S;
            const ivec2 w = ok[r] ? mqa_window(i) : ivec2(0);
            lo[r] = w.x;
            hi[r] = w.y;
        }
        // clean_logits: -inf over the slice's columns no computed tile covers.
        if (pc.clean != 0) {
            for (int r = 0; r < RPW && row0 + r < pc.S; ++r) {
                mqa_fill_neg_inf(row0 + r, c_lo, min(tf * KT, c_hi), tid, NTH);
                mqa_fill_neg_inf(row0 + r, max(tl * KT, c_lo), c_hi, tid, NTH);
            }
        }
        for (int t = tf; t < tl; ++t) {
#if MQA_STAGED
            barrier(); // the previous tile's readers are done
            stage_tile(t, tid);
            barrier();
#endif
            float outv[4 * CPL], sc[CPL];
            [[unroll]] for (int x = 0; x < 4 * CPL; ++x) outv[x] = 0.0;
            [[unroll]] for (int c = 0; c < CPL; ++c) {
#if MQA_STAGED
                const int col = lane + c * SG;
#else
                const int col = lane + c * SGW;
#endif
                sc[c] = key_scale(col, t * KT + col);
            }
            for (int h0 = 0; h0 < pc.H; h0 += HC) {
                float acc[4 * HC * CPL];
                [[unroll]] for (int x = 0; x < 4 * HC * CPL; ++x) acc[x] = 0.0;
                for (int dc = 0; dc < D16; ++dc) {
                    vec4 kv[CPL][4];
                    [[unroll]] for (int c = 0; c < CPL; ++c) {
#if MQA_STAGED
                        const int col = lane + c * SG;
#else
                        const int col = lane + c * SGW;
#endif
                        key_chunk(col, t * KT + col, dc, kv[c]);
                    }
                    [[unroll]] for (int r = 0; r < 4; ++r) {
                        if (!ok[r]) continue;
                        const uint64_t qrow = mqa_row(pc.q, row0 + sub * RPS + r, pc.q_row, 1u);
                        [[unroll]] for (int hh = 0; hh < HC; ++hh) {
                            if (h0 + hh >= pc.H) break;
                            const uvec4 w = mqa_load16(qrow + uint64_t((h0 + hh) * pc.q_head + dc * 16));
                            vec4 qv[4];
                            [[unroll]] for (int i = 0; i < 4; ++i) qv[i] = mqa_decode4(w[i], Q_FNUZ);
                            [[unroll]] for (int c = 0; c < CPL; ++c) {
                                acc[(r * HC + hh) * CPL + c] += dot(qv[0], kv[c][0]) + dot(qv[1], kv[c][1]) +
                                                                dot(qv[2], kv[c][2]) + dot(qv[3], kv[c][3]);
                            }
                        }
                    }
                }
                // ReLU x weight, summed over the chunk's heads.
                [[unroll]] for (int r = 0; r < 4; ++r) {
                    if (!ok[r]) continue;
                    const uint64_t wrow = mqa_row(pc.weights, row0 + sub * RPS + r, pc.w_row, 4u);
                    [[unroll]] for (int hh = 0; hh < HC; ++hh) {
                        if (h0 + hh >= pc.H) break;
                        const float wt = RefF32(wrow).v[(h0 + hh) * pc.w_head];
                        [[unroll]] for (int c = 0; c < CPL; ++c)
                            outv[r * CPL + c] += wt * max(0.0, sc[c] * acc[(r * HC + hh) * CPL + c]);
                    }
                }
            }
            // Inside the window: the logit; outside: -inf when clean.
            [[unroll]] for (int r = 0; r < 4; ++r) {
                if (!ok[r]) continue;
                const uint64_t lrow = mqa_row(pc.logits, row0 + sub * RPS + r, pc.l_row, 4u);
                [[unroll]] for (int c = 0; c < CPL; ++c) {
#if MQA_STAGED
                    const int j = t * KT + lane + c * SG;
#else
                    const int j = t * KT + lane + c * SGW;
#endif
                    if (j >= c_hi) continue;
                    if (j >= lo[r] && j < hi[r]) RefF32(lrow).v[j] = outv[r * CPL + c];
                    else if (pc.clean != 0) RefF32(lrow).v[j] = uintBitsToFloat(0xFF800000u);
                }
            }
        }
    }
}
