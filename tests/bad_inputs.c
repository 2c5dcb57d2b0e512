/*
 * The bad-input script of issue 11: the same bad calls on the cpu backend
 * and on Vulkan (lavapipe, validation layer on), with and without
 * QATTN_CHECK_INDICES=1. For every case both backends must return the same
 * status, write nothing outside their output tensors (guard bytes around o,
 * lse and the workspace are checked), and either refuse without writing
 * anything or agree with the spec's answer.
 *
 * The spec's answer for a decode whose indices break the rules (spec 2,
 * "Indices that break the rules"): without the index mode a key whose page
 * falls outside the cache is not visible, a request's keys are bounded by
 * its kv_indptr row, and L_b > max_kv_len is computed exactly; with it the
 * call fails with QATTN_ERR_INDEX_OUT_OF_RANGE and writes nothing. The
 * oracle is the cpu reference on a valid equivalent call: page size 1 and,
 * per request, the list of the slots of its visible keys (one query row and
 * no window, so only the set of visible keys matters).
 *
 * Usage: qattn_bad_inputs [--group core|decode|paged|vulkan|all] [--no-validation]
 *                         [--variant auto|simt|matrix]
 *   --no-validation: the device context without the validation layer (a GPU
 *   machine that has none); --variant pins the device's decode plans to
 *   that variant (the cpu's stay auto), so a device with cooperative
 *   matrices runs the bad inputs on the matrix variant; a pin the device
 *   cannot run fails every case (the plan's status differs from the cpu's).
 *   core:   refusals decided by the core (edited plans, bounds), rows 2/7/14;
 *           issue 24: decode o / lse with batch stride 0 (item 2), out = q
 *           (item 5), paged MQA logits whose rows or requests overlap
 *           (item 3), each refused naming the operand, nothing written
 *   vulkan: wrapped and failed buffers on the Vulkan backend, rows 15-17
 *   decode: the decode index rows 9, 10 and 13 (need bounded kernels)
 *   paged:  paged MQA logits (issue 26 item 6): the same index rows, each
 *           against the f64 oracle of tests/common/paged_mqa_case.h (spec
 *           5's visibility rules) on both backends, and the core rows for
 *           this op: an edited plan (14), a run with another max_kv_len
 *           than the plan's, a stride past int64 on q's size-1 row
 *           dimension (2/7), logits on q's bytes (issue 24 item 5)
 * Each case runs in a child process, so a crash is reported as that case's
 * failure and the script goes on. Exit 0: all passed; 1: some failed; 77:
 * no device (skipped).
 *
 * Built with QATTN_BAD_INPUTS_HIP, the same core and decode cases compare
 * the HIP backend against cpu instead (tests/hardening.cmake builds it on
 * each host simulation, so the HIP kernels' own code runs the bad inputs;
 * on a real HIP device the same binary runs them there). The Vulkan-only
 * rows 15-17 are not part of that build.
 */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "qattn/convert.h"
#include "qattn/qattn.h"
#include "paged_mqa_case.h"
#include "test_rng.h"
#include "tolerance.h"

#if defined(QATTN_BAD_INPUTS_HIP)
#include "qattn/hip.h"
#define DEV_NAME "hip"
#else
#include "qattn/vulkan.h"
/* White-box access for rows 15-17: the test makes its own VkBuffers on the
 * context's device through the backend's function table. */
#include "internal.h"
#include "vk_internal.h"
#define DEV_NAME "vulkan"
#endif

enum { B = 2, R = 1, HQ = 4, HKV = 2, D = 64, NS = 64, P = 4, NPAGES = 16, GUARD = 256 };
enum { NQ = B * R * HQ * D, NO = B * R * HQ * D, NL = B * R * HQ, MAXIDX = 128 };
#define POISON 0xA5

/* ---- the data every case shares (made once, inherited by the children) -- */
static uint16_t g_q[NQ];
static uint8_t g_k[NS * HKV * D], g_v[NS * HKV * D];
static float g_ks[NS * HKV], g_vs[NS * HKV];

typedef struct dinput {
    int32_t indptr[B + 1];
    int32_t indices[MAXIDX];
    int32_t lens[B];
    int32_t n_indices;  /* kv_indices' length */
    int32_t page_size;
    int32_t max_kv_len;
    int64_t n_slots;    /* k_cache's slot count (<= NS) */
    int64_t q_stride1;  /* q's row stride (R = 1: addresses nothing) */
    int64_t o_stride0, lse_stride0; /* o's and lse's batch strides */
    int o_over_q;       /* o placed on q's bytes (out = q) */
} dinput;

static dinput base_input(void) {
    dinput in;
    memset(&in, 0, sizeof in);
    const int32_t perm[NPAGES] = {3, 7, 0, 12, 5, 9, 14, 1, 8, 2, 15, 6, 11, 4, 13, 10};
    memcpy(in.indices, perm, sizeof perm);
    in.indptr[0] = 0;
    in.indptr[1] = 8;
    in.indptr[2] = 16;
    in.lens[0] = 29;
    in.lens[1] = 32;
    in.n_indices = NPAGES;
    in.page_size = P;
    in.max_kv_len = 32;
    in.n_slots = NS;
    in.q_stride1 = HQ * D;
    in.o_stride0 = R * HQ * D;
    in.lse_stride0 = R * HQ;
    return in;
}

/* The valid equivalent of `in` with the spec's visibility rules applied. */
static dinput oracle_of(const dinput *in) {
    dinput o = base_input();
    o.page_size = 1;
    o.n_slots = in->n_slots;
    int32_t n = 0, longest = 0;
    for (int b = 0; b < B; ++b) {
        o.indptr[b] = n;
        const int64_t lo = in->indptr[b], hi = in->indptr[b + 1], L = in->lens[b];
        int32_t count = 0;
        for (int64_t p = 0; p < L && p < (int64_t)MAXIDX * in->page_size; ++p) {
            const int64_t pos = lo + p / in->page_size;
            if (pos < lo || pos >= hi || pos < 0 || pos >= in->n_indices) continue;
            const int64_t page = in->indices[pos];
            const int64_t slot = page * in->page_size + p % in->page_size;
            if (page < 0 || slot >= in->n_slots) continue;
            o.indices[n++] = (int32_t)slot;
            ++count;
        }
        o.lens[b] = count;
        if (count > longest) longest = count;
    }
    o.indptr[B] = n;
    o.n_indices = n > 0 ? n : 1;
    o.max_kv_len = longest;
    return o;
}

/* ---- running one decode with guard bytes -------------------------------- */
typedef enum how { RUN_PLAIN, RUN_EDITED_PLAN, RUN_PAST_PLAN_MAX_LEN } how;

typedef struct result {
    qattn_status st;
    char msg[600];
    uint16_t o[NO];
    float lse[NL];
    int guards_ok;   /* every byte outside o / lse / the workspace kept */
    int untouched;   /* o and lse still hold the poison */
    int setup_error; /* the fixture itself failed (not the case) */
} result;

