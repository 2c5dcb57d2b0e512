/*
 * The hip* calls of the runtime, served by the host simulation
 * (qh_hostsim.c): memory is host memory, a launch runs every workgroup of
 * the kernel on fibers before it returns, events read the host clock. The
 * simulated device names one AMD target (QH_SIM_GFX942 or QH_SIM_GFX12),
 * whose code paths the kernels then take with its instructions emulated.
 * Nothing it measures is a device time.
 */
#ifndef QH_HOSTSIM_AS_HIP_H
#define QH_HOSTSIM_AS_HIP_H

#include <stddef.h>

typedef int hipError_t;
typedef struct qhsim_stream *hipStream_t;
typedef struct qhsim_event *hipEvent_t;
typedef const char *hipModule_t; /* the kernel source the "code object" holds */
typedef const struct qhsim_kernel *hipFunction_t;

enum { hipSuccess = 0, qhsimErrorNoDevice = 100, qhsimErrorNotFound = 500, qhsimErrorLaunch = 719 };
enum { hipMemcpyHostToDevice = 1, hipMemcpyDeviceToHost = 2 };
enum {
    hipDeviceAttributeMultiprocessorCount,
    hipDeviceAttributeWarpSize,
    hipDeviceAttributeMaxSharedMemoryPerBlock,
    hipDeviceAttributeMaxThreadsPerBlock
};

hipError_t qhsim_get_device_count(int *n);
hipError_t qhsim_set_device(int d);
hipError_t qhsim_get_device(int *d);
hipError_t qhsim_device_get_attribute(int *v, int attr, int d);
hipError_t qhsim_device_name_arch(int d, char *name, size_t nn, char *arch, size_t na);
hipError_t qhsim_malloc(void **p, size_t n);
hipError_t qhsim_free(void *p);
hipError_t qhsim_memcpy_async(void *dst, const void *src, size_t n, int kind, hipStream_t s);
hipError_t qhsim_stream_synchronize(hipStream_t s);
hipError_t qhsim_event_create(hipEvent_t *e);
hipError_t qhsim_event_record(hipEvent_t e, hipStream_t s);
hipError_t qhsim_event_synchronize(hipEvent_t e);
hipError_t qhsim_event_elapsed_time(float *ms, hipEvent_t a, hipEvent_t b);
hipError_t qhsim_event_destroy(hipEvent_t e);
const char *qhsim_error_string(hipError_t e);
hipError_t qhsim_module_load_data(hipModule_t *m, const void *image);
hipError_t qhsim_module_unload(hipModule_t m);
hipError_t qhsim_module_get_function(hipFunction_t *f, hipModule_t m, const char *name);
hipError_t qhsim_module_launch_kernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                      unsigned by, unsigned bz, unsigned shared, hipStream_t s,
                                      void **params, void **extra);

#define hipGetDeviceCount qhsim_get_device_count
#define hipSetDevice qhsim_set_device
#define hipGetDevice qhsim_get_device
#define hipDeviceGetAttribute qhsim_device_get_attribute
#define hipMalloc qhsim_malloc
#define hipFree qhsim_free
#define hipMemcpyAsync qhsim_memcpy_async
#define hipStreamSynchronize qhsim_stream_synchronize
#define hipEventCreate qhsim_event_create
#define hipEventRecord qhsim_event_record
#define hipEventSynchronize qhsim_event_synchronize
#define hipEventElapsedTime qhsim_event_elapsed_time
#define hipEventDestroy qhsim_event_destroy
#define hipGetErrorString qhsim_error_string
#define hipModuleLoadData qhsim_module_load_data
#define hipModuleUnload qhsim_module_unload
#define hipModuleGetFunction qhsim_module_get_function
#define hipModuleLaunchKernel qhsim_module_launch_kernel

#endif /* QH_HOSTSIM_AS_HIP_H */
