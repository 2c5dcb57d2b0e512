/* qattn-bench: runs named presets on a backend, checks every output against
 * the cpu reference before reporting its timing, prints a table and
 * optionally writes JSON with every sample.
 *
 *   qattn-bench [--backend auto|cpu|vulkan|hip] [--device SEL]
 *               [--op decode|kv_store|mqa_logits] [--preset A,B,...]
 *               [--seeds] [--iters N] [--warmup N] [--warmup-ms MS] [--seed S]
 *               [--json FILE]
 *               [--list]
 * Without --preset, the quick presets run (--seeds: the seeds' workloads).
 * MQA presets planned on the matrix unit print the matrix ceiling of their
 * tile shape first (bench_mqa.c) and their share of it on their row.
 * Exit status 0 only when every preset ran and matched the reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "qattn/qattn.h"
#ifdef QATTN_BENCH_HAVE_VULKAN
#include "qattn/vulkan.h"
#endif
#ifdef QATTN_BENCH_HAVE_HIP
#include "qattn/hip.h"
#endif

typedef struct named_backend {
    const char *name;
    const qattn_backend_iface *(*get)(void);
} named_backend;

static const named_backend BACKENDS[] = {
#ifdef QATTN_BENCH_HAVE_HIP
    {"hip", qattn_backend_hip},
#endif
#ifdef QATTN_BENCH_HAVE_VULKAN
    {"vulkan", qattn_backend_vulkan},
#endif
    {"cpu", qattn_backend_cpu},
};
enum { N_BACKENDS = sizeof BACKENDS / sizeof BACKENDS[0] };

/* auto: the first backend (hip, then vulkan, then cpu) that opens a device;
 * a Vulkan device that is itself a CPU rasterizer (llvmpipe) still counts,
 * since it runs the Vulkan shaders for real. */
static qattn_context *open_backend(const char *want, const char *device, char *err, size_t n) {
    qattn_context_options opt = {.device = device};
    for (int i = 0; i < N_BACKENDS; ++i) {
        if (strcmp(want, "auto") != 0 && strcmp(want, BACKENDS[i].name) != 0) continue;
        qattn_context *ctx = NULL;
        if (qattn_context_create(BACKENDS[i].get(), &opt, &ctx, err, n) == QATTN_OK) return ctx;
        if (strcmp(want, "auto") == 0) fprintf(stderr, "qattn-bench: %s unavailable: %s\n", BACKENDS[i].name, err);
    }
    if (strcmp(want, "auto") != 0 && err[0] == '\0') snprintf(err, n, "backend %s not built", want);
    return NULL;
}

static int wanted(const char *list, const char *name) {
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == '\0' || p[n] == ',')) return 1;
    return 0;
}

static void json_result(FILE *f, const bench_preset *p, const qattn_device_caps *caps, const char *backend,
                        const bench_result *r, int first) {
    fprintf(f, "%s\n  {\"preset\": \"%s\", \"op\": \"%s\", \"backend\": \"%s\", \"arch\": \"%s\", "
               "\"device\": \"%s\", \"variant\": \"%s\", \"splits\": %d, \"timer\": \"%s\", "
               "\"median_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, \"bytes\": %.0f, \"flops\": %.0f, "
               "\"verified\": %s, \"worst_err_over_tol\": %.4g, \"ceiling_tflops\": %.3f, \"error\": \"%s\", \"samples_us\": [",
            first ? "" : ",", p->name, bench_op_name(p->op), backend, caps->arch, caps->device_name,
            r->variant, r->splits, r->timer, r->median_us, r->min_us, r->max_us, r->bytes, r->flops,
            r->verified ? "true" : "false", r->worst_ratio, r->ceiling_tflops, r->error);
    for (int i = 0; i < r->n_samples; ++i) fprintf(f, "%s%.3f", i ? ", " : "", r->samples_us[i]);
    fprintf(f, "]}");
}

