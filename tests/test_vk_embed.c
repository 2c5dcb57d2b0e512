/*
 * qattn inside an engine's Vulkan world (issue 9): the test makes its own
 * VkInstance (validation layer on, its own messenger) and VkDevice, hands
 * them to qattn_vulkan_context_create, wraps its own VkBuffers, records KV
 * store + decode + MQA logits into its own command buffer, submits it, and
 * compares with the CPU reference. Then: warm-up covers every pipeline the
 * run needs, a saved pipeline cache makes a second context compile nothing,
 * and bad descriptors and missing features are refused by name.
 *
 * QATTN_TEST_VALIDATION=0 runs without the validation layer (for a GPU
 * machine that has none); otherwise a missing layer skips the test.
 *
 * Exit 0 pass, 1 fail, 77 skipped (no Vulkan loader/device/layer).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qt_step.h"
#include "qt_vk.h"
#include "qt_check.h"
#include "qt_sizes.h"

#define GUARD 256u
#define GUARD_BYTE 0xA5

static int validation = 1;

/* Every tensor of the step in its own VkBuffer: GUARD bytes, the tensor,
 * GUARD bytes; wrapped on ctx. */
typedef struct wrapped {
    qt_vk_buf vb[QS_COUNT + 1];   /* the last one: decode workspace */
    qattn_buffer *qb[QS_COUNT + 1];
} wrapped;

static int wrap_all(qt_vk *v, qattn_context *ctx, const qt_step *s, uint64_t ws_bytes, wrapped *w) {
    memset(w, 0, sizeof *w);
    for (int i = 0; i <= QS_COUNT; ++i) {
        const size_t n = i < QS_COUNT ? s->bytes[i] : (size_t)ws_bytes;
        if (n == 0) continue;
        const size_t total = GUARD + n + GUARD;
        if (!qt_vk_buf_make(v, total, &w->vb[i])) return 0;
        memset(w->vb[i].map, GUARD_BYTE, total);
        if (i < QS_COUNT) memcpy((char *)w->vb[i].map + GUARD, s->host[i], n);
        const qattn_vk_native_buffer nb = {&w->vb[i].buffer, total,
                                           (uint32_t)(VK_BUFFER_USAGE_STORAGE_BUFFER_BIT |
                                                      VK_BUFFER_USAGE_SHADER_DEVICE_ADDRESS_BIT |
                                                      VK_BUFFER_USAGE_TRANSFER_SRC_BIT |
                                                      VK_BUFFER_USAGE_TRANSFER_DST_BIT),
                                           0};
        qattn_status st = qattn_buffer_wrap(ctx, (void *)&nb, total, &w->qb[i]);
        if (st != QATTN_OK) {
            fprintf(stderr, "wrap %d: %s\n", i, qattn_last_error(ctx));
            return 0;
        }
    }
    return 1;
}

static void unwrap_all(qt_vk *v, qattn_context *ctx, wrapped *w) {
    for (int i = 0; i <= QS_COUNT; ++i) {
        qattn_buffer_free(ctx, w->qb[i]);
        qt_vk_buf_free(v, &w->vb[i]);
    }
}

static int guards_intact(const wrapped *w, const qt_step *s) {
    for (int i = 0; i < QS_COUNT; ++i) {
        const unsigned char *m = w->vb[i].map;
        for (size_t k = 0; k < GUARD; ++k)
            if (m[k] != GUARD_BYTE || m[GUARD + s->bytes[i] + k] != GUARD_BYTE) return 0;
    }
    return 1;
}

static void poison_logits(wrapped *w, const qt_step *s) {
    memset((char *)w->vb[QS_LOGITS].map + GUARD, 0xFF, s->bytes[QS_LOGITS]);
}

static qattn_vulkan_pipeline_stats stats_of(qattn_context *ctx) {
    qattn_vulkan_pipeline_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    qattn_status s = qattn_vulkan_pipeline_stats_get(ctx, &st);
    CHECK(s == QATTN_OK, "%s", qattn_last_error(ctx));
    return st;
}

static qattn_context *import(qt_vk *v, int validation) {
    qattn_vulkan_device d = qt_vk_import_desc(v);
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    o.debug_validation = validation;
    qattn_context *ctx = NULL;
    char err[512];
    qattn_status s = qattn_vulkan_context_create(&d, &o, &ctx, err, sizeof err);
    CHECK(s == QATTN_OK, "qattn_vulkan_context_create: %s", err);
    return ctx;
}

