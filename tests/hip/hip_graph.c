/*
 * qattn_hip_graph: the HIP backend's ops inside a graph the caller owns
 * (issue 9 item 4; a CUDA graph on the NVIDIA platform).
 *
 * The context is created without a stream; qattn_hip_set_stream then
 * points it at a stream this test creates, and a capture of that stream
 * records, in order, a KV store of new tokens, a decode that reads them
 * back from the cache, and an MQA logits op. The graph is instantiated
 * once and replayed for several rounds; before each round fresh seeded
 * inputs are uploaded into the same buffers (outside the capture), the
 * cache is reset, and after the replay every output is compared with the
 * CPU reference run on the same inputs (spec 4 tolerances; the KV store bit
 * for bit). Outputs are poisoned before each replay, so a graph that kept
 * stale results cannot pass, and each round must differ from the last.
 *
 * Also checked: after every call the caller's current device is the one it
 * set (with two or more devices the context is made on the last one while
 * device 0 is current).
 *
 * Exit 0: every round matched; 1: a failure (seed printed); 77: no HIP
 * device (skipped, never passed).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/convert.h"
#include "qattn/hip.h"
#include "qattn/qattn.h"
#include "qh_platform.h"
#include "test_rng.h"
#include "tolerance.h"

#define SKIP 77
#define ROUNDS 3

/* decode: B requests of L keys in pages of P over Hkv heads; the KV store
 * writes T = B new tokens (each request's last key) before the decode */
enum { B = 3, HKV = 2, G = 4, HQ = HKV * G, D = 128, P = 16, L = 77, PAGES_PER = (L + P - 1) / P };
enum { NPAGES = B * PAGES_PER + 2, NSLOTS = NPAGES * P };
/* mqa: S rows over S_kv columns, H heads */
enum { S = 5, SKV = 300, H = 4, DM = 64 };

static qattn_context *dev, *ref;
static qt_rng rng;
static int failures;

typedef struct pair {
    qattn_buffer *d, *r;
    size_t bytes;
} pair;

static void die(const char *what) {
    fprintf(stderr, "FAIL %s: dev \"%s\" ref \"%s\"\n     reproduce: QATTN_TEST_SEED=0x%016llx\n", what,
            qattn_last_error(dev), qattn_last_error(ref), (unsigned long long)rng.base_seed);
    exit(1);
}

static pair make(size_t bytes) {
    pair p = {NULL, NULL, bytes};
    if (qattn_buffer_alloc(dev, bytes, &p.d) != QATTN_OK || qattn_buffer_alloc(ref, bytes, &p.r) != QATTN_OK)
        die("alloc");
    return p;
}
static void put(pair p, const void *data) {
    if (qattn_buffer_upload(dev, p.d, 0, data, p.bytes) != QATTN_OK ||
        qattn_buffer_upload(ref, p.r, 0, data, p.bytes) != QATTN_OK)
        die("upload");
}
static void poison(pair p) {
    void *x = malloc(p.bytes);
    if (!x) die("host memory");
    memset(x, 0xFF, p.bytes);
    put(p, x);
    free(x);
}
static void get(pair p, void *d, void *r) {
    if (qattn_buffer_download(dev, p.d, 0, d, p.bytes) != QATTN_OK ||
        qattn_buffer_download(ref, p.r, 0, r, p.bytes) != QATTN_OK)
        die("download");
}
static qattn_tensor t_of(pair p, int side, qattn_dtype dt, int rank, const int64_t *shape) {
    return qattn_tensor_contiguous(side ? p.d : p.r, 0, dt, rank, shape);
}

static int current_device(void) {
    int d = -1;
    return hipGetDevice(&d) == hipSuccess ? d : -1;
}

static void check_device(int want, const char *after) {
    const int got = current_device();
    if (got != want) {
        fprintf(stderr, "FAIL current device %d after %s, caller had %d\n", got, after, want);
        failures++;
    }
}