static qattn_buffer *buf_with(qattn_context *ctx, const void *data, size_t bytes, size_t pad,
                              int *err) {
    qattn_buffer *b = NULL;
    size_t total = bytes + 2 * pad;
    if (qattn_buffer_alloc(ctx, total, &b) != QATTN_OK) {
        *err = 1;
        return NULL;
    }
    unsigned char *img = malloc(total);
    memset(img, POISON, total);
    if (data) memcpy(img + pad, data, bytes);
    if (qattn_buffer_upload(ctx, b, 0, img, total) != QATTN_OK) *err = 1;
    free(img);
    return b;
}

/* Downloads a guarded buffer: 1 if the guards hold; copies the middle. */
static int read_guarded(qattn_context *ctx, qattn_buffer *b, size_t bytes, size_t pad, void *mid) {
    size_t total = bytes + 2 * pad;
    unsigned char *img = malloc(total);
    int ok = qattn_buffer_download(ctx, b, 0, img, total) == QATTN_OK;
    for (size_t i = 0; ok && i < pad; ++i) ok = img[i] == POISON && img[pad + bytes + i] == POISON;
    if (mid) memcpy(mid, img + pad, bytes);
    free(img);
    return ok;
}

static int g_validation = 1;                          /* --no-validation: 0 */
static qattn_decode_variant g_variant = QATTN_DECODE_AUTO; /* --variant */
static qattn_context *g_dev;                          /* the device context */

