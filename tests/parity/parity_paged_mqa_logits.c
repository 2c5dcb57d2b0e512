/*
 * Parity cases of paged FP8 MQA logits (spec 5; spec 4: |out - ref| <=
 * 4e-5 A + 1e-6 at every visible position, -inf exactly at every other
 * column when clean_logits is set, nothing written outside the tensor's
 * elements).
 *
 * The table walks N = 1..8 against page sizes 1, 16 and 64, and with them
 * batch sizes 1..7 (empty requests and requests shorter than their rows
 * among them), heads 1..64, D 64/128/256, fn and fnuz q and k in every
 * mix, clean on and off, the fused layouts (codes then the scale in each
 * slot row; P rows of codes then P scales in each page), the rank-3 cache,
 * padded rows with unaligned offsets (byte loads), every out-of-range index
 * kind of spec 2 (computed as the reference computes it; with
 * QATTN_CHECK_INDICES=1 refused with nothing written), and splits forced
 * to one tile. Inputs come from paged_mqa_case.h; the reference is the cpu
 * backend, itself checked against that header's f64 oracle.
 *
 * --variant NAME pins the variant ("simt", "matrix"); "matrix-shared"
 * pins the matrix variant planned as for a device whose fragment layout is
 * not known (caps without QATTN_FEAT_FRAGMENT_LAYOUT: fragments and
 * accumulator tiles through shared memory), so a device that reports the
 * layout runs that path too; another op's variant name is counted as
 * refused, and so is a case whose shape the pinned variant's gate refuses.
 * Cases *_neg have negative scales on every third slot (the matrix
 * kernels fold the sign into the key). The case named paged_mqa_logits/wide (B 4, N 8, H 64,
 * D 128, 3000 keys of pages of 64) runs once as planned and once with
 * splits of one tile (tens of splits per request); paged_mqa_logits/bigq
 * (H 64, D 256) has a q row too large to stage beside a tile on devices
 * with 32 KiB of shared memory, so there each thread decodes q itself.
 */
#define _POSIX_C_SOURCE 200809L /* setenv, unsetenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "paged_mqa_case.h"
#include "parity_common.h"

static int parse_variant(const char *s, qattn_paged_mqa_variant *v, int *shared_path) {
    *shared_path = 0;
    if (!strcmp(s, "matrix-shared")) {
        *v = QATTN_PAGED_MQA_MATRIX;
        *shared_path = 1;
        return 1;
    }
    for (int i = 0; i < QATTN_PAGED_MQA_VARIANT_COUNT; ++i)
        if (!strcmp(s, qattn_paged_mqa_variant_name((qattn_paged_mqa_variant)i))) {
            *v = (qattn_paged_mqa_variant)i;
            return 1;
        }
    return 0;
}

typedef struct side {
    char err[256]; /* the pure planner's message (caps given) */
    qattn_context *ctx;
    qattn_buffer *bufs[PM_NBUF];
    qattn_paged_mqa_logits_args a;
    uint8_t *img;
} side;

/* caps: NULL plans for the context's device (plan_create), else with the
 * pure planner for these caps (the run then checks the device can run it). */
static qattn_status side_run(side *s, const pm_case *k, const qattn_paged_mqa_logits_options *o,
                             const qattn_device_caps *caps, qattn_paged_mqa_logits_plan *plan) {
    qattn_status st = QATTN_OK;
    memset(s->bufs, 0, sizeof s->bufs);
    for (int i = 0; i < PM_NBUF && st == QATTN_OK; ++i) {
        if (!k->img[i]) continue;
        st = qattn_buffer_alloc(s->ctx, k->bytes[i], &s->bufs[i]);
        if (st == QATTN_OK) st = qattn_buffer_upload(s->ctx, s->bufs[i], 0, k->img[i], k->bytes[i]);
    }
    if (st != QATTN_OK) return st;
    s->a = pm_bind(k, s->bufs);
    if (caps) {
        st = qattn_paged_mqa_logits_plan_compute(caps, &s->a, o, plan, s->err, sizeof s->err);
    } else {
        st = qattn_paged_mqa_logits_plan_create(s->ctx, &s->a, o, plan);
    }
    if (st == QATTN_OK) st = qattn_paged_mqa_logits_run(s->ctx, plan, &s->a, NULL, 0);
    s->img = malloc(k->bytes[PM_LOGITS]);
    if (st == QATTN_OK)
        st = qattn_buffer_download(s->ctx, s->bufs[PM_LOGITS], 0, s->img, k->bytes[PM_LOGITS]);
    return st;
}