/* The main path: import, wrap, warm up, record three ops, submit, compare. */
static void test_record_step(qt_vk *v, const qt_step *s, void *blob, size_t *blob_bytes,
                             qattn_vulkan_pipeline_stats *warm_stats) {
    qattn_context *ctx = import(v, validation);
    if (!ctx) return;
    qattn_vulkan_device got;
    memset(&got, 0, sizeof got);
    got.size = sizeof got;
    CHECK(qattn_vulkan_get_device(ctx, &got) == QATTN_OK, "%s", qattn_last_error(ctx));
    CHECK(got.instance == v->instance && got.physical_device == v->phys && got.device == v->device &&
              got.queue_family == v->family && got.queue_index == 0,
          "qattn_vulkan_get_device returned other handles");

    wrapped w;
    /* Plan on a first wrap to learn the workspace size. */
    CHECK(wrap_all(v, ctx, s, 0, &w), "wrapping the step's buffers failed");
    qattn_decode_args de = qt_step_decode_args(s, w.qb, GUARD);
    qattn_mqa_logits_args mq = qt_step_mqa_args(s, w.qb, GUARD);
    qattn_decode_plan dp;
    qattn_mqa_logits_plan mp;
    CHECK(qattn_decode_plan_create(ctx, &de, NULL, &dp) == QATTN_OK, "%s", qattn_last_error(ctx));
    CHECK(qattn_mqa_logits_plan_create(ctx, &mq, NULL, &mp) == QATTN_OK, "%s", qattn_last_error(ctx));
    if (dp.workspace_bytes) {
        unwrap_all(v, ctx, &w);
        CHECK(wrap_all(v, ctx, s, dp.workspace_bytes, &w), "wrapping with a workspace failed");
        de = qt_step_decode_args(s, w.qb, GUARD);
        mq = qt_step_mqa_args(s, w.qb, GUARD);
    }
    qattn_kv_store_args kv = qt_step_kv_args(s, w.qb, GUARD);

    /* Warm-up: every pipeline of these plans, none compiled later. */
    qattn_vulkan_warmup_set set;
    memset(&set, 0, sizeof set);
    set.size = sizeof set;
    set.decode_plans = &dp;
    set.n_decode_plans = 1;
    set.mqa_plans = &mp;
    set.n_mqa_plans = 1;
    set.kv_store_dtypes = 1u << s->kv_dtype;
    CHECK(qattn_vulkan_warmup(ctx, &set) == QATTN_OK, "warmup: %s", qattn_last_error(ctx));
    const qattn_vulkan_pipeline_stats after_warm = stats_of(ctx);
    CHECK(after_warm.created >= 3, "warm-up created %llu pipelines, want >= 3 (kv store, decode, mqa)",
          (unsigned long long)after_warm.created);
    *warm_stats = after_warm;
    CHECK(guards_intact(&w, s), "warm-up wrote into a buffer");

    /* Record the step into our command buffer. */
    CHECK(qt_vk_cmd_begin(v), "vkBeginCommandBuffer failed");
    qt_vk_cmd_barrier(v, VK_PIPELINE_STAGE_HOST_BIT, VK_ACCESS_HOST_WRITE_BIT, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT,
                      VK_ACCESS_SHADER_READ_BIT | VK_ACCESS_SHADER_WRITE_BIT);
    CHECK(qattn_vulkan_record_begin(ctx, v->cmd) == QATTN_OK, "%s", qattn_last_error(ctx));
    CHECK(qattn_vulkan_record_begin(ctx, v->cmd) == QATTN_ERR_INVALID_ARGUMENT, "a second record_begin was accepted");
    qattn_buffer *ws = w.qb[QS_COUNT];
    CHECK(qattn_kv_store(ctx, &kv) == QATTN_OK, "kv_store: %s", qattn_last_error(ctx));
    CHECK(qattn_decode_run(ctx, &dp, &de, ws, ws ? GUARD : 0) == QATTN_OK, "decode: %s", qattn_last_error(ctx));
    CHECK(qattn_mqa_logits_run(ctx, &mp, &mq, NULL, 0) == QATTN_OK, "mqa: %s", qattn_last_error(ctx));
    uint32_t ops = 0;
    CHECK(qattn_vulkan_record_end(ctx, &ops) == QATTN_OK, "%s", qattn_last_error(ctx));
    CHECK(ops == 3, "recorded %u ops, want 3", ops);
    qt_vk_cmd_barrier(v, VK_PIPELINE_STAGE_COMPUTE_SHADER_BIT, VK_ACCESS_SHADER_WRITE_BIT, VK_PIPELINE_STAGE_HOST_BIT,
                      VK_ACCESS_HOST_READ_BIT);
    /* Recorded, not run: the outputs still hold the poison. */
    CHECK(((const uint32_t *)((char *)w.vb[QS_LOGITS].map + GUARD))[0] == 0xFFFFFFFFu,
          "an output changed before the command buffer was submitted");
    const qattn_vulkan_pipeline_stats after_rec = stats_of(ctx);
    CHECK(after_rec.created == after_warm.created, "recording created %llu pipelines after warm-up",
          (unsigned long long)(after_rec.created - after_warm.created));
    double ms = 0.0;
    CHECK(qattn_last_op_time_ms(ctx, &ms) == QATTN_ERR_INVALID_ARGUMENT, "a recorded op reported a time");
    CHECK(qt_vk_cmd_submit_wait(v), "submit failed");

    void *out[QS_COUNT];
    for (int i = 0; i < QS_COUNT; ++i) out[i] = (char *)w.vb[i].map + GUARD;
    char why[512];
    CHECK(qt_step_check(s, out, why, sizeof why), "recorded step: %s (seed 0x%016llx)", why,
          (unsigned long long)s->rng.base_seed);
    CHECK(guards_intact(&w, s), "a write landed outside a tensor");

    /* The default mode still submits, waits and times. */
    poison_logits(&w, s);
    CHECK(qattn_mqa_logits_run(ctx, &mp, &mq, NULL, 0) == QATTN_OK, "%s", qattn_last_error(ctx));
    qattn_device_caps caps;
    qattn_get_caps(ctx, &caps);
    if (caps.features & QATTN_FEAT_TIMESTAMPS)
        CHECK(qattn_last_op_time_ms(ctx, &ms) == QATTN_OK && ms >= 0.0, "default mode lost its timer: %s",
              qattn_last_error(ctx));
    CHECK(qt_step_check(s, out, why, sizeof why), "default-mode mqa: %s", why);

    /* Mode misuse is refused by name. */
    CHECK(qattn_vulkan_record_end(ctx, NULL) == QATTN_ERR_INVALID_ARGUMENT, "record_end outside recording accepted");
    CHECK(strstr(qattn_last_error(ctx), "not recording") != NULL, "message: %s", qattn_last_error(ctx));
    CHECK(qattn_vulkan_record_begin(ctx, NULL) == QATTN_ERR_INVALID_ARGUMENT, "NULL cmd accepted");

    /* The cache blob for the next test. */
    size_t need = 0;
    CHECK(qattn_vulkan_pipeline_cache_save(ctx, NULL, &need) == QATTN_OK, "%s", qattn_last_error(ctx));
    size_t small = need > 0 ? need - 1 : 0;
    CHECK(need == 0 || qattn_vulkan_pipeline_cache_save(ctx, blob, &small) == QATTN_ERR_OUT_OF_BOUNDS,
          "a too small capacity was accepted");
    CHECK(need <= *blob_bytes, "cache of %zu bytes exceeds the test's %zu", need, *blob_bytes);
    if (need <= *blob_bytes) {
        CHECK(qattn_vulkan_pipeline_cache_save(ctx, blob, blob_bytes) == QATTN_OK, "%s", qattn_last_error(ctx));
    }
    unwrap_all(v, ctx, &w);
    qattn_context_free(ctx);
}