static void run_decode(qattn_context *ctx, const dinput *in, how h, result *res) {
    memset(res, 0, sizeof *res);
    int e = 0;
    qattn_buffer *bq = buf_with(ctx, g_q, sizeof g_q, 0, &e);
    qattn_buffer *bk = buf_with(ctx, g_k, sizeof g_k, 0, &e), *bv = buf_with(ctx, g_v, sizeof g_v, 0, &e);
    qattn_buffer *bks = buf_with(ctx, g_ks, sizeof g_ks, 0, &e);
    qattn_buffer *bvs = buf_with(ctx, g_vs, sizeof g_vs, 0, &e);
    qattn_buffer *bip = buf_with(ctx, in->indptr, sizeof in->indptr, 0, &e);
    qattn_buffer *bix = buf_with(ctx, in->indices, sizeof in->indices, 0, &e);
    qattn_buffer *bln = buf_with(ctx, in->lens, sizeof in->lens, 0, &e);
    qattn_buffer *bo = buf_with(ctx, NULL, sizeof res->o, GUARD, &e);
    qattn_buffer *bl = buf_with(ctx, NULL, sizeof res->lse, GUARD, &e);
    qattn_buffer *bws = NULL;
    if (e) {
        res->setup_error = 1;
        snprintf(res->msg, sizeof res->msg, "fixture: %s", qattn_last_error(ctx));
        goto done;
    }
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(bq, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    a.q.strides[1] = in->q_stride1;
    a.k_cache = qattn_tensor_contiguous(bk, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){in->n_slots, HKV, D});
    a.v_cache = qattn_tensor_contiguous(bv, 0, QATTN_FP8_E4M3FN, 3, (int64_t[]){in->n_slots, HKV, D});
    a.k_scale = qattn_tensor_contiguous(bks, 0, QATTN_F32, 2, (int64_t[]){in->n_slots, HKV});
    a.v_scale = qattn_tensor_contiguous(bvs, 0, QATTN_F32, 2, (int64_t[]){in->n_slots, HKV});
    a.kv_indptr = qattn_tensor_contiguous(bip, 0, QATTN_I32, 1, (int64_t[]){B + 1});
    a.kv_indices = qattn_tensor_contiguous(bix, 0, QATTN_I32, 1, (int64_t[]){in->n_indices});
    a.kv_lens = qattn_tensor_contiguous(bln, 0, QATTN_I32, 1, (int64_t[]){B});
    a.o = qattn_tensor_contiguous(bo, GUARD, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    a.lse = qattn_tensor_contiguous(bl, GUARD, QATTN_F32, 3, (int64_t[]){B, R, HQ});
    a.o.strides[0] = in->o_stride0;
    a.lse.strides[0] = in->lse_stride0;
    if (in->o_over_q) a.o = qattn_tensor_contiguous(bq, 0, QATTN_BF16, 4, (int64_t[]){B, R, HQ, D});
    a.page_size = in->page_size;
    a.max_kv_len = in->max_kv_len;
    a.sm_scale = 0.125f;
    a.window_left = -1;
    qattn_decode_args planned = a;
    if (h == RUN_PAST_PLAN_MAX_LEN) planned.max_kv_len = in->max_kv_len / 2;
    qattn_decode_plan plan;
    memset(&plan, 0, sizeof plan);
    qattn_decode_options opt = QATTN_DECODE_OPTIONS_INIT;
    opt.num_splits = 2;
    if (ctx == g_dev) opt.variant = g_variant;
    res->st = qattn_decode_plan_create(ctx, &planned, &opt, &plan);
    if (res->st == QATTN_OK) {
        if (h == RUN_EDITED_PLAN) {
            plan.num_splits = 4;
            plan.workspace_bytes = 0;
        }
        uint64_t wsb = plan.workspace_bytes;
        bws = buf_with(ctx, NULL, (size_t)wsb, GUARD, &e);
        if (e) {
            res->setup_error = 1;
            snprintf(res->msg, sizeof res->msg, "fixture: workspace: %s", qattn_last_error(ctx));
            goto done;
        }
        res->st = qattn_decode_run(ctx, &plan, &a, wsb ? bws : NULL, wsb ? GUARD : 0);
    }
    snprintf(res->msg, sizeof res->msg, "%s", qattn_last_error(ctx));
    res->guards_ok = read_guarded(ctx, bo, sizeof res->o, GUARD, res->o) &
                     read_guarded(ctx, bl, sizeof res->lse, GUARD, res->lse);
    if (bws) res->guards_ok &= read_guarded(ctx, bws, (size_t)plan.workspace_bytes, GUARD, NULL);
    res->untouched = 1;
    for (size_t i = 0; i < NO; ++i) res->untouched &= res->o[i] == (uint16_t)(POISON * 0x101);
    const unsigned char *lb = (const unsigned char *)res->lse;
    for (size_t i = 0; i < sizeof res->lse; ++i) res->untouched &= lb[i] == POISON;
    if (in->o_over_q) { /* o is q's bytes: a refused call leaves q as it was */
        uint16_t q_now[NQ];
        res->untouched &= qattn_buffer_download(ctx, bq, 0, q_now, sizeof q_now) == QATTN_OK &&
                          !memcmp(q_now, g_q, sizeof q_now);
    }
done:;
    qattn_buffer *all[] = {bq, bk, bv, bks, bvs, bip, bix, bln, bo, bl, bws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) qattn_buffer_free(ctx, all[i]);
}

/* Elements of got outside the spec's tolerance of ref; prints the first. */
static int mismatches(const char *who, const result *got, const result *ref) {
    int bad = 0;
    for (size_t i = 0; i < NO; ++i) {
        double g = qattn_bf16_to_f32(got->o[i]), r = qattn_bf16_to_f32(ref->o[i]);
        if (!qt_tol_decode_o(g, r) && bad++ == 0)
            printf("    %s: o[%zu] = %g, expected %g\n", who, i, g, r);
    }
    for (size_t i = 0; i < NL; ++i)
        if (!qt_tol_decode_lse(got->lse[i], ref->lse[i]) && bad++ == 0)
            printf("    %s: lse[%zu] = %g, expected %g\n", who, i, got->lse[i], ref->lse[i]);
    return bad;
}

/* ---- the cases ---------------------------------------------------------- */
typedef struct dcase {
    const char *name;
    void (*bad)(dinput *);
    how h;
    /* Status both backends must return; QATTN_OK means "the spec's answer"
     * (the oracle). index_status: the same with QATTN_CHECK_INDICES=1. */
    qattn_status status, index_status;
    const char *needle; /* a refusal's message must contain it (NULL: any) */
} dcase;

static void c_valid(dinput *in) { (void)in; }
static void c_page_past(dinput *in) { in->indices[2] = NPAGES; }        /* slot 64 of 64 */
static void c_page_neg(dinput *in) { in->indices[9] = -1; }
static void c_page_huge(dinput *in) { in->indices[5] = 1 << 26; }
static void c_indptr_neg(dinput *in) { in->indptr[0] = -2; }
static void c_lens_max(dinput *in) { in->lens[1] = INT32_MAX; }
static void c_empty_cache(dinput *in) { in->n_slots = 0; }
static void c_indptr_down(dinput *in) { in->indptr[1] = 20; }         /* 20 > indptr[2] = 16 */
static void c_indptr_past(dinput *in) {
    in->indptr[2] = 40; /* 24 entries past the end of kv_indices */
    in->lens[1] = 100;
    in->max_kv_len = 128;
}
static void c_len_over_max(dinput *in) { in->max_kv_len = 8; } /* lens 29, 32 */
static void c_q_stride(dinput *in) { in->q_stride1 = INT64_MAX / 2; }
static void c_o_batch0(dinput *in) { in->o_stride0 = 0; }
static void c_lse_batch0(dinput *in) { in->lse_stride0 = 0; }
static void c_o_over_q(dinput *in) { in->o_over_q = 1; }

static const dcase CORE_CASES[] = {
    {"baseline (valid)", c_valid, RUN_PLAIN, QATTN_OK, QATTN_OK},
    {"row 14: plan edited to 4 splits, workspace_bytes 0", c_valid, RUN_EDITED_PLAN,
     QATTN_ERR_INVALID_ARGUMENT, QATTN_ERR_INVALID_ARGUMENT},
    {"deliverable 6: run with max_kv_len past the plan's", c_valid, RUN_PAST_PLAN_MAX_LEN,
     QATTN_ERR_INVALID_ARGUMENT, QATTN_ERR_INVALID_ARGUMENT},
    {"rows 2/7: stride 2^62 on q's size-1 row dimension", c_q_stride, RUN_PLAIN, QATTN_ERR_OVERFLOW,
     QATTN_ERR_OVERFLOW},
    {"issue 24 item 2: o with batch stride 0 (requests on one address)", c_o_batch0, RUN_PLAIN,
     QATTN_ERR_STRIDE, QATTN_ERR_STRIDE, "o: stride[0] is 0"},
    {"issue 24 item 2: lse with batch stride 0", c_lse_batch0, RUN_PLAIN, QATTN_ERR_STRIDE, QATTN_ERR_STRIDE,
     "lse: stride[0] is 0"},
    {"issue 24 item 5: out = q (o on q's bytes)", c_o_over_q, RUN_PLAIN, QATTN_ERR_INVALID_ARGUMENT,
     QATTN_ERR_INVALID_ARGUMENT, "o: its bytes overlap q's"},
};

static const dcase DECODE_CASES[] = {
    {"row 9: kv_indices entry = n_pages (one past the cache)", c_page_past, RUN_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE},
    {"row 9: kv_indices entry -1", c_page_neg, RUN_PLAIN, QATTN_OK, QATTN_ERR_INDEX_OUT_OF_RANGE},
    {"row 9: kv_indptr[0] = -2", c_indptr_neg, RUN_PLAIN, QATTN_OK, QATTN_ERR_INDEX_OUT_OF_RANGE},
    {"row 9: kv_lens = INT32_MAX", c_lens_max, RUN_PLAIN, QATTN_OK, QATTN_ERR_INDEX_OUT_OF_RANGE},
    {"row 9: an empty cache (0 slots)", c_empty_cache, RUN_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE},
    {"row 10: kv_indices entry 2^26", c_page_huge, RUN_PLAIN, QATTN_OK, QATTN_ERR_INDEX_OUT_OF_RANGE},
    {"row 10: kv_indptr not monotonic", c_indptr_down, RUN_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE},
    {"row 10: kv_indptr past the end of kv_indices", c_indptr_past, RUN_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE},
    {"row 13: kv_lens {29, 32} with max_kv_len 8", c_len_over_max, RUN_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE},
};

static int make_contexts(qattn_context **cpu, qattn_context **vk) {
    char err[256];
    if (qattn_context_create(qattn_backend_cpu(), NULL, cpu, err, sizeof err) != QATTN_OK) {
        printf("    cpu context: %s\n", err);
        return 1;
    }
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
#if defined(QATTN_BAD_INPUTS_HIP)
    qattn_status s = qattn_context_create(qattn_backend_hip(), &o, vk, err, sizeof err);
#else
    o.debug_validation = g_validation;
    qattn_status s = qattn_context_create(qattn_backend_vulkan(), &o, vk, err, sizeof err);
#endif
    g_dev = *vk;
    if (s == QATTN_ERR_BACKEND_UNAVAILABLE) return 77;
    if (s != QATTN_OK) {
        printf("    " DEV_NAME " context: %s\n", err);
        return 1;
    }
    return 0;
}

/* One decode case in one mode; the body of a child process. */
static int decode_child(const dcase *c, int index_mode) {
    if (index_mode) setenv("QATTN_CHECK_INDICES", "1", 1);
    else unsetenv("QATTN_CHECK_INDICES");
    qattn_context *cpu = NULL, *vk = NULL;
    int rc = make_contexts(&cpu, &vk);
    if (rc) return rc;
    dinput in = base_input();
    c->bad(&in);
    static result rc_cpu, rc_vk, rc_ref;
    run_decode(cpu, &in, c->h, &rc_cpu);
    run_decode(vk, &in, c->h, &rc_vk);
    const qattn_status want = index_mode ? c->index_status : c->status;
    int fails = 0;
    const result *rs[2] = {&rc_cpu, &rc_vk};
    const char *who[2] = {"cpu", DEV_NAME};
    for (int i = 0; i < 2; ++i) {
        if (rs[i]->setup_error) {
            printf("    %s: %s\n", who[i], rs[i]->msg);
            ++fails;
            continue;
        }
        if (rs[i]->st != want) {
            printf("    %s: status %s, want %s (%s)\n", who[i], qattn_status_name(rs[i]->st),
                   qattn_status_name(want), rs[i]->msg);
            ++fails;
        }
        if (!rs[i]->guards_ok) {
            printf("    %s: wrote outside o / lse / the workspace (guard bytes changed)\n", who[i]);
            ++fails;
        }
        if (want != QATTN_OK && !rs[i]->untouched) {
            printf("    %s: a refused call wrote into o or lse\n", who[i]);
            ++fails;
        }
        if (want != QATTN_OK && c->needle && !strstr(rs[i]->msg, c->needle)) {
            printf("    %s: message \"%s\" does not name the operand and rule (\"%s\")\n", who[i], rs[i]->msg,
                   c->needle);
            ++fails;
        }
    }
    if (rc_cpu.st != rc_vk.st) {
        printf("    backends disagree: cpu %s, " DEV_NAME " %s\n", qattn_status_name(rc_cpu.st),
               qattn_status_name(rc_vk.st));
        ++fails;
    }
    if (want == QATTN_OK) {
        unsetenv("QATTN_CHECK_INDICES");
        const dinput ref = oracle_of(&in);
        run_decode(cpu, &ref, RUN_PLAIN, &rc_ref);
        if (rc_ref.st != QATTN_OK) {
            printf("    oracle: %s (%s)\n", qattn_status_name(rc_ref.st), rc_ref.msg);
            ++fails;
        } else {
            for (int i = 0; i < 2; ++i)
                if (rs[i]->st == QATTN_OK && mismatches(who[i], rs[i], &rc_ref)) ++fails;
            if (rc_cpu.st == QATTN_OK && rc_vk.st == QATTN_OK && mismatches(DEV_NAME " vs cpu", &rc_vk, &rc_cpu))
                ++fails;
        }
    }
    qattn_context_free(cpu);
    qattn_context_free(vk);
    return fails ? 1 : 0;
}

/* ---- paged MQA logits whose rows overlap (issue 24 item 3) ------------- *
 * B 2 requests of N 2 rows, H 2 heads of D 64, pages of 4 slots, max_kv_len
 * 8; logits [B, N, max_kv_len] with the case's row and batch strides in a
 * guarded buffer. Both backends must give the case's status, a refusal must
 * name `logits` and leave every byte poisoned. */
enum { PB = 2, PN = 2, PH = 2, PD = 64, PP = 4, PM = 8, PSLOTS = 16, PLOG = PB * PN * PM };
typedef struct pcase {
    const char *name;
    int64_t row_stride, batch_stride;
    qattn_status status;
    const char *needle;
} pcase;

static const pcase PAGED_CASES[] = {
    {"issue 24 item 3: paged MQA logits, valid baseline", PM, PN * PM, QATTN_OK, NULL},
    {"issue 24 item 3: paged MQA logits row stride max_kv_len - 1 (rows overlap)", PM - 1, PN * PM,
     QATTN_ERR_STRIDE, "logits: stride[1]"},
    {"issue 24 item 3: paged MQA logits batch stride 0 (requests on one address)", PM, 0, QATTN_ERR_STRIDE,
     "logits: stride[0] is 0"},
};

static qattn_status run_paged(qattn_context *ctx, const pcase *c, float *logits, int *guards_ok, char *msg,
                              size_t n) {
    qt_rng rng = qt_rng_for("bad_inputs/paged_mqa");
    static uint8_t q[PB * PN * PH * PD], k[PSLOTS * PD];
    static float ks[PSLOTS], w[PB * PN * PH];
    const int32_t table[PB + 1 + 4 + PB] = {0, 2, 4, /* indices */ 3, 0, 1, 2, /* lens */ 8, 6};
    qt_fill_fp8(&rng, q, sizeof q, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_fp8(&rng, k, sizeof k, QATTN_FP8_E4M3FN, 2.0f);
    qt_fill_f32_pos(&rng, ks, PSLOTS, 0.5f, 1.0f);
    qt_fill_f32_pos(&rng, w, PB * PN * PH, 0.5f, 1.0f);
    int e = 0;
    qattn_buffer *bq = buf_with(ctx, q, sizeof q, 0, &e), *bk = buf_with(ctx, k, sizeof k, 0, &e);
    qattn_buffer *bks = buf_with(ctx, ks, sizeof ks, 0, &e), *bw = buf_with(ctx, w, sizeof w, 0, &e);
    qattn_buffer *bt = buf_with(ctx, table, sizeof table, 0, &e);
    qattn_buffer *bl = buf_with(ctx, NULL, PLOG * 4, GUARD, &e), *bws = NULL;
    qattn_status st = QATTN_ERR_DEVICE;
    *guards_ok = 0;
    if (e) {
        snprintf(msg, n, "fixture: %s", qattn_last_error(ctx));
        goto done;
    }
    qattn_paged_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(bq, 0, QATTN_FP8_E4M3FN, 4, (int64_t[]){PB, PN, PH, PD});
    a.k_cache = qattn_tensor_contiguous(bk, 0, QATTN_FP8_E4M3FN, 2, (int64_t[]){PSLOTS, PD});
    a.k_scale = qattn_tensor_contiguous(bks, 0, QATTN_F32, 1, (int64_t[]){PSLOTS});
    a.weights = qattn_tensor_contiguous(bw, 0, QATTN_F32, 3, (int64_t[]){PB, PN, PH});
    a.kv_indptr = qattn_tensor_contiguous(bt, 0, QATTN_I32, 1, (int64_t[]){PB + 1});
    a.kv_indices = qattn_tensor_contiguous(bt, 4 * (PB + 1), QATTN_I32, 1, (int64_t[]){4});
    a.kv_lens = qattn_tensor_contiguous(bt, 4 * (PB + 1 + 4), QATTN_I32, 1, (int64_t[]){PB});
    a.logits = qattn_tensor_contiguous(bl, GUARD, QATTN_F32, 3, (int64_t[]){PB, PN, PM});
    a.logits.strides[0] = c->batch_stride;
    a.logits.strides[1] = c->row_stride;
    a.page_size = PP;
    a.max_kv_len = PM;
    a.clean_logits = 1;
    qattn_paged_mqa_logits_plan plan;
    memset(&plan, 0, sizeof plan);
    st = qattn_paged_mqa_logits_plan_create(ctx, &a, NULL, &plan);
    if (st == QATTN_OK && plan.workspace_bytes) {
        bws = buf_with(ctx, NULL, (size_t)plan.workspace_bytes, 0, &e);
        if (e) {
            snprintf(msg, n, "fixture: workspace: %s", qattn_last_error(ctx));
            st = QATTN_ERR_DEVICE;
            goto done;
        }
    }
    if (st == QATTN_OK) st = qattn_paged_mqa_logits_run(ctx, &plan, &a, bws, 0);
    snprintf(msg, n, "%s", qattn_last_error(ctx));
    *guards_ok = read_guarded(ctx, bl, PLOG * 4, GUARD, logits);
done:;
    qattn_buffer *all[] = {bq, bk, bks, bw, bt, bl, bws};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) qattn_buffer_free(ctx, all[i]);
    return st;
}

static int paged_child(const pcase *c) {
    qattn_context *cpu = NULL, *dev = NULL;
    int rc = make_contexts(&cpu, &dev);
    if (rc) return rc;
    static float lg[2][PLOG];
    char msg[2][600];
    int guards[2];
    qattn_status st[2];
    st[0] = run_paged(cpu, c, lg[0], &guards[0], msg[0], sizeof msg[0]);
    st[1] = run_paged(dev, c, lg[1], &guards[1], msg[1], sizeof msg[1]);
    const char *who[2] = {"cpu", DEV_NAME};
    int fails = 0;
    for (int i = 0; i < 2; ++i) {
        if (st[i] != c->status) {
            printf("    %s: status %s, want %s (%s)\n", who[i], qattn_status_name(st[i]), qattn_status_name(c->status),
                   msg[i]);
            ++fails;
        }
        if (!guards[i]) {
            printf("    %s: wrote outside logits (guard bytes changed)\n", who[i]);
            ++fails;
        }
        const unsigned char *b = (const unsigned char *)lg[i];
        int poisoned = 1;
        for (size_t k = 0; k < sizeof lg[i]; ++k) poisoned &= b[k] == POISON;
        if (c->status != QATTN_OK && !poisoned) {
            printf("    %s: a refused call wrote into logits\n", who[i]);
            ++fails;
        }
        if (c->status == QATTN_OK && poisoned) {
            printf("    %s: an accepted call wrote no logits\n", who[i]);
            ++fails;
        }
        if (c->status != QATTN_OK && c->needle && !strstr(msg[i], c->needle)) {
            printf("    %s: message \"%s\" does not name the operand and rule (\"%s\")\n", who[i], msg[i],
                   c->needle);
            ++fails;
        }
    }
    if (c->status == QATTN_OK && st[0] == QATTN_OK && st[1] == QATTN_OK)
        for (int k = 0; k < PLOG; ++k) {
            const double g = lg[1][k], r = lg[0][k];
            if (!(isinf(r) ? g == r : fabs(g - r) <= 1e-3 * (1.0 + fabs(r)))) {
                printf("    " DEV_NAME " vs cpu: logits[%d] = %g, expected %g\n", k, g, r);
                ++fails;
                break;
            }
        }
    qattn_context_free(cpu);
    qattn_context_free(dev);
    return fails ? 1 : 0;
}

static int paged_body(const void *arg, int mode) {
    if (mode) setenv("QATTN_CHECK_INDICES", "1", 1);
    else unsetenv("QATTN_CHECK_INDICES");
    return paged_child((const pcase *)arg);
}

/* ---- paged MQA logits: index rows and core rows (issue 26 item 6) ------ *
 * A case of paged_mqa_case.h (B 3 requests of N 2 rows, H 2 heads of D 64,
 * pages of 4, the longest request 20 keys; request 1 shorter than its
 * rows), with one of its page-table faults or an edit of its own, run on
 * the cpu and on the device into logits with GUARD poisoned bytes on each
 * side. Both backends must give the case's status; a refusal names what
 * it refuses and writes nothing (q kept too where logits sit on it); an
 * accepted call matches the oracle, which applies spec 5's visibility
 * rules to the faulty table, within spec 4's tolerance, -inf exactly in
 * every column not seen, and no byte outside the elements written. */
typedef enum pxhow { PX_PLAIN, PX_EDITED_PLAN, PX_OTHER_MAX_LEN, PX_Q_STRIDE, PX_LOGITS_OVER_Q } pxhow;

typedef struct pxcase {
    const char *name;
    int fault;               /* PM_* of paged_mqa_case.h */
    void (*edit)(pm_case *); /* a fault of this file's own (NULL: none) */
    pxhow how;
    qattn_status status, index_status;
    const char *needle;
    int rows;                /* N (0: 2) */
} pxcase;

static void px_indptr_neg(pm_case *k) { k->indptr[0] = -2; }
static void px_lens_max(pm_case *k) { k->lens[0] = INT32_MAX; }
static void px_page_huge(pm_case *k) { k->indices[1] = 1 << 26; }
static void px_indptr_down(pm_case *k) { k->indptr[1] = k->indptr[2] + 1; }
static void px_empty_cache(pm_case *k) { /* rank 2 [0, D], scales [0] */
    k->a.k_cache.shape[0] = 0;
    k->a.k_scale.shape[0] = 0;
    k->n_slots = 0;
}

static const pxcase PX_CASES[] = {
    {"paged: baseline (valid)", PM_OK, NULL, PX_PLAIN, QATTN_OK, QATTN_OK, NULL, 0},
    {"paged row 9: kv_indices entry past the cache", PM_BAD_PAGE, NULL, PX_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE, "kv_indices", 0},
    {"paged row 9: kv_indices entry -1", PM_NEG_PAGE, NULL, PX_PLAIN, QATTN_OK, QATTN_ERR_INDEX_OUT_OF_RANGE,
     "kv_indices", 0},
    {"paged row 9: kv_indptr[0] = -2", PM_OK, px_indptr_neg, PX_PLAIN, QATTN_OK, QATTN_ERR_INDEX_OUT_OF_RANGE,
     "kv_indptr", 0},
    {"paged row 9: kv_lens = INT32_MAX", PM_OK, px_lens_max, PX_PLAIN, QATTN_OK, QATTN_ERR_INDEX_OUT_OF_RANGE,
     "kv_lens", 0},
    {"paged row 9: an empty cache (0 slots)", PM_OK, px_empty_cache, PX_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE, NULL, 0},
    {"paged row 10: kv_indices entry 2^26", PM_OK, px_page_huge, PX_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE, "kv_indices", 0},
    {"paged row 10: kv_indptr not monotonic", PM_OK, px_indptr_down, PX_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE, "kv_indptr", 0},
    {"paged row 10: kv_indptr past the end of kv_indices", PM_INDPTR_PAST, NULL, PX_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE, "kv_indptr", 0},
    {"paged row 13: kv_lens past max_kv_len", PM_LEN_PAST_MAX, NULL, PX_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE, "kv_lens", 0},
    {"paged: kv_lens past its request's pages", PM_LEN_PAST_PAGES, NULL, PX_PLAIN, QATTN_OK,
     QATTN_ERR_INDEX_OUT_OF_RANGE, "pages of", 0},
    {"paged row 14: plan edited (one more split)", PM_OK, NULL, PX_EDITED_PLAN, QATTN_ERR_INVALID_ARGUMENT,
     QATTN_ERR_INVALID_ARGUMENT, "changed after planning", 0},
    {"paged deliverable 6: run with max_kv_len below the plan's", PM_OK, NULL, PX_OTHER_MAX_LEN,
     QATTN_ERR_INVALID_ARGUMENT, QATTN_ERR_INVALID_ARGUMENT, "max_kv_len", 0},
    {"paged rows 2/7: stride 2^62 on q's size-1 row dimension", PM_OK, NULL, PX_Q_STRIDE, QATTN_ERR_OVERFLOW,
     QATTN_ERR_OVERFLOW, "q: ", 1},
    {"paged issue 24 item 5: logits on q's bytes", PM_OK, NULL, PX_LOGITS_OVER_Q, QATTN_ERR_INVALID_ARGUMENT,
     QATTN_ERR_INVALID_ARGUMENT, "logits: its bytes overlap q's", 0},
};

static pm_cfg px_cfg(const pxcase *c) {
    pm_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.B = 3;
    cfg.N = c->rows ? c->rows : 2;
    cfg.H = 2;
    cfg.D = 64;
    cfg.P = 4;
    cfg.qt = QATTN_FP8_E4M3FN;
    cfg.kt = QATTN_FP8_E4M3FNUZ;
    cfg.clean = 1;
    cfg.max_len = 20;
    cfg.bad = c->fault;
    return cfg;
}

typedef struct pxresult {
    qattn_status st;
    char msg[600];
    uint8_t *logits; /* the logits image after the call */
    int guards_ok, q_kept, setup_error;
} pxresult;

static void run_px(qattn_context *ctx, const pm_case *k, const pxcase *c, pxresult *r) {
    memset(r, 0, sizeof *r);
    r->logits = malloc(k->bytes[PM_LOGITS]);
    qattn_buffer *bufs[PM_NBUF] = {NULL};
    int e = 0;
    for (int i = 0; i < PM_NBUF; ++i) {
        if (!k->img[i]) continue;
        const int guarded = i == PM_LOGITS;
        bufs[i] = buf_with(ctx, k->img[i], k->bytes[i], guarded ? GUARD : 0, &e);
    }
    if (e) {
        r->setup_error = 1;
        snprintf(r->msg, sizeof r->msg, "fixture: %s", qattn_last_error(ctx));
        goto done;
    }
    qattn_paged_mqa_logits_args a = pm_bind(k, bufs);
    a.logits.offset += GUARD;
    if (c->how == PX_Q_STRIDE) a.q.strides[1] = INT64_MAX / 2;
    if (c->how == PX_LOGITS_OVER_Q) {
        a.logits.buffer = bufs[PM_Q];
        a.logits.offset = a.q.offset;
    }
    qattn_paged_mqa_logits_args run = a;
    if (c->how == PX_OTHER_MAX_LEN) {
        run.max_kv_len = a.max_kv_len - 1;
        run.logits.shape[2] = run.max_kv_len;
    }
    qattn_paged_mqa_logits_plan plan;
    memset(&plan, 0, sizeof plan);
    r->st = qattn_paged_mqa_logits_plan_create(ctx, &a, NULL, &plan);
    if (r->st == QATTN_OK) {
        if (c->how == PX_EDITED_PLAN) {
            plan.num_splits += 1;
            plan.grid[0] += 1;
        }
        r->st = qattn_paged_mqa_logits_run(ctx, &plan, &run, NULL, 0);
    }
    snprintf(r->msg, sizeof r->msg, "%s", qattn_last_error(ctx));
    r->guards_ok = read_guarded(ctx, bufs[PM_LOGITS], k->bytes[PM_LOGITS], GUARD, r->logits);
    uint8_t *q_now = malloc(k->bytes[PM_Q]);
    r->q_kept = qattn_buffer_download(ctx, bufs[PM_Q], 0, q_now, k->bytes[PM_Q]) == QATTN_OK &&
                !memcmp(q_now, k->img[PM_Q], k->bytes[PM_Q]);
    free(q_now);
done:
    for (int i = 0; i < PM_NBUF; ++i) qattn_buffer_free(ctx, bufs[i]);
}

static int px_child(const pxcase *c, int index_mode) {
    qattn_context *cpu = NULL, *dev = NULL;
    int rc = make_contexts(&cpu, &dev);
    if (rc) return rc;
    const pm_cfg cfg = px_cfg(c);
    qt_rng rng = qt_rng_for("bad_inputs/paged_index");
    pm_case k;
    pm_make(&k, &cfg, &rng, POISON);
    if (c->edit) c->edit(&k);
    const size_t cells = (size_t)(cfg.B * cfg.N * k.M);
    double *ref = calloc(cells, sizeof *ref), *A = calloc(cells, sizeof *A);
    uint8_t *vis = calloc(cells, 1);
    pm_oracle(&k, ref, A, vis);
    pxresult rs[2];
    run_px(cpu, &k, c, &rs[0]);
    run_px(dev, &k, c, &rs[1]);
    const qattn_status want = index_mode ? c->index_status : c->status;
    const char *who[2] = {"cpu", DEV_NAME};
    int fails = 0, seen = 0;
    for (size_t i = 0; i < cells; ++i) seen += vis[i];
    /* every case but the empty cache has seen and unseen columns (request
     * 1 is shorter than its rows) */
    if (want == QATTN_OK && ((seen == 0 && c->edit != px_empty_cache) || seen == (int)cells)) {
        printf("    the oracle sees %d of %zu columns: a case that cannot fail\n", seen, cells);
        ++fails;
    }
    for (int i = 0; i < 2; ++i) {
        const pxresult *r = &rs[i];
        if (r->setup_error) {
            printf("    %s: %s\n", who[i], r->msg);
            ++fails;
            continue;
        }
        if (r->st != want) {
            printf("    %s: status %s, want %s (%s)\n", who[i], qattn_status_name(r->st), qattn_status_name(want),
                   r->msg);
            ++fails;
        }
        if (!r->guards_ok) {
            printf("    %s: wrote outside the logits' buffer span (guard bytes changed)\n", who[i]);
            ++fails;
        }
        if (!r->q_kept) {
            printf("    %s: q changed\n", who[i]);
            ++fails;
        }
        if (want != QATTN_OK) {
            int untouched = 1;
            for (size_t j = 0; j < k.bytes[PM_LOGITS]; ++j) untouched &= r->logits[j] == POISON;
            if (!untouched) {
                printf("    %s: a refused call wrote into logits\n", who[i]);
                ++fails;
            }
            if (c->needle && !strstr(r->msg, c->needle)) {
                printf("    %s: message \"%s\" does not name the operand and rule (\"%s\")\n", who[i], r->msg,
                       c->needle);
                ++fails;
            }
        } else if (r->st == QATTN_OK) {
            char msg[256];
            const int64_t bad = pm_check(&k, r->logits, ref, A, vis, POISON, 1, msg, sizeof msg);
            if (bad) {
                printf("    %s: %lld logits differ from the oracle, first %s\n", who[i], (long long)bad, msg);
                ++fails;
            }
        }
    }
    if (rs[0].st != rs[1].st) {
        printf("    backends disagree: cpu %s, " DEV_NAME " %s\n", qattn_status_name(rs[0].st),
               qattn_status_name(rs[1].st));
        ++fails;
    }
    free(rs[0].logits);
    free(rs[1].logits);
    free(ref);
    free(A);
    free(vis);
    pm_free(&k);
    qattn_context_free(cpu);
    qattn_context_free(dev);
    return fails ? 1 : 0;
}

static int px_body(const void *arg, int mode) {
    if (mode) setenv("QATTN_CHECK_INDICES", "1", 1);
    else unsetenv("QATTN_CHECK_INDICES");
    return px_child((const pxcase *)arg, mode);
}

#if !defined(QATTN_BAD_INPUTS_HIP)
/* ---- rows 15-17: Vulkan buffers ----------------------------------------- */
typedef struct raw_buffer {
    VkBuffer buffer;
    VkDeviceMemory memory;
} raw_buffer;

static int raw_make(qattn_vk *vk, uint64_t bytes, VkBufferUsageFlags usage, raw_buffer *rb) {
    memset(rb, 0, sizeof *rb);
    VkBufferCreateInfo bci = {VK_STRUCTURE_TYPE_BUFFER_CREATE_INFO};
    bci.size = bytes;
    bci.usage = usage;
    if (vk->vkd.vkCreateBuffer(vk->device, &bci, NULL, &rb->buffer) != VK_SUCCESS) return 0;
    VkMemoryRequirements req;
    vk->vkd.vkGetBufferMemoryRequirements(vk->device, rb->buffer, &req);
    VkMemoryAllocateFlagsInfo fl = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_FLAGS_INFO};
    fl.flags = VK_MEMORY_ALLOCATE_DEVICE_ADDRESS_BIT;
    VkMemoryAllocateInfo ai = {VK_STRUCTURE_TYPE_MEMORY_ALLOCATE_INFO};
    ai.pNext = (usage & VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT) ? &fl : NULL;
    ai.allocationSize = req.size;
    ai.memoryTypeIndex = vk->mem_device;
    if (vk->vkd.vkAllocateMemory(vk->device, &ai, NULL, &rb->memory) != VK_SUCCESS) return 0;
    return vk->vkd.vkBindBufferMemory(vk->device, rb->buffer, rb->memory, 0) == VK_SUCCESS;
}

