/*
 * Parity cases of FP8 MQA logits (spec 3; spec 4: |out - ref| <= 4e-5 A +
 * 1e-6 inside each row's window, -inf exactly outside it when clean_logits
 * is set, nothing written outside the tensor's elements).
 *
 * The default table is pairwise: every pair of values of the factors below
 * appears in some case. It is built greedily from a fixed generator (so the
 * table is the same on every run; QATTN_TEST_SEED changes only the data),
 * under a per-case work budget that keeps the whole table within a couple of
 * minutes on lavapipe with 2 cores:
 *   rows {1, 15, 16, 17, 1023}, KV {1, 255, 257, 20007}, heads {16, 32, 64,
 *   128}, D {64, 128, 256, 512}, q fn/fnuz, k fn/fnuz, clean on/off, windows
 *   {random (full, inside, clamped, empty mixed), causal, full, all empty},
 *   variant {planner, direct, staged, coopmat forced}, layout {dense,
 *   padded and unaligned}.
 * Then eight fixed cases name every coopmat geometry (rows over 1 to 8
 * subgroups, 1 to 4 rows per subgroup), and eight more pin one row per
 * workgroup through the experimental geometry pins (a geometry the planner
 * does not choose).
 * --full covers every pair twice over with a ten times larger budget, and
 * adds the 16 x 1,500,000-column case (also reachable alone with
 * --filter mqa_logits/long). That case checks a sample of rows and column
 * ranges against the reference on sub-problems, and every other element for
 * being a finite number or the exact -inf.
 *
 * A forced variant its gate refuses is counted as refused (the message must
 * name why) and the case then runs with the planner's choice, so the data
 * combination is still covered; with --variant every case must run that
 * variant or be refused.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity_common.h"
#include "qattn/convert.h"
#include "qattn/experimental.h"
#include "tolerance.h"

enum { W_RANDOM, W_CAUSAL, W_FULL, W_EMPTY, W_COUNT };
static const char *const WIN_NAME[W_COUNT] = {"random", "causal", "full", "empty"};

/* Factor levels. */
static const int ROWS[] = {1, 15, 16, 17, 1023};
static const int KVS[] = {1, 255, 257, 20007};
static const int HEADS[] = {16, 32, 64, 128};
static const int DIMS[] = {64, 128, 256, 512};
#define N_FACTORS 10
static const int LEVELS[N_FACTORS] = {5, 4, 4, 4, 2, 2, 2, W_COUNT, QATTN_MQA_VARIANT_COUNT, 2};

typedef struct mqa_case {
    int S, S_kv, H, D;
    qattn_dtype qt, kt;
    int clean, win;
    qattn_mqa_variant variant; /* AUTO = the planner's choice */
    int padded;                /* padded, unaligned strides and offsets */
    double budget;             /* multiply-adds the windows may cost */
    qattn_mqa_logits_geometry geo; /* coopmat geometry pins (0 = planner) */
} mqa_case;

static mqa_case case_from_levels(const int lv[N_FACTORS], double budget) {
    mqa_case c;
    c.S = ROWS[lv[0]];
    c.S_kv = KVS[lv[1]];
    c.H = HEADS[lv[2]];
    c.D = DIMS[lv[3]];
    c.qt = lv[4] ? QATTN_FP8_E4M3FNUZ : QATTN_FP8_E4M3FN;
    c.kt = lv[5] ? QATTN_FP8_E4M3FNUZ : QATTN_FP8_E4M3FN;
    c.clean = lv[6];
    c.win = lv[7];
    c.variant = (qattn_mqa_variant)lv[8];
    c.padded = lv[9];
    c.budget = budget;
    memset(&c.geo, 0, sizeof c.geo);
    return c;
}

/* Work of a case's windows: full and causal windows cost all of S x S_kv;
 * random ones are capped to the budget when drawn. */
static double case_cost(const mqa_case *c) {
    if (c->win == W_FULL || c->win == W_CAUSAL) return (double)c->S * c->S_kv * c->H * c->D;
    return 0.0;
}

/* ---- the pairwise table ------------------------------------------------- */
#define MAX_CASES 128

static int pair_index(int f, int a, int g, int b) { return ((f * N_FACTORS + g) * 8 + a) * 8 + b; }

/* Greedy pairwise cover: each step takes, among candidates drawn from a
 * fixed generator, the one within budget covering the most uncovered pairs
 * (fewest work on ties). `rounds` covers every pair that many times. */
