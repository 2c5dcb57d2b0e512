/* What a user writes first: a cpu context, one KV-store call, and a check of
 * one written code against the spec's arithmetic. Exit 0 on success. */
#include <stdio.h>
#include <string.h>

#include <qattn/convert.h>
#include <qattn/qattn.h>

int main(void) {
    char err[256];
    qattn_context *ctx = NULL;
    if (qattn_context_create(qattn_backend_cpu(), NULL, &ctx, err, sizeof err) != QATTN_OK) {
        fprintf(stderr, "context: %s\n", err);
        return 1;
    }
    /* One token, one head, D = 64: values 1..64, so amax = 64 and the int8
     * scale is 64/127; element 0 encodes round(1 * 127/64) = 2. */
    enum { D = 64, SLOTS = 4 };
    uint16_t kv[D];
    for (int d = 0; d < D; ++d) kv[d] = qattn_f32_to_bf16((float)(d + 1));
    int32_t slot = 2;
    qattn_buffer *knew, *vnew, *map, *kc, *vc, *ks, *vs;
    qattn_buffer_alloc(ctx, sizeof kv, &knew);
    qattn_buffer_alloc(ctx, sizeof kv, &vnew);
    qattn_buffer_alloc(ctx, 4, &map);
    qattn_buffer_alloc(ctx, SLOTS * D, &kc);
    qattn_buffer_alloc(ctx, SLOTS * D, &vc);
    qattn_buffer_alloc(ctx, SLOTS * 4, &ks);
    qattn_buffer_alloc(ctx, SLOTS * 4, &vs);
    qattn_buffer_upload(ctx, knew, 0, kv, sizeof kv);
    qattn_buffer_upload(ctx, vnew, 0, kv, sizeof kv);
    qattn_buffer_upload(ctx, map, 0, &slot, 4);
    qattn_kv_store_args a;
    memset(&a, 0, sizeof a);
    a.k_new = qattn_tensor_contiguous(knew, 0, QATTN_BF16, 3, (int64_t[]){1, 1, D});
    a.v_new = qattn_tensor_contiguous(vnew, 0, QATTN_BF16, 3, (int64_t[]){1, 1, D});
    a.slot_mapping = qattn_tensor_contiguous(map, 0, QATTN_I32, 1, (int64_t[]){1});
    a.k_cache = qattn_tensor_contiguous(kc, 0, QATTN_I8, 3, (int64_t[]){SLOTS, 1, D});
    a.v_cache = qattn_tensor_contiguous(vc, 0, QATTN_I8, 3, (int64_t[]){SLOTS, 1, D});
    a.k_scale = qattn_tensor_contiguous(ks, 0, QATTN_F32, 2, (int64_t[]){SLOTS, 1});
    a.v_scale = qattn_tensor_contiguous(vs, 0, QATTN_F32, 2, (int64_t[]){SLOTS, 1});
    qattn_status s = qattn_kv_store(ctx, &a);
    int8_t code = 0;
    float scale = 0;
    qattn_buffer_download(ctx, kc, slot * D, &code, 1);
    qattn_buffer_download(ctx, ks, slot * 4, &scale, 4);
    int ok = s == QATTN_OK && code == 2 && scale == 64.0f / 127.0f;
    printf("qattn %s (%s): kv_store -> code %d scale %g: %s\n", qattn_version_string(),
           qattn_status_name(s), code, scale, ok ? "ok" : "WRONG");
    qattn_buffer *all[] = {knew, vnew, map, kc, vc, ks, vs};
    for (int i = 0; i < 7; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
    return ok ? 0 : 1;
}