/* A second context loading the first one's cache compiles nothing. */
static void test_cache_reuse(qt_vk *v, const qt_step *s, const void *blob, size_t blob_bytes,
                             const qattn_vulkan_pipeline_stats *first) {
    qattn_context *ctx = import(v, validation);
    if (!ctx) return;
    /* A blob of another device (its UUID changed) is refused. */
    unsigned char *bad = malloc(blob_bytes);
    memcpy(bad, blob, blob_bytes);
    if (blob_bytes > 20) bad[20] ^= 0x5A;
    CHECK(qattn_vulkan_pipeline_cache_load(ctx, bad, blob_bytes) == QATTN_ERR_INVALID_ARGUMENT,
          "a foreign cache was accepted");
    CHECK(strstr(qattn_last_error(ctx), "another device") != NULL, "message: %s", qattn_last_error(ctx));
    free(bad);
    CHECK(qattn_vulkan_pipeline_cache_load(ctx, blob, 8) == QATTN_ERR_INVALID_ARGUMENT, "a truncated cache was accepted");
    CHECK(qattn_vulkan_pipeline_cache_load_file(ctx, "qattn_vk_embed_no_such_file.bin") == QATTN_ERR_INVALID_ARGUMENT,
          "a missing file was accepted");

    /* Through a file, as an engine would keep it. */
    qattn_context *first_ctx = import(v, validation);
    CHECK(qattn_vulkan_pipeline_cache_load(first_ctx, blob, blob_bytes) == QATTN_OK, "%s", qattn_last_error(first_ctx));
    CHECK(qattn_vulkan_pipeline_cache_save_file(first_ctx, "qattn_vk_embed_cache.bin") == QATTN_OK, "%s",
          qattn_last_error(first_ctx));
    qattn_context_free(first_ctx);
    CHECK(qattn_vulkan_pipeline_cache_load_file(ctx, "qattn_vk_embed_cache.bin") == QATTN_OK, "%s",
          qattn_last_error(ctx));
    remove("qattn_vk_embed_cache.bin");

    wrapped w;
    CHECK(wrap_all(v, ctx, s, 0, &w), "wrap failed");
    qattn_decode_args de = qt_step_decode_args(s, w.qb, GUARD);
    qattn_mqa_logits_args mq = qt_step_mqa_args(s, w.qb, GUARD);
    qattn_decode_plan dp;
    qattn_mqa_logits_plan mp;
    CHECK(qattn_decode_plan_create(ctx, &de, NULL, &dp) == QATTN_OK, "%s", qattn_last_error(ctx));
    CHECK(qattn_mqa_logits_plan_create(ctx, &mq, NULL, &mp) == QATTN_OK, "%s", qattn_last_error(ctx));
    qattn_vulkan_warmup_set set;
    memset(&set, 0, sizeof set);
    set.size = sizeof set;
    set.decode_plans = &dp;
    set.n_decode_plans = 1;
    set.mqa_plans = &mp;
    set.n_mqa_plans = 1;
    set.kv_store_dtypes = 1u << s->kv_dtype;
    CHECK(qattn_vulkan_warmup(ctx, &set) == QATTN_OK, "%s", qattn_last_error(ctx));
    const qattn_vulkan_pipeline_stats st = stats_of(ctx);
    CHECK(st.created == first->created, "second context created %llu pipelines, first %llu",
          (unsigned long long)st.created, (unsigned long long)first->created);
    if (st.no_feedback > 0) {
        printf("skipped: cache-hit check (the driver gave no creation feedback for %llu pipelines)\n",
               (unsigned long long)st.no_feedback);
    } else if (blob_bytes <= 16u + VK_UUID_SIZE) {
        /* lavapipe keeps no compute pipelines in a VkPipelineCache: its blob
         * is the bare header, so there is nothing to hit. */
        printf("skipped: cache-hit check (%s stores nothing in a VkPipelineCache: the blob is its %zu-byte "
               "header); the blob and file round trips were checked\n",
               v->props.deviceName, blob_bytes);
    } else {
        CHECK(st.compiled == 0 && st.cache_hits == st.created,
              "with the loaded cache %llu of %llu pipelines were compiled", (unsigned long long)st.compiled,
              (unsigned long long)st.created);
        CHECK(first->compiled == first->created, "the first context reported %llu cache hits from an empty cache",
              (unsigned long long)first->cache_hits);
        printf("pipeline cache: first context compiled %llu in %.1f ms, second compiled %llu in %.1f ms "
               "(%llu cache hits, blob %zu bytes)\n",
               (unsigned long long)first->compiled, first->create_ms, (unsigned long long)st.compiled,
               st.create_ms, (unsigned long long)st.cache_hits, blob_bytes);
    }
    /* Warm-up through the real calls: a fresh context compiles the same
     * pipelines and nothing is written. */
    {
        qattn_context *c3 = import(v, validation);
        wrapped w3;
        CHECK(c3 && wrap_all(v, c3, s, dp.workspace_bytes, &w3), "third context");
        if (c3) {
            qattn_kv_store_args kv3 = qt_step_kv_args(s, w3.qb, GUARD);
            qattn_decode_args de3 = qt_step_decode_args(s, w3.qb, GUARD);
            qattn_mqa_logits_args mq3 = qt_step_mqa_args(s, w3.qb, GUARD);
            qattn_buffer *ws3 = w3.qb[QS_COUNT];
            CHECK(qattn_vulkan_warmup_begin(c3) == QATTN_OK, "%s", qattn_last_error(c3));
            CHECK(qattn_vulkan_record_begin(c3, v->cmd) == QATTN_ERR_INVALID_ARGUMENT, "record during warm-up accepted");
            CHECK(qattn_kv_store(c3, &kv3) == QATTN_OK, "%s", qattn_last_error(c3));
            CHECK(qattn_decode_run(c3, &dp, &de3, ws3, ws3 ? GUARD : 0) == QATTN_OK, "%s", qattn_last_error(c3));
            CHECK(qattn_mqa_logits_run(c3, &mp, &mq3, NULL, 0) == QATTN_OK, "%s", qattn_last_error(c3));
            CHECK(qattn_vulkan_warmup_end(c3) == QATTN_OK, "%s", qattn_last_error(c3));
            CHECK(qattn_vulkan_warmup_end(c3) == QATTN_ERR_INVALID_ARGUMENT, "a second warmup_end accepted");
            double ms;
            CHECK(qattn_last_op_time_ms(c3, &ms) == QATTN_ERR_INVALID_ARGUMENT, "a warmed-up op reported a time");
            const qattn_vulkan_pipeline_stats st3 = stats_of(c3);
            CHECK(st3.created == first->created, "warm-up through the calls created %llu pipelines, the plan "
                  "warm-up %llu", (unsigned long long)st3.created, (unsigned long long)first->created);
            for (int i = 0; i < QS_COUNT; ++i)
                CHECK(memcmp((char *)w3.vb[i].map + GUARD, s->host[i], s->bytes[i]) == 0,
                      "warm-up wrote tensor %d", i);
            unwrap_all(v, c3, &w3);
            qattn_context_free(c3);
        }
    }
    /* Bad warm-up sets are refused. */
    set.size = 1;
    CHECK(qattn_vulkan_warmup(ctx, &set) == QATTN_ERR_INVALID_ARGUMENT, "a bad set size was accepted");
    set.size = sizeof set + 8; /* a newer header's: its fields would be ignored */
    CHECK(qattn_vulkan_warmup(ctx, &set) == QATTN_ERR_INVALID_ARGUMENT, "a set size past sizeof was accepted");
    CHECK(strstr(qattn_last_error(ctx), "set->size") != NULL, "message: %s", qattn_last_error(ctx));
    set.size = sizeof set;
    set.kv_store_dtypes = 1u << QATTN_F32;
    CHECK(qattn_vulkan_warmup(ctx, &set) == QATTN_ERR_INVALID_ARGUMENT, "an f32 kv store was accepted");
    unwrap_all(v, ctx, &w);
    qattn_context_free(ctx);
}