static void raw_free(qattn_vk *vk, raw_buffer *rb) {
    if (rb->buffer) vk->vkd.vkDestroyBuffer(vk->device, rb->buffer, NULL);
    if (rb->memory) vk->vkd.vkFreeMemory(vk->device, rb->memory, NULL);
}

#define FULL_USAGE                                                                                   \
    (VK_BUFFER_USAGE_STORAGE_BUFFER_BIT | VK_BUFFER_USAGE_TRANSFER_SRC_BIT |                         \
     VK_BUFFER_USAGE_TRANSFER_DST_BIT | VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT)

#define EXPECT(cond, ...)                                                                            \
    do {                                                                                             \
        if (!(cond)) {                                                                               \
            printf("    " __VA_ARGS__);                                                              \
            printf(" [%s]\n", qattn_last_error(ctx));                                                \
            ++fails;                                                                                 \
        }                                                                                            \
    } while (0)

static int vulkan_child(int which) {
    qattn_context *cpu = NULL, *ctx = NULL;
    int rc = make_contexts(&cpu, &ctx);
    if (rc) return rc;
    qattn_context_free(cpu);
    qattn_vk *vk = (qattn_vk *)ctx->be;
    int fails = 0;
    qattn_buffer *w = NULL;
    if (which == 15) {
        /* A 1 KiB VkBuffer claimed as 4 KiB, directly or through a lying size. */
        raw_buffer rb;
        if (!raw_make(vk, 1024, FULL_USAGE, &rb)) return printf("    fixture: VkBuffer\n"), 1;
        qattn_vk_native_buffer nb = {&rb.buffer, 1024, FULL_USAGE, 0};
        qattn_status s = qattn_buffer_wrap(ctx, &nb, 4096, &w);
        EXPECT(s == QATTN_ERR_OUT_OF_BOUNDS && w == NULL && strstr(qattn_last_error(ctx), "bytes"),
               "wrap 1 KiB as 4 KiB: %s", qattn_status_name(s));
        nb.size = 4096;
        s = qattn_buffer_wrap(ctx, &nb, 4096, &w);
        EXPECT(s == QATTN_ERR_OUT_OF_BOUNDS && w == NULL && strstr(qattn_last_error(ctx), "native.size"),
               "wrap 1 KiB claiming native.size 4 KiB: %s", qattn_status_name(s));
        /* reserved is 0 or the struct is not read at all. */
        nb.size = 1024;
        nb.reserved = 1;
        s = qattn_buffer_wrap(ctx, &nb, 1024, &w);
        EXPECT(s == QATTN_ERR_INVALID_ARGUMENT && w == NULL && strstr(qattn_last_error(ctx), "native.reserved"),
               "wrap with native.reserved 1: %s", qattn_status_name(s));
        nb.reserved = 0;
        /* The honest wrap works, and a 4 KiB upload into it is refused. */
        s = qattn_buffer_wrap(ctx, &nb, 1024, &w);
        EXPECT(s == QATTN_OK, "honest wrap: %s", qattn_status_name(s));
        if (w) {
            static unsigned char big[4096];
            memset(big, 0x3C, sizeof big);
            s = qattn_buffer_upload(ctx, w, 0, big, sizeof big);
            EXPECT(s == QATTN_ERR_OUT_OF_BOUNDS, "4 KiB upload into 1 KiB: %s", qattn_status_name(s));
            s = qattn_buffer_upload(ctx, w, 0, big, 1024);
            unsigned char back[1024];
            EXPECT(s == QATTN_OK && qattn_buffer_download(ctx, w, 0, back, 1024) == QATTN_OK &&
                       memcmp(back, big, 1024) == 0,
                   "1 KiB round trip through the wrapped buffer: %s", qattn_status_name(s));
            qattn_buffer_free(ctx, w);
        }
        raw_free(vk, &rb);
    } else if (which == 16) {
        /* A VkBuffer without device-address usage. */
        raw_buffer rb;
        const VkBufferUsageFlags usage = FULL_USAGE & ~VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT;
        if (!raw_make(vk, 1024, usage, &rb)) return printf("    fixture: VkBuffer\n"), 1;
        qattn_vk_native_buffer nb = {&rb.buffer, 1024, usage, 0};
        qattn_status s = qattn_buffer_wrap(ctx, &nb, 1024, &w);
        EXPECT(s == QATTN_ERR_INVALID_ARGUMENT && w == NULL &&
                   strstr(qattn_last_error(ctx), "SHADER_DEVICE_ADDRESS"),
               "wrap without device-address usage: %s", qattn_status_name(s));
        if (w) qattn_buffer_free(ctx, w);
        raw_free(vk, &rb);
        /* The next call is not failed by anything the refused one left. */
        qattn_buffer *ok = NULL;
        s = qattn_buffer_alloc(ctx, 256, &ok);
        EXPECT(s == QATTN_OK, "alloc after the refused wrap: %s", qattn_status_name(s));
        qattn_buffer_free(ctx, ok);
    } else {
        /* A failed alloc(2^50), then a valid upload and download. */
        qattn_buffer *huge = NULL, *b = NULL;
        qattn_status s = qattn_buffer_alloc(ctx, 1ull << 50, &huge);
        EXPECT(s != QATTN_OK && huge == NULL, "alloc(2^50): %s", qattn_status_name(s));
        s = qattn_buffer_alloc(ctx, 4096, &b);
        EXPECT(s == QATTN_OK, "alloc(4096) after the failed one: %s", qattn_status_name(s));
        if (b) {
            static unsigned char data[4096], back[4096];
            for (size_t i = 0; i < sizeof data; ++i) data[i] = (unsigned char)(i * 7 + 1);
            s = qattn_buffer_upload(ctx, b, 0, data, sizeof data);
            EXPECT(s == QATTN_OK, "upload after the failed alloc: %s", qattn_status_name(s));
            s = qattn_buffer_download(ctx, b, 0, back, sizeof back);
            EXPECT(s == QATTN_OK && memcmp(back, data, sizeof data) == 0, "download: %s",
                   qattn_status_name(s));
            qattn_buffer_free(ctx, b);
        }
    }
    qattn_context_free(ctx);
    return fails ? 1 : 0;
}

