/* The fragment layout probe: VK_KHR_cooperative_matrix leaves to the
 * implementation which lane holds which element of a fragment, and the
 * register-resident decode kernel (shaders/decode_regs.comp) builds its K,
 * V and P fragments element by element. Once per context, on devices with a
 * 16x16x16 f16 -> f32 shape and subgroups of 32, shaders/fragment_probe.comp
 * loads index matrices as each operand and reports what every lane holds;
 * QATTN_FEAT_FRAGMENT_LAYOUT is set only when that is exactly the layout
 * the kernel assumes (seen on NVIDIA's driver 580 on the H200: mma.m16n8k16's registers, the
 * two n8 halves of A and the accumulator interleaved):
 *   lane l, g = l / 4, t = l % 4, element i of 8:
 *   A and accumulator: row g + 8 * (i / 4), column 2t + i % 2 + 8 * ((i / 2) % 2)
 *   B: row (k) 2t + i % 2 + 8 * ((i / 2) % 2), column (n) g + 8 * (i / 4)
 * On any other layout the kernel is not offered and vk->frag_layout says
 * what lane 5 held (enough to name the layout a new variant would need). */
#include <stdio.h>
#include <string.h>

#include "qattn/convert.h"
#include "vk_internal.h"

typedef struct probe_push {
    uint64_t idx16, idx32, dst;
} probe_push;

enum { PROBE_OUT = 3 * 256 + 3 };

static int expected(int use, int lane, int i) {
    const int g = lane / 4, t = lane % 4;
    if (use == 1) return (2 * t + i % 2 + 8 * ((i / 2) % 2)) * 16 + g + 8 * (i / 4);
    return (g + 8 * (i / 4)) * 16 + 2 * t + i % 2 + 8 * ((i / 2) % 2);
}

static int has_f16_16(const qattn_device_caps *c) {
    for (int32_t i = 0; i < c->n_matrix_shapes && i < QATTN_MAX_MATRIX_SHAPES; ++i) {
        const qattn_matrix_shape *s = &c->matrix_shapes[i];
        if (s->m == 16 && s->n == 16 && s->k == 16 && s->a_type == QATTN_F16 && s->c_type == QATTN_F32) return 1;
    }
    return 0;
}

/* Reads the probe's output into out[PROBE_OUT]. */
static qattn_status run_probe(qattn_vk *vk, float *out) {
    uint16_t idx16[256];
    float idx32[256];
    for (int e = 0; e < 256; ++e) {
        idx16[e] = qattn_f32_to_f16((float)e);
        idx32[e] = (float)e;
    }
    for (int e = 0; e < PROBE_OUT; ++e) out[e] = -1.0f;
    void *h = NULL;
    const uint64_t bytes = sizeof idx16 + sizeof idx32 + PROBE_OUT * sizeof(float);
    qattn_status s = qattn_vk_buffer_alloc(vk, bytes, &h);
    if (s != QATTN_OK) return s;
    const VkDeviceAddress base = ((qattn_vk_buffer *)h)->address;
    s = qattn_vk_buffer_upload(vk, h, 0, idx16, sizeof idx16);
    if (s == QATTN_OK) s = qattn_vk_buffer_upload(vk, h, sizeof idx16, idx32, sizeof idx32);
    if (s == QATTN_OK) s = qattn_vk_buffer_upload(vk, h, sizeof idx16 + sizeof idx32, out, PROBE_OUT * sizeof(float));
    VkPipeline pipe;
    if (s == QATTN_OK) s = qattn_vk_pipeline(vk, "fragment_probe", NULL, 0, sizeof(probe_push), 0, &pipe);
    if (s == QATTN_OK) s = qattn_vk_begin(vk);
    if (s == QATTN_OK) {
        const probe_push p = {base, base + sizeof idx16, base + sizeof idx16 + sizeof idx32};
        qattn_vk_dispatch(vk, pipe, &p, sizeof p, 1, 1, 1);
        s = qattn_vk_submit(vk, "fragment probe");
    }
    if (s == QATTN_OK) s = qattn_vk_synchronize(vk);
    if (s == QATTN_OK)
        s = qattn_vk_buffer_download(vk, h, sizeof idx16 + sizeof idx32, out, PROBE_OUT * sizeof(float));
    qattn_vk_buffer_free(vk, h);
    return s;
}

