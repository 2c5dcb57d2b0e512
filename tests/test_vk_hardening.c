/*
 * Issue 18's Vulkan findings, each a check that failed before its fix:
 *  - item 2: qattn_vulkan_warmup applies the plan checks of
 *    qattn_decode_run / qattn_mqa_logits_run: an edited plan is refused,
 *    naming it, before any pipeline is built;
 *  - item 3: qattn_vulkan_pipeline_cache_load_file refuses a directory, a
 *    FIFO (without blocking) and a file over
 *    QATTN_VULKAN_PIPELINE_CACHE_MAX_BYTES (without reading it);
 *  - item 5: qattn_vulkan_context_create refuses a physical device that
 *    does not belong to the instance it is given.
 *
 * QATTN_TEST_VALIDATION=0 runs without the validation layer.
 * Exit 0 pass, 1 fail, 77 skipped (no Vulkan loader or device).
 */
#define _POSIX_C_SOURCE 200809L /* mkfifo, ftruncate, mkdtemp */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "qt_step.h"
#include "qt_vk.h"
#include "qt_check.h"

static int validation = 1;

static qattn_context *own_ctx(void) {
    char err[512];
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    o.debug_validation = validation;
    qattn_context *ctx = NULL;
    qattn_status s = qattn_context_create(qattn_backend_vulkan(), &o, &ctx, err, sizeof err);
    CHECK(s == QATTN_OK, "qattn_context_create: %s", err);
    return ctx;
}

static uint64_t pipelines_created(qattn_context *ctx) {
    qattn_vulkan_pipeline_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    CHECK(qattn_vulkan_pipeline_stats_get(ctx, &st) == QATTN_OK, "%s", qattn_last_error(ctx));
    return st.created;
}

static int says(qattn_context *ctx, const char *a, const char *b) {
    const char *m = qattn_last_error(ctx);
    return strstr(m, a) && (!b || strstr(m, b));
}

/* Item 2: plans edited after planning are refused by the warm-up as by a
 * run; nothing is built. The edits are harmless to a compiler (the reason
 * text, the split count), so before the fix the warm-up returned OK. */
static void test_warmup_checks_plans(const qt_step *s) {
    qattn_context *ctx = own_ctx();
    if (!ctx) return;
    qattn_buffer *buf[QS_COUNT] = {0};
    int ok = 1;
    for (int i = 0; i < QS_COUNT && ok; ++i)
        ok = qattn_buffer_alloc(ctx, s->bytes[i], &buf[i]) == QATTN_OK;
    CHECK(ok, "buffers: %s", qattn_last_error(ctx));
    qattn_decode_args de = qt_step_decode_args(s, buf, 0);
    qattn_mqa_logits_args mq = qt_step_mqa_args(s, buf, 0);
    qattn_decode_plan dp[2];
    qattn_mqa_logits_plan mp;
    CHECK(qattn_decode_plan_create(ctx, &de, NULL, &dp[0]) == QATTN_OK, "%s", qattn_last_error(ctx));
    CHECK(qattn_mqa_logits_plan_create(ctx, &mq, NULL, &mp) == QATTN_OK, "%s", qattn_last_error(ctx));
    qattn_vulkan_warmup_set set;
    memset(&set, 0, sizeof set);
    set.size = sizeof set;
    set.decode_plans = dp;
    set.n_decode_plans = 2;

    dp[1] = dp[0];
    dp[1].reason[QATTN_REASON_BYTES - 1] ^= 1;
    qattn_status st = qattn_vulkan_warmup(ctx, &set);
    CHECK(st == QATTN_ERR_INVALID_ARGUMENT && says(ctx, "decode_plans[1]", "changed after planning"),
          "an edited decode plan (reason) warmed up: %s, %s", qattn_status_name(st), qattn_last_error(ctx));
    dp[1] = dp[0];
    dp[1].num_splits = dp[0].num_splits == 1 ? 2 : 1;
    st = qattn_vulkan_warmup(ctx, &set);
    CHECK(st == QATTN_ERR_INVALID_ARGUMENT && says(ctx, "decode_plans[1]", "changed after planning"),
          "an edited decode plan (splits) warmed up: %s, %s", qattn_status_name(st), qattn_last_error(ctx));
    set.n_decode_plans = 1;
    set.mqa_plans = &mp;
    set.n_mqa_plans = 1;
    qattn_mqa_logits_plan good = mp;
    mp.reason[QATTN_REASON_BYTES - 1] ^= 1;
    st = qattn_vulkan_warmup(ctx, &set);
    CHECK(st == QATTN_ERR_INVALID_ARGUMENT && says(ctx, "mqa_plans[0]", "changed after planning"),
          "an edited MQA plan warmed up: %s, %s", qattn_status_name(st), qattn_last_error(ctx));
    CHECK(pipelines_created(ctx) == 0, "refused warm-ups built %llu pipelines",
          (unsigned long long)pipelines_created(ctx));
    /* The unedited plans still warm up. */
    mp = good;
    st = qattn_vulkan_warmup(ctx, &set);
    CHECK(st == QATTN_OK, "the planned plans: %s", qattn_last_error(ctx));
    CHECK(pipelines_created(ctx) > 0, "the warm-up built nothing");
    for (int i = 0; i < QS_COUNT; ++i) qattn_buffer_free(ctx, buf[i]);
    qattn_context_free(ctx);
}