#endif /* !QATTN_BAD_INPUTS_HIP */

/* ---- driver ------------------------------------------------------------- */

static int in_child(int (*body)(const void *, int), const void *arg, int mode) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 1;
    if (pid == 0) {
        int rc = body(arg, mode);
        fflush(stdout);
        _exit(rc);
    }
    int st = 0;
    if (waitpid(pid, &st, 0) != pid) return 1;
    if (WIFSIGNALED(st)) {
        printf("    crashed: signal %d (%s)\n", WTERMSIG(st), strsignal(WTERMSIG(st)));
        return 1;
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static int decode_body(const void *arg, int mode) { return decode_child((const dcase *)arg, mode); }
#if !defined(QATTN_BAD_INPUTS_HIP)
static int vulkan_body(const void *arg, int mode) {
    (void)mode;
    return vulkan_child(*(const int *)arg);
}
#endif

static int run_cases(const char *group, const dcase *cases, size_t n, int *failed, int *skipped) {
    for (size_t i = 0; i < n; ++i)
        for (int mode = 0; mode < 2; ++mode) {
            printf("[%s] %s, %s\n", group, cases[i].name, mode ? "QATTN_CHECK_INDICES=1" : "no index mode");
            int rc = in_child(decode_body, &cases[i], mode);
            if (rc == 77) return ++*skipped, 77;
            printf("  %s\n", rc ? "FAIL" : "ok");
            *failed += rc != 0;
        }
    return 0;
}

int main(int argc, char **argv) {
    const char *group = "all";
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "--group") && i + 1 < argc) {
            group = argv[++i];
        } else if (!strcmp(argv[i], "--no-validation")) {
            g_validation = 0;
        } else if (!strcmp(argv[i], "--variant") && i + 1 < argc) {
            const char *v = argv[++i];
            int found = 0;
            for (int k = 0; k < QATTN_DECODE_VARIANT_COUNT && !found; ++k)
                if (!strcmp(v, qattn_decode_variant_name((qattn_decode_variant)k))) {
                    g_variant = (qattn_decode_variant)k;
                    found = 1;
                }
            if (!found) {
                fprintf(stderr, "--variant %s: not a decode variant\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "usage: %s [--group core|decode|paged|vulkan|all] [--no-validation] "
                            "[--variant auto|simt|matrix]\n", argv[0]);
            return 2;
        }
    }
    printf("device decode plans: variant %s%s; validation layer %s\n", qattn_decode_variant_name(g_variant),
           g_variant == QATTN_DECODE_AUTO ? " (the planner's choice)" : " (pinned)",
           g_validation ? "on" : "off");
    qt_rng rng = qt_rng_for("bad_inputs");
    qt_fill_bf16(&rng, g_q, NQ, 1.0f);
    qt_fill_fp8(&rng, g_k, sizeof g_k, QATTN_FP8_E4M3FN, 4.0f);
    qt_fill_fp8(&rng, g_v, sizeof g_v, QATTN_FP8_E4M3FN, 4.0f);
    qt_fill_f32_pos(&rng, g_ks, NS * HKV, 0.01f, 0.1f);
    qt_fill_f32_pos(&rng, g_vs, NS * HKV, 0.01f, 0.1f);
    printf("seed: QATTN_TEST_SEED=0x%llx\n", (unsigned long long)rng.base_seed);
    int failed = 0, skipped = 0;
    const int all = !strcmp(group, "all");
    if ((all || !strcmp(group, "core")) &&
        run_cases("core", CORE_CASES, sizeof CORE_CASES / sizeof CORE_CASES[0], &failed, &skipped) == 77)
        goto skip;
    if (all || !strcmp(group, "core"))
        for (size_t i = 0; i < sizeof PAGED_CASES / sizeof PAGED_CASES[0]; ++i)
            for (int mode = 0; mode < 2; ++mode) {
                printf("[core] %s, %s\n", PAGED_CASES[i].name, mode ? "QATTN_CHECK_INDICES=1" : "no index mode");
                const int rc = in_child(paged_body, &PAGED_CASES[i], mode);
                if (rc == 77) goto skip;
                printf("  %s\n", rc ? "FAIL" : "ok");
                failed += rc != 0;
            }