static void side_free(side *s) {
    for (int i = 0; i < PM_NBUF; ++i) qattn_buffer_free(s->ctx, s->bufs[i]);
    free(s->img);
}

static void run_case(parity_ctx *pc, const pm_cfg *c, int one_tile_splits, const char *name) {
    if (!pt_selected(pc, name)) return;
    qt_rng rng = qt_rng_for(name);
    qattn_paged_mqa_logits_options o = QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT;
    int shared_path = 0;
    if (pc->variant && !parse_variant(pc->variant, &o.variant, &shared_path)) {
        pc->n_refused++; /* another op's variant name: nothing to force here */
        if (pc->verbose) printf("gate %s: --variant %s is not a paged MQA variant\n", name, pc->variant);
        return;
    }
    pm_case k;
    pm_make(&k, c, &rng, PT_POISON);
    side ref, dev;
    memset(&ref, 0, sizeof ref);
    memset(&dev, 0, sizeof dev);
    ref.ctx = pc->ref;
    dev.ctx = pc->dev;
    qattn_paged_mqa_logits_plan rplan, dplan;
    qattn_status s = side_run(&ref, &k, NULL, NULL, &rplan);
    if (s != QATTN_OK) {
        pt_fail(pc, &rng, name, "reference: %s (%s)", qattn_status_name(s), qattn_last_error(pc->ref));
        goto done;
    }
    qattn_device_caps masked = pc->caps;
    masked.features &= ~(uint32_t)QATTN_FEAT_FRAGMENT_LAYOUT;
    const qattn_device_caps *caps = shared_path ? &masked : NULL;
    if (one_tile_splits) {
        /* plan once to learn the tile, then pin splits of one tile */
        qattn_paged_mqa_logits_plan probe;
        qattn_paged_mqa_logits_args a = k.a;
        char err[256];
        if (qattn_paged_mqa_logits_plan_compute(caps ? caps : &pc->caps, &a, &o, &probe, err, sizeof err) ==
            QATTN_OK)
            o.keys_per_split = probe.kv_tile;
    }
    s = side_run(&dev, &k, &o, caps, &dplan);
    if (s == QATTN_ERR_VARIANT_GATE && o.variant != QATTN_PAGED_MQA_AUTO) {
        /* a pinned variant this shape (or device) does not allow: counted */
        pc->n_refused++;
        if (pc->verbose) printf("gate %s: %s\n", name, caps ? dev.err : qattn_last_error(pc->dev));
        goto done;
    }
    if (s == QATTN_ERR_UNSUPPORTED && strstr(qattn_last_error(pc->dev), "has no paged_mqa_logits op")) {
        /* a backend without the op: said, counted as refused, never passed */
        pc->n_refused++;
        printf("refused %s: %s\n", name, qattn_last_error(pc->dev));
        goto done;
    }
    if (s != QATTN_OK) {
        pt_fail(pc, &rng, name, "%s: %s (%s)", pc->backend, qattn_status_name(s),
                caps && dev.err[0] ? dev.err : qattn_last_error(pc->dev));
        goto done;
    }
    {
        const size_t cells = (size_t)(c->B * c->N * k.M);
        double *ref_v = calloc(cells, sizeof *ref_v), *A = calloc(cells, sizeof *A);
        uint8_t *vis = calloc(cells, 1);
        pm_oracle(&k, ref_v, A, vis);
        char msg[256];
        int64_t bad = pm_check(&k, ref.img, ref_v, A, vis, PT_POISON, 1, msg, sizeof msg);
        if (bad) {
            pt_fail(pc, &rng, name, "the cpu reference disagrees with the f64 oracle: %s", msg);
        } else {
            /* the device against the reference's own values */
            for (int64_t b = 0; b < c->B; ++b)
                for (int64_t t = 0; t < c->N; ++t)
                    for (int64_t p = 0; p < k.M; ++p) {
                        const int64_t o_ = (b * c->N + t) * k.M + p;
                        if (!vis[o_]) continue;
                        float f;
                        memcpy(&f, ref.img + pm_off(&k.a.logits, b, t, p, 0), 4);
                        ref_v[o_] = f;
                    }
            bad = pm_check(&k, dev.img, ref_v, A, vis, PT_POISON, 0, msg, sizeof msg);
            if (!bad && c->bad) {
                /* the index mode: refused before launching, nothing written */
                const qattn_status before = qattn_buffer_upload(pc->dev, dev.bufs[PM_LOGITS], 0,
                                                                k.img[PM_LOGITS], k.bytes[PM_LOGITS]);
                setenv("QATTN_CHECK_INDICES", "1", 1);
                const qattn_status st = qattn_paged_mqa_logits_run(pc->dev, &dplan, &dev.a, NULL, 0);
                unsetenv("QATTN_CHECK_INDICES");
                if (before != QATTN_OK || st != QATTN_ERR_INDEX_OUT_OF_RANGE) {
                    bad = 1;
                    snprintf(msg, sizeof msg, "QATTN_CHECK_INDICES=1: %s, want QATTN_ERR_INDEX_OUT_OF_RANGE",
                             qattn_status_name(st));
                } else if (qattn_buffer_download(pc->dev, dev.bufs[PM_LOGITS], 0, dev.img, k.bytes[PM_LOGITS]) !=
                           QATTN_OK) {
                    bad = 1;
                    snprintf(msg, sizeof msg, "download failed");
                } else {
                    for (size_t i = 0; i < k.bytes[PM_LOGITS] && !bad; ++i)
                        if (dev.img[i] != PT_POISON) {
                            bad = 1;
                            snprintf(msg, sizeof msg, "QATTN_CHECK_INDICES=1 refused the call but byte %zu was written", i);
                        }
                }
            }
            if (bad) {
                pt_fail(pc, &rng, name, "%lld mismatches (%s plan, %d splits of %d), first %s", (long long)bad,
                        qattn_paged_mqa_variant_name(dplan.variant), (int)dplan.num_splits,
                        (int)dplan.keys_per_split, msg);
            } else {
                char detail[200];
                if (dplan.variant == QATTN_PAGED_MQA_MATRIX)
                    snprintf(detail, sizeof detail,
                             "matrix %s, %d splits of %d, %d keys a step, %d pass%s of %d rows",
                             dplan.fragment_layout ? "in registers" : "through shared memory",
                             (int)dplan.num_splits, (int)dplan.keys_per_split, (int)dplan.kv_tile,
                             (int)dplan.passes, dplan.passes > 1 ? "es" : "", (int)dplan.pass_rows);
                else
                    snprintf(detail, sizeof detail, "%s, %d splits of %d, %d-byte loads%s",
                             qattn_paged_mqa_variant_name(dplan.variant), (int)dplan.num_splits,
                             (int)dplan.keys_per_split, (int)dplan.load_bytes,
                             dplan.q_staged ? ", q staged" : ", q per thread");
                pt_pass(pc, name, detail);
            }
        }
        free(ref_v);
        free(A);
        free(vis);
    }
done:
    side_free(&ref);
    side_free(&dev);
    pm_free(&k);
}

