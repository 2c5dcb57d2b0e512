/*
 * The code-object qualification of the HIP kernels: what it reads from an
 * AMD code object (llvm-readelf --notes, llvm-objdump -d) and the rules it
 * holds each kernel to. See tests/hip.cmake for how CI runs it.
 */
#ifndef QATTN_HIP_QUALIFY_H
#define QATTN_HIP_QUALIFY_H

#define QK_NAME 96
#define QK_MAX_KERNELS 256
#define QK_MAX_INSNS 512

/* One kernel of one code object. */
typedef struct qk_kernel {
    char name[QK_NAME];
    char target[16];    /* gfx942, gfx1200, gfx1201 */
    char file[256];
    long vgpr, agpr, sgpr, vgpr_spill, sgpr_spill, scratch, lds, wave, max_block;
    /* distinct instruction mnemonics of its disassembly */
    int n_insns;
    char insns[QK_MAX_INSNS][48];
} qk_kernel;

/* Appends every kernel of `file` (metadata notes) to ks; returns the new
 * count or -1 with a message on stderr. */
int qk_read_notes(const char *readelf, const char *target, const char *file, qk_kernel *ks, int n,
                  int cap);
/* Fills the instruction sets of the kernels of `file` from its
 * disassembly; returns 0 or -1. */
int qk_read_disasm(const char *objdump, const char *file, qk_kernel *ks, int n);
/* Whether kernel k's disassembly holds `mnemonic` (an exact mnemonic, or
 * one of its encodings: name followed by "_e32", "_e64", "_sdwa", ...). */
int qk_has_insn(const qk_kernel *k, const char *mnemonic);

/* Waves per SIMD this kernel can keep resident on its target: the minimum
 * of the VGPR, SGPR (gfx9) and LDS limits and the hardware maximum.
 * `why` receives which limit binds. */
int qk_waves_per_simd(const qk_kernel *k, char *why, int why_n);

#endif
