/*
 * The portable device layer of the HIP kernels: thread/block indices,
 * barriers, lane shuffles and math, written once for the compilers that
 * build these sources.
 *
 * - AMD (clang -x hip, device-only, -nogpuinc -nogpulib): everything comes
 *   from clang builtins, so the code objects need neither HIP's headers nor
 *   ROCm's device libraries. That is what lets CI build gfx1200/gfx1201 with
 *   a clang whose device libraries predate RDNA4 (docs/environment.md).
 * - NVIDIA (nvcc -x cu): CUDA's own built-ins.
 * - QH_HOSTSIM (clang -x c++ for the host CPU): the host simulation of one
 *   AMD target (QH_SIM_GFX942: wave64; QH_SIM_GFX12: wave32) that CI runs
 *   the parity suite on. Threads are fibers (src/hostsim/qh_hostsim.c);
 *   the target's instructions (packed fp8 conversion, MFMA, WMMA) are
 *   emulated from their documented semantics next to each primitive
 *   (qh_fp8.h, qh_matrix.h), so the
 *   arch-specific code paths and fragment layouts of the kernels run too.
 *
 * Kernels never read blockDim/gridDim: the host passes every extent in the
 * parameter block, so no implicit kernel argument is needed on AMD either.
 */
#ifndef QH_DEVICE_H
#define QH_DEVICE_H

#include <stdint.h>

#if defined(QH_HOSTSIM)
#include <math.h>
#include <string.h>
#elif defined(__AMDGCN__) || defined(__AMDGPU__)
#define QH_AMD 1
#elif defined(__CUDACC__)
#define QH_NVIDIA 1
#include <cuda_fp16.h>
#endif

/* Which AMD ISA family the code targets (clang defines __gfxNNN__ on a
 * device pass; the host simulation names its target). */
#if defined(__gfx942__) || defined(QH_SIM_GFX942)
#define QH_GFX942 1
#endif
#if defined(__gfx1200__) || defined(__gfx1201__) || defined(QH_SIM_GFX12)
#define QH_GFX12 1
#endif

/* ---- language attributes ---- */
#if defined(QH_AMD)
#ifndef __global__
#define __global__ __attribute__((global))
#endif
#ifndef __device__
#define __device__ __attribute__((device))
#endif
#ifndef __shared__
#define __shared__ __attribute__((shared))
#endif
#ifndef __forceinline__
#define __forceinline__ inline __attribute__((always_inline))
#endif
/* Largest block the kernel is launched with: lets the register allocator use
 * the budget that block size really leaves (the default assumes 1024). */
#define QH_LAUNCH_BOUNDS(n) __attribute__((amdgpu_flat_work_group_size(1, n)))
/* A kernel that promises `w` waves per SIMD: the compiler must fit in the
 * registers that occupancy leaves, and the qualification test checks it. */
#define QH_WAVES_PER_SIMD(w) __attribute__((amdgpu_waves_per_eu(w)))
#define QH_WAVE __AMDGCN_WAVEFRONT_SIZE
#elif defined(QH_HOSTSIM)
#define __global__
#define __device__
/* One block runs at a time, so a function-local static is the block's LDS. */
#define __shared__ static
#define __forceinline__ inline
#define QH_LAUNCH_BOUNDS(n)
#define QH_WAVES_PER_SIMD(w)
#if defined(QH_GFX942)
#define QH_WAVE 64
#else
#define QH_WAVE 32
#endif
#else
#define QH_LAUNCH_BOUNDS(n) __launch_bounds__(n)
#define QH_WAVES_PER_SIMD(w)
#define QH_WAVE 32
#endif

#define QH_DEV static __device__ __forceinline__
/* Every kernel is extern "C": the runtime finds it in the code object by
 * its plain name (hipModuleGetFunction / cudaLibraryGetKernel). */
#define QH_KERNEL extern "C" __global__

