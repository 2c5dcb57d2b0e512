/*
 * Occupancy of a kernel on its AMD target, from its register and LDS use,
 * with the allocation rules LLVM's AMDGPU backend applies
 * (AMDGPUBaseInfo.cpp getVGPRAllocGranule / getTotalNumVGPRs / SGPR rules):
 *
 * gfx942 (CDNA3, wave64): 512 VGPRs per lane per SIMD shared by arch VGPRs
 *   and AGPRs (.vgpr_count is their total), allocated in 8s; 800 SGPRs per
 *   SIMD in 16s; 64 KiB LDS per CU over 4 SIMDs; at most 8 waves per SIMD.
 * gfx1200/gfx1201 (RDNA4, wave32): 1536 VGPRs per lane per SIMD, allocated
 *   in 24s; SGPRs do not limit (each wave has its own); LDS 128 KiB per WGP
 *   over its 4 SIMDs (workgroup-processor mode, the compiler's default); at
 *   most 16 waves per SIMD.
 * LDS limit: workgroups per CU/WGP = floor(LDS budget / the kernel's LDS),
 * times the kernel's waves per workgroup (its launch bound), spread over
 * the SIMDs.
 */
#include <stdio.h>
#include <string.h>

#include "qualify.h"

static long roundup(long v, long g) { return (v < 1 ? 1 : v + g - 1) / g * g; }

int qk_waves_per_simd(const qk_kernel *k, char *why, int why_n) {
    const int cdna3 = !strcmp(k->target, "gfx942");
    const long max_waves = cdna3 ? 8 : 16;
    const long wave = cdna3 ? 64 : 32;
    const long w_vgpr = cdna3 ? 512 / roundup(k->vgpr, 8) : 1536 / roundup(k->vgpr, 24);
    const long w_sgpr = cdna3 ? 800 / roundup(k->sgpr, 16) : max_waves;
    const long lds_budget = cdna3 ? 65536 : 131072;
    const long block_waves = k->max_block > 0 ? (k->max_block + wave - 1) / wave : 1;
    long w_lds = max_waves;
    if (k->lds > 0) {
        const long blocks = lds_budget / k->lds;
        w_lds = blocks * block_waves / 4;
    }
    long w = max_waves;
    const char *lim = "hardware maximum";
    if (w_vgpr < w) w = w_vgpr, lim = "VGPRs";
    if (w_sgpr < w) w = w_sgpr, lim = "SGPRs";
    if (w_lds < w) w = w_lds, lim = "LDS";
    if (why) snprintf(why, (size_t)why_n, "%s", lim);
    return (int)w;
}