/* qattn's own device, read back with qattn_vulkan_get_device: the caller
 * makes VkBuffers on it, wraps them and runs the KV store of the step. */
static void test_own_device_wrap(const qt_step *s) {
    char err[512];
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    o.debug_validation = validation;
    qattn_context *ctx = NULL;
    if (qattn_context_create(qattn_backend_vulkan(), &o, &ctx, err, sizeof err) != QATTN_OK) {
        CHECK(0, "qattn_context_create: %s", err);
        return;
    }
    qattn_vulkan_device d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    CHECK(qattn_vulkan_get_device(ctx, &d) == QATTN_OK && d.device && d.get_instance_proc_addr, "%s",
          qattn_last_error(ctx));
    d.size = 4;
    CHECK(qattn_vulkan_get_device(ctx, &d) == QATTN_ERR_INVALID_ARGUMENT, "out->size 4 accepted");
    d.size = sizeof d + 8;
    CHECK(qattn_vulkan_get_device(ctx, &d) == QATTN_ERR_INVALID_ARGUMENT, "out->size past sizeof accepted");
    qattn_vulkan_pipeline_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st + 8;
    CHECK(qattn_vulkan_pipeline_stats_get(ctx, &st) == QATTN_ERR_INVALID_ARGUMENT,
          "pipeline stats out->size past sizeof accepted");
    CHECK(strstr(qattn_last_error(ctx), "out->size") != NULL, "message: %s", qattn_last_error(ctx));
    st.size = sizeof st - 1;
    CHECK(qattn_vulkan_pipeline_stats_get(ctx, &st) == QATTN_ERR_INVALID_ARGUMENT,
          "pipeline stats out->size below sizeof accepted");
    d.size = sizeof d;
    qattn_vulkan_get_device(ctx, &d);
    qt_vk v;
    if (!qt_vk_attach(&v, &d)) {
        CHECK(0, "cannot reach qattn's device through the handles it returned");
        qattn_context_free(ctx);
        return;
    }
    wrapped w;
    CHECK(wrap_all(&v, ctx, s, 0, &w), "wrap on qattn's own device failed");
    qattn_kv_store_args kv = qt_step_kv_args(s, w.qb, GUARD);
    CHECK(qattn_kv_store(ctx, &kv) == QATTN_OK, "%s", qattn_last_error(ctx));
    static const int cache[] = {QS_KC, QS_VC, QS_KS, QS_VS};
    for (int i = 0; i < 4; ++i) {
        const int id = cache[i];
        CHECK(memcmp((char *)w.vb[id].map + GUARD, s->ref[id], s->bytes[id]) == 0,
              "KV store on qattn's own device: tensor %d differs from the reference", id);
    }
    CHECK(guards_intact(&w, s), "a write landed outside a tensor");
    unwrap_all(&v, ctx, &w);
    qt_vk_close(&v);
    qattn_context_free(ctx);
}