static int build_table(mqa_case *out, double budget, int rounds, uint64_t gen_seed) {
    static unsigned char need[N_FACTORS * N_FACTORS * 64];
    int n = 0;
    uint64_t st = gen_seed;
    for (int round = 0; round < rounds; ++round) {
        memset(need, 0, sizeof need);
        int uncovered = 0;
        for (int f = 0; f < N_FACTORS; ++f)
            for (int g = f + 1; g < N_FACTORS; ++g)
                for (int a = 0; a < LEVELS[f]; ++a)
                    for (int b = 0; b < LEVELS[g]; ++b) {
                        need[pair_index(f, a, g, b)] = 1;
                        ++uncovered;
                    }
        while (uncovered > 0 && n < MAX_CASES) {
            /* Candidates keep the first uncovered pair; the size factors
             * (rows, KV, heads, D: factors 0-3) fall to their cheapest level
             * half the time so expensive pairs find a completion in budget. */
            int pf = 0, pa = 0, pg = 1, pb = 0, found = 0;
            for (int f = 0; f < N_FACTORS && !found; ++f)
                for (int g = f + 1; g < N_FACTORS && !found; ++g)
                    for (int a = 0; a < LEVELS[f] && !found; ++a)
                        for (int b = 0; b < LEVELS[g] && !found; ++b)
                            if (need[pair_index(f, a, g, b)]) {
                                pf = f, pa = a, pg = g, pb = b;
                                found = 1;
                            }
            int best[N_FACTORS], best_gain = -1;
            double best_cost = 0;
            for (int cand = 0; cand < 400; ++cand) {
                int lv[N_FACTORS];
                for (int f = 0; f < N_FACTORS; ++f) {
                    lv[f] = (int)(qt_splitmix64(&st) % (uint64_t)LEVELS[f]);
                    if (f < 4 && (qt_splitmix64(&st) & 1u)) lv[f] = 0;
                }
                lv[pf] = pa;
                lv[pg] = pb;
                mqa_case c = case_from_levels(lv, budget);
                double cost = case_cost(&c);
                if (cost > budget) continue;
                int gain = 0;
                for (int f = 0; f < N_FACTORS; ++f)
                    for (int g = f + 1; g < N_FACTORS; ++g) gain += need[pair_index(f, lv[f], g, lv[g])];
                if (gain > best_gain || (gain == best_gain && cost < best_cost)) {
                    best_gain = gain;
                    best_cost = cost;
                    memcpy(best, lv, sizeof best);
                }
            }
            if (best_gain <= 0) break; /* the rest are infeasible under the budget */
            for (int f = 0; f < N_FACTORS; ++f)
                for (int g = f + 1; g < N_FACTORS; ++g) {
                    unsigned char *p = &need[pair_index(f, best[f], g, best[g])];
                    uncovered -= *p;
                    *p = 0;
                }
            out[n++] = case_from_levels(best, budget);
        }
        if (uncovered > 0) return -uncovered;
    }
    return n;
}

static void case_name(const mqa_case *c, int idx, char *buf, size_t n) {
    snprintf(buf, n, "mqa_logits/%02d_S%d_kv%d_H%d_D%d_q%s_k%s_%s_%s_%s%s", idx, c->S, c->S_kv, c->H, c->D,
             c->qt == QATTN_FP8_E4M3FN ? "fn" : "fnuz", c->kt == QATTN_FP8_E4M3FN ? "fn" : "fnuz",
             c->clean ? "clean" : "dirty", WIN_NAME[c->win], qattn_mqa_variant_name(c->variant),
             c->padded ? "_padded" : "");
    if (c->geo.m_tiles || c->geo.n_tiles || c->geo.rows_per_workgroup) {
        const size_t used = strlen(buf);
        snprintf(buf + used, n - used, "_mt%d_nt%d_rpw%d", (int)c->geo.m_tiles, (int)c->geo.n_tiles,
                 (int)c->geo.rows_per_workgroup);
    }
}

/* Geometry pins from the environment for every case that names none
 * (QATTN_MQA_MTILES, QATTN_MQA_NTILES, QATTN_MQA_RPW: the device runs force
 * each geometry through the whole table this way); -1 on a malformed value. */
static int env_pin(const char *name) {
    const char *e = getenv(name);
    if (!e || !*e) return 0;
    char *end = NULL;
    const long v = strtol(e, &end, 10);
    return *end || v < 1 || v > 64 ? -1 : (int)v;
}

/* ---- inputs ------------------------------------------------------------- */
typedef struct mqa_data {
    pt_tensor q, k, scale, w, ks, ke, logits;
} mqa_data;

static void data_free(parity_ctx *pc, mqa_data *d) {
    pt_tensor *all[7] = {&d->q, &d->k, &d->scale, &d->w, &d->ks, &d->ke, &d->logits};
    for (int i = 0; i < 7; ++i)
        if (all[i]->host) pt_free(pc, all[i]);
}

/* Row i's window for the case's mode. Random windows cycle through the
 * edge cases and keep their width within the budget. */
