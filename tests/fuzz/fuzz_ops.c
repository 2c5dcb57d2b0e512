/*
 * libFuzzer harness: every op through the public API on a real backend,
 * with small shapes, data from a seeded generator and indices, options and
 * (sometimes) descriptors from the input.
 *
 * Built twice:
 * - fuzz_ops_cpu: the cpu backend. Host buffers, so ASan sees any read or
 *   write outside a buffer.
 * - fuzz_ops_vulkan (FZ_VULKAN): the Vulkan backend on lavapipe, and the
 *   cpu backend on the same call as the oracle: both must return the same
 *   status, and on success the same outputs within the spec's tolerances.
 *   Shaders run in host memory that ASan does not instrument, so every
 *   tensor sits between guard bytes that must survive. QATTN_CHECK_INDICES
 *   is on by default (the decode kernels do not bound their indices yet,
 *   issue 11 rows 9-10); QATTN_FUZZ_UNCHECKED=1 fuzzes without it.
 *
 * Promises checked on both: no crash; inputs never change; a refused call
 * leaves its outputs as they were; nothing outside an output's own bytes
 * (guards, other tensors) changes.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>

#include "fuzz_common.h"
#include "qattn/convert.h"
#include "test_rng.h"
#include "tolerance.h"
#ifdef FZ_VULKAN
#include "qattn/vulkan.h"
#endif

#define GUARD 64
#define POISON 0xA5
#define MAXT 12

static qattn_context *g_ctx, *g_ref;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char err[256];
    if (qattn_context_create(qattn_backend_cpu(), NULL, &g_ref, err, sizeof err) != QATTN_OK) abort();
#ifdef FZ_VULKAN
    const char *u = getenv("QATTN_FUZZ_UNCHECKED");
    if (!(u && !strcmp(u, "1"))) setenv("QATTN_CHECK_INDICES", "1", 1);
    if (qattn_context_create(qattn_backend_vulkan(), NULL, &g_ctx, err, sizeof err) != QATTN_OK) {
        fprintf(stderr, "fuzz_ops_vulkan: no Vulkan device: %s\n", err);
        exit(77);
    }
#else
    g_ctx = g_ref;
#endif
    return 0;
}

/* One tensor: host image (with guards), and its buffer on each context. */
typedef struct ft {
    size_t bytes;      /* of the tensor's own span */
    uint8_t *img;      /* GUARD + bytes + GUARD */
    qattn_buffer *buf[2];
    qattn_tensor desc;
    int output;
} ft;

/* Roles of a decode call's tensors (index into call.t, -1 when absent). */
enum { R_Q, R_K, R_V, R_KS, R_VS, R_IP, R_IX, R_LN, R_SK, R_O, R_LSE, N_ROLES };

typedef struct call {
    ft t[MAXT];
    int n;
    int role[N_ROLES];
} call;

static ft *add_role(call *c, int role, qattn_dtype dt, int32_t rank, const int64_t *shape, int output) {
    if (role >= 0) c->role[role] = c->n;
    ft *t = &c->t[c->n++];
    memset(t, 0, sizeof *t);
    int64_t n = 1;
    for (int i = 0; i < rank; ++i) n *= shape[i] > 0 ? shape[i] : 1;
    t->bytes = (size_t)n * qattn_dtype_size(dt);
    t->img = malloc(t->bytes + 2 * GUARD);
    memset(t->img, POISON, t->bytes + 2 * GUARD);
    t->desc = qattn_tensor_contiguous(NULL, GUARD, dt, rank, shape);
    t->output = output;
    return t;
}

static ft *add(call *c, qattn_dtype dt, int32_t rank, const int64_t *shape, int output) {
    return add_role(c, -1, dt, rank, shape, output);
}

static void *host(ft *t) { return t->img + GUARD; }

/* Uploads every tensor to ctx k; returns 0 when the fixture failed. */
static int upload(call *c, int k, qattn_context *ctx) {
    for (int i = 0; i < c->n; ++i) {
        ft *t = &c->t[i];
        if (qattn_buffer_alloc(ctx, t->bytes + 2 * GUARD, &t->buf[k]) != QATTN_OK) return 0;
        if (qattn_buffer_upload(ctx, t->buf[k], 0, t->img, t->bytes + 2 * GUARD) != QATTN_OK) return 0;
    }
    return 1;
}

/* Points the descriptors at context k's buffers. */
static void bind(call *c, int k) {
    for (int i = 0; i < c->n; ++i) c->t[i].desc.buffer = c->t[i].buf[k];
}

/* Checks the promises after a call on context k; returns the outputs'
 * bytes (caller frees) for comparison. */
