/*
 * Kernel argument blocks that every GPU backend passes as they are: the
 * core builds them (qattn_decode_kernel_args_of, qattn_decode_read_args_of
 * in qattn/backend.h) and a backend hands them to its kernels unchanged:
 * Vulkan as the push blocks of its shaders, HIP inside its kernels'
 * parameter structs. One layout, so one marshalling.
 *
 * Layout rules, so that C, C++ (HIP, CUDA) and GLSL std430 push blocks
 * agree byte for byte: fixed-width fields only; 8-byte fields first, then
 * 4-byte ones, so no field needs padding before it; device addresses are 8
 * bytes. A shader's push block declares the same fields in the same order
 * (shaders/common_tiled.glsl, decode_merge.comp, decode_read.comp); the
 * offsets checked at the end of this file are the ones those blocks give.
 *
 * Self-contained (only <stdint.h>) so kernels can include it. A kernel
 * that wants typed pointers defines QATTN_KERNEL_ADDRESS(T) as `T *` before
 * including it (the same 8 bytes; a HIP kernel then knows the addresses
 * are global memory); C code sees uint64_t.
 */
#ifndef QATTN_KERNEL_ARGS_H
#define QATTN_KERNEL_ARGS_H

#include <stddef.h>
#include <stdint.h>

#ifndef QATTN_KERNEL_ADDRESS
#define QATTN_KERNEL_ADDRESS(T) uint64_t
#endif

/* ---- decode (spec 3): the tiled stage 1 ---------------------------------
 * Strides are in elements. The cache views are qattn_cache_kernel_view's
 * (qattn/backend.h): key row `row` of page `page` of kv head g starts at
 * page * ps + g * hs (64-bit: a cache may span more than 2^32 elements)
 * + row * rs (32-bit) elements from the tensor's element 0. A kernel that
 * addresses only caches below 2^32 elements may use the low halves. */
typedef struct qattn_decode_tile_args {
    QATTN_KERNEL_ADDRESS(const uint16_t) q;
    QATTN_KERNEL_ADDRESS(const uint8_t) k;
    QATTN_KERNEL_ADDRESS(const uint8_t) v;
    QATTN_KERNEL_ADDRESS(const float) ks; /* 0 for bf16 caches */
    QATTN_KERNEL_ADDRESS(const float) vs;
    QATTN_KERNEL_ADDRESS(const int32_t) indptr;
    QATTN_KERNEL_ADDRESS(const int32_t) indices;
    QATTN_KERNEL_ADDRESS(const int32_t) lens;
    QATTN_KERNEL_ADDRESS(float) ws_o;  /* workspace + plan.partial_o_offset */
    QATTN_KERNEL_ADDRESS(float) ws_ml; /* workspace + plan.partial_ml_offset */
    int64_t k_ps, v_ps, ks_ps, vs_ps;  /* page strides */
    int64_t k_hs, v_hs, ks_hs, vs_hs;  /* head strides */
    int64_t n_slots;                   /* slots inside all four cache tensors */
    uint32_t k_rs, v_rs, ks_rs, vs_rs; /* row-in-page strides */
    int32_t q_sb, q_sr, q_sh;
    int32_t indptr_s, indices_s, lens_s, n_indices;
    int32_t hq, hkv, page_size, window_left;
    int32_t num_splits, keys_per_split;
    float sm_scale, softcap;
    int32_t flags;                     /* QATTN_DECODE_TILE_* */
} qattn_decode_tile_args;

enum {
    QATTN_DECODE_TILE_Q_F16 = 1 /* q is f16 (else bf16) */
};

/* Shared memory of the register-resident stage 1 (the regs variant): q's 16
 * staged rows of D + 8 f16 (shaders/decode_regs.comp loads them once as
 * fragments). A kernel that builds q's fragments in registers (the HIP
 * one) leaves them unused; the plan reserves them for every backend. */
