/*
 * qattn_vk_stats: what the driver made of one of qattn's pipelines, for
 * performance work (registers, spills, shared memory, and the driver's
 * internal representations where it offers them: NVIDIA gives its own IR
 * and SASS-level statistics, RADV its NIR/ACO/disassembly).
 *
 *   qattn_vk_stats SHADER SUBGROUP SPEC0,SPEC1,... [OUTDIR]
 *
 * SHADER is an embedded shader name (e.g. decode_matrix_fp8fn), SUBGROUP the
 * pinned subgroup size (0 = none), SPEC the specialization constants in
 * constant_id order. Statistics go to stdout; internal representations to
 * OUTDIR/<shader>.<executable>.<name>.txt when OUTDIR is given.
 * Device selection as the library's (QATTN_VULKAN_DEVICE).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vk_internal.h"

static void print_stat(const VkPipelineExecutableStatisticKHR *st) {
    printf("  %-32s ", st->name);
    switch (st->format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR: printf("%s", st->value.b32 ? "true" : "false"); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR: printf("%lld", (long long)st->value.i64); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR: printf("%llu", (unsigned long long)st->value.u64); break;
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR: printf("%g", st->value.f64); break;
    default: printf("?"); break;
    }
    printf("   (%s)\n", st->description);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: qattn_vk_stats SHADER SUBGROUP SPEC0,SPEC1,... [OUTDIR]\n");
        return 2;
    }
    uint32_t spec[QATTN_VK_MAX_SPEC];
    uint32_t n_spec = 0;
    for (char *tok = strtok(argv[3], ","); tok && n_spec < QATTN_VK_MAX_SPEC; tok = strtok(NULL, ","))
        spec[n_spec++] = (uint32_t)strtoul(tok, NULL, 0);
    char err[1024] = "";
    void *be = NULL;
    qattn_context_options o = QATTN_CONTEXT_OPTIONS_INIT;
    if (qattn_vk_create_ex(&o, 1, &be, err, sizeof err) != QATTN_OK) {
        fprintf(stderr, "no device: %s\n", err);
        return 77;
    }
    qattn_vk *vk = be;
    printf("%s: %s subgroup %s spec", vk->caps.arch, argv[1], argv[2]);
    for (uint32_t i = 0; i < n_spec; ++i) printf(" %u", spec[i]);
    printf("%s\n", vk->capture ? "" : " (device lacks VK_KHR_pipeline_executable_properties)");
    VkPipeline p;
    if (qattn_vk_pipeline(vk, argv[1], spec, n_spec, QATTN_VK_PUSH_BYTES, (uint32_t)atoi(argv[2]), &p) !=
        QATTN_OK) {
        fprintf(stderr, "pipeline: %s\n", vk->message);
        qattn_vk_destroy(be);
        return 1;
    }
    if (!vk->capture) {
        qattn_vk_destroy(be);
        return 0;
    }
    VkPipelineInfoKHR pi = {VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR};
    pi.pipeline = p;
    uint32_t ne = 0;
    vk->vkd.vkGetPipelineExecutablePropertiesKHR(vk->device, &pi, &ne, NULL);
    VkPipelineExecutablePropertiesKHR *ep = calloc(ne ? ne : 1, sizeof *ep);
    for (uint32_t i = 0; i < ne; ++i) ep[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR;
    vk->vkd.vkGetPipelineExecutablePropertiesKHR(vk->device, &pi, &ne, ep);
    for (uint32_t e = 0; e < ne; ++e) {
        printf("executable %u: %s (%s), subgroup %u\n", e, ep[e].name, ep[e].description, ep[e].subgroupSize);
        VkPipelineExecutableInfoKHR ei = {VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR};
        ei.pipeline = p;
        ei.executableIndex = e;
        uint32_t ns = 0;
        vk->vkd.vkGetPipelineExecutableStatisticsKHR(vk->device, &ei, &ns, NULL);
        VkPipelineExecutableStatisticKHR *st = calloc(ns ? ns : 1, sizeof *st);
        for (uint32_t i = 0; i < ns; ++i) st[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR;
        vk->vkd.vkGetPipelineExecutableStatisticsKHR(vk->device, &ei, &ns, st);
        for (uint32_t i = 0; i < ns; ++i) print_stat(&st[i]);
        free(st);
        if (argc < 5) continue;
        uint32_t nr = 0;
        vk->vkd.vkGetPipelineExecutableInternalRepresentationsKHR(vk->device, &ei, &nr, NULL);
        VkPipelineExecutableInternalRepresentationKHR *ir = calloc(nr ? nr : 1, sizeof *ir);
        for (uint32_t i = 0; i < nr; ++i) ir[i].sType = VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INTERNAL_REPRESENTATION_KHR;
        vk->vkd.vkGetPipelineExecutableInternalRepresentationsKHR(vk->device, &ei, &nr, ir);
        for (uint32_t i = 0; i < nr; ++i) {
            ir[i].pData = calloc(ir[i].dataSize + 1, 1);
            if (!ir[i].pData) ir[i].dataSize = 0;
        }
        vk->vkd.vkGetPipelineExecutableInternalRepresentationsKHR(vk->device, &ei, &nr, ir);
        for (uint32_t i = 0; i < nr; ++i) {
            char path[512], name[64];
            snprintf(name, sizeof name, "%s", ir[i].name);
            for (char *c = name; *c; ++c)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9'))) *c = '_';
            snprintf(path, sizeof path, "%s/%s.%u.%s.txt", argv[4], argv[1], e, name);
            FILE *f = fopen(path, "wb");
            if (f) {
                if (ir[i].isText) fputs((const char *)ir[i].pData, f);
                else fwrite(ir[i].pData, 1, ir[i].dataSize, f);
                fclose(f);
            }
            printf("  IR %s: %zu bytes -> %s\n", ir[i].name, ir[i].dataSize, path);
            free(ir[i].pData);
        }
        free(ir);
    }
    free(ep);
    qattn_vk_destroy(be);
    return 0;
}