/* Descriptors that break a rule, and devices without a required feature. */
static void test_refusals(qt_vk *v) {
    char err[512];
    qattn_context *ctx = (qattn_context *)1;
    qattn_vulkan_device d = qt_vk_import_desc(v);
    d.size = 8;
    CHECK(qattn_vulkan_context_create(&d, NULL, &ctx, err, sizeof err) == QATTN_ERR_INVALID_ARGUMENT && !ctx,
          "size 8 accepted");
    CHECK(strstr(err, "device->size") != NULL, "message: %s", err);
    d.size = sizeof d + 8;
    CHECK(qattn_vulkan_context_create(&d, NULL, &ctx, err, sizeof err) == QATTN_ERR_INVALID_ARGUMENT && !ctx,
          "device->size past sizeof accepted");
    CHECK(strstr(err, "device->size") != NULL, "message: %s", err);
    /* The options follow the rule of qattn.h: a size no version has is
     * refused before the device is looked at. */
    d = qt_vk_import_desc(v);
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    o.size = 0;
    CHECK(qattn_vulkan_context_create(&d, &o, &ctx, err, sizeof err) == QATTN_ERR_INVALID_ARGUMENT && !ctx,
          "options.size 0 accepted");
    CHECK(strstr(err, "options.size is 0") && strstr(err, "QATTN_CONTEXT_OPTIONS_INIT"), "message: %s", err);
    o.size = sizeof o + 8;
    CHECK(qattn_vulkan_context_create(&d, &o, &ctx, err, sizeof err) == QATTN_ERR_INVALID_ARGUMENT && !ctx,
          "options.size past sizeof accepted");
    CHECK(strstr(err, "options.size: ") != NULL, "message: %s", err);
    d.queue_family = 99;
    CHECK(qattn_vulkan_context_create(&d, NULL, &ctx, err, sizeof err) == QATTN_ERR_INVALID_ARGUMENT,
          "queue family 99 accepted");
    CHECK(strstr(err, "queue_family") != NULL, "message: %s", err);
    d = qt_vk_import_desc(v);
    d.device = NULL;
    CHECK(qattn_vulkan_context_create(&d, NULL, &ctx, err, sizeof err) == QATTN_ERR_INVALID_ARGUMENT,
          "NULL device accepted");
    d = qt_vk_import_desc(v);
    d.enabled_features_chain = NULL;
    CHECK(qattn_vulkan_context_create(&d, NULL, &ctx, err, sizeof err) == QATTN_ERR_BACKEND_UNAVAILABLE,
          "a device without the enabled-feature list accepted");

    static const char *const needed[] = {"bufferDeviceAddress", "shaderInt8", "shaderInt64", "maintenance4",
                                          "shaderFloat16"};
    for (int i = 0; i < 4; ++i) {
        qt_vk w;
        int rc = qt_vk_open(&w, 0, needed[i], err, sizeof err);
        CHECK(rc == 0, "device without %s: %s", needed[i], err);
        if (rc == 0) {
            qattn_vulkan_device dw = qt_vk_import_desc(&w);
            qattn_status s = qattn_vulkan_context_create(&dw, NULL, &ctx, err, sizeof err);
            CHECK(s == QATTN_ERR_BACKEND_UNAVAILABLE, "a device without %s was accepted", needed[i]);
            CHECK(strstr(err, needed[i]) != NULL, "the message does not name %s: %s", needed[i], err);
        }
        qt_vk_close(&w);
    }
    /* A cpu context is not a Vulkan one. */
    qattn_context *cpu = NULL;
    qattn_context_create(qattn_backend_cpu(), NULL, &cpu, err, sizeof err);
    qattn_vulkan_pipeline_stats st = {sizeof st};
    CHECK(qattn_vulkan_pipeline_stats_get(cpu, &st) == QATTN_ERR_INVALID_ARGUMENT, "a cpu context was accepted");
    CHECK(strstr(qattn_last_error(cpu), "not a Vulkan context") != NULL, "message: %s", qattn_last_error(cpu));
    qattn_context_free(cpu);
}

