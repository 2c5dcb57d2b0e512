/*
 * qattn_parity: runs the parity suite of every registered op on one backend
 * against the CPU reference.
 *
 *   qattn_parity --backend vulkan|hip|cpu [--op decode|kv_store|mqa_logits]
 *                [--filter SUBSTRING] [--full] [--variant NAME]
 *                [--no-validation] [--device SELECTOR] [--list] [-v]
 *                [--shape SPEC] [--time N] [--no-check]
 *
 * --shape runs one ad-hoc case instead of the table (decode:
 * B,R,Hkv,G,D,dtype,keys[,page[,splits]] with dtype bf16|fn|fnuz|i8);
 * --time N then times the tested backend's op N times with its own timer
 * and prints the median (a measurement, never a pass/fail criterion);
 * --no-check skips the reference for timing-only runs (the case then
 * counts as neither passed nor failed).
 *
 * --variant forces the decode (or MQA) variant for the tested backend: cases
 * whose gate refuses it are counted as refused, every other case must run
 * that variant. Exit status: 0 all selected cases passed, 1 a failure, 77
 * skipped (backend not built, no device, or no case ran).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "parity_common.h"
#include "parity_ops.h" /* generated: PARITY_OPS, the table of registered ops */
#include "qattn/backends.h"
#include "qattn/qattn.h"

#define SKIP 77

static void usage(void) {
    fprintf(stderr,
            "usage: qattn_parity --backend vulkan|hip|cpu [--op NAME] [--filter S] [--full]\n"
            "                    [--variant NAME] [--no-validation] [--device SEL] [--list] [-v]\n"
            "                    [--shape SPEC] [--time N] [--no-check]\n");
}

int main(int argc, char **argv) {
    const char *backend = NULL, *op = NULL, *device = NULL;
    int validation = 1, list = 0;
    parity_ctx pc;
    memset(&pc, 0, sizeof pc);
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--backend") && next) backend = argv[++i];
        else if (!strcmp(a, "--op") && next) op = argv[++i];
        else if (!strcmp(a, "--filter") && next) pc.filter = argv[++i];
        else if (!strcmp(a, "--variant") && next) pc.variant = argv[++i];
        else if (!strcmp(a, "--device") && next) device = argv[++i];
        else if (!strcmp(a, "--shape") && next) pc.shape = argv[++i];
        else if (!strcmp(a, "--time") && next) pc.time_iters = atoi(argv[++i]);
        else if (!strcmp(a, "--no-check")) pc.no_check = 1;
        else if (!strcmp(a, "--full")) pc.full = 1;
        else if (!strcmp(a, "--no-validation")) validation = 0;
        else if (!strcmp(a, "--list")) list = 1;
        else if (!strcmp(a, "-v")) pc.verbose = 1;
        else {
            usage();
            return 2;
        }
    }
    if (list) {
        for (size_t i = 0; i < sizeof PARITY_OPS / sizeof PARITY_OPS[0]; ++i)
            if (PARITY_OPS[i]) printf("%s\n", PARITY_OPS[i]->name);
        return 0;
    }
    if (!backend) {
        usage();
        return 2;
    }
    const qattn_backend_iface *iface = qattn_backend_by_name(backend);
    if (!iface) {
        printf("SKIP: backend %s is not built into this binary\n", backend);
        return SKIP;
    }
    char err[1024] = "";
    if (qattn_context_create(qattn_backend_cpu(), NULL, &pc.ref, err, sizeof err) != QATTN_OK) {
        fprintf(stderr, "cannot create the cpu reference context: %s\n", err);
        return 1;
    }
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    o.device = device;
    o.debug_validation = validation && strcmp(backend, "vulkan") == 0;
    qattn_status s = qattn_context_create(iface, &o, &pc.dev, err, sizeof err);
    if (s == QATTN_ERR_BACKEND_UNAVAILABLE && !strstr(err, "validation")) {
        printf("SKIP: %s\n", err);
        qattn_context_free(pc.ref);
        return SKIP;
    }
    if (s != QATTN_OK) {
        fprintf(stderr, "cannot create the %s context: %s: %s\n", backend, qattn_status_name(s), err);
        qattn_context_free(pc.ref);
        return 1;
    }
    pc.backend = backend;
    qattn_get_caps(pc.dev, &pc.caps);
    printf("parity: %s on %s (subgroup %u..%u, %u B shared, %d matrix shapes)%s%s\n", backend,
           pc.caps.arch, (unsigned)pc.caps.subgroup_size_min, (unsigned)pc.caps.subgroup_size_max,
           (unsigned)pc.caps.max_shared_bytes, (int)pc.caps.n_matrix_shapes,
           o.debug_validation ? ", validation on" : "", pc.full ? ", full sweep" : "");
    printf("parity: seed 0x%016llx (set QATTN_TEST_SEED to change)\n",
           (unsigned long long)qt_base_seed());

    int ran_op = 0;
    for (size_t i = 0; i < sizeof PARITY_OPS / sizeof PARITY_OPS[0]; ++i) {
        const parity_op *p = PARITY_OPS[i];
        if (!p || (op && strcmp(op, p->name) != 0)) continue;
        ran_op = 1;
        const int before_pass = pc.n_pass, before_fail = pc.n_fail, before_ref = pc.n_refused;
        p->run(&pc);
        printf("parity: %-10s %d passed, %d failed, %d refused by the variant gate\n", p->name,
               pc.n_pass - before_pass, pc.n_fail - before_fail, pc.n_refused - before_ref);
    }
    qattn_context_free(pc.dev);
    qattn_context_free(pc.ref);
    if (!ran_op) {
        printf("SKIP: no registered op named %s\n", op ? op : "(any)");
        return SKIP;
    }
    if (pc.n_fail) return 1;
    if (pc.n_pass == 0 && !(pc.no_check && pc.time_iters > 0)) {
        printf("SKIP: no case ran\n");
        return SKIP;
    }
    return 0;
}