static void draw_window(qt_rng *rng, const mqa_case *c, int i, int64_t cap, int32_t *ks, int32_t *ke) {
    const int Skv = c->S_kv;
    switch (c->win) {
    case W_FULL: *ks = 0; *ke = Skv; return;
    case W_EMPTY: *ks = (int32_t)qt_int(rng, 0, Skv); *ke = *ks - (int32_t)qt_int(rng, 0, 2); return;
    case W_CAUSAL: { /* a prefill chunk at the end of a cached prefix */
        *ks = 0;
        *ke = Skv - c->S + i + 1; /* <= 0 (empty) when S > S_kv for early rows */
        return;
    }
    default: break;
    }
    const int32_t width = (int32_t)qt_int(rng, 0, cap < Skv ? cap : Skv);
    const int32_t a = (int32_t)qt_int(rng, 0, Skv - width);
    switch (qt_int(rng, 0, 7)) {
    case 0: *ks = a; *ke = a + width; break;                                   /* inside */
    case 1: *ks = -(int32_t)qt_int(rng, 1, 300); *ke = width; break;           /* ks < 0 clamps */
    case 2: *ks = Skv - width; *ke = Skv + (int32_t)qt_int(rng, 1, 300); break; /* ke > S_kv clamps */
    case 3: *ks = a; *ke = a; break;                                           /* ks == ke: empty */
    case 4: *ks = a + 1; *ke = a - (int32_t)qt_int(rng, 0, 5); break;          /* ks > ke: empty */
    case 5: *ks = Skv + 3; *ke = Skv + 40; break;                              /* right of S_kv */
    case 6: *ks = cap >= Skv ? 0 : a; *ke = cap >= Skv ? Skv : a + width; break; /* full if cheap */
    default: *ks = a + (int32_t)qt_int(rng, 0, 17); *ke = *ks + width; break; /* unaligned */
    }
}

static int make_data(parity_ctx *pc, qt_rng *rng, const mqa_case *c, mqa_data *d) {
    memset(d, 0, sizeof *d);
    pt_layout l = pt_dense();
    if (c->padded) { /* strides and offsets off every 16-byte boundary */
        l.pad = 3;
        l.lead = 5;
    }
    const int64_t qs[3] = {c->S, c->H, c->D}, kss[2] = {c->S_kv, c->D}, skv[1] = {c->S_kv};
    const int64_t ws[2] = {c->S, c->H}, s1[1] = {c->S}, ls[2] = {c->S, c->S_kv};
    if (!pt_make(&d->q, c->qt, 3, qs, &l, PT_POISON) || !pt_make(&d->k, c->kt, 2, kss, &l, PT_POISON) ||
        !pt_make(&d->scale, QATTN_F32, 1, skv, &l, PT_POISON) ||
        !pt_make(&d->w, QATTN_F32, 2, ws, &l, PT_POISON) || !pt_make(&d->ks, QATTN_I32, 1, s1, &l, PT_POISON) ||
        !pt_make(&d->ke, QATTN_I32, 1, s1, NULL, PT_POISON) ||
        !pt_make(&d->logits, QATTN_F32, 2, ls, &l, PT_POISON))
        return 0;
    /* Per case, one of: q over every code of its format (all binades,
     * subnormals, the max) with k encoded activations; the other way round;
     * or both from the subnormal and smallest-normal codes only, where a
     * path that flushed small values would miss by far more than the bound. */
    const int regime = (int)qt_int(rng, 0, 3);
    for (int64_t n = 0; n < pt_count(&d->q); ++n) {
        uint8_t *p = pt_at_linear(&d->q, n);
        if (regime == 3) *p = (uint8_t)((qt_u32(rng) & 0x80u) | (uint8_t)qt_int(rng, 1, 15));
        else if (regime == 0) qt_fill_fp8_codes(rng, p, 1, c->qt);
        else qt_fill_fp8(rng, p, 1, c->qt, 8.0f);
    }
    for (int64_t n = 0; n < pt_count(&d->k); ++n) {
        uint8_t *p = pt_at_linear(&d->k, n);
        if (regime == 3) *p = (uint8_t)((qt_u32(rng) & 0x80u) | (uint8_t)qt_int(rng, 1, 15));
        else if (regime != 0) qt_fill_fp8_codes(rng, p, 1, c->kt);
        else qt_fill_fp8(rng, p, 1, c->kt, 8.0f);
    }
    /* k_scale: positive, with some negative columns in half the cases
     * (the contract allows them; the matrix path folds the sign). */
    const int negatives = qt_int(rng, 0, 1) == 1;
    for (int j = 0; j < c->S_kv; ++j) {
        float s = qt_uniform(rng, 0.001f, 0.05f);
        if (negatives && qt_int(rng, 0, 7) == 0) s = -s;
        memcpy(pt_at(&d->scale, j, 0, 0, 0), &s, 4);
    }
    for (int i = 0; i < c->S; ++i)
        for (int h = 0; h < c->H; ++h) {
            float v = qt_signed(rng, 0.05f, 1.0f);
            memcpy(pt_at(&d->w, i, h, 0, 0), &v, 4);
        }
    const double per_col = (double)c->S * c->H * c->D;
    int64_t cap = (int64_t)(c->budget / per_col);
    if (cap < 16) cap = 16;
    for (int i = 0; i < c->S; ++i) {
        int32_t a, b;
        draw_window(rng, c, i, cap, &a, &b);
        memcpy(pt_at(&d->ks, i, 0, 0, 0), &a, 4);
        memcpy(pt_at(&d->ke, i, 0, 0, 0), &b, 4);
    }
    pt_tensor *all[7] = {&d->q, &d->k, &d->scale, &d->w, &d->ks, &d->ke, &d->logits};
    for (int i = 0; i < 7; ++i)
        if (pt_upload(pc, all[i]) != QATTN_OK) return 0;
    return 1;
}