static uint8_t **verify(call *c, int k, qattn_context *ctx, qattn_status st, const char *what) {
    uint8_t **outs = calloc((size_t)c->n, sizeof *outs);
    for (int i = 0; i < c->n; ++i) {
        ft *t = &c->t[i];
        const size_t total = t->bytes + 2 * GUARD;
        uint8_t *now = malloc(total);
        if (qattn_buffer_download(ctx, t->buf[k], 0, now, total) != QATTN_OK)
            fz_fail("%s: download failed: %s", what, qattn_last_error(ctx));
        for (size_t j = 0; j < GUARD; ++j)
            if (now[j] != POISON || now[GUARD + t->bytes + j] != POISON)
                fz_fail("%s (%s): tensor %d: a guard byte changed", what, qattn_status_name(st), i);
        if ((!t->output || st != QATTN_OK) && memcmp(now, t->img, total) != 0)
            fz_fail("%s (%s): tensor %d (%s) changed", what, qattn_status_name(st), i,
                    t->output ? "output of a refused call" : "input");
        outs[i] = now;
    }
    return outs;
}

static void release(call *c, uint8_t **outs[2]) {
    for (int i = 0; i < c->n; ++i) {
        qattn_buffer_free(g_ctx, c->t[i].buf[0]);
        if (g_ctx != g_ref) qattn_buffer_free(g_ref, c->t[i].buf[1]);
        free(c->t[i].img);
        for (int k = 0; k < 2; ++k)
            if (outs[k]) free(outs[k][i]);
    }
    for (int k = 0; k < 2; ++k) free(outs[k]);
}

/* Sometimes mutates one input descriptor (validation must catch it). */
static void maybe_mutate(fz *f, call *c) {
    if (fz_u8(f) < 232) return;
    ft *t = &c->t[fz_pick(f, c->n)];
    if (t->output) return; /* guards around outputs must stay meaningful */
    fz_tensor(f, &t->desc);
}

/* ---- decode ---- */
static int build_decode(fz *f, qt_rng *rng, call *c, qattn_decode_args *a, qattn_decode_options *o) {
    fz_decode_shape s = fz_decode_shape_of(f);
    s.B = 1 + fz_pick(f, 2);
    const int64_t ppr = s.pages / s.B > 0 ? s.pages / s.B : 1;
    memset(a, 0, sizeof *a);
    for (int r = 0; r < N_ROLES; ++r) c->role[r] = -1;
    ft *q = add_role(c, R_Q, QATTN_BF16, 4, (int64_t[]){s.B, s.R, s.Hq, s.D}, 0);
    qt_fill_bf16(rng, host(q), q->bytes / 2, 1.0f);
    ft *k = add_role(c, R_K, s.kv, 3, (int64_t[]){s.slots, s.Hkv, s.D}, 0);
    ft *v = add_role(c, R_V, s.kv, 3, (int64_t[]){s.slots, s.Hkv, s.D}, 0);
    for (int i = 0; i < 2; ++i) {
        ft *t = i ? v : k;
        if (s.kv == QATTN_BF16) qt_fill_bf16(rng, host(t), t->bytes / 2, 1.0f);
        else if (s.kv == QATTN_I8) qt_fill_i8(rng, host(t), t->bytes);
        else qt_fill_fp8(rng, host(t), t->bytes, s.kv, 4.0f);
    }
    ft *ks = NULL, *vs = NULL;
    if (s.kv != QATTN_BF16) {
        ks = add_role(c, R_KS, QATTN_F32, 2, (int64_t[]){s.slots, s.Hkv}, 0);
        vs = add_role(c, R_VS, QATTN_F32, 2, (int64_t[]){s.slots, s.Hkv}, 0);
        qt_fill_f32_pos(rng, host(ks), (size_t)(s.slots * s.Hkv), 0.01f, 0.1f);
        qt_fill_f32_pos(rng, host(vs), (size_t)(s.slots * s.Hkv), 0.01f, 0.1f);
    }
    ft *ip = add_role(c, R_IP, QATTN_I32, 1, (int64_t[]){s.B + 1}, 0);
    ft *ix = add_role(c, R_IX, QATTN_I32, 1, (int64_t[]){s.pages}, 0);
    ft *ln = add_role(c, R_LN, QATTN_I32, 1, (int64_t[]){s.B}, 0);
    int32_t *ipv = host(ip), *ixv = host(ix), *lnv = host(ln);
    const int bad = fz_u8(f) >= 224; /* indices left as the input says */
    int32_t longest = 0;
    for (int64_t b = 0; b <= s.B; ++b) ipv[b] = (int32_t)(b * ppr);
    for (int64_t i = 0; i < s.pages; ++i) ixv[i] = (int32_t)((i * 5 + fz_pick(f, 4)) % s.pages);
    for (int64_t b = 0; b < s.B; ++b) {
        lnv[b] = (int32_t)fz_pick(f, (int)(ppr * s.P) + 1);
        if (lnv[b] > longest) longest = lnv[b];
    }
    if (bad) {
        for (int64_t b = 0; b <= s.B; ++b) ipv[b] = fz_i32(f, ipv[b]);
        for (int64_t i = 0; i < s.pages; ++i) ixv[i] = fz_i32(f, ixv[i]);
        for (int64_t b = 0; b < s.B; ++b) lnv[b] = fz_i32(f, lnv[b]);
    }
    ft *sk = NULL, *lse = NULL;
    if (fz_u8(f) & 1) {
        sk = add_role(c, R_SK, QATTN_F32, 1, (int64_t[]){s.Hq}, 0);
        qt_fill_f32(rng, host(sk), (size_t)s.Hq, 2.0f);
    }
    ft *out = add_role(c, R_O, QATTN_BF16, 4, (int64_t[]){s.B, s.R, s.Hq, s.D}, 1);
    if (fz_u8(f) & 1) lse = add_role(c, R_LSE, QATTN_F32, 3, (int64_t[]){s.B, s.R, s.Hq}, 1);
    a->page_size = (int32_t)s.P;
    a->max_kv_len = fz_i32(f, longest);
    a->sm_scale = 1.0f / sqrtf((float)s.D);
    a->window_left = fz_u8(f) & 1 ? fz_pick(f, 40) : -1;
    a->logit_softcap = fz_u8(f) & 1 ? 30.0f : 0.0f;
    static const qattn_decode_variant V[3] = {QATTN_DECODE_AUTO, QATTN_DECODE_SIMT, QATTN_DECODE_MATRIX};
    o->variant = V[fz_pick(f, 3)];
    o->num_splits = fz_pick(f, 6);
    (void)q;
    (void)sk;
    (void)lse;
    (void)out;
    maybe_mutate(f, c);
    return 1;
}