int main(void) {
    rng = qt_rng_for("hip_graph");
    int count = 0;
    if (hipGetDeviceCount(&count) != hipSuccess || count < 1) {
        printf("SKIP: no HIP device\n");
        return SKIP;
    }
    /* the caller's device: 0; the context's: the last one */
    hipSetDevice(0);
    char sel[16], err[1024] = "";
    snprintf(sel, sizeof sel, "%d", count - 1);
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    o.device = sel;
    if (qattn_context_create(qattn_backend_hip(), &o, &dev, err, sizeof err) != QATTN_OK) {
        printf("SKIP: %s\n", err);
        return SKIP;
    }
    check_device(0, "qattn_context_create");
    if (qattn_context_create(qattn_backend_cpu(), NULL, &ref, err, sizeof err) != QATTN_OK) die(err);
    if (qattn_hip_set_stream(ref, NULL) != QATTN_ERR_INVALID_ARGUMENT) die("set_stream on a cpu context");
    hipSetDevice(count - 1);
    hipStream_t stream;
    if (hipStreamCreate(&stream) != hipSuccess) die("hipStreamCreate");
    hipSetDevice(0);
    if (qattn_hip_set_stream(dev, stream) != QATTN_OK) die("qattn_hip_set_stream");
    printf("hip_graph: %d device(s), context on device %d, caller on device 0; seed 0x%016llx\n", count,
           count - 1, (unsigned long long)rng.base_seed);

    const qattn_dtype KV = QATTN_FP8_E4M3FN;
    /* ---- buffers (the graph keeps these addresses) ---- */
    pair kc = make(NSLOTS * HKV * D), vc = make(NSLOTS * HKV * D), ks = make(NSLOTS * HKV * 4),
         vs = make(NSLOTS * HKV * 4), kn = make(B * HKV * D * 2), vn = make(B * HKV * D * 2),
         slots = make(B * 4), q = make(B * HQ * D * 2), indptr = make((B + 1) * 4),
         indices = make(B * PAGES_PER * 4), lens = make(B * 4), out = make(B * HQ * D * 2),
         lse = make(B * HQ * 4), mq = make(S * H * DM), mk = make(SKV * DM), mks = make(SKV * 4),
         mw = make(S * H * 4), mks_i = make(S * 4), mke_i = make(S * 4), logits = make(S * SKV * 4);
    /* page table: request b owns pages b * PAGES_PER + 2 .. (pages 0, 1 unused) */
    int32_t ip[B + 1], pg[B * PAGES_PER], ln[B], sl[B];
    for (int b = 0; b <= B; ++b) ip[b] = b * PAGES_PER;
    for (int i = 0; i < B * PAGES_PER; ++i) pg[i] = i + 2;
    for (int b = 0; b < B; ++b) {
        ln[b] = L - 9 * b;
        sl[b] = pg[b * PAGES_PER + (ln[b] - 1) / P] * P + (ln[b] - 1) % P; /* its last key */
    }
    put(indptr, ip);
    put(indices, pg);
    put(lens, ln);
    put(slots, sl);
    int32_t wks[S], wke[S];
    for (int i = 0; i < S; ++i) {
        wks[i] = 7 * i;
        wke[i] = SKV - 11 * i;
    }
    put(mks_i, wks);
    put(mke_i, wke);

    /* ---- args, per side ---- */
    qattn_kv_store_args st[2];
    qattn_decode_args da[2];
    qattn_mqa_logits_args ma[2];
    for (int w = 0; w < 2; ++w) {
        memset(&st[w], 0, sizeof st[w]);
        memset(&da[w], 0, sizeof da[w]);
        memset(&ma[w], 0, sizeof ma[w]);
        const int64_t cs[3] = {NSLOTS, HKV, D}, ss[2] = {NSLOTS, HKV}, ns[3] = {B, HKV, D};
        st[w].k_new = t_of(kn, w, QATTN_BF16, 3, ns);
        st[w].v_new = t_of(vn, w, QATTN_BF16, 3, ns);
        st[w].slot_mapping = t_of(slots, w, QATTN_I32, 1, (int64_t[]){B});
        st[w].k_cache = da[w].k_cache = t_of(kc, w, KV, 3, cs);
        st[w].v_cache = da[w].v_cache = t_of(vc, w, KV, 3, cs);
        st[w].k_scale = da[w].k_scale = t_of(ks, w, QATTN_F32, 2, ss);
        st[w].v_scale = da[w].v_scale = t_of(vs, w, QATTN_F32, 2, ss);
        da[w].q = t_of(q, w, QATTN_BF16, 4, (int64_t[]){B, 1, HQ, D});
        da[w].kv_indptr = t_of(indptr, w, QATTN_I32, 1, (int64_t[]){B + 1});
        da[w].kv_indices = t_of(indices, w, QATTN_I32, 1, (int64_t[]){B * PAGES_PER});
        da[w].kv_lens = t_of(lens, w, QATTN_I32, 1, (int64_t[]){B});
        da[w].o = t_of(out, w, QATTN_BF16, 4, (int64_t[]){B, 1, HQ, D});
        da[w].lse = t_of(lse, w, QATTN_F32, 3, (int64_t[]){B, 1, HQ});
        da[w].page_size = P;
        da[w].max_kv_len = L;
        da[w].sm_scale = 1.0f / sqrtf((float)D);
        da[w].window_left = -1;
        ma[w].q = t_of(mq, w, QATTN_FP8_E4M3FN, 3, (int64_t[]){S, H, DM});
        ma[w].k = t_of(mk, w, QATTN_FP8_E4M3FN, 2, (int64_t[]){SKV, DM});
        ma[w].k_scale = t_of(mks, w, QATTN_F32, 1, (int64_t[]){SKV});
        ma[w].weights = t_of(mw, w, QATTN_F32, 2, (int64_t[]){S, H});
        ma[w].ks = t_of(mks_i, w, QATTN_I32, 1, (int64_t[]){S});
        ma[w].ke = t_of(mke_i, w, QATTN_I32, 1, (int64_t[]){S});
        ma[w].logits = t_of(logits, w, QATTN_F32, 2, (int64_t[]){S, SKV});
        ma[w].clean_logits = 1;
    }
    qattn_decode_plan dplan[2];
    qattn_mqa_logits_plan mplan[2];
    qattn_buffer *dws = NULL, *mws = NULL, *rws = NULL;
    if (qattn_decode_plan_create(dev, &da[1], NULL, &dplan[1]) != QATTN_OK ||
        qattn_decode_plan_create(ref, &da[0], NULL, &dplan[0]) != QATTN_OK ||
        qattn_mqa_logits_plan_create(dev, &ma[1], NULL, &mplan[1]) != QATTN_OK ||
        qattn_mqa_logits_plan_create(ref, &ma[0], NULL, &mplan[0]) != QATTN_OK)
        die("plan");
    check_device(0, "planning");
    if ((dplan[1].workspace_bytes && qattn_buffer_alloc(dev, dplan[1].workspace_bytes, &dws) != QATTN_OK) ||
        (mplan[1].workspace_bytes && qattn_buffer_alloc(dev, mplan[1].workspace_bytes, &mws) != QATTN_OK) ||
        (dplan[0].workspace_bytes && qattn_buffer_alloc(ref, dplan[0].workspace_bytes, &rws) != QATTN_OK))
        die("workspace");

    /* ---- capture once ---- */
    hipSetDevice(count - 1); /* capture on the stream's device, as an engine would */
    if (hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal) != hipSuccess) die("begin capture");
    qattn_status s1 = qattn_kv_store(dev, &st[1]);
    qattn_status s2 = qattn_decode_run(dev, &dplan[1], &da[1], dws, 0);
    qattn_status s3 = qattn_mqa_logits_run(dev, &mplan[1], &ma[1], mws, 0);
    hipGraph_t graph = NULL;
    if (hipStreamEndCapture(stream, &graph) != hipSuccess || !graph) die("end capture");
    if (s1 != QATTN_OK || s2 != QATTN_OK || s3 != QATTN_OK) die("an op inside the capture");
    check_device(count - 1, "the captured ops");
    hipGraphExec_t exec = NULL;
    if (hipGraphInstantiate(&exec, graph, NULL, NULL, 0) != hipSuccess) die("instantiate");
    hipSetDevice(0);

    size_t cache_b = NSLOTS * HKV * D;
    uint8_t *img = malloc(cache_b), *gd = malloc(cache_b), *gr = malloc(cache_b);
    static uint8_t hq[S * H * DM], hk[SKV * DM];
    static float hks[SKV], hw[S * H];
    uint16_t prev_o[B * HQ * D];
    float prev_lg[S * SKV];
    memset(prev_o, 0, sizeof prev_o);
    memset(prev_lg, 0, sizeof prev_lg);
    if (!img || !gd || !gr) die("host memory");
    for (int round = 0; round < ROUNDS; ++round) {
        qt_rng_case(&rng, (uint64_t)round);
        /* fresh inputs into the same buffers, outside the capture */
        qt_fill_fp8(&rng, img, cache_b, KV, 3.0f);
        put(kc, img);
        qt_fill_fp8(&rng, img, cache_b, KV, 3.0f);
        put(vc, img);
        float *f = malloc(NSLOTS * HKV * 4);
        if (!f) die("host memory");
        qt_fill_f32_pos(&rng, f, NSLOTS * HKV, 0.002f, 0.006f);
        put(ks, f);
        qt_fill_f32_pos(&rng, f, NSLOTS * HKV, 0.002f, 0.006f);
        put(vs, f);
        free(f);
        uint16_t bf[B * HQ * D];
        qt_fill_bf16(&rng, bf, B * HKV * D, 2.0f);
        put(kn, bf);
        qt_fill_bf16(&rng, bf, B * HKV * D, 2.0f);
        put(vn, bf);
        qt_fill_bf16(&rng, bf, B * HQ * D, 1.0f);
        put(q, bf);
        qt_fill_fp8(&rng, hq, sizeof hq, QATTN_FP8_E4M3FN, 2.0f);
        put(mq, hq);
        qt_fill_fp8(&rng, hk, sizeof hk, QATTN_FP8_E4M3FN, 2.0f);
        put(mk, hk);
        qt_fill_f32_pos(&rng, hks, SKV, 0.5f, 1.5f);
        put(mks, hks);
        qt_fill_f32(&rng, hw, S * H, 1.0f);
        put(mw, hw);
        poison(out);
        poison(lse);
        poison(logits);
        check_device(0, "uploads");

        if (hipGraphLaunch(exec, stream) != hipSuccess) die("graph launch");
        if (qattn_synchronize(dev) != QATTN_OK) die("synchronize");
        check_device(0, "qattn_synchronize");
        if (qattn_kv_store(ref, &st[0]) != QATTN_OK || qattn_decode_run(ref, &dplan[0], &da[0], rws, 0) != QATTN_OK ||
            qattn_mqa_logits_run(ref, &mplan[0], &ma[0], NULL, 0) != QATTN_OK)
            die("reference");

        /* KV store: codes and scales bit for bit */
        pair cmp[4] = {kc, vc, ks, vs};
        for (int i = 0; i < 4; ++i) {
            get(cmp[i], gd, gr);
            if (qt_tol_kv_store_bytes(gd, gr, cmp[i].bytes) >= 0) {
                fprintf(stderr, "FAIL round %d: kv_store buffer %d differs from the reference\n", round, i);
                failures++;
            }
        }
        uint16_t od[B * HQ * D], orf[B * HQ * D];
        get(out, od, orf);
        int bad = 0, same_as_prev = 1;
        for (int i = 0; i < B * HQ * D; ++i) {
            if (!qt_tol_decode_o(qattn_bf16_to_f32(od[i]), qattn_bf16_to_f32(orf[i]))) bad++;
            if (od[i] != prev_o[i]) same_as_prev = 0;
        }
        memcpy(prev_o, od, sizeof od);
        float ld[B * HQ], lr[B * HQ];
        get(lse, ld, lr);
        for (int i = 0; i < B * HQ; ++i)
            if (!qt_tol_decode_lse(ld[i], lr[i])) bad++;
        if (bad || same_as_prev) {
            fprintf(stderr, "FAIL round %d: decode: %d elements outside tolerance%s\n", round, bad,
                    same_as_prev ? ", output identical to the previous round" : "");
            failures++;
        }
        float lgd[S * SKV], lgr[S * SKV];
        get(logits, lgd, lgr);
        bad = 0;
        same_as_prev = 1;
        for (int i = 0; i < S * SKV; ++i) {
            const int row = i / SKV, col = i % SKV;
            /* spec 4: A = sum_h |w| k_scale sum_d |q k| */
            double a = 0.0;
            for (int h = 0; h < H; ++h) {
                double qk = 0.0;
                for (int e = 0; e < DM; ++e)
                    qk += fabs((double)qattn_fp8_to_f32(hq[(row * H + h) * DM + e], QATTN_FP8_E4M3FN) *
                               (double)qattn_fp8_to_f32(hk[col * DM + e], QATTN_FP8_E4M3FN));
                a += qt_tol_mqa_a_term(hw[row * H + h], hks[col], qk);
            }
            const int inside = col >= wks[row] && col < wke[row];
            if (inside ? !qt_tol_mqa_logit(lgd[i], lgr[i], a) : !(isinf(lgd[i]) && lgd[i] < 0)) bad++;
            if (lgd[i] != prev_lg[i] && !(isinf(lgd[i]) && isinf(prev_lg[i]))) same_as_prev = 0;
        }
        memcpy(prev_lg, lgd, sizeof lgd);
        if (bad || same_as_prev) {
            fprintf(stderr, "FAIL round %d: mqa_logits: %d elements wrong%s\n", round, bad,
                    same_as_prev ? ", output identical to the previous round" : "");
            failures++;
        }
        printf("hip_graph: round %d replayed: kv_store + decode + mqa_logits %s\n", round,
               failures ? "FAILED" : "match the reference");
    }
    free(img);
    free(gd);
    free(gr);
    hipGraphExecDestroy(exec);
    hipGraphDestroy(graph);
    qattn_buffer_free(dev, dws);
    qattn_buffer_free(dev, mws);
    qattn_buffer_free(ref, rws);
    pair all[] = {kc, vc, ks, vs, kn, vn, slots, q, indptr, indices, lens, out, lse,
                  mq, mk, mks, mw, mks_i, mke_i, logits};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        qattn_buffer_free(dev, all[i].d);
        qattn_buffer_free(ref, all[i].r);
    }
    check_device(0, "qattn_buffer_free");
    qattn_context_free(dev);
    check_device(0, "qattn_context_free");
    qattn_context_free(ref);
    hipStreamDestroy(stream);
    if (failures) {
        fprintf(stderr, "hip_graph: %d failure(s); reproduce: QATTN_TEST_SEED=0x%016llx\n", failures,
                (unsigned long long)rng.base_seed);
        return 1;
    }
    printf("hip_graph: %d rounds of one captured graph matched the reference\n", ROUNDS);
    return 0;
}
