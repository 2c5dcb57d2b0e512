/*
 * Kernel parameter blocks, shared by the host launchers (C11) and the
 * kernels (HIP C++ / CUDA). Each kernel takes exactly one of these by value.
 *
 * Layout rules that keep both compilers in agreement: fixed-width fields
 * only, device addresses 8 bytes on both sides (QH_PTR), 4-byte fields in
 * runs of even length so every 8-byte field stays 8-aligned without
 * padding, and a total size that is a multiple of 8 (checked below).
 * Strides are in elements, as in qattn_tensor, and fit int32 (the validator
 * bounds every tensor to INT32_MAX elements).
 */
#ifndef QH_PARAMS_H
#define QH_PARAMS_H

#include <stdint.h>

/* Device addresses: typed pointers in the kernels (on AMD the compiler then
 * knows they are global memory, not flat), plain 64-bit integers on the C
 * host side. Both are 8 bytes with 8-byte alignment. */
#ifdef __cplusplus
#define QH_PTR(T) T *
#else
#define QH_PTR(T) uint64_t
#endif

/* Element formats (kernel template arguments, MQA's runtime q/k formats). */
enum { QH_BF16 = 0, QH_FN = 1, QH_FNUZ = 2, QH_I8 = 3 };

/* ---- decode (generic, packed) and the split-KV merge ---- */
enum {
    QH_DEC_SINKS = 1,  /* sinks present */
    QH_DEC_LSE = 2,    /* lse requested */
    QH_DEC_KV_VEC = 4  /* every K/V row start is aligned for 4-element loads */
};

/* Query rows one generic-decode workgroup keeps (register arrays). */
#define QH_DEC_MAX_ROWS 16
/* Generic decode workgroup: 64 or 128 threads, one key per thread per tile. */
#define QH_DEC_MAX_WG 128
/* Packed decode: four wave32 waves, 16 keys per wave step. */
#define QH_PACKED_WAVES 4

typedef struct qh_decode_params {
    /* Ordered by when the kernels read them: the AMD compiler merges
     * neighbouring scalar loads, and a merge that pulls end-of-kernel fields
     * into the prologue keeps them in SGPRs across the whole key loop.
     * All strides and extents are int32: the core's validator guarantees
     * every tensor spans at most INT32_MAX elements, so element offsets
     * within one tensor fit 32 bits (only page * page_size is formed in
     * 64 bits, before it is checked against the slot count). */
    /* -- key loop -- */
    QH_PTR(const uint8_t) k;
    QH_PTR(const uint8_t) v;
    QH_PTR(const float) k_scale;
    QH_PTR(const float) v_scale;
    QH_PTR(const int32_t) indices;
    /* Page and row strides of the views (qattn_cache_view32) of K, V and
     * their scales: key row `row` of page `page` starts at
     * page * ps + row * rs elements (unsigned 32-bit, exact inside the
     * cache) from the tensor's head row */
    uint32_t k_ps, k_rs, v_ps, v_rs;
    uint32_t ks_ps, ks_rs, vs_ps, vs_rs;
    int32_t indices_s;
    int32_t n_pages;      /* length of kv_indices */
    int32_t n_slots;      /* cache slots (>= 1): slots outside [0, n_slots) are never read */
    int32_t page_size, window_left;
    float sm_scale, softcap;
    int32_t flags;        /* QH_DEC_* */
    int32_t wg;           /* threads per block launched */
    int32_t pad0_;
    /* -- prologue -- */
    QH_PTR(const uint16_t) q;
    QH_PTR(const int32_t) indptr;
    QH_PTR(const int32_t) lens;
    int32_t q_s[3];       /* batch, row, head */
    int32_t k_sh, v_sh;   /* K/V: elements between kv heads (view head strides) */
    int32_t ks_sh, vs_sh; /* scales: elements between kv heads */
    int32_t indptr_s, lens_s;
    int32_t B, R, Hq, Hkv, D;
    int32_t num_splits, keys_per_split; /* keys_per_split unused when 1 split */
    int32_t n_qchunks, rows_per_block;  /* generic: query-row chunks per group */
    /* -- epilogue -- */
    QH_PTR(uint16_t) o;
    QH_PTR(float) lse;
    QH_PTR(const float) sinks;
    QH_PTR(float) ws_o;   /* split partial outputs: f32 [splits][B][R][Hq][Dv] */
    QH_PTR(float) ws_lse; /* split partial LSEs: f32 [splits][B][R][Hq] */
    int32_t o_s[3];
    int32_t lse_s[3];
    int32_t sinks_s;
    int32_t pad1_;
} qh_decode_params;

/* ---- KV store ---- */
typedef struct qh_kv_store_params {
    QH_PTR(const uint16_t) k_new;
    QH_PTR(const uint16_t) v_new;
    QH_PTR(const int32_t) slots;
    QH_PTR(uint8_t) k_cache;
    QH_PTR(uint8_t) v_cache;
    QH_PTR(float) k_scale;
    QH_PTR(float) v_scale;
    int32_t kn_s[2], vn_s[2]; /* token, head */
    /* Views (qattn_cache_view32): page_rows, page, row and head stride of
     * k_cache, v_cache, k_scale, v_scale; slot s is page s / page_rows,
     * row s % page_rows, offsets in unsigned 32-bit arithmetic */
    uint32_t kc_v[4], vc_v[4], ks_v[4], vs_v[4];
    int32_t slots_s;
    int32_t n_slots;
    int32_t T, Hkv, D;
    int32_t pad_;
} qh_kv_store_params;

/* ---- FP8 MQA logits ---- */
enum {
    QH_MQA_CLEAN = 1,    /* write -inf outside each row's window */
    QH_MQA_ALIGNED4 = 2  /* q and k rows start on 4-byte boundaries */
};

/* Columns per KV tile of the staged kernels (one LDS tile). */
#define QH_MQA_TILE 64
/* Waves per staged workgroup. */
#define QH_MQA_WAVES 4

typedef struct qh_mqa_params {
    QH_PTR(const uint8_t) q;
    QH_PTR(const uint8_t) k;
    QH_PTR(const float) k_scale;
    QH_PTR(const float) weights;
    QH_PTR(const int32_t) ks;
    QH_PTR(const int32_t) ke;
    QH_PTR(float) logits;
    int32_t q_s[2];       /* row, head */
    int32_t k_s;          /* row */
    int32_t ksc_s;
    int32_t w_s[2];       /* row, head */
    int32_t ks_s, ke_s;
    int32_t lg_s;         /* logits row stride */
    int32_t kv_per_slice; /* columns per grid.y slice */
    int32_t S, Skv, H, D;
    int32_t q_fmt, k_fmt; /* QH_FN or QH_FNUZ (qh_fp8.h) */
    int32_t rows_per_wave; /* 1, 2 or 4 */
    int32_t waves;         /* waves per workgroup */
    int32_t flags;         /* QH_MQA_* */
    int32_t pad_;
} qh_mqa_params;

#ifdef __cplusplus
static_assert(sizeof(qh_decode_params) % 8 == 0, "layout");
static_assert(sizeof(qh_kv_store_params) % 8 == 0, "layout");
static_assert(sizeof(qh_mqa_params) % 8 == 0, "layout");
#else
_Static_assert(sizeof(qh_decode_params) % 8 == 0, "layout");
_Static_assert(sizeof(qh_kv_store_params) % 8 == 0, "layout");
_Static_assert(sizeof(qh_mqa_params) % 8 == 0, "layout");
#endif

#endif /* QH_PARAMS_H */