static void run_paged_mqa_logits(parity_ctx *pc) {
    static const int PAGES[] = {1, 16, 64};
    static const int HEADS[] = {1, 16, 64, 4};
    const qattn_dtype F[2] = {QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ};
    int idx = 0;
    for (int n = 1; n <= 8; ++n)
        for (int pi = 0; pi < 3; ++pi, ++idx) {
            pm_cfg c;
            memset(&c, 0, sizeof c);
            c.N = n;
            c.P = PAGES[pi];
            c.B = 1 + (idx * 5) % 7;
            c.H = HEADS[idx % 4];
            c.D = idx % 6 == 5 ? 256 : idx % 3 == 1 ? 128 : 64;
            c.qt = F[idx & 1];
            c.kt = F[(idx >> 1) & 1];
            c.clean = ((idx >> 2) & 1) ^ (idx % 3 == 0);
            c.fused = idx % 4 == 2;
            c.paged3 = (idx / 2) % 2;
            c.pad = idx % 5 == 1 && !c.fused;
            c.max_len = 1 + (idx * 53) % (2 * c.P + 300);
            c.bad = idx % 4 == 3 ? 1 + (idx / 4) % (PM_BAD_COUNT - 1) : PM_OK;
            const int one_tile = idx % 7 == 6;
            if (one_tile) c.max_len += 700; /* several splits of one tile */
            char name[160];
            snprintf(name, sizeof name,
                     "paged_mqa_logits/%02d_N%d_P%d_B%d_H%d_D%d_%s_%s%s%s%s%s%s%s", idx, c.N, c.P, c.B, c.H, c.D,
                     c.qt == F[0] ? "fn" : "fnuz", c.kt == F[0] ? "fn" : "fnuz", c.clean ? "_clean" : "",
                     c.fused ? "_fused" : "", c.paged3 ? "_paged" : "", c.pad ? "_padded" : "",
                     c.bad ? "_badidx" : "", one_tile ? "_tilesplits" : "");
            run_case(pc, &c, one_tile, name);
        }
    pm_cfg w;
    memset(&w, 0, sizeof w);
    w.B = 4;
    w.N = 8;
    w.H = 64;
    w.D = 128;
    w.P = 64;
    w.qt = w.kt = QATTN_FP8_E4M3FN;
    w.clean = 1;
    w.paged3 = 1;
    w.fused = 1;
    w.max_len = 3000;
    run_case(pc, &w, 0, "paged_mqa_logits/wide_B4_N8_H64_D128_P64_3000");
    run_case(pc, &w, 1, "paged_mqa_logits/wide_B4_N8_H64_D128_P64_3000_tilesplits");
    /* q of 64 heads x 256 dims (32 KiB as f16): staged on devices with the
     * shared memory, decoded per thread on the others (lavapipe) */
    w.B = 2;
    w.N = 3;
    w.D = 256;
    w.P = 16;
    w.max_len = 200;
    w.kt = QATTN_FP8_E4M3FNUZ;
    run_case(pc, &w, 0, "paged_mqa_logits/bigq_B2_N3_H64_D256_P16");
    /* The matrix variant's own corners: negative scales (the sign folded
     * into the key), head counts not a multiple of 16 (padding slots),
     * q staged in passes (N x H over 128 columns), D 256's one fragment per
     * subgroup, and an fnuz cache. */
    static const struct {
        int B, N, H, D, P, len, neg;
        qattn_dtype qt, kt;
        const char *name;
    } mx[] = {
        {3, 2, 64, 128, 16, 700, 1, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FN, "paged_mqa_logits/mx_B3_N2_H64_D128_P16_neg"},
        {2, 8, 32, 64, 64, 900, 1, QATTN_FP8_E4M3FNUZ, QATTN_FP8_E4M3FN, "paged_mqa_logits/mx_B2_N8_H32_D64_P64_neg"},
        {2, 3, 24, 256, 1, 300, 0, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, "paged_mqa_logits/mx_B2_N3_H24_D256_P1"},
        {1, 5, 48, 128, 16, 1500, 1, QATTN_FP8_E4M3FNUZ, QATTN_FP8_E4M3FNUZ,
         "paged_mqa_logits/mx_B1_N5_H48_D128_P16_neg"},
    };
    for (size_t i = 0; i < sizeof mx / sizeof mx[0]; ++i) {
        pm_cfg m;
        memset(&m, 0, sizeof m);
        m.B = mx[i].B;
        m.N = mx[i].N;
        m.H = mx[i].H;
        m.D = mx[i].D;
        m.P = mx[i].P;
        m.max_len = mx[i].len;
        m.neg = mx[i].neg;
        m.qt = mx[i].qt;
        m.kt = mx[i].kt;
        m.clean = (int)(i & 1);
        m.paged3 = (int)(i >> 1 & 1);
        m.fused = i == 3;
        run_case(pc, &m, 0, mx[i].name);
    }
}

const parity_op parity_op_paged_mqa_logits = {"paged_mqa_logits", run_paged_mqa_logits};