/* The sized structs of vulkan.h follow the rule of qattn.h ("option
 * structs"): every size that is no version's sizeof is refused through
 * each public call with a message naming the size member, the rule and the
 * struct, and nothing is done: no context, no byte of an out struct
 * written, no pipeline warmed. */
static int names(const char *msg, const char *arg, const char *says, const char *type) {
    return strstr(msg, arg) && strstr(msg, says) && strstr(msg, type);
}

/* A call that fills a caller-sized out struct. */
typedef qattn_status (*fill_fn)(qattn_context *ctx, void *out);
static qattn_status get_device(qattn_context *ctx, void *out) { return qattn_vulkan_get_device(ctx, out); }
static qattn_status get_stats(qattn_context *ctx, void *out) { return qattn_vulkan_pipeline_stats_get(ctx, out); }

/* Each refused out->size: the call fails naming it, and no byte of the
 * caller's struct (`full` bytes, poisoned) changes. */
static void check_out_refused(qattn_context *ctx, fill_fn fill, size_t full, const char *type) {
    union {
        max_align_t align;
        unsigned char b[256];
    } out, was;
    CHECK(full <= sizeof out.b, "%s: %zu bytes, past the test's room", type, full);
    if (full > sizeof out.b) return;
    qt_refused_size bad[QT_REFUSED_SIZES];
    const int n = qt_refused_sizes(full, bad);
    for (int i = 0; i < n; ++i) {
        memset(out.b, 0xA5, full);
        memcpy(out.b, &bad[i].size, sizeof bad[i].size);
        memcpy(was.b, out.b, full);
        CHECK(fill(ctx, out.b) == QATTN_ERR_INVALID_ARGUMENT, "%s out->size %zu accepted", type, bad[i].size);
        const char *e = qattn_last_error(ctx);
        CHECK(names(e, "out->size", bad[i].says, type), "message: %s", e);
        CHECK(memcmp(out.b, was.b, full) == 0, "a refused call wrote its %s (size %zu)", type, bad[i].size);
    }
}