#if !defined(QATTN_BAD_INPUTS_HIP)
    if (all || !strcmp(group, "vulkan")) {
        static const int rows[3] = {15, 16, 17};
        static const char *what[3] = {"row 15: a VkBuffer wrapped as larger than it is",
                                      "row 16: a VkBuffer without device-address usage",
                                      "row 17: a failed alloc(2^50), then a valid upload"};
        for (int i = 0; i < 3; ++i) {
            printf("[vulkan] %s\n", what[i]);
            int rc = in_child(vulkan_body, &rows[i], 0);
            if (rc == 77) goto skip;
            printf("  %s\n", rc ? "FAIL" : "ok");
            failed += rc != 0;
        }
    }
#endif
    if ((all || !strcmp(group, "decode")) &&
        run_cases("decode", DECODE_CASES, sizeof DECODE_CASES / sizeof DECODE_CASES[0], &failed,
                  &skipped) == 77)
        goto skip;
    if (all || !strcmp(group, "paged"))
        for (size_t i = 0; i < sizeof PX_CASES / sizeof PX_CASES[0]; ++i)
            for (int mode = 0; mode < 2; ++mode) {
                printf("[paged] %s, %s\n", PX_CASES[i].name, mode ? "QATTN_CHECK_INDICES=1" : "no index mode");
                const int rc = in_child(px_body, &PX_CASES[i], mode);
                if (rc == 77) goto skip;
                printf("  %s\n", rc ? "FAIL" : "ok");
                failed += rc != 0;
            }
    printf("%d case run(s) failed\n", failed);
    return failed ? 1 : 0;
skip:
    printf("skipped: no " DEV_NAME " device\n");
    return 77;
}