static void set_decode(call *c, qattn_decode_args *a) {
    qattn_tensor *dst[N_ROLES] = {&a->q, &a->k_cache, &a->v_cache, &a->k_scale, &a->v_scale,
                                  &a->kv_indptr, &a->kv_indices, &a->kv_lens, &a->sinks, &a->o, &a->lse};
    for (int r = 0; r < N_ROLES; ++r) {
        if (c->role[r] >= 0) *dst[r] = c->t[c->role[r]].desc;
        else memset(dst[r], 0, sizeof *dst[r]);
    }
}

static qattn_status run_decode(qattn_context *ctx, call *c, qattn_decode_args *a,
                               const qattn_decode_options *o) {
    set_decode(c, a);
    qattn_decode_plan p;
    qattn_status st = qattn_decode_plan_create(ctx, a, o, &p);
    fz_check_status(st, qattn_last_error(ctx), "decode_plan_create");
    if (st != QATTN_OK) return st;
    if (getenv("QATTN_FUZZ_VERBOSE"))
        fprintf(stderr, "decode B=%d R=%d Hq=%d Hkv=%d D=%d %s P=%d max_kv_len=%d: %s, %d splits of %d, "
                "reason %s\n", (int)p.batch, (int)p.rows, (int)p.q_heads, (int)p.kv_heads, (int)p.head_dim,
                qattn_dtype_name(p.kv_dtype), (int)a->page_size, (int)a->max_kv_len,
                qattn_decode_variant_name(p.variant), (int)p.num_splits, (int)p.keys_per_split, p.reason);
    qattn_buffer *ws = NULL;
    if (p.workspace_bytes && qattn_buffer_alloc(ctx, p.workspace_bytes, &ws) != QATTN_OK)
        fz_fail("workspace alloc: %s", qattn_last_error(ctx));
    st = qattn_decode_run(ctx, &p, a, ws, 0);
    fz_check_status(st, qattn_last_error(ctx), "decode_run");
    qattn_buffer_free(ctx, ws);
    return st;
}