static qattn_mqa_logits_args args_for(const mqa_data *d, int which, int clean) {
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = pt_desc(&d->q, which);
    a.k = pt_desc(&d->k, which);
    a.k_scale = pt_desc(&d->scale, which);
    a.weights = pt_desc(&d->w, which);
    a.ks = pt_desc(&d->ks, which);
    a.ke = pt_desc(&d->ke, which);
    a.logits = pt_desc(&d->logits, which);
    a.clean_logits = clean;
    return a;
}

static int32_t get_i32(const pt_tensor *t, int64_t i) {
    int32_t v;
    memcpy(&v, pt_at(t, i, 0, 0, 0), 4);
    return v;
}
static float get_f32(const pt_tensor *t, int64_t i0, int64_t i1) {
    float v;
    memcpy(&v, pt_at(t, i0, i1, 0, 0), 4);
    return v;
}
static int32_t clamp32(int32_t x, int32_t lo, int32_t hi) { return x < lo ? lo : x > hi ? hi : x; }

/* Plans and runs one side; returns the status (message in last error). */
static qattn_status run_side(parity_ctx *pc, int which, const mqa_data *d, const mqa_case *c,
                             const qattn_mqa_logits_options *o, qattn_mqa_logits_plan *plan) {
    qattn_context *ctx = which ? pc->dev : pc->ref;
    qattn_mqa_logits_args a = args_for(d, which, c->clean);
    const qattn_mqa_logits_geometry *g = &c->geo;
    qattn_status s = which && (g->m_tiles || g->n_tiles || g->rows_per_workgroup)
                         ? qattn_experimental_mqa_logits_plan_create(ctx, &a, o, g, plan)
                         : qattn_mqa_logits_plan_create(ctx, &a, o, plan);
    if (s != QATTN_OK) return s;
    s = qattn_mqa_logits_run(ctx, plan, &a, NULL, 0);
    if (s == QATTN_OK) s = qattn_synchronize(ctx);
    return s;
}

static int parse_variant(const char *s, qattn_mqa_variant *v) {
    for (int i = 0; i < QATTN_MQA_VARIANT_COUNT; ++i)
        if (!strcmp(s, qattn_mqa_variant_name((qattn_mqa_variant)i))) {
            *v = (qattn_mqa_variant)i;
            return 1;
        }
    return 0;
}

/* Compares the device's logits with the reference's: inside windows with
 * the spec bound, -inf outside when clean, gaps untouched. Returns the
 * number of bad elements (reported through pt_fail once). */
static int compare(parity_ctx *pc, qt_rng *rng, const char *name, const mqa_case *c, const mqa_data *d) {
    pt_tensor const *L = &d->logits;
    uint8_t *ri = malloc(L->bytes), *di = malloc(L->bytes);
    double *u = malloc(sizeof(double) * (size_t)c->D);
    int bad = 0;
    char first[320] = "";
    if (!ri || !di || !u || pt_download(pc, L, 0, ri) != QATTN_OK || pt_download(pc, L, 1, di) != QATTN_OK) {
        pt_fail(pc, rng, name, "download failed");
        bad = 1;
        goto out;
    }
    if (!pt_gaps_equal(L, di, PT_POISON)) {
        snprintf(first, sizeof first, "bytes outside the logits elements were written");
        ++bad;
    }
    for (int i = 0; i < c->S; ++i) {
        const int32_t lo = clamp32(get_i32(&d->ks, i), 0, c->S_kv);
        const int32_t hi = clamp32(get_i32(&d->ke, i), 0, c->S_kv);
        /* u[d] = sum_h |w_ih| |q_ihd|, so A = |s_j| sum_d |k_jd| u[d]. */
        for (int e = 0; e < c->D; ++e) u[e] = 0.0;
        for (int h = 0; h < c->H; ++h) {
            const double wa = fabs((double)get_f32(&d->w, i, h));
            for (int e = 0; e < c->D; ++e)
                u[e] += wa * fabs((double)qattn_fp8_to_f32(*(uint8_t *)pt_at(&d->q, i, h, e, 0), c->qt));
        }
        for (int32_t j = 0; j < c->S_kv; ++j) {
            const size_t off = (size_t)((const uint8_t *)pt_at(L, i, j, 0, 0) - L->host);
            float got, ref;
            memcpy(&got, di + off, 4);
            memcpy(&ref, ri + off, 4);
            const int inside = j >= lo && j < hi;
            if (!inside) {
                if (c->clean && !(isinf(got) && got < 0)) {
                    if (!bad++) snprintf(first, sizeof first, "[%d, %d] outside [%d, %d): got %.9g, want -inf", i, j, lo, hi, got);
                }
                continue;
            }
            double A = 0.0;
            for (int e = 0; e < c->D; ++e)
                A += fabs((double)qattn_fp8_to_f32(*(uint8_t *)pt_at(&d->k, j, e, 0, 0), c->kt)) * u[e];
            A *= fabs((double)get_f32(&d->scale, j, 0));
            if (!qt_tol_mqa_logit(got, ref, A)) {
                if (!bad++)
                    snprintf(first, sizeof first, "[%d, %d] got %.9g, reference %.9g, |diff| %.3g > bound %.3g", i, j,
                             got, ref, fabs((double)got - ref), qt_tol_mqa_bound(A));
            }
        }
    }
    if (bad) pt_fail(pc, rng, name, "%d bad elements; first: %s", bad, first);
out:
    free(ri);
    free(di);
    free(u);
    return bad;
}