#if defined(QH_HOSTSIM)
/* The fiber runtime's device-side hooks (src/hostsim/qh_hostsim.c). */
extern "C" {
uint32_t qhsim_tid(void);
uint32_t qhsim_bid(int dim);
void qhsim_barrier(void);
void qhsim_wave_sync(void);
uint32_t qhsim_shfl(uint32_t v, uint32_t src_lane);
/* every lane's v, in lane order, into all[0 .. wave) (for the emulations) */
void qhsim_wave_gather_u64(uint64_t v, uint64_t *all);
}
#endif

/* ---- indices ---- */
QH_DEV uint32_t qh_tid(void) {
#if defined(QH_AMD)
    return __builtin_amdgcn_workitem_id_x();
#elif defined(QH_HOSTSIM)
    return qhsim_tid();
#else
    return threadIdx.x;
#endif
}
QH_DEV uint32_t qh_bid_x(void) {
#if defined(QH_AMD)
    return __builtin_amdgcn_workgroup_id_x();
#elif defined(QH_HOSTSIM)
    return qhsim_bid(0);
#else
    return blockIdx.x;
#endif
}
QH_DEV uint32_t qh_bid_y(void) {
#if defined(QH_AMD)
    return __builtin_amdgcn_workgroup_id_y();
#elif defined(QH_HOSTSIM)
    return qhsim_bid(1);
#else
    return blockIdx.y;
#endif
}
QH_DEV uint32_t qh_bid_z(void) {
#if defined(QH_AMD)
    return __builtin_amdgcn_workgroup_id_z();
#elif defined(QH_HOSTSIM)
    return qhsim_bid(2);
#else
    return blockIdx.z;
#endif
}
QH_DEV uint32_t qh_lane(void) {
#if defined(QH_AMD)
#if QH_WAVE == 64
    return __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u));
#else
    return __builtin_amdgcn_mbcnt_lo(~0u, 0u);
#endif
#elif defined(QH_HOSTSIM)
    return qhsim_tid() % QH_WAVE;
#else
    return threadIdx.x & 31u;
#endif
}

/* Marks a value the whole wave shares (e.g. the wave index) as uniform, so
 * the AMD compiler keeps it and what derives from it in scalar registers
 * and may use scalar loads for wave-uniform addresses. */
QH_DEV int32_t qh_uniform(int32_t v) {
#if defined(QH_AMD)
    return __builtin_amdgcn_readfirstlane(v);
#else
    return v;
#endif
}

/* An opaque copy of v, produced by an empty volatile asm the compiler can
 * neither see through nor move. Two uses:
 * - on AMD it lives in a vector register, hiding that v is wave-uniform, so
 *   loads addressed by it use vector registers (for loop nests whose
 *   uniform operands would exhaust wave64's 102 SGPRs; a spill is a
 *   qualification failure);
 * - evaluated inside a loop, an address offset by it cannot be hoisted, so
 *   LDS data that is constant across the loop is re-read each iteration
 *   instead of being cached in (hundreds of) registers. */
QH_DEV int32_t qh_as_vector(int32_t v) {
#if defined(QH_AMD)
    __asm__ volatile("" : "+v"(v));
#elif defined(QH_NVIDIA)
    asm volatile("" : "+r"(v));
#endif
    return v;
}

/* QH_LATE(p, field): a field of the kernel's parameter block (its only
 * argument), read where it is used. The AMD compiler loads kernel arguments
 * early and keeps fields that only the end of a kernel needs (output
 * pointers) in SGPRs across the whole main loop; a volatile read from the
 * kernel-argument segment cannot be hoisted, so those SGPRs stay free.
 * (Taking the address of the by-value parameter instead would copy it to
 * scratch.) Elsewhere it is the plain field. */
#if defined(QH_AMD)
#define QH_LATE(p, field)                                                                          \
    (*(const volatile __typeof__((p).field) __attribute__((address_space(4))) *)(                  \
        (const __attribute__((address_space(4))) char *)__builtin_amdgcn_kernarg_segment_ptr() + \
        __builtin_offsetof(__typeof__(p), field)))
#else
#define QH_LATE(p, field) ((p).field)
#endif

