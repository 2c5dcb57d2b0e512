/*
 * The one place that decides which runtime the host side talks to:
 * QH_PLATFORM_AMD (ROCm's HIP runtime, libamdhip64), QH_PLATFORM_NVIDIA
 * (the CUDA runtime through qh_cuda_as_hip.h) or QH_PLATFORM_HOSTSIM (the
 * CPU simulation of one AMD target, hostsim/, for CI). CMake defines one.
 * Everything else in backend_hip/src is written against the hip* names.
 */
#ifndef QH_PLATFORM_H
#define QH_PLATFORM_H

#if defined(QH_PLATFORM_AMD)
#ifndef __HIP_PLATFORM_AMD__
#define __HIP_PLATFORM_AMD__ 1
#endif
#include <hip/hip_runtime_api.h>
#define QH_PLATFORM_NAME "amd"
#elif defined(QH_PLATFORM_NVIDIA)
#include "qh_cuda_as_hip.h"
#define QH_PLATFORM_NAME "nvidia"
#elif defined(QH_PLATFORM_HOSTSIM)
#include "hostsim/qh_hostsim_as_hip.h"
#define QH_PLATFORM_NAME "hostsim"
#else
#error "define QH_PLATFORM_AMD, QH_PLATFORM_NVIDIA or QH_PLATFORM_HOSTSIM"
#endif

#endif /* QH_PLATFORM_H */