/* ---- kv store ---- */
static void build_kv_store(fz *f, qt_rng *rng, call *c) {
    const fz_decode_shape s = fz_decode_shape_of(f);
    const int64_t T = 1 + fz_pick(f, 4);
    ft *kn = add(c, QATTN_BF16, 3, (int64_t[]){T, s.Hkv, s.D}, 0);
    ft *vn = add(c, QATTN_BF16, 3, (int64_t[]){T, s.Hkv, s.D}, 0);
    qt_fill_bf16(rng, host(kn), kn->bytes / 2, 3.0f);
    qt_fill_bf16(rng, host(vn), vn->bytes / 2, 3.0f);
    ft *sl = add(c, QATTN_I32, 1, (int64_t[]){T}, 0);
    int32_t *slv = host(sl);
    for (int64_t t = 0; t < T; ++t) slv[t] = (int32_t)((t * 7 + fz_pick(f, 3)) % s.slots);
    for (int64_t t = 0; t < T; ++t) slv[t] = fz_i32(f, slv[t]);
    /* Distinct slots keep the result defined; a repeat is a race. */
    for (int64_t t = 1; t < T; ++t)
        for (int64_t u = 0; u < t; ++u)
            if (slv[t] == slv[u] && slv[t] != -1) slv[t] = -1;
    ft *kc = add(c, s.kv, 3, (int64_t[]){s.slots, s.Hkv, s.D}, 1);
    ft *vc = add(c, s.kv, 3, (int64_t[]){s.slots, s.Hkv, s.D}, 1);
    memset(host(kc), 0x11, kc->bytes);
    memset(host(vc), 0x22, vc->bytes);
    if (s.kv != QATTN_BF16) {
        ft *ks = add(c, QATTN_F32, 2, (int64_t[]){s.slots, s.Hkv}, 1);
        ft *vs = add(c, QATTN_F32, 2, (int64_t[]){s.slots, s.Hkv}, 1);
        qt_fill_f32_pos(rng, host(ks), (size_t)(s.slots * s.Hkv), 0.5f, 1.0f);
        qt_fill_f32_pos(rng, host(vs), (size_t)(s.slots * s.Hkv), 0.5f, 1.0f);
    }
    maybe_mutate(f, c);
}

static qattn_status run_kv_store(qattn_context *ctx, call *c) {
    qattn_kv_store_args a;
    memset(&a, 0, sizeof a);
    a.k_new = c->t[0].desc;
    a.v_new = c->t[1].desc;
    a.slot_mapping = c->t[2].desc;
    a.k_cache = c->t[3].desc;
    a.v_cache = c->t[4].desc;
    if (c->n > 5) {
        a.k_scale = c->t[5].desc;
        a.v_scale = c->t[6].desc;
    }
    qattn_status st = qattn_kv_store(ctx, &a);
    fz_check_status(st, qattn_last_error(ctx), "kv_store");
    return st;
}

/* ---- MQA logits ---- */
static void build_mqa(fz *f, qt_rng *rng, call *c, int32_t *clean) {
    const int64_t S = 1 + fz_pick(f, 20), H = 16 * (1 + fz_pick(f, 2)), D = fz_u8(f) & 1 ? 128 : 64;
    const int64_t Skv = 1 + fz_pick(f, 64);
    const qattn_dtype qt = fz_u8(f) & 1 ? QATTN_FP8_E4M3FN : QATTN_FP8_E4M3FNUZ;
    const qattn_dtype kt = fz_u8(f) & 1 ? QATTN_FP8_E4M3FN : QATTN_FP8_E4M3FNUZ;
    ft *q = add(c, qt, 3, (int64_t[]){S, H, D}, 0);
    ft *k = add(c, kt, 2, (int64_t[]){Skv, D}, 0);
    qt_fill_fp8(rng, host(q), q->bytes, qt, 2.0f);
    qt_fill_fp8(rng, host(k), k->bytes, kt, 2.0f);
    ft *ksc = add(c, QATTN_F32, 1, (int64_t[]){Skv}, 0);
    qt_fill_f32_pos(rng, host(ksc), (size_t)Skv, 0.5f, 1.0f);
    ft *w = add(c, QATTN_F32, 2, (int64_t[]){S, H}, 0);
    qt_fill_f32(rng, host(w), (size_t)(S * H), 1.0f);
    ft *ks = add(c, QATTN_I32, 1, (int64_t[]){S}, 0);
    ft *ke = add(c, QATTN_I32, 1, (int64_t[]){S}, 0);
    int32_t *ksv = host(ks), *kev = host(ke);
    for (int64_t i = 0; i < S; ++i) {
        ksv[i] = fz_i32(f, (int32_t)fz_pick(f, (int)Skv));
        kev[i] = fz_i32(f, (int32_t)((int64_t)ksv[i] + fz_pick(f, (int)Skv + 1)));
    }
    add(c, QATTN_F32, 2, (int64_t[]){S, Skv}, 1);
    *clean = fz_u8(f) & 1;
    maybe_mutate(f, c);
}

