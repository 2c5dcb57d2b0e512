/*
 * The host simulation of one AMD target: runs the HIP kernels' own code on
 * the CPU so CI can put them through the parity suite without a GPU.
 *
 * Execution model. A launch runs its workgroups one after another. The
 * threads of a workgroup are fibers on one OS thread, switched only where a
 * GPU thread would wait for others: at a workgroup barrier (qh_barrier), at
 * a wave sync (qh_wave_sync) and inside lane exchanges (shuffles, which are
 * two wave syncs around a per-lane exchange buffer). A fiber that returns
 * counts as arrived everywhere. If no fiber can move, the kernel diverged
 * around a sync and the launch fails (it would hang or be undefined on a
 * GPU). `static` locals stand in for LDS (one workgroup runs at a time).
 *
 * What it proves and what not: the kernels' index math, masking, staging,
 * synchronisation points, reductions and the fragment layouts they assume
 * for the target's MFMA/WMMA and packed conversions (emulated in
 * qh_fp8.h / qh_matrix.h from the documented semantics). It proves nothing
 * about the hardware instructions themselves, timing, or the compiler's
 * AMD code generation (the code-object qualification covers the latter).
 */
#if !defined(_GNU_SOURCE)
#define _GNU_SOURCE
#endif
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "qh_code_objects.h"
#include "qh_hostsim_as_hip.h"

#if defined(QH_SIM_GFX942)
#define SIM_ARCH "gfx942"
#define SIM_WAVE 64u
#elif defined(QH_SIM_GFX12)
#define SIM_ARCH "gfx1201"
#define SIM_WAVE 32u
#else
#error "define QH_SIM_GFX942 or QH_SIM_GFX12"
#endif

struct qhsim_kernel {
    const char *name, *source;
    void (*call)(const void *params);
};
extern const struct qhsim_kernel qhsim_kernels[];
extern const unsigned qhsim_kernel_count;

/* ---- fibers --------------------------------------------------------------- */

enum { F_RUN, F_BARRIER, F_WAVE_SYNC, F_DONE };
#define STACK_BYTES (256u * 1024u)
#define MAX_THREADS 1024u

typedef struct fiber {
    void *sp; /* saved stack pointer while switched out */
    int state;
    uint32_t tid;
    unsigned char *stack;
} fiber;

static struct {
    fiber f[MAX_THREADS];
    unsigned n;
    uint32_t bid[3];
    fiber *cur;
    void *sched_sp;
    const struct qhsim_kernel *k;
    const void *params;
    uint32_t xbuf[MAX_THREADS];
    unsigned char *dyn;  /* the launch's dynamic LDS */
    size_t dyn_cap;
} S;

unsigned char *qhsim_dyn_lds(void) { return S.dyn; }

#if defined(__x86_64__)
/* Saves the callee-saved registers and stack pointer of the running context
 * in *from_sp and resumes the one whose stack pointer is to_sp (System V
 * x86-64: rbx, rbp, r12-r15 are all a C function must preserve). */
void qhsim_switch(void **from_sp, void *to_sp);
__asm__(".text\n"
        ".globl qhsim_switch\n"
        ".hidden qhsim_switch\n"
        ".type qhsim_switch,@function\n"
        "qhsim_switch:\n"
        "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
        "  ret\n"
        ".size qhsim_switch, .-qhsim_switch\n");
#else
#error "the HIP host simulation's fiber switch is written for x86-64"
#endif

static void fiber_main(void) {
    S.k->call(S.params);
    S.cur->state = F_DONE;
    qhsim_switch(&S.cur->sp, S.sched_sp); /* never resumed */
    abort();
}

/* A fresh fiber's stack: six zero registers, then fiber_main as the return
 * address of the first switch, leaving rsp = 8 mod 16 at its entry as a
 * call would. */
static void fiber_init(fiber *f) {
    uintptr_t top = ((uintptr_t)(f->stack + STACK_BYTES)) & ~(uintptr_t)15;
    void **sp = (void **)top;
    *--sp = NULL;               /* fiber_main's (unused) return address */
    *--sp = (void *)fiber_main; /* popped by ret */
    for (int i = 0; i < 6; ++i) *--sp = NULL;
    f->sp = sp;
    f->state = F_RUN;
}

static void yield_as(int state) {
    S.cur->state = state;
    qhsim_switch(&S.cur->sp, S.sched_sp);
}