static void run_case(parity_ctx *pc, const mqa_case *cin, int idx) {
    mqa_case cc = *cin;
    const mqa_case *c = &cc;
    static const char *const PIN_ENV[3] = {"QATTN_MQA_MTILES", "QATTN_MQA_NTILES", "QATTN_MQA_RPW"};
    int32_t *pins[3] = {&cc.geo.m_tiles, &cc.geo.n_tiles, &cc.geo.rows_per_workgroup};
    for (int i = 0; i < 3; ++i) {
        const int v = env_pin(PIN_ENV[i]);
        if (v < 0) {
            qt_rng rng = qt_rng_for(PIN_ENV[i]);
            pt_fail(pc, &rng, PIN_ENV[i], "%s: expected a number 1..64", PIN_ENV[i]);
            return;
        }
        if (v && !*pins[i]) *pins[i] = v;
    }
    char name[200];
    case_name(c, idx, name, sizeof name);
    if (!pt_selected(pc, name)) return;
    qt_rng rng = qt_rng_for(name);
    qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;
    o.variant = c->variant;
    int forced_globally = 0;
    if (pc->variant) {
        if (!parse_variant(pc->variant, &o.variant)) {
            /* Another op's variant name: nothing to force here. */
            pc->n_refused++;
            if (pc->verbose) printf("gate %s: --variant %s is not an MQA variant\n", name, pc->variant);
            return;
        }
        forced_globally = 1;
    }
    mqa_data d;
    if (!make_data(pc, &rng, c, &d)) {
        pt_fail(pc, &rng, name, "inputs: out of memory or upload failed");
        data_free(pc, &d);
        return;
    }
    qattn_mqa_logits_plan ref_plan, plan;
    qattn_status s = run_side(pc, 0, &d, c, NULL, &ref_plan);
    if (s != QATTN_OK) {
        pt_fail(pc, &rng, name, "reference: %s: %s", qattn_status_name(s), qattn_last_error(pc->ref));
        data_free(pc, &d);
        return;
    }
    s = run_side(pc, 1, &d, c, &o, &plan);
    if (s == QATTN_ERR_VARIANT_GATE && o.variant != QATTN_MQA_AUTO) {
        const char *why = qattn_last_error(pc->dev);
        pc->n_refused++;
        if (pc->verbose) printf("gate %s: %s\n", name, why);
        if (!strstr(why, qattn_mqa_variant_name(o.variant))) {
            pt_fail(pc, &rng, name, "gate refusal does not name the variant: %s", why);
            data_free(pc, &d);
            return;
        }
        if (forced_globally) {
            data_free(pc, &d);
            return;
        }
        o.variant = QATTN_MQA_AUTO; /* still cover the data combination */
        s = run_side(pc, 1, &d, c, &o, &plan);
    }
    if (s != QATTN_OK) {
        pt_fail(pc, &rng, name, "%s: %s", qattn_status_name(s), qattn_last_error(pc->dev));
        data_free(pc, &d);
        return;
    }
    if (o.variant != QATTN_MQA_AUTO && plan.variant != o.variant) {
        pt_fail(pc, &rng, name, "forced %s but the plan ran %s", qattn_mqa_variant_name(o.variant),
                qattn_mqa_variant_name(plan.variant));
        data_free(pc, &d);
        return;
    }
    if (compare(pc, &rng, name, c, &d) == 0) {
        char detail[200];
        snprintf(detail, sizeof detail,
                 "%s, %d rows/subgroup, %d rows/wg, %d subgroups, mt %d, tile %d, %d slices, %u B shared, "
                 "%d-byte loads",
                 qattn_mqa_variant_name(plan.variant), plan.rows_per_subgroup, plan.rows_per_workgroup,
                 plan.subgroups_per_workgroup, plan.m_tiles, plan.kv_tile, plan.kv_slices,
                 (unsigned)plan.shared_bytes, plan.load_bytes);
        pt_pass(pc, name, detail);
    }
    data_free(pc, &d);
}

/* ---- 16 rows x 1,500,000 columns ------------------------------------------
 * End to end on the device; the reference runs on sub-problems: for three
 * sampled rows, column ranges around their window edges and at random,
 * each as its own (1 row x range) problem on the cpu backend. */
#define LONG_S 16
#define LONG_KV 1500000
#define LONG_H 64
#define LONG_D 128

static qattn_status upload_new(qattn_context *ctx, const void *src, size_t bytes, qattn_buffer **b) {
    qattn_status s = qattn_buffer_alloc(ctx, bytes, b);
    if (s == QATTN_OK) s = qattn_buffer_upload(ctx, *b, 0, src, bytes);
    return s;
}