#define QATTN_DECODE_REGS_SHARED_BYTES(D) (32u * ((uint32_t)(D) + 8u))

/* ---- decode: the split merge -------------------------------------------- */
enum {
    QATTN_DECODE_MERGE_SINKS = 1, /* sinks present */
    QATTN_DECODE_MERGE_LSE = 2,   /* lse requested */
    QATTN_DECODE_MERGE_O_F16 = 4  /* o is f16 (else bf16) */
};

typedef struct qattn_decode_merge_args {
    QATTN_KERNEL_ADDRESS(const float) ws_o; /* as the stage's */
    QATTN_KERNEL_ADDRESS(const float) ws_ml;
    QATTN_KERNEL_ADDRESS(const float) sinks;
    QATTN_KERNEL_ADDRESS(uint16_t) o;
    QATTN_KERNEL_ADDRESS(float) lse;
    int32_t o_sb, o_sr, o_sh;
    int32_t lse_sb, lse_sr, lse_sh;
    int32_t sinks_s, hkv;
    int32_t R, QH, NR, S; /* plan: rows, q_heads_per_workgroup, row_slots, num_splits */
    int32_t D;            /* head dim of V */
    int32_t perm;         /* staged dims have positions 1, 2 of each 4 swapped */
    int32_t flags;        /* QATTN_DECODE_MERGE_* */
    float vf;             /* a staged V value times vf is the decoded one */
} qattn_decode_merge_args;

/* ---- qattn_decode_read (qattn/experimental.h): decode's access pattern -- */
typedef struct qattn_decode_read_args {
    QATTN_KERNEL_ADDRESS(const uint16_t) q;
    QATTN_KERNEL_ADDRESS(const uint8_t) k;
    QATTN_KERNEL_ADDRESS(const uint8_t) v;
    QATTN_KERNEL_ADDRESS(const uint32_t) ks; /* scale bits; 0 for bf16 caches */
    QATTN_KERNEL_ADDRESS(const uint32_t) vs;
    QATTN_KERNEL_ADDRESS(const int32_t) indptr;
    QATTN_KERNEL_ADDRESS(const int32_t) indices;
    QATTN_KERNEL_ADDRESS(const int32_t) lens;
    QATTN_KERNEL_ADDRESS(uint32_t) sum; /* the u32 the words read are added to */
    /* views of k_cache, v_cache, k_scale, v_scale, in that order */
    int64_t page_stride[4], head_stride[4];
    int64_t n_slots;
    uint32_t row_stride[4];
    int32_t q_sb, q_sr, q_sh;
    int32_t indptr_s, indices_s, lens_s, n_indices;
    int32_t page_size, window_left, R, G; /* G: q heads per kv head */
    int32_t D, row_words, es;             /* head dim, 16-byte chunks per row, element bytes */
    int32_t keys_per_split, num_splits, scaled;
} qattn_decode_read_args;

/* ---- paged MQA logits (spec 5): both variants, one block -----------------
 * Strides in elements (fp8 codes are bytes). The cache and its scales are
 * addressed as decode's caches: key row `row` of page `page` at
 * page * ps (64-bit: a cache may span more than 2^32 elements) + row * rs
 * (32-bit, validation keeps it below 2^31); a rank-2 cache reads as pages
 * of page_size slots. The launch values of the plan come with it, so a
 * kernel that takes no specialization constants (HIP) reads them here;
 * the index and bounds arithmetic on them is qattn/paged_mqa_index.h. */