uint32_t qhsim_tid(void) { return S.cur->tid; }
uint32_t qhsim_bid(int dim) { return S.bid[dim]; }
void qhsim_barrier(void) { yield_as(F_BARRIER); }
void qhsim_wave_sync(void) { yield_as(F_WAVE_SYNC); }
uint32_t qhsim_shfl(uint32_t v, uint32_t src_lane) {
    const uint32_t base = S.cur->tid / SIM_WAVE * SIM_WAVE;
    S.xbuf[S.cur->tid] = v;
    qhsim_wave_sync();
    const uint32_t src = base + src_lane % SIM_WAVE;
    const uint32_t r = src < S.n ? S.xbuf[src] : 0u;
    qhsim_wave_sync();
    return r;
}

void qhsim_wave_gather_u64(uint64_t v, uint64_t *all) {
    static uint64_t xbuf64[MAX_THREADS];
    const uint32_t base = S.cur->tid / SIM_WAVE * SIM_WAVE;
    xbuf64[S.cur->tid] = v;
    qhsim_wave_sync();
    for (uint32_t l = 0; l < SIM_WAVE; ++l) all[l] = base + l < S.n ? xbuf64[base + l] : 0u;
    qhsim_wave_sync();
}

/* Runs one workgroup to completion; 0 on success, -1 on a divergent sync. */
static int run_block(void) {
    for (unsigned t = 0; t < S.n; ++t) {
        S.f[t].tid = t;
        fiber_init(&S.f[t]);
    }
    for (;;) {
        int ran = 0;
        for (unsigned t = 0; t < S.n; ++t) {
            if (S.f[t].state != F_RUN) continue;
            S.cur = &S.f[t];
            qhsim_switch(&S.sched_sp, S.f[t].sp);
            ran = 1;
        }
        /* release: the barrier when every live fiber waits at it; a wave
         * sync when every live lane of that wave waits at it */
        unsigned live = 0, at_barrier = 0;
        for (unsigned t = 0; t < S.n; ++t) {
            live += S.f[t].state != F_DONE;
            at_barrier += S.f[t].state == F_BARRIER;
        }
        if (live == 0) return 0;
        int released = 0;
        if (at_barrier == live) {
            for (unsigned t = 0; t < S.n; ++t)
                if (S.f[t].state == F_BARRIER) S.f[t].state = F_RUN;
            released = 1;
        }
        for (unsigned w0 = 0; w0 < S.n; w0 += SIM_WAVE) {
            unsigned lanes = 0, waiting = 0;
            for (unsigned t = w0; t < w0 + SIM_WAVE && t < S.n; ++t) {
                lanes += S.f[t].state != F_DONE;
                waiting += S.f[t].state == F_WAVE_SYNC;
            }
            if (lanes && waiting == lanes) {
                for (unsigned t = w0; t < w0 + SIM_WAVE && t < S.n; ++t) S.f[t].state = F_RUN;
                released = 1;
            }
        }
        if (!ran && !released) return -1; /* lanes wait at different syncs */
    }
}

/* ---- the hip* API ----------------------------------------------------------- */