/* QH_LOW32(p, field): the low 32 bits of a 64-bit field of the parameter
 * block, read alone. The AMD compiler loads a run of 64-bit fields as one
 * wide load, both halves, and holds every SGPR of it; a kernel that uses
 * only the low halves (offsets known to fit 32 bits) holds one SGPR per
 * field this way. Little-endian, as every target is. */
#if defined(QH_AMD)
#define QH_LOW32(p, field)                                                                         \
    (*(const uint32_t __attribute__((address_space(4))) *)(                                        \
        (const __attribute__((address_space(4))) char *)__builtin_amdgcn_kernarg_segment_ptr() + \
        __builtin_offsetof(__typeof__(p), field)))
#else
#define QH_LOW32(p, field) ((uint32_t)(p).field)
#endif

/* Keeps the AMD instruction scheduler from moving instructions across this
 * point (no effect on execution; nothing elsewhere). */
QH_DEV void qh_sched_barrier(void) {
#if defined(QH_AMD)
    __builtin_amdgcn_sched_barrier(0);
#endif
}

/* ---- barriers ---- */
/* Workgroup barrier with the LDS ordering __syncthreads gives. */
QH_DEV void qh_barrier(void) {
#if defined(QH_AMD)
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#elif defined(QH_HOSTSIM)
    qhsim_barrier();
#else
    __syncthreads();
#endif
}
/* Orders one wave's own LDS writes before its later LDS reads (per-wave
 * staging areas need no workgroup barrier). */
QH_DEV void qh_wave_sync(void) {
#if defined(QH_AMD)
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#elif defined(QH_HOSTSIM)
    qhsim_wave_sync();
#else
    __syncwarp();
#endif
}

/* ---- math ----
 * Plain IEEE f32 everywhere: no fast-math reciprocal or approximate divide,
 * because the KV store must reproduce the reference's codes bit for bit. */
#if defined(QH_AMD)
QH_DEV float qh_rintf(float x) { return __builtin_rintf(x); }
QH_DEV float qh_fabsf(float x) { return __builtin_fabsf(x); }
QH_DEV float qh_fmaxf(float a, float b) { return __builtin_fmaxf(a, b); }
QH_DEV float qh_fminf(float a, float b) { return __builtin_fminf(a, b); }
QH_DEV int qh_isnan(float x) { return __builtin_isnan(x); }
#else
QH_DEV float qh_rintf(float x) { return rintf(x); }
QH_DEV float qh_fabsf(float x) { return fabsf(x); }
QH_DEV float qh_fmaxf(float a, float b) { return fmaxf(a, b); }
QH_DEV float qh_fminf(float a, float b) { return fminf(a, b); }
QH_DEV int qh_isnan(float x) { return isnan(x); }
#endif
QH_DEV float qh_neg_inf(void) { return -__builtin_huge_valf(); }
template <typename T> QH_DEV T qh_min(T a, T b) { return a < b ? a : b; }
template <typename T> QH_DEV T qh_max(T a, T b) { return a < b ? b : a; }

QH_DEV float qh_bits_f32(uint32_t u) {
#if defined(QH_AMD)
    return __builtin_bit_cast(float, u);
#elif defined(QH_HOSTSIM)
    float f;
    memcpy(&f, &u, 4);
    return f;
#else
    return __uint_as_float(u);
#endif
}
QH_DEV uint32_t qh_f32_bits(float f) {
#if defined(QH_AMD)
    return __builtin_bit_cast(uint32_t, f);
#elif defined(QH_HOSTSIM)
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
#else
    return __float_as_uint(f);
#endif
}

/* ---- lane exchange ---- */
QH_DEV uint32_t qh_shfl_u32(uint32_t v, uint32_t src_lane) {
#if defined(QH_AMD)
    return (uint32_t)__builtin_amdgcn_ds_bpermute((int)(src_lane << 2), (int)v);
#elif defined(QH_HOSTSIM)
    return qhsim_shfl(v, src_lane);
#else
    return __shfl_sync(0xffffffffu, v, src_lane);
#endif
}
QH_DEV float qh_shfl_f32(float v, uint32_t src_lane) {
    return qh_bits_f32(qh_shfl_u32(qh_f32_bits(v), src_lane));
}
QH_DEV float qh_shfl_xor_f32(float v, uint32_t mask) {
#if defined(QH_NVIDIA)
    return __shfl_xor_sync(0xffffffffu, v, mask);
#else
    return qh_shfl_f32(v, qh_lane() ^ mask);
#endif
}
QH_DEV float qh_wave_max(float v) {
    for (uint32_t m = QH_WAVE / 2; m > 0; m >>= 1) v = qh_fmaxf(v, qh_shfl_xor_f32(v, m));
    return v;
}

