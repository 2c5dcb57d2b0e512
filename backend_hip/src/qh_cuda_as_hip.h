/*
 * The HIP runtime calls this backend uses, mapped onto the CUDA runtime.
 *
 * HIP ships an NVIDIA platform of its own, but the copy available here
 * (Debian's HIP 5.2 headers) does not compile against CUDA 13: several
 * runtime signatures changed (docs/environment.md). The backend needs only the
 * few calls below, so it maps them itself and builds with nvcc.
 *
 * Modules: HIP loads a code object with hipModuleLoadData and looks kernels
 * up by name; the CUDA runtime's library API (cudaLibraryLoadData,
 * cudaLibraryGetKernel) does the same with a fatbin, and a cudaKernel_t
 * may be passed to cudaLaunchKernel. No driver-API library is linked.
 */
#ifndef QH_CUDA_AS_HIP_H
#define QH_CUDA_AS_HIP_H

#include <cuda_runtime_api.h>

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaLibrary_t hipModule_t;
typedef cudaKernel_t hipFunction_t;

#define hipSuccess cudaSuccess
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost

#define hipGetDeviceCount cudaGetDeviceCount
#define hipSetDevice cudaSetDevice
#define hipGetDevice cudaGetDevice
#define hipDeviceGetAttribute cudaDeviceGetAttribute
#define hipDeviceAttributeMultiprocessorCount cudaDevAttrMultiProcessorCount
#define hipDeviceAttributeWarpSize cudaDevAttrWarpSize
#define hipDeviceAttributeMaxSharedMemoryPerBlock cudaDevAttrMaxSharedMemoryPerBlock
#define hipDeviceAttributeMaxThreadsPerBlock cudaDevAttrMaxThreadsPerBlock
#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipMemcpy cudaMemcpy
#define hipMemcpyAsync cudaMemcpyAsync
#define hipStreamSynchronize cudaStreamSynchronize
#define hipEventCreate cudaEventCreate
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime
#define hipEventDestroy cudaEventDestroy
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError

/* Streams and graphs: not used by the backend itself, but by callers that
 * capture its ops (tests/hip/hip_graph.c) through the same names. */
typedef cudaGraph_t hipGraph_t;
typedef cudaGraphExec_t hipGraphExec_t;
typedef cudaGraphNode_t hipGraphNode_t;
#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamBeginCapture cudaStreamBeginCapture
#define hipStreamEndCapture cudaStreamEndCapture
#define hipStreamCaptureModeThreadLocal cudaStreamCaptureModeThreadLocal
#define hipGraphLaunch cudaGraphLaunch
#define hipGraphExecDestroy cudaGraphExecDestroy
#define hipGraphDestroy cudaGraphDestroy
static inline hipError_t hipGraphInstantiate(hipGraphExec_t *exec, hipGraph_t graph, hipGraphNode_t *error_node,
                                             char *log, size_t log_bytes) {
    (void)error_node;
    (void)log;
    (void)log_bytes;
    return cudaGraphInstantiate(exec, graph, 0);
}

static inline hipError_t hipModuleLoadData(hipModule_t *module, const void *image) {
    return cudaLibraryLoadData(module, image, NULL, NULL, 0, NULL, NULL, 0);
}
static inline hipError_t hipModuleUnload(hipModule_t module) { return cudaLibraryUnload(module); }
static inline hipError_t hipModuleGetFunction(hipFunction_t *fn, hipModule_t module, const char *name) {
    return cudaLibraryGetKernel(fn, module, name);
}
static inline hipError_t hipModuleLaunchKernel(hipFunction_t fn, unsigned gx, unsigned gy, unsigned gz,
                                               unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                               hipStream_t stream, void **params, void **extra) {
    (void)extra;
    dim3 grid, block;
    grid.x = gx;
    grid.y = gy;
    grid.z = gz;
    block.x = bx;
    block.y = by;
    block.z = bz;
    return cudaLaunchKernel((const void *)fn, grid, block, params, shared, stream);
}

#endif /* QH_CUDA_AS_HIP_H */