struct qhsim_event {
    double t;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

hipError_t qhsim_get_device_count(int *n) {
    *n = 1;
    return hipSuccess;
}
hipError_t qhsim_set_device(int d) { return d == 0 ? hipSuccess : qhsimErrorNoDevice; }
hipError_t qhsim_get_device(int *d) {
    *d = 0; /* the one simulated device is always current */
    return hipSuccess;
}
hipError_t qhsim_device_get_attribute(int *v, int attr, int d) {
    (void)d;
    switch (attr) {
    case hipDeviceAttributeMultiprocessorCount: *v = 4; break;
    case hipDeviceAttributeWarpSize: *v = (int)SIM_WAVE; break;
    case hipDeviceAttributeMaxSharedMemoryPerBlock: *v = 65536; break;
    case hipDeviceAttributeMaxThreadsPerBlock: *v = (int)MAX_THREADS; break;
    default: return qhsimErrorNotFound;
    }
    return hipSuccess;
}
hipError_t qhsim_device_name_arch(int d, char *name, size_t nn, char *arch, size_t na) {
    (void)d;
    snprintf(name, nn, "qattn host simulation of %s (CPU, no GPU)", SIM_ARCH);
    snprintf(arch, na, "%s", SIM_ARCH);
    return hipSuccess;
}
hipError_t qhsim_malloc(void **p, size_t n) {
    *p = aligned_alloc(256, (n + 255) / 256 * 256);
    return *p ? hipSuccess : 2 /* out of memory */;
}
hipError_t qhsim_free(void *p) {
    free(p);
    return hipSuccess;
}
hipError_t qhsim_memcpy_async(void *dst, const void *src, size_t n, int kind, hipStream_t s) {
    (void)kind;
    (void)s;
    memcpy(dst, src, n);
    return hipSuccess;
}
hipError_t qhsim_stream_synchronize(hipStream_t s) {
    (void)s;
    return hipSuccess;
}
hipError_t qhsim_event_create(hipEvent_t *e) {
    *e = calloc(1, sizeof **e);
    return *e ? hipSuccess : 2;
}
hipError_t qhsim_event_record(hipEvent_t e, hipStream_t s) {
    (void)s;
    e->t = now_ms();
    return hipSuccess;
}
hipError_t qhsim_event_synchronize(hipEvent_t e) {
    (void)e;
    return hipSuccess;
}
hipError_t qhsim_event_elapsed_time(float *ms, hipEvent_t a, hipEvent_t b) {
    *ms = (float)(b->t - a->t);
    return hipSuccess;
}
hipError_t qhsim_event_destroy(hipEvent_t e) {
    free(e);
    return hipSuccess;
}
const char *qhsim_error_string(hipError_t e) {
    switch (e) {
    case hipSuccess: return "no error";
    case qhsimErrorNoDevice: return "no simulated device with that index";
    case qhsimErrorNotFound: return "kernel not in the simulated code object";
    case qhsimErrorLaunch: return "simulated launch failed: lanes diverged around a barrier or wave sync";
    default: return "simulation error";
    }
}
hipError_t qhsim_module_load_data(hipModule_t *m, const void *image) {
    *m = (const char *)image;
    return hipSuccess;
}
hipError_t qhsim_module_unload(hipModule_t m) {
    (void)m;
    return hipSuccess;
}
hipError_t qhsim_module_get_function(hipFunction_t *f, hipModule_t m, const char *name) {
    for (unsigned i = 0; i < qhsim_kernel_count; ++i)
        if (qhsim_kernels[i].call && !strcmp(qhsim_kernels[i].name, name) &&
            !strcmp(qhsim_kernels[i].source, m)) {
            *f = &qhsim_kernels[i];
            return hipSuccess;
        }
    return qhsimErrorNotFound;
}
hipError_t qhsim_module_launch_kernel(hipFunction_t f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                      unsigned by, unsigned bz, unsigned shared, hipStream_t s,
                                      void **params, void **extra) {
    (void)s;
    (void)extra;
    const unsigned n = bx * by * bz;
    if (n == 0 || n > MAX_THREADS || by != 1 || bz != 1 || shared > 65536u) return qhsimErrorLaunch;
    if (shared > S.dyn_cap) {
        unsigned char *d = realloc(S.dyn, shared);
        if (!d) return 2;
        S.dyn = d;
        S.dyn_cap = shared;
    }
    for (unsigned t = 0; t < n; ++t)
        if (!S.f[t].stack && !(S.f[t].stack = malloc(STACK_BYTES))) return 2;
    S.n = n;
    S.k = f;
    S.params = params[0];
    for (unsigned z = 0; z < gz; ++z)
        for (unsigned y = 0; y < gy; ++y)
            for (unsigned x = 0; x < gx; ++x) {
                S.bid[0] = x;
                S.bid[1] = y;
                S.bid[2] = z;
                /* every workgroup starts from poisoned LDS (NaN in f16 and
                 * f32): a read of LDS no lane wrote shows in the results */
                if (shared) memset(S.dyn, 0xFF, shared);
                if (run_block() != 0) return qhsimErrorLaunch;
            }
    return hipSuccess;
}

/* The "code objects": one per kernel source, naming the source. */
const qh_code_object qh_code_objects[] = {
    {SIM_ARCH, "decode", (const unsigned char *)"decode", NULL},
    {SIM_ARCH, "decode_regs", (const unsigned char *)"decode_regs", NULL},
    {SIM_ARCH, "kv_store", (const unsigned char *)"kv_store", NULL},
    {SIM_ARCH, "mqa_logits", (const unsigned char *)"mqa_logits", NULL},
    {SIM_ARCH, "paged_mqa_logits", (const unsigned char *)"paged_mqa_logits", NULL},
    {SIM_ARCH, "read_bandwidth", (const unsigned char *)"read_bandwidth", NULL},
};
const size_t qh_code_object_count = sizeof qh_code_objects / sizeof qh_code_objects[0];
