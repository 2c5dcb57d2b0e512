/*
 * Vulkan contexts share no mutable state (issue 11 row 18): contexts with
 * and without the validation layer, created and freed in interleaved order,
 * in one thread and in two threads at once, each running a KV store and a
 * decode checked against the CPU reference while the other is created or
 * freed. Before per-context entry points this crashed in qattn_vk_destroy
 * (volk's globals reset by the second context). Then (issue 18 item 6) the
 * contexts without validation share one VkInstance, and N threads create,
 * use and destroy contexts with no order between them.
 *
 * QATTN_TEST_VALIDATION=0 runs every context without the validation layer.
 * Exit 0 pass, 1 fail, 77 skipped (no Vulkan device or validation layer).
 */
#define _POSIX_C_SOURCE 200809L /* pthread_barrier_t */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/vulkan.h"
#include "qt_step.h"
#include "qt_check.h"

static qt_step step; /* inputs and reference, read-only once made */

/* QATTN_TEST_VALIDATION=0 (a GPU machine without the layer): every
 * context without validation. */
static int validation_allowed = 1;

static qattn_context *open_ctx(int validation, char *err, size_t n, qattn_status *st) {
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    o.debug_validation = validation && validation_allowed;
    qattn_context *ctx = NULL;
    *st = qattn_context_create(qattn_backend_vulkan(), &o, &ctx, err, n);
    return ctx;
}

/* KV store then decode of the shared step on ctx, compared with the
 * reference (cache bit-exact, o within tolerance). */
static void run_step(qattn_context *ctx, const char *who) {
    qattn_buffer *buf[QS_COUNT] = {0};
    void *got[QS_COUNT] = {0};
    int ok = 1;
    for (int i = 0; i < QS_COUNT && ok; ++i) {
        got[i] = malloc(step.bytes[i]);
        ok = got[i] && qattn_buffer_alloc(ctx, step.bytes[i], &buf[i]) == QATTN_OK &&
             qattn_buffer_upload(ctx, buf[i], 0, step.host[i], step.bytes[i]) == QATTN_OK;
    }
    CHECK(ok, "%s: buffers: %s", who, qattn_last_error(ctx));
    qattn_kv_store_args kv = qt_step_kv_args(&step, buf, 0);
    qattn_decode_args de = qt_step_decode_args(&step, buf, 0);
    qattn_decode_plan dp;
    qattn_buffer *ws = NULL;
    if (ok) ok = qattn_kv_store(ctx, &kv) == QATTN_OK && qattn_decode_plan_create(ctx, &de, NULL, &dp) == QATTN_OK;
    if (ok && dp.workspace_bytes) ok = qattn_buffer_alloc(ctx, dp.workspace_bytes, &ws) == QATTN_OK;
    if (ok) ok = qattn_decode_run(ctx, &dp, &de, ws, 0) == QATTN_OK;
    CHECK(ok, "%s: ops: %s", who, qattn_last_error(ctx));
    for (int i = 0; i < QS_COUNT && ok; ++i)
        ok = qattn_buffer_download(ctx, buf[i], 0, got[i], step.bytes[i]) == QATTN_OK;
    /* The MQA part of the step did not run here: take its reference. */
    if (ok) {
        memcpy(got[QS_LOGITS], step.ref[QS_LOGITS], step.bytes[QS_LOGITS]);
        char why[512];
        CHECK(qt_step_check(&step, got, why, sizeof why), "%s: %s (seed 0x%016llx)", who, why,
              (unsigned long long)step.rng.base_seed);
    }
    qattn_buffer_free(ctx, ws);
    for (int i = 0; i < QS_COUNT; ++i) {
        qattn_buffer_free(ctx, buf[i]);
        free(got[i]);
    }
}

/* One thread: A (validation) and B (none), freed in both orders. */
static void test_sequences(void) {
    char err[512];
    qattn_status st;
    for (int order = 0; order < 2; ++order) {
        qattn_context *a = open_ctx(1, err, sizeof err, &st);
        CHECK(a, "A: %s", err);
        qattn_context *b = open_ctx(0, err, sizeof err, &st);
        CHECK(b, "B: %s", err);
        if (!a || !b) {
            qattn_context_free(a);
            qattn_context_free(b);
            return;
        }
        qattn_context *first = order ? b : a, *second = order ? a : b;
        run_step(first, order ? "B" : "A");
        qattn_context_free(first);
        run_step(second, order ? "A after B freed" : "B after A freed");
        qattn_context *c = open_ctx(order, err, sizeof err, &st);
        CHECK(c, "C: %s", err);
        if (c) run_step(c, "C");
        qattn_context_free(second);
        if (c) run_step(c, "C alone");
        qattn_context_free(c);
    }
}

/* Two threads, one with validation: create together, run, free in turns
 * while the other still runs. */
enum { ROUNDS = 3 };
static pthread_barrier_t barrier;

typedef struct worker {
    int id, validation;
} worker;

static void *work(void *p) {
    const worker *w = p;
    char err[512], who[32];
    for (int r = 0; r < ROUNDS; ++r) {
        snprintf(who, sizeof who, "thread %d round %d", w->id, r);
        pthread_barrier_wait(&barrier); /* create at the same time */
        qattn_status st;
        qattn_context *ctx = open_ctx(w->validation, err, sizeof err, &st);
        CHECK(ctx, "%s: %s", who, err);
        pthread_barrier_wait(&barrier);
        if (ctx) run_step(ctx, who);
        const int frees_first = (r % 2) == w->id;
        if (frees_first) qattn_context_free(ctx);
        pthread_barrier_wait(&barrier); /* one context freed, the other still in use */
        if (!frees_first) {
            if (ctx) run_step(ctx, who);
            qattn_context_free(ctx);
        }
    }
    return NULL;
}