typedef struct qattn_paged_mqa_kernel_args {
    QATTN_KERNEL_ADDRESS(const uint8_t) q;
    QATTN_KERNEL_ADDRESS(const uint8_t) k;
    QATTN_KERNEL_ADDRESS(const float) ks;
    QATTN_KERNEL_ADDRESS(const float) w;
    QATTN_KERNEL_ADDRESS(const int32_t) indptr;
    QATTN_KERNEL_ADDRESS(const int32_t) indices;
    QATTN_KERNEL_ADDRESS(const int32_t) lens;
    QATTN_KERNEL_ADDRESS(float) logits;
    int64_t k_ps, ks_ps;      /* page strides */
    uint32_t k_rs, ks_rs;     /* row-in-page strides */
    int32_t q_sb, q_sr, q_sh; /* q: request, row, head */
    int32_t w_sb, w_sr;       /* weights: request, row */
    int32_t l_sb, l_sr;       /* logits: request, row */
    int32_t n_slots;          /* slots inside the cache and its scales */
    int32_t n_indices;        /* kv_indices entries */
    int32_t B, N, H, D, P;    /* plan: batch, rows, heads, head dim, page size */
    int32_t M;                /* plan: max_kv_len, the logits' columns */
    int32_t num_splits, keys_per_split;
    int32_t grid_y;           /* plan.grid[1]: requests are walked with this stride */
    int32_t clean;            /* clean_logits */
    int32_t kv_tile;          /* plan: keys per step (simt: one per thread) */
    int32_t q_staged;         /* plan (simt) */
    int32_t load16;           /* plan.load_bytes == 16 */
    int32_t head_slots, pass_rows, passes; /* plan (matrix) */
    int32_t key_tiles, subgroups;          /* plan (matrix) */
    int32_t fragment_layout, q_row_halves; /* plan (matrix) */
    int32_t q_fnuz, k_fnuz;   /* the formats are e4m3fnuz */
    float unshift;            /* matrix: a product of staged codes times this is the value's */
} qattn_paged_mqa_kernel_args;

/* The byte offsets the shaders' std430 push blocks give these fields (a
 * field moved here must move there too). */
#ifdef __cplusplus
#define QATTN_KA_CHECK(c, m) static_assert(c, m)
#else
#define QATTN_KA_CHECK(c, m) _Static_assert(c, m)
#endif
QATTN_KA_CHECK(offsetof(qattn_decode_tile_args, k_ps) == 80 && offsetof(qattn_decode_tile_args, k_rs) == 152 &&
                   offsetof(qattn_decode_tile_args, q_sb) == 168 &&
                   offsetof(qattn_decode_tile_args, softcap) == 224 &&
                   offsetof(qattn_decode_tile_args, flags) == 228 && sizeof(qattn_decode_tile_args) == 232,
               "qattn_decode_tile_args: layout differs from shaders/common_tiled.glsl's push block");
QATTN_KA_CHECK(offsetof(qattn_decode_merge_args, o_sb) == 40 && offsetof(qattn_decode_merge_args, vf) == 100 &&
                   sizeof(qattn_decode_merge_args) == 104,
               "qattn_decode_merge_args: layout differs from shaders/decode_merge.comp's push block");
QATTN_KA_CHECK(offsetof(qattn_decode_read_args, page_stride) == 72 &&
                   offsetof(qattn_decode_read_args, row_stride) == 144 &&
                   offsetof(qattn_decode_read_args, scaled) == 224 && sizeof(qattn_decode_read_args) == 232,
               "qattn_decode_read_args: layout differs from shaders/decode_read.comp's push block");
QATTN_KA_CHECK(offsetof(qattn_paged_mqa_kernel_args, k_ps) == 64 &&
                   offsetof(qattn_paged_mqa_kernel_args, k_rs) == 80 &&
                   offsetof(qattn_paged_mqa_kernel_args, q_sb) == 88 &&
                   offsetof(qattn_paged_mqa_kernel_args, B) == 124 &&
                   offsetof(qattn_paged_mqa_kernel_args, key_tiles) == 188 &&
                   offsetof(qattn_paged_mqa_kernel_args, unshift) == 212 &&
                   sizeof(qattn_paged_mqa_kernel_args) == 216,
               "qattn_paged_mqa_kernel_args: layout differs from shaders/paged_mqa_common.glsl's push block");
#undef QATTN_KA_CHECK

#endif /* QATTN_KERNEL_ARGS_H */