static void test_struct_sizes(qt_vk *v) {
    char err[512];
    qt_refused_size bad[QT_REFUSED_SIZES];

    /* qattn_vulkan_context_create's device (read). */
    qattn_vulkan_device d = qt_vk_import_desc(v);
    int n = qt_refused_sizes(sizeof d, bad);
    for (int i = 0; i < n; ++i) {
        d.size = bad[i].size;
        qattn_context *ctx = (qattn_context *)1;
        err[0] = '\0';
        CHECK(qattn_vulkan_context_create(&d, NULL, &ctx, err, sizeof err) == QATTN_ERR_INVALID_ARGUMENT && !ctx,
              "device->size %zu accepted", bad[i].size);
        CHECK(names(err, "device->size", bad[i].says, "qattn_vulkan_device"), "message: %s", err);
    }

    qattn_context *ctx = import(v, validation);
    if (!ctx) return;

    /* The out structs the library fills: the caller's bytes stay. */
    check_out_refused(ctx, get_device, sizeof(qattn_vulkan_device), "qattn_vulkan_device");
    check_out_refused(ctx, get_stats, sizeof(qattn_vulkan_pipeline_stats), "qattn_vulkan_pipeline_stats");
    qattn_vulkan_device got;
    memset(&got, 0xA5, sizeof got);
    got.size = sizeof got;
    CHECK(qattn_vulkan_get_device(ctx, &got) == QATTN_OK && got.size == sizeof got && got.device == d.device &&
              got.enabled_features_chain == NULL && got.enabled_extension_count == 0,
          "get_device with sizeof: %s", qattn_last_error(ctx));
    const uint64_t before = stats_of(ctx).created;

    /* qattn_vulkan_warmup's set (read): a refused set warms nothing; the
     * same set with its sizeof then makes the KV store's pipeline. */
    qattn_vulkan_warmup_set set;
    memset(&set, 0, sizeof set);
    set.kv_store_dtypes = 1u << QATTN_BF16;
    n = qt_refused_sizes(sizeof set, bad);
    for (int i = 0; i < n; ++i) {
        set.size = bad[i].size;
        CHECK(qattn_vulkan_warmup(ctx, &set) == QATTN_ERR_INVALID_ARGUMENT, "set->size %zu accepted", bad[i].size);
        const char *e = qattn_last_error(ctx);
        CHECK(names(e, "set->size", bad[i].says, "qattn_vulkan_warmup_set"), "message: %s", e);
    }
    CHECK(stats_of(ctx).created == before, "a refused warm-up set made pipelines");
    set.size = sizeof set;
    CHECK(qattn_vulkan_warmup(ctx, &set) == QATTN_OK, "%s", qattn_last_error(ctx));
    CHECK(stats_of(ctx).created > before, "the warm-up set with its sizeof made no pipeline");
    qattn_context_free(ctx);
}