static void test_threads(void) {
    pthread_barrier_init(&barrier, NULL, 2);
    worker w[2] = {{0, 1}, {1, 0}};
    pthread_t t[2];
    for (int i = 0; i < 2; ++i) pthread_create(&t[i], NULL, work, &w[i]);
    for (int i = 0; i < 2; ++i) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&barrier);
}

/* The library's own contexts without validation share one VkInstance,
 * made with the first and destroyed with the last (issue 18 item 6): on
 * the NVIDIA driver an instance created or destroyed while another thread
 * used or destroyed a device crashed inside the driver. */
static VkInstance instance_of(qattn_context *ctx) {
    qattn_vulkan_device d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    CHECK(qattn_vulkan_get_device(ctx, &d) == QATTN_OK, "%s", qattn_last_error(ctx));
    return d.instance;
}

static void test_shared_instance(void) {
    char err[512];
    qattn_status st;
    qattn_context *a = open_ctx(0, err, sizeof err, &st);
    CHECK(a, "A: %s", err);
    qattn_context *b = open_ctx(0, err, sizeof err, &st);
    CHECK(b, "B: %s", err);
    if (a && b)
        CHECK(instance_of(a) == instance_of(b), "two contexts made two VkInstances (one per process expected)");
    qattn_context_free(a);
    if (b) run_step(b, "B after A, which made the instance, was freed");
    qattn_context_free(b);
    /* the instance outlives its last context (vk_instance.c): a context
     * made after every other one was freed runs on it */
    qattn_context *c = open_ctx(0, err, sizeof err, &st);
    CHECK(c, "C: %s", err);
    if (c) run_step(c, "C after A and B were freed");
    if (c && b == NULL) CHECK(0, "C: B was never made");
    qattn_context_free(c);
}

/* N threads each create, use (KV store + decode checked against the cpu
 * reference) and destroy contexts, validation off, with no order between
 * threads beyond starting each round together: the shape of an engine
 * with one worker per GPU starting up and shutting down. The issue's
 * crash was 2 threads x 6 rounds on the H200; QATTN_TEST_THREADS and
 * QATTN_TEST_ROUNDS make it larger there. */
static pthread_barrier_t round_barrier;
static int n_rounds = 4;

static void *churn(void *p) {
    const int id = *(const int *)p;
    char err[512], who[48];
    for (int r = 0; r < n_rounds; ++r) {
        snprintf(who, sizeof who, "churn thread %d round %d", id, r);
        pthread_barrier_wait(&round_barrier);
        qattn_status st;
        qattn_context *ctx = open_ctx(0, err, sizeof err, &st);
        CHECK(ctx, "%s: %s", who, err);
        if (ctx) run_step(ctx, who);
        qattn_context_free(ctx);
    }
    return NULL;
}

static int env_int(const char *name, int dflt, int lo, int hi) {
    const char *v = getenv(name);
    int x = v && *v ? atoi(v) : dflt;
    return x < lo ? lo : x > hi ? hi : x;
}

static void test_churn(void) {
    const int n = env_int("QATTN_TEST_THREADS", 3, 2, 64);
    n_rounds = env_int("QATTN_TEST_ROUNDS", 4, 1, 1000);
    pthread_barrier_init(&round_barrier, NULL, (unsigned)n);
    pthread_t t[64];
    int ids[64];
    for (int i = 0; i < n; ++i) {
        ids[i] = i;
        pthread_create(&t[i], NULL, churn, &ids[i]);
    }
    for (int i = 0; i < n; ++i) pthread_join(t[i], NULL);
    pthread_barrier_destroy(&round_barrier);
    printf("vk_contexts: %d threads x %d rounds of create / KV store + decode / destroy\n", n, n_rounds);
}

int main(void) {
    char err[512];
    qattn_status st;
    const char *env = getenv("QATTN_TEST_VALIDATION");
    validation_allowed = !(env && strcmp(env, "0") == 0);
    qattn_context *probe = open_ctx(1, err, sizeof err, &st);
    if (!probe) {
        if (st == QATTN_ERR_BACKEND_UNAVAILABLE) {
            printf("skipped: %s\n", err);
            return 77;
        }
        fprintf(stderr, "FAIL: %s\n", err);
        return 1;
    }
    qattn_context_free(probe);
    if (!qt_step_make(&step, "vk_contexts/step") || !qt_step_reference(&step, err, sizeof err)) {
        fprintf(stderr, "FAIL: %s\n", err);
        return 1;
    }
    /* each phase says when it starts (stderr, unbuffered), so a crash
     * names its phase */
    fprintf(stderr, "vk_contexts: sequences\n");
    test_sequences();
    fprintf(stderr, "vk_contexts: two threads\n");
    test_threads();
    fprintf(stderr, "vk_contexts: shared instance\n");
    test_shared_instance();
    fprintf(stderr, "vk_contexts: churn\n");
    test_churn();
    qt_step_free(&step);
    if (qt_failures) {
        fprintf(stderr, "vk_contexts: %d check(s) failed\n", (int)qt_failures);
        return 1;
    }
    printf("vk_contexts: interleaved contexts with and without validation, 1, 2 and N threads, one "
           "shared instance: passed\n");
    return 0;
}
