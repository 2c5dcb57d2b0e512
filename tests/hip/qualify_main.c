/*
 * qattn_hip_qualify: holds every HIP kernel specialization to its promises
 * from its AMD code objects alone (no GPU).
 *
 *   qattn_hip_qualify --readelf TOOL --objdump TOOL [--table FILE.md]
 *                     [--expect-reject WORD] TARGET:FILE...
 *
 * For each kernel of each code object: no VGPR or SGPR spill, no scratch
 * (private segment), LDS within the target's 64 KiB per workgroup (the tiled
 * decode's dynamic LDS counted at its largest plan), the
 * target's wave size, at least the waves per SIMD its variant promises
 * (qh_kernels.def; computed by qualify_occupancy.c), and the instructions
 * it exists for in its disassembly. Every kernel qh_kernels.def lists for a
 * target must be present. Exit 0 when all hold, 1 otherwise.
 *
 * --expect-reject WORD inverts the verdict for a negative test: exit 0 only
 * if some kernel breaks a rule whose message contains WORD (the kernel list
 * is then not required). It shows the checker can fail.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qh_kernels.def" /* defines the QH_T_* bits before any spec line */
#include "qh_params.h"     /* QH_DEC_LDS_BYTES */
#include "qualify.h"

typedef struct spec {
    const char *name;
    int targets, waves;
    const char *insn942, *insn12;
} spec;

static const spec specs[] = {
#define QH_KERNEL_SPEC(name, source, targets, waves, insn942, insn12) {#name, targets, waves, insn942, insn12},
#include "qh_kernels.def"
#undef QH_KERNEL_SPEC
};
#define N_SPECS ((int)(sizeof specs / sizeof specs[0]))

static qk_kernel kernels[QK_MAX_KERNELS];

static int target_bit(const char *t) {
    if (!strcmp(t, "gfx942")) return QH_T_GFX942;
    if (!strcmp(t, "gfx1200") || !strcmp(t, "gfx1201")) return QH_T_GFX12;
    return 0;
}

static const spec *spec_of(const char *name) {
    for (int i = 0; i < N_SPECS; ++i)
        if (!strcmp(specs[i].name, name)) return &specs[i];
    return NULL;
}

static int n_fail, n_match;
static const char *reject_word;

static void fail(const char *target, const char *kernel, const char *fmt, const char *detail) {
    char msg[512];
    snprintf(msg, sizeof msg, fmt, detail);
    printf("FAIL %-8s %-34s %s\n", target, kernel, msg);
    ++n_fail;
    if (reject_word && strstr(msg, reject_word)) ++n_match;
}

/* The tiled decode kernels take their LDS at launch (plan.shared_bytes):
 * the code object shows none, so they are held to the largest plan's, 16
 * row slots of their head dims (qh_params.h): _d<D> D = Dv = D, the generic
 * _g<M> D = Dv = M, on top of any static LDS. */
static long dynamic_lds(const char *name) {
    const char *u = strncmp(name, "qattn_decode_tiled_", 19) == 0 ? strrchr(name, '_') : NULL;
    if (!u || (u[1] != 'd' && u[1] != 'g') || u[2] < '0' || u[2] > '9') return 0;
    const long hd = strtol(u + 2, NULL, 10);
    return hd == 64 || hd == 128 || hd == 256 ? (long)QH_DEC_LDS_BYTES(hd, hd, QH_DEC_MAX_NR) : 0;
}

