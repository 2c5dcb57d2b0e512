/* What a user writes first: a cpu context, one KV-store call, and a check of
 * one written code against the spec's arithmetic; then one decode over the
 * bf16 cache it fills, whose single visible key makes o equal that key's V
 * row exactly. Exit 0 on success. */
#include <stdio.h>
#include <string.h>

#include <qattn/convert.h>
#include <qattn/qattn.h>

/* Decode, B = R = Hq = Hkv = 1, D = 64, a bf16 cache of 4 slots in pages
 * of 2 whose request sees one key (slot 3): softmax over one key is 1, so
 * o is that key's V row, bit for bit. */
static int decode_one_key(qattn_context *ctx) {
    enum { D = 64, SLOTS = 4 };
    uint16_t q[D], cache[SLOTS * D], o[D];
    for (int d = 0; d < D; ++d) q[d] = qattn_f32_to_bf16(0.5f);
    for (int i = 0; i < SLOTS * D; ++i) cache[i] = qattn_f32_to_bf16((float)(i % 97) * 0.25f - 3.0f);
    int32_t indptr[2] = {0, 1}, pages[1] = {1}, lens[1] = {2};
    qattn_buffer *bq, *bk, *bv, *bip, *bpg, *bln, *bo;
    qattn_buffer_alloc(ctx, sizeof q, &bq);
    qattn_buffer_alloc(ctx, sizeof cache, &bk);
    qattn_buffer_alloc(ctx, sizeof cache, &bv);
    qattn_buffer_alloc(ctx, sizeof indptr, &bip);
    qattn_buffer_alloc(ctx, sizeof pages, &bpg);
    qattn_buffer_alloc(ctx, sizeof lens, &bln);
    qattn_buffer_alloc(ctx, sizeof o, &bo);
    qattn_buffer_upload(ctx, bq, 0, q, sizeof q);
    qattn_buffer_upload(ctx, bk, 0, cache, sizeof cache);
    qattn_buffer_upload(ctx, bv, 0, cache, sizeof cache);
    qattn_buffer_upload(ctx, bip, 0, indptr, sizeof indptr);
    qattn_buffer_upload(ctx, bpg, 0, pages, sizeof pages);
    qattn_buffer_upload(ctx, bln, 0, lens, sizeof lens);
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(bq, 0, QATTN_BF16, 4, (int64_t[]){1, 1, 1, D});
    a.k_cache = qattn_tensor_contiguous(bk, 0, QATTN_BF16, 3, (int64_t[]){SLOTS, 1, D});
    a.v_cache = qattn_tensor_contiguous(bv, 0, QATTN_BF16, 3, (int64_t[]){SLOTS, 1, D});
    a.kv_indptr = qattn_tensor_contiguous(bip, 0, QATTN_I32, 1, (int64_t[]){2});
    a.kv_indices = qattn_tensor_contiguous(bpg, 0, QATTN_I32, 1, (int64_t[]){1});
    a.kv_lens = qattn_tensor_contiguous(bln, 0, QATTN_I32, 1, (int64_t[]){1});
    a.o = qattn_tensor_contiguous(bo, 0, QATTN_BF16, 4, (int64_t[]){1, 1, 1, D});
    a.page_size = 2;
    a.max_kv_len = 2;
    a.sm_scale = 0.125f;
    a.window_left = 0; /* the row at position 1 sees key 1 only: slot 1 * 2 + 1 */
    qattn_decode_plan plan;
    qattn_status s = qattn_decode_plan_create(ctx, &a, NULL, &plan);
    qattn_buffer *ws = NULL; /* the plan's partials, sized by the planner */
    if (s == QATTN_OK && plan.workspace_bytes) s = qattn_buffer_alloc(ctx, plan.workspace_bytes, &ws);
    if (s == QATTN_OK) s = qattn_decode_run(ctx, &plan, &a, ws, 0);
    qattn_buffer_free(ctx, ws);
    qattn_buffer_download(ctx, bo, 0, o, sizeof o);
    int ok = s == QATTN_OK && memcmp(o, cache + 3 * D, sizeof o) == 0;
    printf("qattn decode (%s): o = v[slot 3]: %s\n", qattn_status_name(s), ok ? "ok" : "WRONG");
    qattn_buffer *all[] = {bq, bk, bv, bip, bpg, bln, bo};
    for (int i = 0; i < 7; ++i) qattn_buffer_free(ctx, all[i]);
    return ok;
}

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
    if (ok) ok = decode_one_key(ctx);
    qattn_context_free(ctx);
    return ok ? 0 : 1;
}