/* ---- f16 (the tiled decode's staging format) ---- */
#if defined(QH_NVIDIA)
QH_DEV uint16_t qh_f32_to_f16(float x) { return __half_as_ushort(__float2half_rn(x)); }
QH_DEV float qh_f16_to_f32(uint16_t h) { return __half2float(__ushort_as_half(h)); }
/* Both f16 halves of w minus c (c and the results exact in f16). */
QH_DEV uint32_t qh_f16x2_sub(uint32_t w, float c) {
    const __half2 r = __hsub2(__halves2half2(__ushort_as_half((unsigned short)(w & 0xFFFFu)),
                                             __ushort_as_half((unsigned short)(w >> 16))),
                              __float2half2_rn(c));
    return (uint32_t)__half_as_ushort(__low2half(r)) | ((uint32_t)__half_as_ushort(__high2half(r)) << 16);
}
#else
/* clang's _Float16 (AMD: v_cvt_f16_f32, round to nearest even; host: the
 * same rounding in software or F16C) */
QH_DEV uint16_t qh_f32_to_f16(float x) { return __builtin_bit_cast(uint16_t, (_Float16)x); }
QH_DEV float qh_f16_to_f32(uint16_t h) { return (float)__builtin_bit_cast(_Float16, h); }
QH_DEV uint32_t qh_f16x2_sub(uint32_t w, float c) {
    typedef _Float16 h2 __attribute__((ext_vector_type(2)));
    const h2 a = __builtin_bit_cast(h2, w);
    const h2 r = a - (h2){(_Float16)c, (_Float16)c};
    return __builtin_bit_cast(uint32_t, r);
}
#endif

/* 2^x and log2 (the tiled decode keeps its softmax in log2 units). */
QH_DEV float qh_exp2f(float x) {
#if defined(QH_AMD)
    return __builtin_exp2f(x);
#else
    return exp2f(x);
#endif
}
QH_DEV float qh_log2f(float x) {
#if defined(QH_AMD)
    return __builtin_log2f(x);
#else
    return log2f(x);
#endif
}

/* The launch's dynamic LDS (the bytes the host passed at launch). */
#if defined(QH_HOSTSIM)
extern "C" unsigned char *qhsim_dyn_lds(void);
#define QH_DYN_LDS(name) unsigned char *name = qhsim_dyn_lds()
#elif defined(QH_AMD)
#define QH_DYN_LDS(name)                                                       \
    extern __shared__ __attribute__((aligned(32))) unsigned char qh_dyn_lds_[]; \
    unsigned char *name = qh_dyn_lds_
#else
#define QH_DYN_LDS(name)                                \
    extern __shared__ __align__(32) unsigned char qh_dyn_lds_[]; \
    unsigned char *name = qh_dyn_lds_
#endif

QH_DEV float qh_bf16_to_f32(uint16_t b) { return qh_bits_f32((uint32_t)b << 16); }
/* Round to nearest even; NaN stays a quiet NaN (spec section 1). */
QH_DEV uint16_t qh_f32_to_bf16(float f) {
    uint32_t u = qh_f32_bits(f);
    if (qh_isnan(f)) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* Aligned vector words for wide loads (the compilers turn a copy of these
 * into one 8- or 16-byte load); defined here because neither HIP's nor
 * CUDA's vector types are available on both sides. */
struct alignas(8) qh_u32x2 {
    uint32_t x, y;
};
struct alignas(16) qh_u32x4 {
    uint32_t x, y, z, w;
};

#endif /* QH_DEVICE_H */