static qattn_status run_mqa(qattn_context *ctx, call *c, int32_t clean, const qattn_mqa_logits_options *o) {
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = c->t[0].desc;
    a.k = c->t[1].desc;
    a.k_scale = c->t[2].desc;
    a.weights = c->t[3].desc;
    a.ks = c->t[4].desc;
    a.ke = c->t[5].desc;
    a.logits = c->t[6].desc;
    a.clean_logits = clean;
    qattn_mqa_logits_plan p;
    qattn_status st = qattn_mqa_logits_plan_create(ctx, &a, o, &p);
    fz_check_status(st, qattn_last_error(ctx), "mqa_logits_plan_create");
    if (st != QATTN_OK) return st;
    qattn_buffer *ws = NULL;
    if (p.workspace_bytes && qattn_buffer_alloc(ctx, p.workspace_bytes, &ws) != QATTN_OK)
        fz_fail("workspace alloc: %s", qattn_last_error(ctx));
    st = qattn_mqa_logits_run(ctx, &p, &a, ws, 0);
    fz_check_status(st, qattn_last_error(ctx), "mqa_logits_run");
    qattn_buffer_free(ctx, ws);
    return st;
}

/* ---- paged MQA logits ---- */
/* Tensors in this order in call.t. */
enum { PX_Q, PX_K, PX_KS, PX_W, PX_IP, PX_IX, PX_LN, PX_LOGITS };

typedef struct paged_opts {
    int32_t page_size, max_kv_len, clean;
    qattn_paged_mqa_variant variant;
    int split_tiles;      /* > 0: keys_per_split of this many of the plan's key tiles */
    int32_t raw_split;    /* cpu build: a keys_per_split straight from the input */
} paged_opts;

static void build_paged(fz *f, qt_rng *rng, call *c, paged_opts *o) {
    const int64_t B = 1 + fz_pick(f, 3), N = 1 + fz_pick(f, 4), H = 1 + fz_pick(f, 8);
    const int64_t D = fz_u8(f) & 1 ? 128 : 64, P = 1 + fz_pick(f, 8), pages = 2 + fz_pick(f, 6);
    const int64_t slots = pages * P, ppr = pages / B > 0 ? pages / B : 1;
    const int rank3 = fz_u8(f) & 1;
    const qattn_dtype qt = fz_u8(f) & 1 ? QATTN_FP8_E4M3FN : QATTN_FP8_E4M3FNUZ;
    const qattn_dtype kt = fz_u8(f) & 1 ? QATTN_FP8_E4M3FN : QATTN_FP8_E4M3FNUZ;
    ft *q = add(c, qt, 4, (int64_t[]){B, N, H, D}, 0);
    qt_fill_fp8(rng, host(q), q->bytes, qt, 2.0f);
    ft *k = rank3 ? add(c, kt, 3, (int64_t[]){pages, P, D}, 0) : add(c, kt, 2, (int64_t[]){slots, D}, 0);
    qt_fill_fp8(rng, host(k), k->bytes, kt, 2.0f);
    ft *ks = rank3 ? add(c, QATTN_F32, 2, (int64_t[]){pages, P}, 0) : add(c, QATTN_F32, 1, (int64_t[]){slots}, 0);
    qt_fill_f32_pos(rng, host(ks), (size_t)slots, 0.5f, 1.0f);
    ft *w = add(c, QATTN_F32, 3, (int64_t[]){B, N, H}, 0);
    qt_fill_f32(rng, host(w), (size_t)(B * N * H), 1.0f);
    ft *ip = add(c, QATTN_I32, 1, (int64_t[]){B + 1}, 0);
    ft *ix = add(c, QATTN_I32, 1, (int64_t[]){pages}, 0);
    ft *ln = add(c, QATTN_I32, 1, (int64_t[]){B}, 0);
    int32_t *ipv = host(ip), *ixv = host(ix), *lnv = host(ln);
    const int bad = fz_u8(f) >= 224; /* indices left as the input says */
    int32_t longest = 0;
    for (int64_t b = 0; b <= B; ++b) ipv[b] = (int32_t)(b * ppr);
    for (int64_t i = 0; i < pages; ++i) ixv[i] = (int32_t)((i * 5 + fz_pick(f, 4)) % pages);
    for (int64_t b = 0; b < B; ++b) {
        lnv[b] = (int32_t)fz_pick(f, (int)(ppr * P) + 1);
        if (lnv[b] > longest) longest = lnv[b];
    }
    if (bad) {
        for (int64_t b = 0; b <= B; ++b) ipv[b] = fz_i32(f, ipv[b]);
        for (int64_t i = 0; i < pages; ++i) ixv[i] = fz_i32(f, ixv[i]);
        for (int64_t b = 0; b < B; ++b) lnv[b] = fz_i32(f, lnv[b]);
    }
    /* columns: the longest request, a few past it, or (sometimes) half of
     * it (lengths past max_kv_len) */
    int64_t M = longest + fz_pick(f, 4);
    if (fz_u8(f) >= 224) M = longest / 2;
    if (M < 1) M = 1;
    add(c, QATTN_F32, 3, (int64_t[]){B, N, M}, 1);
    o->page_size = fz_i32(f, (int32_t)P);
    o->max_kv_len = fz_i32(f, (int32_t)M);
    o->clean = fz_u8(f) & 1;
    o->variant = (qattn_paged_mqa_variant)fz_pick(f, QATTN_PAGED_MQA_VARIANT_COUNT);
    o->split_tiles = fz_pick(f, 4);
    o->raw_split = fz_u8(f) >= 240 ? fz_i32(f, 16) : 0;
    maybe_mutate(f, c);
}

