/* popen/pclose are POSIX, outside C11. */
#define _POSIX_C_SOURCE 200809L
/* Reads an AMD code object through llvm-readelf (kernel metadata) and
 * llvm-objdump (disassembly). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qualify.h"

static FILE *run(const char *tool, const char *args, const char *file) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "'%s' %s '%s'", tool, args, file);
    return popen(cmd, "r");
}

/* Kernel-level keys sit at indent 4 ("    .key: v") or open an entry at
 * indent 2 ("  - .key: v"); deeper lines belong to .args. */
int qk_read_notes(const char *readelf, const char *target, const char *file, qk_kernel *ks, int n,
                  int cap) {
    FILE *f = run(readelf, "--notes", file);
    if (!f) {
        fprintf(stderr, "qualify: cannot run %s\n", readelf);
        return -1;
    }
    char line[512];
    qk_kernel *k = NULL;
    int in_kernels = 0;
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "amdhsa.kernels:", 15)) {
            in_kernels = 1;
            continue;
        }
        if (in_kernels && line[0] != ' ' && line[0] != '\n') in_kernels = 0;
        if (!in_kernels) continue;
        const char *key = NULL;
        if (!strncmp(line, "  - .", 5)) {
            if (n == cap) {
                fprintf(stderr, "qualify: more than %d kernels\n", cap);
                pclose(f);
                return -1;
            }
            k = &ks[n++];
            memset(k, 0, sizeof *k);
            snprintf(k->target, sizeof k->target, "%s", target);
            snprintf(k->file, sizeof k->file, "%s", file);
            k->vgpr = k->sgpr = k->lds = k->wave = k->scratch = -1;
            k->vgpr_spill = k->sgpr_spill = -1;
            key = line + 4;
        } else if (!strncmp(line, "    .", 5)) {
            key = line + 4;
        }
        if (!key || !k) continue;
        char name[64], val[256];
        if (sscanf(key, ".%63[^:]: %255s", name, val) != 2) continue;
        long v = strtol(val, NULL, 10);
        if (!strcmp(name, "name")) snprintf(k->name, sizeof k->name, "%s", val);
        else if (!strcmp(name, "vgpr_count")) k->vgpr = v;
        else if (!strcmp(name, "agpr_count")) k->agpr = v;
        else if (!strcmp(name, "sgpr_count")) k->sgpr = v;
        else if (!strcmp(name, "vgpr_spill_count")) k->vgpr_spill = v;
        else if (!strcmp(name, "sgpr_spill_count")) k->sgpr_spill = v;
        else if (!strcmp(name, "private_segment_fixed_size")) k->scratch = v;
        else if (!strcmp(name, "group_segment_fixed_size")) k->lds = v;
        else if (!strcmp(name, "wavefront_size")) k->wave = v;
        else if (!strcmp(name, "max_flat_workgroup_size")) k->max_block = v;
    }
    int rc = pclose(f);
    if (rc != 0) {
        fprintf(stderr, "qualify: %s --notes %s failed (%d)\n", readelf, file, rc);
        return -1;
    }
    return n;
}

static void add_insn(qk_kernel *k, const char *m) {
    for (int i = 0; i < k->n_insns; ++i)
        if (!strcmp(k->insns[i], m)) return;
    if (k->n_insns < QK_MAX_INSNS) snprintf(k->insns[k->n_insns++], sizeof k->insns[0], "%s", m);
}

int qk_read_disasm(const char *objdump, const char *file, qk_kernel *ks, int n) {
    FILE *f = run(objdump, "-d --no-show-raw-insn", file);
    if (!f) {
        fprintf(stderr, "qualify: cannot run %s\n", objdump);
        return -1;
    }
    char line[1024];
    qk_kernel *k = NULL;
    while (fgets(line, sizeof line, f)) {
        char sym[QK_NAME];
        /* "0000000000001c00 <qattn_kv_store_bf16>:" starts a function */
        if (isxdigit((unsigned char)line[0]) && sscanf(line, "%*s <%95[^>]>:", sym) == 1) {
            k = NULL;
            for (int i = 0; i < n; ++i)
                if (!strcmp(ks[i].name, sym) && !strcmp(ks[i].file, file)) k = &ks[i];
            continue;
        }
        if (!k || line[0] != '\t') continue;
        char m[48];
        if (sscanf(line, " %47s", m) == 1) add_insn(k, m);
    }
    int rc = pclose(f);
    if (rc != 0) {
        fprintf(stderr, "qualify: %s -d %s failed (%d)\n", objdump, file, rc);
        return -1;
    }
    return 0;
}

int qk_has_insn(const qk_kernel *k, const char *mnemonic) {
    size_t n = strlen(mnemonic);
    for (int i = 0; i < k->n_insns; ++i)
        if (!strncmp(k->insns[i], mnemonic, n) && (k->insns[i][n] == '\0' || k->insns[i][n] == '_'))
            return 1;
    return 0;
}