/* Reference logits of row i over columns [c0, c0 + n) into out. */
static qattn_status long_reference(parity_ctx *pc, const uint8_t *q, const uint8_t *k, const float *sc,
                                   const float *w, int32_t ks, int32_t ke, int i, int32_t c0, int32_t n,
                                   float *out) {
    qattn_context *ctx = pc->ref;
    qattn_buffer *b[7] = {0};
    const int32_t sks = ks - c0, ske = ke - c0; /* may leave [0, n]: clamps as the full row does */
    qattn_status s = upload_new(ctx, q + (size_t)i * LONG_H * LONG_D, (size_t)LONG_H * LONG_D, &b[0]);
    if (s == QATTN_OK) s = upload_new(ctx, k + (size_t)c0 * LONG_D, (size_t)n * LONG_D, &b[1]);
    if (s == QATTN_OK) s = upload_new(ctx, sc + c0, (size_t)n * 4, &b[2]);
    if (s == QATTN_OK) s = upload_new(ctx, w + (size_t)i * LONG_H, LONG_H * 4, &b[3]);
    if (s == QATTN_OK) s = upload_new(ctx, &sks, 4, &b[4]);
    if (s == QATTN_OK) s = upload_new(ctx, &ske, 4, &b[5]);
    if (s == QATTN_OK) s = qattn_buffer_alloc(ctx, (size_t)n * 4, &b[6]);
    if (s == QATTN_OK) {
        qattn_mqa_logits_args a;
        memset(&a, 0, sizeof a);
        const int64_t qs[3] = {1, LONG_H, LONG_D}, kss[2] = {n, LONG_D}, one = 1, nn = n, ws[2] = {1, LONG_H};
        const int64_t ls[2] = {1, n};
        a.q = qattn_tensor_contiguous(b[0], 0, QATTN_FP8_E4M3FN, 3, qs);
        a.k = qattn_tensor_contiguous(b[1], 0, QATTN_FP8_E4M3FNUZ, 2, kss);
        a.k_scale = qattn_tensor_contiguous(b[2], 0, QATTN_F32, 1, &nn);
        a.weights = qattn_tensor_contiguous(b[3], 0, QATTN_F32, 2, ws);
        a.ks = qattn_tensor_contiguous(b[4], 0, QATTN_I32, 1, &one);
        a.ke = qattn_tensor_contiguous(b[5], 0, QATTN_I32, 1, &one);
        a.logits = qattn_tensor_contiguous(b[6], 0, QATTN_F32, 2, ls);
        a.clean_logits = 1;
        qattn_mqa_logits_plan p;
        s = qattn_mqa_logits_plan_create(ctx, &a, NULL, &p);
        if (s == QATTN_OK) s = qattn_mqa_logits_run(ctx, &p, &a, NULL, 0);
        if (s == QATTN_OK) s = qattn_buffer_download(ctx, b[6], 0, out, (size_t)n * 4);
    }
    for (int x = 0; x < 7; ++x) qattn_buffer_free(ctx, b[x]);
    return s;
}