static qattn_status run_paged(qattn_context *ctx, call *c, const paged_opts *po) {
    qattn_paged_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    qattn_tensor *dst[8] = {&a.q,         &a.k_cache,    &a.k_scale, &a.weights,
                            &a.kv_indptr, &a.kv_indices, &a.kv_lens, &a.logits};
    for (int i = 0; i < 8; ++i) *dst[i] = c->t[i].desc;
    a.page_size = po->page_size;
    a.max_kv_len = po->max_kv_len;
    a.clean_logits = po->clean;
    qattn_paged_mqa_logits_options o = QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT;
    o.variant = po->variant;
    qattn_paged_mqa_logits_plan p;
    qattn_status st;
    if (po->split_tiles > 0) { /* the same number of this device's tiles on every backend */
        st = qattn_paged_mqa_logits_plan_create(ctx, &a, &o, &p);
        fz_check_status(st, qattn_last_error(ctx), "paged_mqa_logits_plan_create");
        if (st != QATTN_OK) return st;
        o.keys_per_split = po->split_tiles * p.kv_tile;
    }
#ifndef FZ_VULKAN
    if (po->raw_split) o.keys_per_split = po->raw_split; /* its validity depends on the device */
#endif
    st = qattn_paged_mqa_logits_plan_create(ctx, &a, &o, &p);
    fz_check_status(st, qattn_last_error(ctx), "paged_mqa_logits_plan_create");
    if (st != QATTN_OK) return st;
    if (getenv("QATTN_FUZZ_VERBOSE"))
        fprintf(stderr, "paged mqa B=%d N=%d H=%d D=%d P=%d max_kv_len=%d: %s, %d splits of %d, reason %s\n",
                (int)p.batch, (int)p.rows, (int)p.heads, (int)p.head_dim, (int)p.page_size, (int)p.max_kv_len,
                qattn_paged_mqa_variant_name(p.variant), (int)p.num_splits, (int)p.keys_per_split, p.reason);
    qattn_buffer *ws = NULL;
    if (p.workspace_bytes && qattn_buffer_alloc(ctx, p.workspace_bytes, &ws) != QATTN_OK)
        fz_fail("workspace alloc: %s", qattn_last_error(ctx));
    st = qattn_paged_mqa_logits_run(ctx, &p, &a, ws, 0);
    fz_check_status(st, qattn_last_error(ctx), "paged_mqa_logits_run");
    qattn_buffer_free(ctx, ws);
    return st;
}

#ifdef FZ_VULKAN
/* Byte offset of element (i0, i1, i2) of t in its image (past the guard). */
static int64_t elem_at(const qattn_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t ix[4] = {i0, i1, i2, i3};
    int64_t e = 0;
    for (int i = 0; i < t->rank; ++i) e += ix[i] * t->strides[i];
    return (int64_t)t->offset - GUARD + e * (int64_t)qattn_dtype_size(t->dtype);
}

/* An i32 element of index tensor t (as called) from its host image. */
static int32_t idx_at(call *c, int which, int64_t i) {
    int32_t v;
    memcpy(&v, (const uint8_t *)host(&c->t[which]) + elem_at(&c->t[which].desc, i, 0, 0, 0), 4);
    return v;
}

/* Paged MQA logits against the cpu. Which columns a row sees comes from the
 * page table as both backends read it (spec 5 with spec 2's index rules);
 * a seen column is within spec 4's bound of the cpu's, A from the inputs
 * as called; an unseen one is -inf on both with clean_logits, unspecified
 * without. */
