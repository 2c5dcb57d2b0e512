/*
 * One id per kernel of qh_kernels.def (the runtime's function table index),
 * apart from the runtime so launch-free code (hip_decode_launch.c, its test)
 * can name kernels without the HIP headers.
 */
#ifndef QH_KERNEL_IDS_H
#define QH_KERNEL_IDS_H

enum qh_kernel_id {
#define QH_KERNEL_SPEC(name, source, targets, waves, insn942, insn12) QH_K_##name,
#include "qh_kernels.def"
#undef QH_KERNEL_SPEC
    QH_K_COUNT
};

#endif /* QH_KERNEL_IDS_H */
