/* qattn-bench: runs named presets (or decode shapes given with --shape) on a
 * backend, checks every output against the cpu reference before reporting
 * its timing, prints one line per preset as it finishes and optionally
 * writes JSON with every sample. Before the presets it measures the read
 * bandwidth of the device through the same backend (qattn_read_stream) and
 * reports each decode and KV-store preset as a share of it, and of the copy
 * rate given with --copy-gbps (the torch baseline's, from the same run).
 * Each decode preset also times qattn_decode_read over the same call, the
 * reads of its own access pattern alone, and prints its share of that
 * (%pat: that read's time over the decode's).
 * `qattn-bench --help` lists the options.
 * --embed-record N and --pipeline-cache FILE (Vulkan, bench/bench_embed.c) measure
 * recorded command buffers and pipeline-cache reuse.
 * MQA presets planned on the matrix unit print the matrix ceiling of their
 * tile shape first (bench_mqa.c) and their share of it on their row.
 * Exit status 0 only when every preset ran and matched the reference. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "qattn/backends.h"
#include "qattn/qattn.h"
#ifdef QATTN_BENCH_HAVE_VULKAN
#include "bench_embed.h"
#include "qattn/vulkan.h"
#endif

/* auto: the first backend (hip, then vulkan, then cpu) that opens a device;
 * a Vulkan device that is itself a CPU rasterizer (llvmpipe) still counts,
 * since it runs the Vulkan shaders for real. */