int main(void) {
    char err[512];
    const char *env = getenv("QATTN_TEST_VALIDATION");
    validation = !(env && strcmp(env, "0") == 0);
    qt_vk v;
    int rc = qt_vk_open(&v, validation, NULL, err, sizeof err);
    if (rc == 77) {
        printf("skipped: %s\n", err);
        return 77;
    }
    if (rc != 0) {
        fprintf(stderr, "FAIL: setting up the test's own device: %s\n", err);
        return 1;
    }
    printf("vk_embed: own instance and device on %s, validation %s (seed 0x%016llx)\n", v.props.deviceName,
           validation ? "on" : "OFF (QATTN_TEST_VALIDATION=0)", (unsigned long long)qt_base_seed());
    qt_step s;
    if (!qt_step_make(&s, "vk_embed/step") || !qt_step_reference(&s, err, sizeof err)) {
        fprintf(stderr, "FAIL: %s\n", err);
        return 1;
    }
    size_t blob_bytes = 64u << 20;
    void *blob = malloc(blob_bytes);
    qattn_vulkan_pipeline_stats first;
    memset(&first, 0, sizeof first);
    test_record_step(&v, &s, blob, &blob_bytes, &first);
    test_cache_reuse(&v, &s, blob, blob_bytes, &first);
    test_own_device_wrap(&s);
    test_refusals(&v);
    test_struct_sizes(&v);
    free(blob);
    qt_step_free(&s);
    CHECK(v.n_messages == 0, "the validation layer reported %d message(s); first: %s", v.n_messages, v.first_message);
    qt_vk_close(&v);
    if (qt_failures) {
        fprintf(stderr, "vk_embed: %d check(s) failed\n", (int)qt_failures);
        return 1;
    }
    printf("vk_embed: all checks passed\n");
    return 0;
}
