#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

static double wall_us(void) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec * 1e-3;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int bench_time(qattn_context *ctx, bench_launch_fn fn, void *arg, const bench_config *cfg,
               bench_result *res) {
    /* Warm up for a count and for a minimum time: after seconds of host work
     * (the reference check) an idle GPU has lowered its clocks, and a few
     * sub-millisecond launches are not enough load to raise them again. */
    const double t_warm = wall_us();
    for (int i = 0; i < cfg->warmup || wall_us() - t_warm < cfg->warmup_min_ms * 1e3; ++i) {
        if (fn(arg) != QATTN_OK) goto fail;
    }
    qattn_synchronize(ctx);
    res->samples_us = calloc((size_t)cfg->iters, sizeof(double));
    res->n_samples = 0;
    for (int i = 0; i < cfg->iters; ++i) {
        double t0 = wall_us();
        if (fn(arg) != QATTN_OK) goto fail;
        double ms;
        if (qattn_last_op_time_ms(ctx, &ms) == QATTN_OK) {
            snprintf(res->timer, sizeof res->timer, "device");
            res->samples_us[res->n_samples++] = ms * 1e3;
        } else {
            /* No backend timer: host wall clock around launch + sync. */
            qattn_synchronize(ctx);
            snprintf(res->timer, sizeof res->timer, "host");
            res->samples_us[res->n_samples++] = wall_us() - t0;
        }
    }
    double *sorted = malloc((size_t)res->n_samples * sizeof(double));
    memcpy(sorted, res->samples_us, (size_t)res->n_samples * sizeof(double));
    qsort(sorted, (size_t)res->n_samples, sizeof(double), cmp_double);
    int n = res->n_samples;
    res->min_us = sorted[0];
    res->max_us = sorted[n - 1];
    res->median_us = n % 2 ? sorted[n / 2] : 0.5 * (sorted[n / 2 - 1] + sorted[n / 2]);
    free(sorted);
    return 0;
fail:
    snprintf(res->error, sizeof res->error, "timed launch failed: %s", qattn_last_error(ctx));
    return -1;
}

qattn_buffer *bench_upload(qattn_context *ctx, const void *host, size_t bytes, bench_result *res) {
    qattn_buffer *b = NULL;
    if (bytes == 0) bytes = 4;
    if (qattn_buffer_alloc(ctx, bytes, &b) != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "alloc %zu bytes: %s", bytes, qattn_last_error(ctx));
        return NULL;
    }
    void *fill = NULL;
    if (!host) {
        fill = malloc(bytes);
        memset(fill, 0xFF, bytes);
        host = fill;
    }
    qattn_status s = qattn_buffer_upload(ctx, b, 0, host, bytes);
    free(fill);
    if (s != QATTN_OK) {
        snprintf(res->error, sizeof res->error, "upload: %s", qattn_last_error(ctx));
        qattn_buffer_free(ctx, b);
        return NULL;
    }
    return b;
}