static void compare_paged(call *c, uint8_t **got, uint8_t **ref, int32_t P, int32_t clean) {
    const qattn_tensor *q = &c->t[PX_Q].desc, *k = &c->t[PX_K].desc, *ks = &c->t[PX_KS].desc;
    const qattn_tensor *w = &c->t[PX_W].desc, *lg = &c->t[PX_LOGITS].desc;
    const int64_t B = q->shape[0], N = q->shape[1], H = q->shape[2], D = q->shape[3], M = lg->shape[2];
    const int64_t n_idx = c->t[PX_IX].desc.shape[0];
    const int64_t n_slots = k->rank == 3 ? k->shape[0] * k->shape[1] : k->shape[0];
    const uint8_t *qh = host(&c->t[PX_Q]), *kh = host(&c->t[PX_K]), *sh = host(&c->t[PX_KS]);
    const uint8_t *wh = host(&c->t[PX_W]);
    const uint8_t *g = got[PX_LOGITS] + GUARD, *r = ref[PX_LOGITS] + GUARD;
    for (int64_t b = 0; b < B; ++b) {
        const int64_t lo = idx_at(c, PX_IP, b), hi = idx_at(c, PX_IP, b + 1), L = idx_at(c, PX_LN, b);
        for (int64_t t = 0; t < N; ++t)
            for (int64_t p = 0; p < M; ++p) {
                float x, y;
                const int64_t o = elem_at(lg, b, t, p, 0);
                memcpy(&x, g + o, 4);
                memcpy(&y, r + o, 4);
                const int64_t pos = lo + p / P;
                int64_t slot = -1;
                if (pos >= lo && pos < hi && pos >= 0 && pos < n_idx && p <= L - N + t) {
                    const int64_t page = idx_at(c, PX_IX, pos);
                    if (page >= 0 && page * P + p % P < n_slots) slot = page * P + p % P;
                }
                if (slot < 0) {
                    if (clean && !(isinf(x) && x < 0 && isinf(y) && y < 0))
                        fz_fail("paged mqa logits[%lld, %lld, %lld], not seen: %g, cpu %g (want -inf)",
                                (long long)b, (long long)t, (long long)p, x, y);
                    continue;
                }
                float sc;
                if (ks->rank == 2) memcpy(&sc, sh + elem_at(ks, slot / P, slot % P, 0, 0), 4);
                else memcpy(&sc, sh + elem_at(ks, slot, 0, 0, 0), 4);
                const int64_t krow = k->rank == 3 ? elem_at(k, slot / P, slot % P, 0, 0) : elem_at(k, slot, 0, 0, 0);
                double at = 0;
                for (int64_t h = 0; h < H; ++h) {
                    double sum = 0;
                    const int64_t qrow = elem_at(q, b, t, h, 0);
                    for (int64_t d = 0; d < D; ++d)
                        sum += fabs((double)qattn_fp8_to_f32(qh[qrow + d * q->strides[3]], q->dtype) *
                                    qattn_fp8_to_f32(kh[krow + d * k->strides[k->rank - 1]], k->dtype));
                    float wv;
                    memcpy(&wv, wh + elem_at(w, b, t, h, 0), 4);
                    at += qt_tol_mqa_a_term(wv, sc, sum);
                }
                if (!isfinite(y) || !qt_tol_mqa_logit(x, y, at))
                    fz_fail("paged mqa logits[%lld, %lld, %lld]: %g vs cpu %g", (long long)b, (long long)t,
                            (long long)p, x, y);
            }
    }
}