int main(int argc, char **argv) {
    const char *backend = "auto", *device = NULL, *op = NULL, *presets = NULL, *json = NULL;
    int seeds = 0;
    bench_config cfg = {.warmup = 5, .iters = 30, .seed = 0, .warmup_min_ms = 500.0};
    int iters_given = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--list")) {
            for (int k = 0; k < BENCH_PRESET_COUNT; ++k)
                printf("%-24s %-10s %s\n", BENCH_PRESETS[k].name, bench_op_name(BENCH_PRESETS[k].op),
                       BENCH_PRESETS[k].small ? "quick" : "seed");
            return 0;
        } else if (!strcmp(a, "--seeds")) {
            seeds = 1;
        } else if (v && !strcmp(a, "--backend")) backend = argv[++i];
        else if (v && !strcmp(a, "--device")) device = argv[++i];
        else if (v && !strcmp(a, "--op")) op = argv[++i];
        else if (v && !strcmp(a, "--preset")) presets = argv[++i];
        else if (v && !strcmp(a, "--json")) json = argv[++i];
        else if (v && !strcmp(a, "--iters")) cfg.iters = atoi(argv[++i]), iters_given = 1;
        else if (v && !strcmp(a, "--warmup")) cfg.warmup = atoi(argv[++i]), iters_given = 1;
        else if (v && !strcmp(a, "--seed")) cfg.seed = strtoull(argv[++i], NULL, 0);
        else if (v && !strcmp(a, "--warmup-ms")) cfg.warmup_min_ms = atof(argv[++i]), iters_given = 1;
        else {
            fprintf(stderr, "qattn-bench: unknown or incomplete argument %s (see the header of bench/main.c)\n", a);
            return 2;
        }
    }
    if (cfg.iters < 1) cfg.iters = 1;
    char err[512] = "";
    qattn_context *ctx = open_backend(backend, device, err, sizeof err);
    if (!ctx) {
        fprintf(stderr, "qattn-bench: no %s backend: %s\n", backend, err);
        return 1;
    }
    qattn_device_caps caps;
    qattn_get_caps(ctx, &caps);
    /* The reference is exact, not fast: a few runs show its cost. */
    if (!iters_given && !strcmp(qattn_backend_name(ctx), "cpu"))
        cfg.warmup = 1, cfg.iters = 3, cfg.warmup_min_ms = 0.0;
    printf("qattn %s | backend %s | device %s (%s) | >= %d warm-up runs and >= %.0f ms, then %d timed runs per preset\n",
           qattn_version_string(), qattn_backend_name(ctx), caps.device_name, caps.arch, cfg.warmup,
           cfg.warmup_min_ms, cfg.iters);
    printf("%-24s %-10s %-14s %6s %10s %10s %10s %9s %8s  %s\n", "preset", "op", "variant", "splits",
           "median_us", "min_us", "max_us", "GB/s", "TFLOP/s", "check vs cpu reference");
    FILE *jf = json ? fopen(json, "w") : NULL;
    if (json && !jf) fprintf(stderr, "qattn-bench: cannot write %s\n", json);
    if (jf) fprintf(jf, "{\"version\": \"%s\", \"results\": [", qattn_version_string());
    int failures = 0, ran = 0;
    for (int k = 0; k < BENCH_PRESET_COUNT; ++k) {
        const bench_preset *p = &BENCH_PRESETS[k];
        if (presets ? !wanted(presets, p->name) : (seeds ? p->small : !p->small)) continue;
        if (op && strcmp(op, bench_op_name(p->op)) != 0) continue;
        bench_result r;
        memset(&r, 0, sizeof r);
        int rc = p->op == BENCH_DECODE     ? bench_decode(ctx, p, &cfg, &r)
                 : p->op == BENCH_KV_STORE ? bench_kv_store(ctx, p, &cfg, &r)
                                           : bench_mqa_logits(ctx, p, &cfg, &r);
        ++ran;
        if (rc != 0 || !r.verified) ++failures;
        if (rc != 0) {
            printf("%-24s %-10s FAILED: %s\n", p->name, bench_op_name(p->op), r.error);
        } else {
            double gbs = r.bytes / (r.median_us * 1e3), tf = r.flops / (r.median_us * 1e6);
            char share[48] = "";
            if (r.ceiling_tflops > 0)
                snprintf(share, sizeof share, ", %.1f %% of the matrix ceiling", 100.0 * tf / r.ceiling_tflops);
            printf("%-24s %-10s %-14s %6d %10.2f %10.2f %10.2f %9.1f %8.2f  %s (worst err/tol %.3g, %s timer%s)\n",
                   p->name, bench_op_name(p->op), r.variant, r.splits, r.median_us, r.min_us, r.max_us, gbs, tf,
                   r.verified ? "matched" : "MISMATCH", r.worst_ratio, r.timer, share);
        }
        if (jf) json_result(jf, p, &caps, qattn_backend_name(ctx), &r, ran == 1);
        free(r.samples_us);
    }
    if (jf) {
        fprintf(jf, "\n]}\n");
        fclose(jf);
    }
    qattn_context_free(ctx);
    printf("%d preset(s) ran, %d failed or mismatched\n", ran, failures);
    return (failures || !ran) ? 1 : 0;
}