static qattn_context *open_backend(const char *want, const char *device, char *err, size_t n) {
    qattn_context_options opt = QATTN_CONTEXT_OPTIONS_INIT;
    opt.device = device;
    const qattn_backend_iface *b;
    const char *name = NULL;
    for (int i = 0; (b = qattn_backend_at(i, &name)); ++i) {
        if (strcmp(want, "auto") != 0 && strcmp(want, name) != 0) continue;
        qattn_context *ctx = NULL;
        if (qattn_context_create(b, &opt, &ctx, err, n) == QATTN_OK) return ctx;
        if (strcmp(want, "auto") == 0) fprintf(stderr, "qattn-bench: %s unavailable: %s\n", name, err);
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

static const char USAGE[] =
    "usage: qattn-bench [options]\n"
    "  --backend auto|cpu|vulkan|hip   backend to run on (auto: hip, then vulkan, then cpu)\n"
    "  --device SEL                    device index or name substring\n"
    "  --op decode|kv_store|mqa_logits|paged_mqa_logits only presets of this op\n"
    "  --preset A,B,...                these presets (see --list)\n"
    "  --seeds                         the seeds' full-size presets (default: the quick ones)\n"
    "  --shape SPEC                    a decode shape instead of presets (repeatable):\n"
    "                                  B=16,R=1,Hq=32,Hkv=8,D=128,dtype=fp8_e4m3fn,keys=32768,page=16\n"
    "                                  [,splits=N][,window=W][,softcap=C]; dtype fp8_e4m3fn,\n"
    "                                  fp8_e4m3fnuz, int8 or bf16; keys not given default to\n"
    "                                  B1 R1 Hq32 Hkv8 D128 fp8_e4m3fn keys 8192 page 16\n"
    "  --iters N, --warmup N, --warmup-ms MS   timed runs; warm-up runs and minimum warm-up time\n"
    "  --seed S                        input seed (mixed into each preset's own)\n"
    "  --pages shuffled|in-order       decode page tables: one shuffled pool over all\n"
    "                                  requests (default) or each request's pages in order\n"
    "  --read-mib N                    MiB the read-bandwidth kernel streams (0: skip it;\n"
    "                                  default 1024 on GPUs, 64 on CPU devices)\n"
    "  --copy-gbps X                   copy rate to report against (torch_baseline.py's)\n"
    "  --json FILE                     write every result and sample as JSON\n"
    "  --embed-record N                vulkan: N decodes recorded into one caller command buffer\n"
    "  --pipeline-cache FILE           vulkan: load/save the pipeline cache, count pipelines made\n"
    "  --list                          list the presets and their shapes\n"
    "  --help                          this text\n";

/* s as the body of a JSON string (quotes, backslashes and control
 * characters escaped; error texts quote names). */
static const char *json_str(const char *s, char *buf, size_t n) {
    size_t k = 0;
    for (; *s && k + 7 < n; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') buf[k++] = '\\', buf[k++] = (char)c;
        else if (c < 0x20) k += (size_t)snprintf(buf + k, n - k, "\\u%04x", c);
        else buf[k++] = (char)c;
    }
    buf[k] = '\0';
    return buf;
}

static void json_result(FILE *f, const bench_preset *p, const qattn_device_caps *caps, const char *backend,
                        const bench_result *r, int first) {
    char dev[512], msg[1024];
    fprintf(f, "%s\n  {\"preset\": \"%s\", \"op\": \"%s\", \"backend\": \"%s\", \"arch\": \"%s\", "
               "\"device\": \"%s\", \"variant\": \"%s\", \"splits\": %d, \"timer\": \"%s\", "
               "\"median_us\": %.3f, \"min_us\": %.3f, \"max_us\": %.3f, \"bytes\": %.0f, \"flops\": %.0f, "
               "\"verified\": %s, \"worst_err_over_tol\": %.4g, \"ceiling_tflops\": %.3f, \"error\": \"%s\", "
               "\"pattern_us\": %.3f, \"pattern_verified\": %s, ",
            first ? "" : ",", p->name, bench_op_name(p->op), backend, caps->arch,
            json_str(caps->device_name, dev, sizeof dev), r->variant, r->splits, r->timer, r->median_us, r->min_us,
            r->max_us, r->bytes, r->flops, r->verified ? "true" : "false", r->worst_ratio, r->ceiling_tflops,
            json_str(r->error, msg, sizeof msg), r->pattern_us, r->pattern_verified ? "true" : "false");
    if (p->op == BENCH_PAGED_MQA)
        fprintf(f, "\"floor_bytes\": %.0f, \"shape\": {\"B\": %d, \"N\": %d, \"H\": %d, \"D\": %d, \"dtype\": \"%s\", "
                   "\"context\": %d, \"page\": %d}, ",
                r->floor_bytes, p->batch, p->rows, p->heads, p->mqa_dim, qattn_dtype_name(p->kv_dtype), p->keys,
                p->page_size);
    else if (p->op == BENCH_MQA_LOGITS)
        fprintf(f, "\"shape\": {\"S\": %d, \"S_kv\": %d, \"H\": %d, \"D\": %d, \"dtype\": \"%s\"}, ", p->S,
                p->S_kv, p->heads, p->mqa_dim, qattn_dtype_name(p->kv_dtype));
    else
        fprintf(f, "\"shape\": {\"B\": %d, \"R\": %d, \"Hq\": %d, \"Hkv\": %d, \"D\": %d, \"dtype\": \"%s\", "
                   "\"keys\": %d, \"page\": %d, \"splits\": %d, \"window\": %d, \"softcap\": %g, \"q\": \"%s\"}, ",
                p->batch, p->rows, p->q_heads, p->kv_heads, p->head_dim, qattn_dtype_name(p->kv_dtype), p->keys,
                p->page_size, p->splits, p->window, (double)p->softcap, p->q_dtype == QATTN_F16 ? "f16" : "bf16");
    fprintf(f, "\"samples_us\": [");
    for (int i = 0; i < r->n_samples; ++i) fprintf(f, "%s%.3f", i ? ", " : "", r->samples_us[i]);
    fprintf(f, "]}");
}

/* A device that is itself the host CPU (lavapipe, the reference) streams a
 * small buffer: it has no separate memory, and large ones only take time. */
static int cpu_device(qattn_context *ctx, const qattn_device_caps *caps) {
    return !strcmp(qattn_backend_name(ctx), "cpu") || strstr(caps->device_name, "llvmpipe") ||
           strstr(caps->device_name, "SwiftShader");
}

/* Share of a rate, as printed: "-" when either side is unknown. */
static void pct(char *out, size_t n, double gbs, double of) {
    const double x = gbs > 0 && of > 0 ? 100.0 * gbs / of : 0;
    if (x >= 10) snprintf(out, n, "%.0f%%", x);
    else if (x > 0) snprintf(out, n, "%.1f%%", x);
    else snprintf(out, n, "-");
}

#define MAX_SHAPES 16

int main(int argc, char **argv) {
    const char *backend = "auto", *device = NULL, *op = NULL, *presets = NULL, *json = NULL;
    int seeds = 0, read_mib = -1, n_shapes = 0;
    double copy_gbps = 0;
    bench_preset shapes[MAX_SHAPES];
    bench_config cfg = {.warmup = 5, .iters = 30, .seed = 0, .warmup_min_ms = 500.0};
    int iters_given = 0;
    setvbuf(stdout, NULL, _IOLBF, 0);
    int embed_record = 0;              /* --embed-record N (bench_embed.c) */
    const char *pipeline_cache = NULL; /* --pipeline-cache FILE (bench_embed.c) */
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            fputs(USAGE, stdout);
            return 0;
        } else if (!strcmp(a, "--list")) {
            for (int k = 0; k < BENCH_PRESET_COUNT; ++k) {
                char shape[160];
                bench_preset_describe(&BENCH_PRESETS[k], shape, sizeof shape);
                printf("%-26s %-10s %-5s %s\n", BENCH_PRESETS[k].name, bench_op_name(BENCH_PRESETS[k].op),
                       BENCH_PRESETS[k].small == 2 ? "named" : BENCH_PRESETS[k].small ? "quick" : "seed", shape);
            }
            return 0;
        } else if (!strcmp(a, "--seeds")) {
            seeds = 1;
        } else if (v && !strcmp(a, "--shape")) {
            char why[256];
            if (n_shapes == MAX_SHAPES) {
                fprintf(stderr, "qattn-bench: at most %d --shape options\n", MAX_SHAPES);
                return 2;
            }
            if (bench_parse_shape(argv[++i], &shapes[n_shapes], why, sizeof why) != 0) {
                fprintf(stderr, "qattn-bench: %s\n", why);
                return 2;
            }
            static char names[MAX_SHAPES][16];
            snprintf(names[n_shapes], sizeof names[n_shapes], "shape%d", n_shapes + 1);
            shapes[n_shapes].name = names[n_shapes];
            ++n_shapes;
        } else if (v && !strcmp(a, "--backend")) backend = argv[++i];
        else if (v && !strcmp(a, "--device")) device = argv[++i];
        else if (v && !strcmp(a, "--op")) op = argv[++i];
        else if (v && !strcmp(a, "--preset")) presets = argv[++i];
        else if (v && !strcmp(a, "--json")) json = argv[++i];
        else if (v && !strcmp(a, "--iters")) cfg.iters = atoi(argv[++i]), iters_given = 1;
        else if (v && !strcmp(a, "--warmup")) cfg.warmup = atoi(argv[++i]), iters_given = 1;
        else if (v && !strcmp(a, "--seed")) cfg.seed = strtoull(argv[++i], NULL, 0);
        else if (v && !strcmp(a, "--warmup-ms")) cfg.warmup_min_ms = atof(argv[++i]), iters_given = 1;
        else if (v && !strcmp(a, "--pages")) {
            const char *m = argv[++i];
            if (!strcmp(m, "in-order")) cfg.pages_in_order = 1;
            else if (!strcmp(m, "shuffled")) cfg.pages_in_order = 0;
            else {
                fprintf(stderr, "qattn-bench: --pages takes in-order or shuffled, not '%s'\n", m);
                return 2;
            }
        }
        else if (v && !strcmp(a, "--read-mib")) read_mib = atoi(argv[++i]);
        else if (v && !strcmp(a, "--copy-gbps")) copy_gbps = atof(argv[++i]);
        else if (v && !strcmp(a, "--embed-record")) embed_record = atoi(argv[++i]);
        else if (v && !strcmp(a, "--pipeline-cache")) pipeline_cache = argv[++i];
        else {
            fprintf(stderr, "qattn-bench: unknown or incomplete argument %s\n%s", a, USAGE);
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
#ifdef QATTN_BENCH_HAVE_VULKAN
    if (pipeline_cache) bench_embed_cache_load(ctx, pipeline_cache);
#else
    if (embed_record > 0 || pipeline_cache) {
        fprintf(stderr, "qattn-bench: --embed-record and --pipeline-cache need the vulkan backend\n");
        return 2;
    }
#endif
    /* The reference is exact, not fast: a few runs show its cost. */
    if (!iters_given && !strcmp(qattn_backend_name(ctx), "cpu"))
        cfg.warmup = 1, cfg.iters = 3, cfg.warmup_min_ms = 0.0;
    printf("qattn %s | backend %s | device %s (%s) | decode pages %s | >= %d warm-up runs and >= %.0f ms, then %d timed runs per preset\n",
           qattn_version_string(), qattn_backend_name(ctx), caps.device_name, caps.arch,
           cfg.pages_in_order ? "in order" : "shuffled", cfg.warmup,
           cfg.warmup_min_ms, cfg.iters);
    for (int k = 0; k < n_shapes; ++k) {
        char shape[160];
        bench_preset_describe(&shapes[k], shape, sizeof shape);
        printf("%s: decode %s\n", shapes[k].name, shape);
    }

    if (copy_gbps > 0) printf("copy rate given: %.0f GB/s (%%copy below)\n", copy_gbps);
    /* The ceiling first: what a plain streaming read reaches on this device
     * through this backend. */
    FILE *jf = json ? fopen(json, "w") : NULL;
    if (json && !jf) fprintf(stderr, "qattn-bench: cannot write %s\n", json);
    if (jf) fprintf(jf, "{\"version\": \"%s\", \"decode_pages\": \"%s\", ", qattn_version_string(), cfg.pages_in_order ? "in-order" : "shuffled");
    if (read_mib < 0) read_mib = cpu_device(ctx, &caps) ? 64 : 1024;
    double read_gbps = 0;
    int failures = 0, read_failed = 0;
    if (read_mib > 0) {
        char msg[1024];
        bench_result r;
        memset(&r, 0, sizeof r);
        bench_config rc = cfg;
        if (rc.iters < 10) rc.iters = 10; /* cheap, and the ceiling wants a steady median */
        int ok = bench_read_bandwidth(ctx, (uint64_t)read_mib << 20, &rc, &r) == 0;
        if (ok && r.verified) {
            read_gbps = r.bytes / (r.median_us * 1e3);
            printf("read bandwidth %.*f GB/s: qattn_read_stream over %.0f MiB, median %.2f us (%.2f-%.2f) of %d "
                   "runs, %s timer, sum matched\n",
                   read_gbps < 100 ? 1 : 0, read_gbps, r.bytes / 1048576.0, r.median_us, r.min_us, r.max_us, r.n_samples, r.timer);
        } else {
            read_failed = 1;
            printf("read bandwidth FAILED: %s\n", ok ? "the kernel's sum did not match the buffer" : r.error);
        }
        if (jf)
            fprintf(jf, "\"read_bandwidth\": {\"GBps\": %.3f, \"bytes\": %.0f, \"median_us\": %.3f, \"min_us\": %.3f, "
                        "\"max_us\": %.3f, \"timer\": \"%s\", \"verified\": %s, \"error\": \"%s\", \"samples_us\": [",
                    read_gbps, r.bytes, r.median_us, r.min_us, r.max_us, r.timer, r.verified ? "true" : "false",
                    json_str(r.error, msg, sizeof msg));
        for (int i = 0; jf && i < r.n_samples; ++i) fprintf(jf, "%s%.3f", i ? ", " : "", r.samples_us[i]);
        if (jf) fprintf(jf, "]}, ");
        free(r.samples_us);
    }
    if (jf && copy_gbps > 0) fprintf(jf, "\"copy_gbps_given\": %.3f, ", copy_gbps);
    if (jf) fprintf(jf, "\"results\": [");

    printf("%-26s %-10s %-14s %6s %10s %10s %10s %9s %8s %6s %6s %6s  %s\n", "preset", "op", "variant", "splits",
           "median_us", "min_us", "max_us", "GB/s", "TFLOP/s", "%read", "%pat", "%copy", "check vs cpu reference");
    int ran = 0;
    const int n_list = n_shapes ? n_shapes : BENCH_PRESET_COUNT;
    for (int k = 0; k < n_list; ++k) {
        const bench_preset *p = n_shapes ? &shapes[k] : &BENCH_PRESETS[k];
        /* small 2: by name, or with --seeds and --op (kept out of the plain seeds run) */
        const int chosen = presets ? wanted(presets, p->name)
                           : p->small == 2 ? seeds && op != NULL
                           : seeds ? !p->small : p->small;
        if (!n_shapes && !chosen) continue;
        if (op && strcmp(op, bench_op_name(p->op)) != 0) continue;
        bench_result r;
        memset(&r, 0, sizeof r);
        int rc =
#ifdef QATTN_BENCH_HAVE_VULKAN
                 embed_record > 0 && p->op == BENCH_DECODE ? bench_embed_record(ctx, p, &cfg, embed_record, &r) :
#endif
                 p->op == BENCH_DECODE     ? bench_decode(ctx, p, &cfg, &r)
                 : p->op == BENCH_KV_STORE ? bench_kv_store(ctx, p, &cfg, &r)
                 : p->op == BENCH_PAGED_MQA ? bench_paged_mqa_logits(ctx, p, &cfg, &r)
                                           : bench_mqa_logits(ctx, p, &cfg, &r);
        ++ran;
        if (rc != 0 || !r.verified) ++failures;
        if (rc != 0) {
            printf("%-26s %-10s FAILED: %s\n", p->name, bench_op_name(p->op), r.error);
        } else {
            double gbs = r.bytes / (r.median_us * 1e3), tf = r.flops / (r.median_us * 1e6);
            /* Shares of the ceilings only for the ops that are meant to be
             * memory-bound; MQA logits is a matrix op. */
            char pr[16], pc[16];
            const int mem = p->op != BENCH_MQA_LOGITS;
            pct(pr, sizeof pr, mem ? gbs : 0, read_gbps);
            pct(pc, sizeof pc, mem ? gbs : 0, copy_gbps);
            char share[96] = "";
            if (r.ceiling_tflops > 0)
                snprintf(share, sizeof share, ", %.1f %% of the matrix ceiling", 100.0 * tf / r.ceiling_tflops);
            /* decode: its share of its own access pattern's read time */
            char pp[16] = "-";
            if (r.pattern_us > 0 && r.pattern_verified) pct(pp, sizeof pp, r.pattern_us, r.median_us);
            if (r.pattern_us > 0)
                snprintf(share, sizeof share, ", decode-pattern read %.2f us%s", r.pattern_us,
                         r.pattern_verified ? "" : " (sum MISMATCH)");
            if (r.floor_bytes > 0) {
                /* The op's floor: its K read once at the read rate, or its
                 * FLOPs at the matrix ceiling, whichever is longer. */
                const double mem_us = read_gbps > 0 ? r.floor_bytes / (read_gbps * 1e3) : 0;
                const double mat_us = r.ceiling_tflops > 0 ? r.flops / (r.ceiling_tflops * 1e6) : 0;
                const double fl = mem_us > mat_us ? mem_us : mat_us;
                if (fl > 0)
                    snprintf(share, sizeof share, ", %.0f%% mem %.0f%% mat floor, x%.2f", 100.0 * mem_us / r.median_us,
                             100.0 * mat_us / r.median_us, r.median_us / fl);
            }
            printf("%-26s %-10s %-14s %6d %10.2f %10.2f %10.2f %9.1f %8.2f %6s %6s %6s  %s (worst err/tol %.3g, %s timer%s)\n",
                   p->name, bench_op_name(p->op), r.variant, r.splits, r.median_us, r.min_us, r.max_us, gbs, tf, pr,
                   pp, pc, r.verified ? "matched" : "MISMATCH", r.worst_ratio, r.timer, share);
            if (r.pattern_note[0]) printf("%-26s   %s\n", "", r.pattern_note);
        }
        if (jf) json_result(jf, p, &caps, qattn_backend_name(ctx), &r, ran == 1);
        free(r.samples_us);
    }
    if (jf) {
        fprintf(jf, "\n]}\n");
        fclose(jf);
    }
#ifdef QATTN_BENCH_HAVE_VULKAN
    if (pipeline_cache && bench_embed_cache_save(ctx, pipeline_cache) != 0) ++failures;
#endif
    qattn_context_free(ctx);
    printf("%d preset(s) ran, %d failed or mismatched%s\n", ran, failures,
           read_failed ? "; the read-bandwidth run failed" : "");
    return (failures || read_failed || !ran) ? 1 : 0;
}