qattn_status qattn_vk_probe_fragments(qattn_vk *vk) {
    vk->caps.features &= ~(uint32_t)QATTN_FEAT_FRAGMENT_LAYOUT;
    if (!vk->has_coopmat || !has_f16_16(&vk->caps) || !qattn_vk_has_shader("fragment_probe")) {
        snprintf(vk->frag_layout, sizeof vk->frag_layout, "not probed: no 16x16x16 f16 matrix shape");
        return QATTN_OK;
    }
    if (vk->caps.subgroup_size_min != 32 || vk->caps.subgroup_size_max != 32) {
        snprintf(vk->frag_layout, sizeof vk->frag_layout, "not probed: subgroups of %u..%u lanes",
                 vk->caps.subgroup_size_min, vk->caps.subgroup_size_max);
        return QATTN_OK;
    }
    float out[PROBE_OUT];
    /* The probe's pipeline is not one of the context's: it goes again with
     * its counts, so the pipeline statistics and caches speak of ops only. */
    const int n_pipelines = vk->n_pipelines;
    const uint64_t counts[4] = {vk->n_created, vk->n_cache_hits, vk->n_compiled, vk->n_no_feedback};
    const double create_ms = vk->create_ms;
    const qattn_status s = run_probe(vk, out);
    while (vk->n_pipelines > n_pipelines)
        vk->vkd.vkDestroyPipeline(vk->device, vk->pipelines[--vk->n_pipelines].pipeline, NULL);
    vk->n_created = counts[0];
    vk->n_cache_hits = counts[1];
    vk->n_compiled = counts[2];
    vk->n_no_feedback = counts[3];
    vk->create_ms = create_ms;
    if (s == QATTN_ERR_DEVICE) return s; /* a lost device fails the context */
    if (s != QATTN_OK) {
        snprintf(vk->frag_layout, sizeof vk->frag_layout, "probe failed: %.200s", vk->message);
        vk->message[0] = '\0';
        return QATTN_OK;
    }
    int ok = out[768] == 8.0f && out[769] == 8.0f && out[770] == 8.0f;
    for (int use = 0; use < 3 && ok; ++use)
        for (int lane = 0; lane < 32 && ok; ++lane)
            for (int i = 0; i < 8 && ok; ++i) ok = out[use * 256 + lane * 8 + i] == (float)expected(use, lane, i);
    if (ok) {
        vk->caps.features |= QATTN_FEAT_FRAGMENT_LAYOUT;
        snprintf(vk->frag_layout, sizeof vk->frag_layout, "nv-m16n8k16");
        return QATTN_OK;
    }
    /* Lane 5's elements as row.column, per operand. */
    size_t at = (size_t)snprintf(vk->frag_layout, sizeof vk->frag_layout, "other (lengths %g %g %g; lane 5",
                                 (double)out[768], (double)out[769], (double)out[770]);
    for (int use = 0; use < 3 && at < sizeof vk->frag_layout; ++use) {
        at += (size_t)snprintf(vk->frag_layout + at, sizeof vk->frag_layout - at, " %c:", "ABC"[use]);
        for (int i = 0; i < 8 && at < sizeof vk->frag_layout; ++i) {
            const int e = (int)out[use * 256 + 5 * 8 + i];
            at += (size_t)snprintf(vk->frag_layout + at, sizeof vk->frag_layout - at, "%s%d.%d", i ? "," : "",
                                   e / 16, e % 16);
        }
    }
    if (at < sizeof vk->frag_layout) snprintf(vk->frag_layout + at, sizeof vk->frag_layout - at, ")");
    return QATTN_OK;
}
