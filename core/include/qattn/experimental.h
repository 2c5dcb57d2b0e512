/*
 * qattn experimental API: measurement ops for qattn-bench and tuning tools.
 *
 * NO STABILITY PROMISE. Everything declared here may change its signature,
 * its meaning or disappear in any release, patch releases included, and is
 * outside QATTN_BACKEND_ABI and the soname's promise. An inference engine
 * needs none of it: qattn/qattn.h holds everything an engine calls, and a
 * program that includes only that header cannot come to depend on this one.
 * Including this header is the opt-in (as zstd keeps its unstable calls
 * behind ZSTD_STATIC_LINKING_ONLY).
 *
 * What lives here: ops that exist to be timed against the attention ops
 * (device ceilings), not to compute anything an engine uses, and the
 * planner with pinned geometry that tuning tools time. Each follows
 * the rules of qattn/qattn.h (status, last error naming the argument, bad
 * input writes nothing) and has an optional backend slot in the
 * "experimental slots" of qattn/backend.h; without it the call returns
 * QATTN_ERR_UNSUPPORTED. A new measurement op adds its declaration below in
 * a section of its own and its slot at the end of those slots.
 */
#ifndef QATTN_EXPERIMENTAL_H
#define QATTN_EXPERIMENTAL_H

#include <stdint.h>

#include "qattn/qattn.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- device read bandwidth ------------------------------------------ */
/** Reads bytes [offset, offset + bytes) of `src` once with the backend's
 *  streaming-read kernel (wide loads, several in flight per lane, enough
 *  workgroups to fill the device) and adds, modulo 2^32, the sum of its
 *  little-endian 32-bit words to the u32 at byte `sum_offset` of `sum`.
 *  The sum makes the reads observable and checkable; the op exists to be
 *  timed: qattn_last_op_time_ms gives its device time, and bytes over that
 *  time is the read bandwidth an op on this backend can reach, the ceiling
 *  qattn-bench reports decode against.
 *  Rules: bytes > 0 and offset multiples of 16, bytes / 16 < 2^31,
 *  sum_offset a multiple of 4, both ranges inside their buffers.
 *  Returns QATTN_ERR_UNSUPPORTED on a backend without the kernel. */
QATTN_API qattn_status qattn_read_stream(qattn_context *ctx, const qattn_buffer *src,
                                         uint64_t offset, uint64_t bytes, qattn_buffer *sum,
                                         uint64_t sum_offset);

/* ---- MQA logits plans with a pinned geometry ------------------------ */
/** Plans as qattn_mqa_logits_plan_create does with parts of the coopmat
 *  geometry pinned, so every geometry the kernel supports can be timed and
 *  checked (tests/mqa_tune.c). Pins are part of the coopmat gate: one the
 *  device cannot hold (threads, shared memory, the layout's divisibility
 *  rules) fails it, which is QATTN_ERR_VARIANT_GATE naming the pin when
 *  options pin coopmat, and a step down the chain (with the reason) under
 *  AUTO. Zero fields are the planner's choice. A plan made here is sealed
 *  like any other, so run's integrity check accepts it and only it. */
typedef struct qattn_mqa_logits_geometry {
    int32_t m_tiles;            /* 16-pair m-tiles of q per subgroup: 1, 2 or 4 */
    int32_t n_tiles;            /* 16-column n-tiles per KV tile: 1..4 */
    int32_t rows_per_workgroup; /* >= 2 */
} qattn_mqa_logits_geometry;
QATTN_API qattn_status qattn_experimental_mqa_logits_plan_create(
    qattn_context *ctx, const qattn_mqa_logits_args *args, const qattn_mqa_logits_options *options,
    const qattn_mqa_logits_geometry *geometry, qattn_mqa_logits_plan *plan);

/* ---- MQA logits matrix ceiling -------------------------------------- */
/** The cooperative-matrix rate the device gives the tile shape of `plan` (a
 *  coopmat plan made by qattn_mqa_logits_plan_create or _compute), in
 *  TFLOP/s: a GEMM kernel with the plan's subgroups, m-tiles of q, KV tile,
 *  head dim and matrix shape, operands in registers and shared memory only.
 *  The ceiling that plan's kernel is measured against. The plan is checked
 *  as qattn_mqa_logits_run checks it (integrity digest, fits this device,
 *  the backend runs its variant) before anything launches; *tflops is 0 on
 *  failure. QATTN_ERR_UNSUPPORTED where the backend has no such kernel or
 *  the plan is not a coopmat plan. */
QATTN_API qattn_status qattn_mqa_matrix_ceiling(qattn_context *ctx,
                                                const qattn_mqa_logits_plan *plan,
                                                double *tflops);

/* ---- decode's own access pattern ------------------------------------ */
/** Reads what qattn_decode_run reads for `args`, and nothing else: for every
 *  request b and kv head, the K and V rows and both scales of each key a
 *  query row can see (keys [L_b - R - window_left, L_b) with a window, else
 *  [0, L_b); L_b = kv_lens[b], bounded as decode bounds it), reached
 *  through the same page table, and q once; with 16-byte loads of the rows,
 *  several keys in flight per lane and workgroups over (split, kv head,
 *  request) to fill the device. Adds, modulo 2^32, the sum of the 32-bit
 *  words of every K and V row chunk read (16 bytes at a time, little
 *  endian), of every scale's f32 bits and of q's bf16 elements (as
 *  16-bit integers) to the u32 at byte
 *  `sum_offset` of `sum`. The op exists to be timed: its time is the floor
 *  of a decode kernel with this cache and page table, the ceiling
 *  qattn-bench reports each decode preset against beside the streaming
 *  read. Rules: `args` as for qattn_decode_run (validated the same way);
 *  every cache row (D elements), and the caches' page, row and head
 *  strides, in bytes a multiple of 16 (else QATTN_ERR_ALIGNMENT naming the
 *  tensor); K and V rows of one head dim (Dv = D, else QATTN_ERR_SHAPE);
 *  sum_offset a multiple of 4 inside `sum`. Returns
 *  QATTN_ERR_UNSUPPORTED on a backend without the kernel. */
QATTN_API qattn_status qattn_decode_read(qattn_context *ctx, const qattn_decode_args *args,
                                         qattn_buffer *sum, uint64_t sum_offset);

#ifdef __cplusplus
}
#endif
#endif /* QATTN_EXPERIMENTAL_H */