/* Checks one kernel; writes its table row. */
static void check(const qk_kernel *k0, FILE *table) {
    qk_kernel kd = *k0;
    kd.lds += dynamic_lds(kd.name);
    const qk_kernel *k = &kd;
    char buf[256];
    const int before = n_fail;
    const spec *sp = reject_word ? NULL : spec_of(k->name);
    if (!reject_word && !sp) fail(k->target, k->name, "%s", "not listed in qh_kernels.def");
    if (k->vgpr < 0 || k->sgpr < 0 || k->lds < 0 || k->scratch < 0 || k->wave < 0 || k->vgpr_spill < 0 ||
        k->sgpr_spill < 0)
        fail(k->target, k->name, "%s", "metadata lacks a resource count");
    if (k->vgpr_spill > 0 || k->sgpr_spill > 0) {
        snprintf(buf, sizeof buf, "%ld VGPRs and %ld SGPRs", k->vgpr_spill, k->sgpr_spill);
        fail(k->target, k->name, "register spill: %s spilled", buf);
    }
    if (k->scratch > 0) {
        snprintf(buf, sizeof buf, "%ld", k->scratch);
        fail(k->target, k->name, "scratch: %s bytes of private segment per lane", buf);
    }
    if (k->lds > 65536) {
        snprintf(buf, sizeof buf, "%ld", k->lds);
        fail(k->target, k->name, "LDS: %s bytes exceed the 65536 of one workgroup", buf);
    }
    const long want_wave = !strcmp(k->target, "gfx942") ? 64 : 32;
    if (k->wave != want_wave) {
        snprintf(buf, sizeof buf, "%ld (target runs %ld)", k->wave, want_wave);
        fail(k->target, k->name, "wave size %s", buf);
    }
    char lim[32];
    const int waves = qk_waves_per_simd(k, lim, sizeof lim);
    if (sp && sp->waves > 0 && waves < sp->waves) {
        snprintf(buf, sizeof buf, "%d waves/SIMD (%s-limited) < the %d promised", waves, lim, sp->waves);
        fail(k->target, k->name, "occupancy: %s", buf);
    }
    char need[128] = "";
    if (sp) {
        snprintf(need, sizeof need, "%s", !strcmp(k->target, "gfx942") ? sp->insn942 : sp->insn12);
        char tmp[128];
        snprintf(tmp, sizeof tmp, "%s", need);
        for (char *tok = strtok(tmp, " "); tok; tok = strtok(NULL, " "))
            if (!qk_has_insn(k, tok)) fail(k->target, k->name, "disassembly lacks %s", tok);
    }
    const int ok = n_fail == before;
    printf("%s %-8s %-34s VGPR %3ld (AGPR %ld) SGPR %3ld spill %ld/%ld scratch %ld LDS %6ld "
           "waves/SIMD %2d (%s)%s%s\n",
           ok ? "ok  " : "bad ", k->target, k->name, k->vgpr, k->agpr, k->sgpr, k->vgpr_spill,
           k->sgpr_spill, k->scratch, k->lds, waves, lim, need[0] ? " has " : "", need);
    if (table)
        fprintf(table, "| %s | `%s` | %ld | %ld | %ld/%ld | %ld | %ld | %d (%s)%s | %s |\n", k->target,
                k->name, k->vgpr, k->sgpr, k->vgpr_spill, k->sgpr_spill, k->scratch, k->lds, waves, lim,
                sp && sp->waves ? (waves >= sp->waves ? ", promise met" : ", PROMISE BROKEN") : "",
                need[0] ? need : "-");
}

int main(int argc, char **argv) {
    const char *readelf = NULL, *objdump = NULL, *table_path = NULL;
    int n = 0;
    char targets[8][16];
    int n_targets = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i];
        if (!strcmp(a, "--readelf") && i + 1 < argc) readelf = argv[++i];
        else if (!strcmp(a, "--objdump") && i + 1 < argc) objdump = argv[++i];
        else if (!strcmp(a, "--table") && i + 1 < argc) table_path = argv[++i];
        else if (!strcmp(a, "--expect-reject") && i + 1 < argc) reject_word = argv[++i];
        else {
            const char *colon = strchr(a, ':');
            if (!colon || !readelf || !objdump) {
                fprintf(stderr, "usage: %s --readelf T --objdump T [--table F] [--expect-reject W] "
                                "TARGET:FILE...\n", argv[0]);
                return 2;
            }
            char target[16];
            snprintf(target, sizeof target, "%.*s", (int)(colon - a), a);
            const int before = n;
            n = qk_read_notes(readelf, target, colon + 1, kernels, n, QK_MAX_KERNELS);
            if (n < 0 || qk_read_disasm(objdump, colon + 1, kernels, n) != 0) return 1;
            if (n == before) {
                fprintf(stderr, "qualify: %s holds no kernel\n", colon + 1);
                return 1;
            }
            int seen = 0;
            for (int t = 0; t < n_targets; ++t) seen |= !strcmp(targets[t], target);
            if (!seen && n_targets < 8) snprintf(targets[n_targets++], 16, "%s", target);
        }
    }
    FILE *table = table_path ? fopen(table_path, "w") : NULL;
    if (table)
        fprintf(table, "| target | kernel | VGPR | SGPR | spills (V/S) | scratch B | LDS B | waves/SIMD "
                       "(limit) | instructions required |\n|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 0; i < n; ++i) check(&kernels[i], table);
    if (!reject_word) {
        for (int t = 0; t < n_targets; ++t) {
            const int bit = target_bit(targets[t]);
            if (!bit) fail(targets[t], "-", "%s", "not an AMD target this backend builds for");
            for (int s = 0; s < N_SPECS; ++s) {
                if (!(specs[s].targets & bit)) continue;
                int found = 0;
                for (int i = 0; i < n; ++i)
                    found |= !strcmp(kernels[i].target, targets[t]) && !strcmp(kernels[i].name, specs[s].name);
                if (!found) fail(targets[t], specs[s].name, "%s", "missing from the code objects");
            }
        }
    }
    if (table) fclose(table);
    if (reject_word) {
        printf("%d violation(s), %d mentioning \"%s\": the checker %s the probe\n", n_fail, n_match,
               reject_word, n_match ? "rejects" : "FAILED TO REJECT");
        return n_match ? 0 : 1;
    }
    printf("%d kernels checked on %d targets, %d violation(s)\n", n, n_targets, n_fail);
    return n_fail ? 1 : 0;
}