/* Vulkan against the cpu oracle, output by output. */
static void compare(int op, call *c, uint8_t **got, uint8_t **ref) {
    for (int i = 0; i < c->n; ++i) {
        ft *t = &c->t[i];
        if (!t->output) continue;
        const uint8_t *g = got[i] + GUARD, *r = ref[i] + GUARD;
        if (op == 1) { /* KV store: the spec asks for identical bytes */
            if (t->desc.dtype == QATTN_F32) {
                for (size_t j = 0; j < t->bytes / 4; ++j) {
                    float x, y;
                    memcpy(&x, g + 4 * j, 4);
                    memcpy(&y, r + 4 * j, 4);
                    if (!qt_tol_kv_store_scale(x, y)) fz_fail("kv_store scale %zu: %g vs %g", j, x, y);
                }
            } else if (qt_tol_kv_store_bytes(g, r, t->bytes) >= 0) {
                fz_fail("kv_store: cache bytes differ from the cpu reference");
            }
        } else if (op == 0) {
            const int is_o = t->desc.dtype == QATTN_BF16;
            const size_t n = t->bytes / (is_o ? 2 : 4);
            for (size_t j = 0; j < n; ++j) {
                double x, y;
                if (is_o) {
                    uint16_t u, w;
                    memcpy(&u, g + 2 * j, 2);
                    memcpy(&w, r + 2 * j, 2);
                    x = qattn_bf16_to_f32(u);
                    y = qattn_bf16_to_f32(w);
                } else {
                    float u, w;
                    memcpy(&u, g + 4 * j, 4);
                    memcpy(&w, r + 4 * j, 4);
                    x = u;
                    y = w;
                }
                if (is_o ? !qt_tol_decode_o(x, y) : !qt_tol_decode_lse(x, y))
                    fz_fail("decode %s[%zu]: %g vs cpu %g", is_o ? "o" : "lse", j, x, y);
            }
        } else if (op == 2) {
            /* MQA: the a-term of each logit from the inputs. */
            const qattn_tensor *q = &c->t[0].desc, *k = &c->t[1].desc;
            const int64_t S = q->shape[0], H = q->shape[1], D = q->shape[2], Skv = k->shape[0];
            const uint8_t *qh = host(&c->t[0]), *kh = host(&c->t[1]);
            const float *ksc = host(&c->t[2]), *w = host(&c->t[3]);
            for (int64_t s = 0; s < S; ++s)
                for (int64_t j = 0; j < Skv; ++j) {
                    float x, y;
                    memcpy(&x, g + 4 * (s * Skv + j), 4);
                    memcpy(&y, r + 4 * (s * Skv + j), 4);
                    double at = 0;
                    for (int64_t h = 0; h < H; ++h) {
                        double sum = 0;
                        for (int64_t d = 0; d < D; ++d)
                            sum += fabs((double)qattn_fp8_to_f32(qh[(s * H + h) * D + d], q->dtype) *
                                        qattn_fp8_to_f32(kh[j * D + d], k->dtype));
                        at += qt_tol_mqa_a_term(w[s * H + h], ksc[j], sum);
                    }
                    if (!qt_tol_mqa_logit(x, y, at)) fz_fail("mqa logits[%lld, %lld]: %g vs cpu %g", (long long)s, (long long)j, x, y);
                }
        }
    }
}
#endif

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = {data, size};
    const int op = fz_pick(&f, 4);
    char name[32];
    snprintf(name, sizeof name, "fuzz_ops_%u", (unsigned)fz_bits(&f, 4));
    qt_rng rng = qt_rng_for(name);
    call c;
    memset(&c, 0, sizeof c);
    qattn_decode_args da;
    qattn_decode_options dopt = QATTN_DECODE_OPTIONS_INIT;
    qattn_mqa_logits_options mopt = QATTN_MQA_LOGITS_OPTIONS_INIT;
    int32_t clean = 0;
    paged_opts popt;
    memset(&popt, 0, sizeof popt);
    if (op == 0) build_decode(&f, &rng, &c, &da, &dopt);
    else if (op == 1) build_kv_store(&f, &rng, &c);
    else if (op == 3) build_paged(&f, &rng, &c, &popt);
    else {
        build_mqa(&f, &rng, &c, &clean);
        static const qattn_mqa_variant V[4] = {QATTN_MQA_AUTO, QATTN_MQA_DIRECT, QATTN_MQA_STAGED,
                                               QATTN_MQA_COOPMAT};
        mopt.variant = V[fz_pick(&f, 4)];
    }
    const int sides = g_ctx == g_ref ? 1 : 2;
    qattn_context *ctxs[2] = {g_ctx, g_ref};
    qattn_status st[2] = {QATTN_OK, QATTN_OK};
    uint8_t **outs[2] = {NULL, NULL};
    for (int k = 0; k < sides; ++k) {
        if (!upload(&c, k, ctxs[k])) fz_fail("fixture upload: %s", qattn_last_error(ctxs[k]));
        bind(&c, k);
        if (op == 0) st[k] = run_decode(ctxs[k], &c, &da, &dopt);
        else if (op == 1) st[k] = run_kv_store(ctxs[k], &c);
        else if (op == 3) st[k] = run_paged(ctxs[k], &c, &popt);
        else st[k] = run_mqa(ctxs[k], &c, clean, &mopt);
        outs[k] = verify(&c, k, ctxs[k], st[k], k ? "cpu" : (sides == 2 ? "vulkan" : "cpu"));
    }
#ifdef FZ_VULKAN
    /* The backends may differ on what they support (a pinned variant the
     * device lacks), never on what the input is. */
    const int unsupported = st[0] == QATTN_ERR_UNSUPPORTED || st[0] == QATTN_ERR_VARIANT_GATE;
    if (st[0] != st[1] && !unsupported)
        fz_fail("op %d: vulkan %s (%s), cpu %s (%s)", op, qattn_status_name(st[0]), qattn_last_error(g_ctx),
                qattn_status_name(st[1]), qattn_last_error(g_ref));
    if (st[0] == QATTN_OK && st[1] == QATTN_OK) {
        if (op == 3) compare_paged(&c, outs[0], outs[1], popt.page_size, popt.clean);
        else compare(op, &c, outs[0], outs[1]);
    }
#endif
    release(&c, outs);
    return 0;
}