static void run_long(parity_ctx *pc) {
    const char *name = "mqa_logits/long_16x1500000_H64_D128";
    if (!pt_selected(pc, name)) return;
    if (!pc->full && !(pc->filter && strstr(pc->filter, "long"))) return; /* opt-in */
    qt_rng rng = qt_rng_for(name);
    const int64_t lrow = (LONG_KV + 255) / 256 * 256; /* the spec's recommended stride */
    const size_t nq = (size_t)LONG_S * LONG_H * LONG_D, nk = (size_t)LONG_KV * LONG_D;
    const size_t nl = (size_t)LONG_S * lrow;
    uint8_t *q = malloc(nq), *k = malloc(nk);
    float *sc = malloc((size_t)LONG_KV * 4), *w = malloc((size_t)LONG_S * LONG_H * 4);
    float *out = malloc(nl * 4), *ref = malloc((size_t)8192 * 4);
    int32_t ks[LONG_S], ke[LONG_S];
    qattn_buffer *b[7] = {0};
    int bad = 0;
    char first[256] = "";
    if (!q || !k || !sc || !w || !out || !ref) {
        pt_fail(pc, &rng, name, "out of host memory");
        goto done;
    }
    qt_fill_fp8_codes(&rng, q, nq, QATTN_FP8_E4M3FN);
    qt_fill_fp8_codes(&rng, k, nk, QATTN_FP8_E4M3FNUZ);
    qt_fill_f32_pos(&rng, sc, LONG_KV, 0.001f, 0.05f);
    qt_fill_f32(&rng, w, (size_t)LONG_S * LONG_H, 1.0f);
    for (int i = 0; i < LONG_S; ++i) { /* long windows, some clamped, one empty */
        ks[i] = i == 3 ? 700000 : (int32_t)qt_int(&rng, -100, 200000);
        ke[i] = i == 3 ? 700000 : (int32_t)qt_int(&rng, 1200000, LONG_KV + 100);
    }
    memset(out, PT_POISON, nl * 4);
    qattn_context *ctx = pc->dev;
    qattn_status s = upload_new(ctx, q, nq, &b[0]);
    if (s == QATTN_OK) s = upload_new(ctx, k, nk, &b[1]);
    if (s == QATTN_OK) s = upload_new(ctx, sc, (size_t)LONG_KV * 4, &b[2]);
    if (s == QATTN_OK) s = upload_new(ctx, w, (size_t)LONG_S * LONG_H * 4, &b[3]);
    if (s == QATTN_OK) s = upload_new(ctx, ks, sizeof ks, &b[4]);
    if (s == QATTN_OK) s = upload_new(ctx, ke, sizeof ke, &b[5]);
    if (s == QATTN_OK) s = upload_new(ctx, out, nl * 4, &b[6]);
    qattn_mqa_logits_plan plan;
    if (s == QATTN_OK) {
        qattn_mqa_logits_args a;
        memset(&a, 0, sizeof a);
        const int64_t qs[3] = {LONG_S, LONG_H, LONG_D}, kss[2] = {LONG_KV, LONG_D}, kv = LONG_KV, S = LONG_S;
        const int64_t ws[2] = {LONG_S, LONG_H}, ls[2] = {LONG_S, LONG_KV};
        a.q = qattn_tensor_contiguous(b[0], 0, QATTN_FP8_E4M3FN, 3, qs);
        a.k = qattn_tensor_contiguous(b[1], 0, QATTN_FP8_E4M3FNUZ, 2, kss);
        a.k_scale = qattn_tensor_contiguous(b[2], 0, QATTN_F32, 1, &kv);
        a.weights = qattn_tensor_contiguous(b[3], 0, QATTN_F32, 2, ws);
        a.ks = qattn_tensor_contiguous(b[4], 0, QATTN_I32, 1, &S);
        a.ke = qattn_tensor_contiguous(b[5], 0, QATTN_I32, 1, &S);
        a.logits = qattn_tensor_contiguous(b[6], 0, QATTN_F32, 2, ls);
        a.logits.strides[0] = lrow;
        a.clean_logits = 1;
        qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;
        if (pc->variant && !parse_variant(pc->variant, &o.variant)) o.variant = QATTN_MQA_AUTO;
        s = qattn_mqa_logits_plan_create(ctx, &a, &o, &plan);
        if (s == QATTN_ERR_VARIANT_GATE) {
            pc->n_refused++;
            goto done;
        }
        if (s == QATTN_OK) s = qattn_mqa_logits_run(ctx, &plan, &a, NULL, 0);
        if (s == QATTN_OK) s = qattn_buffer_download(ctx, b[6], 0, out, nl * 4);
    }
    if (s != QATTN_OK) {
        pt_fail(pc, &rng, name, "%s: %s", qattn_status_name(s), qattn_last_error(ctx));
        goto done;
    }
    /* Every element: a number inside the window, -inf outside; the row
     * stride's padding untouched. */
    for (int i = 0; i < LONG_S && !bad; ++i) {
        const int32_t lo = clamp32(ks[i], 0, LONG_KV), hi = clamp32(ke[i], 0, LONG_KV);
        for (int64_t j = 0; j < lrow; ++j) {
            const float v = out[(size_t)i * lrow + j];
            uint32_t bits;
            memcpy(&bits, &v, 4);
            const int ok = j >= LONG_KV ? bits == 0xFFFFFFFFu
                           : (j >= lo && j < hi) ? isfinite(v) : (isinf(v) && v < 0);
            if (!ok) {
                snprintf(first, sizeof first, "[%d, %" PRId64 "] = %.9g (window [%d, %d))", i, j, v, lo, hi);
                ++bad;
                break;
            }
        }
    }
    /* Sampled rows and ranges against the reference. */
    const int rows[3] = {0, 3, LONG_S - 1};
    for (int r = 0; r < 3 && !bad; ++r) {
        const int i = rows[r];
        const int32_t lo = clamp32(ks[i], 0, LONG_KV), hi = clamp32(ke[i], 0, LONG_KV);
        int32_t starts[5] = {lo - 1000, hi - 3000, 0, (int32_t)qt_int(&rng, 0, LONG_KV - 2048),
                             LONG_KV - 2048};
        for (int x = 0; x < 5 && !bad; ++x) {
            const int32_t c0 = clamp32(starts[x], 0, LONG_KV - 4096), n = 4096;
            s = long_reference(pc, q, k, sc, w, ks[i], ke[i], i, c0, n, ref);
            if (s != QATTN_OK) {
                pt_fail(pc, &rng, name, "reference: %s: %s", qattn_status_name(s), qattn_last_error(pc->ref));
                goto done;
            }
            for (int32_t j = 0; j < n && !bad; ++j) {
                const int32_t col = c0 + j;
                const float got = out[(size_t)i * lrow + col];
                double A = 0.0;
                for (int h = 0; h < LONG_H; ++h) {
                    double sa = 0.0;
                    for (int e = 0; e < LONG_D; ++e)
                        sa += fabs((double)qattn_fp8_to_f32(q[((size_t)i * LONG_H + h) * LONG_D + e], QATTN_FP8_E4M3FN) *
                                   qattn_fp8_to_f32(k[(size_t)col * LONG_D + e], QATTN_FP8_E4M3FNUZ));
                    A += qt_tol_mqa_a_term(w[(size_t)i * LONG_H + h], sc[col], sa);
                }
                if (!qt_tol_mqa_logit(got, ref[j], A)) {
                    snprintf(first, sizeof first, "[%d, %d] got %.9g, reference %.9g, bound %.3g", i, col, got,
                             ref[j], qt_tol_mqa_bound(A));
                    ++bad;
                }
            }
        }
    }
    if (bad) {
        pt_fail(pc, &rng, name, "%s", first);
    } else {
        char detail[160];
        snprintf(detail, sizeof detail, "%s, %d slices of %d columns; 3 rows x 5 ranges of 4096 checked",
                 qattn_mqa_variant_name(plan.variant), plan.kv_slices, plan.kv_per_slice);
        pt_pass(pc, name, detail);
    }
done:
    for (int x = 0; x < 7; ++x) qattn_buffer_free(ctx, b[x]);
    free(q);
    free(k);
    free(sc);
    free(w);
    free(out);
    free(ref);
}

