/*
 * The host simulation's kernel table: every kernel of qh_kernels.def that
 * the simulated target builds, with a caller that unpacks its parameter
 * block. Compiled together with the kernel sources (host C++).
 */
#include "qh_params.h"
#include "qh_read_params.h"

struct qhsim_kernel {
    const char *name, *source;
    void (*call)(const void *params);
};

#define QH_PARAMS_decode qh_decode_params
#define QH_PARAMS_decode_regs qh_decode_params
#define QH_PARAMS_kv_store qh_kv_store_params
#define QH_PARAMS_mqa_logits qh_mqa_params
#define QH_PARAMS_paged_mqa_logits qh_paged_mqa_params
#define QH_PARAMS_read_bandwidth qh_read_params

/* Kernels another target has are weak and resolve to null here. */
#define QH_KERNEL_SPEC(name, source, targets, waves, insn942, insn12) \
    extern "C" __attribute__((weak)) void name(QH_PARAMS_##source);
#include "qh_kernels.def"
#undef QH_KERNEL_SPEC

#define QH_KERNEL_SPEC(name, source, targets, waves, insn942, insn12) \
    static void call_##name(const void *p) { name(*(const QH_PARAMS_##source *)p); }
#include "qh_kernels.def"
#undef QH_KERNEL_SPEC

extern "C" const qhsim_kernel qhsim_kernels[] = {
#define QH_KERNEL_SPEC(name, source, targets, waves, insn942, insn12) \
    {#name, #source, name ? call_##name : nullptr},
#include "qh_kernels.def"
#undef QH_KERNEL_SPEC
};
extern "C" const unsigned qhsim_kernel_count = sizeof qhsim_kernels / sizeof qhsim_kernels[0];