/* Item 3: cache files that are not regular files or are larger than any
 * cache are refused without reading them (a directory made the old code
 * allocate LONG_MAX bytes; a FIFO blocked its fopen forever). */
static void test_cache_files(void) {
    qattn_context *ctx = own_ctx();
    if (!ctx) return;
    char dir[] = "/tmp/qattn_vk_hardening_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char path[128];
    qattn_status st = qattn_vulkan_pipeline_cache_load_file(ctx, dir);
    CHECK(st == QATTN_ERR_INVALID_ARGUMENT && says(ctx, "not a regular file", NULL), "a directory: %s, %s",
          qattn_status_name(st), qattn_last_error(ctx));
    snprintf(path, sizeof path, "%s/fifo", dir);
    if (mkfifo(path, 0600) == 0) {
        st = qattn_vulkan_pipeline_cache_load_file(ctx, path);
        CHECK(st == QATTN_ERR_INVALID_ARGUMENT && says(ctx, "not a regular file", NULL), "a FIFO: %s, %s",
              qattn_status_name(st), qattn_last_error(ctx));
        remove(path);
    } else {
        printf("skipped: the FIFO case (mkfifo failed here)\n");
    }
    /* A sparse file one byte over the cap: no disk, no read. */
    snprintf(path, sizeof path, "%s/huge.bin", dir);
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0 && ftruncate(fd, (off_t)QATTN_VULKAN_PIPELINE_CACHE_MAX_BYTES + 1) == 0, "sparse file");
    if (fd >= 0) close(fd);
    st = qattn_vulkan_pipeline_cache_load_file(ctx, path);
    CHECK(st == QATTN_ERR_INVALID_ARGUMENT && says(ctx, "QATTN_VULKAN_PIPELINE_CACHE_MAX_BYTES", NULL),
          "a file over the cap: %s, %s", qattn_status_name(st), qattn_last_error(ctx));
    remove(path);
    /* A regular file of a real cache still loads. */
    CHECK(qattn_vulkan_pipeline_cache_save_file(ctx, path) == QATTN_OK, "%s", qattn_last_error(ctx));
    CHECK(qattn_vulkan_pipeline_cache_load_file(ctx, path) == QATTN_OK, "%s", qattn_last_error(ctx));
    remove(path);
    rmdir(dir);
    qattn_context_free(ctx);
}

/* Item 5: the physical device (and so the device) of one instance with
 * another instance is refused, naming physical_device; before, the context
 * was made and its debug messenger sat on the wrong instance. */
static void test_foreign_handles(void) {
    char err[512];
    qt_vk a, b;
    if (qt_vk_open(&a, 0, NULL, err, sizeof err) != 0) {
        CHECK(0, "first instance: %s", err);
        return;
    }
    if (qt_vk_open(&b, 0, NULL, err, sizeof err) != 0) {
        CHECK(0, "second instance: %s", err);
        qt_vk_close(&a);
        return;
    }
    qattn_vulkan_device d = qt_vk_import_desc(&b);
    d.instance = a.instance;
    d.get_instance_proc_addr = (void (*(*)(VkInstance, const char *))(void))a.gipa;
    qattn_context *ctx = NULL;
    qattn_status st = qattn_vulkan_context_create(&d, NULL, &ctx, err, sizeof err);
    CHECK(st == QATTN_ERR_INVALID_ARGUMENT && !ctx && strstr(err, "physical_device"),
          "a physical device of another instance: %s, %s", qattn_status_name(st), err);
    qattn_context_free(ctx);
    /* Each instance with its own handles still works. */
    d = qt_vk_import_desc(&b);
    st = qattn_vulkan_context_create(&d, NULL, &ctx, err, sizeof err);
    CHECK(st == QATTN_OK, "matching handles: %s", err);
    qattn_context_free(ctx);
    qt_vk_close(&b);
    qt_vk_close(&a);
}

int main(void) {
    char err[512];
    const char *env = getenv("QATTN_TEST_VALIDATION");
    validation = !(env && strcmp(env, "0") == 0);
    qt_vk probe;
    int rc = qt_vk_open(&probe, validation, NULL, err, sizeof err);
    if (rc == 77) {
        printf("skipped: %s\n", err);
        return 77;
    }
    qt_vk_close(&probe);
    if (rc != 0) {
        fprintf(stderr, "FAIL: %s\n", err);
        return 1;
    }
    qt_step s;
    if (!qt_step_make(&s, "vk_hardening/step")) {
        fprintf(stderr, "FAIL: cannot make the step\n");
        return 1;
    }
    test_warmup_checks_plans(&s);
    test_cache_files();
    test_foreign_handles();
    qt_step_free(&s);
    if (qt_failures) {
        fprintf(stderr, "vk_hardening: %d check(s) failed\n", (int)qt_failures);
        return 1;
    }
    printf("vk_hardening: warm-up plan checks, cache files, foreign handles: passed\n");
    return 0;
}