/* Work budgets (multiply-adds per case) of the default table and --full. */
#define BUDGET_DEFAULT 3e7
#define BUDGET_FULL 3e8

static void run_mqa_logits(parity_ctx *pc) {
    static mqa_case table[MAX_CASES];
    const double budget = pc->full ? BUDGET_FULL : BUDGET_DEFAULT;
    const int n = build_table(table, budget, pc->full ? 2 : 1, 0x6D71615F70616972ull /* "mqa_pair" */);
    if (n <= 0) {
        qt_rng rng = qt_rng_for("mqa_logits/table");
        pt_fail(pc, &rng, "mqa_logits/table", "pairwise table leaves %d pairs uncovered", -n);
        return;
    }
    if (pc->verbose) printf("mqa_logits: %d pairwise cases\n", n);
    for (int i = 0; i < n; ++i) run_case(pc, &table[i], i);
    /* Every coopmat geometry by name, coopmat forced: one row over 1, 2, 4
     * and 8 subgroups (H 64 x D 256 and 512, H 128 x D 256: the shapes
     * once wrong on the H200), 2 and 4 rows per subgroup, every tile
     * width. With QATTN_MQA_MTILES / NTILES / RPW set, the same cases run
     * each pinned geometry. */
    static const struct { int S, S_kv, H, D, qfnuz, kfnuz, clean, win, padded; } GEOM[] = {
        {37, 2001, 64, 128, 0, 0, 1, W_CAUSAL, 0}, {33, 1500, 32, 128, 1, 0, 0, W_RANDOM, 1},
        {19, 2049, 64, 256, 0, 1, 1, W_RANDOM, 0}, {17, 1100, 64, 512, 0, 0, 1, W_CAUSAL, 1},
        {18, 1300, 128, 256, 1, 1, 1, W_FULL, 0},  {21, 1027, 128, 128, 0, 0, 0, W_RANDOM, 0},
        {40, 3001, 16, 64, 0, 0, 1, W_RANDOM, 0},  {16, 4099, 64, 64, 0, 0, 1, W_CAUSAL, 0},
    };
    for (int i = 0; i < (int)(sizeof GEOM / sizeof GEOM[0]); ++i) {
        mqa_case c = {GEOM[i].S, GEOM[i].S_kv, GEOM[i].H, GEOM[i].D,
                      GEOM[i].qfnuz ? QATTN_FP8_E4M3FNUZ : QATTN_FP8_E4M3FN,
                      GEOM[i].kfnuz ? QATTN_FP8_E4M3FNUZ : QATTN_FP8_E4M3FN,
                      GEOM[i].clean, GEOM[i].win, QATTN_MQA_COOPMAT, GEOM[i].padded, budget, {0, 0, 0}};
        run_case(pc, &c, 90 + i);
    }
    /* One row per workgroup (rows_per_workgroup pinned to 1, which the
     * planner never chooses): a row over 1, 2, 4 and 8 subgroups, the
     * geometries that gave run-to-run different wrong values on the H200. */
    static const struct { int S, S_kv, H, D, mt, nt, win, padded; } ONEROW[] = {
        {37, 2001, 64, 128, 1, 0, W_CAUSAL, 0}, {29, 1500, 64, 64, 1, 2, W_RANDOM, 1},
        {21, 1027, 128, 128, 2, 0, W_FULL, 0},  {18, 1300, 128, 256, 1, 1, W_CAUSAL, 0},
        {23, 2049, 64, 128, 4, 0, W_RANDOM, 0}, {33, 1100, 32, 128, 1, 0, W_CAUSAL, 1},
        {40, 3001, 16, 64, 1, 4, W_RANDOM, 0},  {17, 777, 64, 256, 2, 0, W_CAUSAL, 0},
    };
    for (int i = 0; i < (int)(sizeof ONEROW / sizeof ONEROW[0]); ++i) {
        mqa_case c = {ONEROW[i].S, ONEROW[i].S_kv, ONEROW[i].H, ONEROW[i].D, QATTN_FP8_E4M3FN,
                      i % 2 ? QATTN_FP8_E4M3FNUZ : QATTN_FP8_E4M3FN, i % 3 != 1, ONEROW[i].win,
                      QATTN_MQA_COOPMAT, ONEROW[i].padded, budget, {ONEROW[i].mt, ONEROW[i].nt, 1}};
        run_case(pc, &c, 80 + i);
    }
    run_long(pc);
}

const parity_op parity_op_mqa_logits = {"mqa_logits", run_mqa_logits};
