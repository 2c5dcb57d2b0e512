/*
 * The HIP backend inside an engine's own stream and graph: qattn ops are
 * enqueued on the caller's stream (qattn_hip_set_stream), captured once into
 * a HIP graph, and the graph replayed after new inputs are written into the
 * same buffers. Copy from here.
 *
 * Build: link qattn::hip and the HIP runtime (CMake: examples/CMakeLists.txt).
 * Exit 0 after two replays; 77 when there is no HIP device.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include <hip/hip_runtime_api.h>
#include <qattn/convert.h>
#include <qattn/hip.h>
#include <qattn/qattn.h>

enum { HQ = 8, HKV = 2, D = 128, P = 16, KEYS = 40, PAGES = 3, SLOTS = PAGES * P };

#define CHECK(call)                                                                            \
    do {                                                                                       \
        if (!(call)) {                                                                         \
            fprintf(stderr, "%s failed: %s\n", #call, ctx ? qattn_last_error(ctx) : "");       \
            return 1;                                                                          \
        }                                                                                      \
    } while (0)

int main(void) {
    qattn_context *ctx = NULL;
    char err[256];
    if (qattn_context_create(qattn_backend_hip(), NULL, &ctx, err, sizeof err) != QATTN_OK) {
        printf("no HIP context: %s\n", err);
        return 77;
    }
    hipStream_t stream;
    CHECK(hipStreamCreate(&stream) == hipSuccess);
    CHECK(qattn_hip_set_stream(ctx, stream) == QATTN_OK); /* every later call enqueues here */

    static uint16_t q[HQ * D], kv[SLOTS * HKV * D], o[HQ * D];
    for (int i = 0; i < SLOTS * HKV * D; ++i) kv[i] = qattn_f32_to_bf16(cosf(0.01f * i));
    const int32_t indptr[2] = {0, PAGES}, pages[PAGES] = {2, 0, 1}, lens[1] = {KEYS};
    qattn_buffer *bq, *bk, *bo, *bi, *bp, *bl, *ws = NULL;
    CHECK(qattn_buffer_alloc(ctx, sizeof q, &bq) == QATTN_OK);
    CHECK(qattn_buffer_alloc(ctx, sizeof kv, &bk) == QATTN_OK);
    CHECK(qattn_buffer_alloc(ctx, sizeof o, &bo) == QATTN_OK);
    CHECK(qattn_buffer_alloc(ctx, sizeof indptr, &bi) == QATTN_OK);
    CHECK(qattn_buffer_alloc(ctx, sizeof pages, &bp) == QATTN_OK);
    CHECK(qattn_buffer_alloc(ctx, sizeof lens, &bl) == QATTN_OK);
    CHECK(qattn_buffer_upload(ctx, bk, 0, kv, sizeof kv) == QATTN_OK);
    CHECK(qattn_buffer_upload(ctx, bi, 0, indptr, sizeof indptr) == QATTN_OK);
    CHECK(qattn_buffer_upload(ctx, bp, 0, pages, sizeof pages) == QATTN_OK);
    CHECK(qattn_buffer_upload(ctx, bl, 0, lens, sizeof lens) == QATTN_OK);

    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    a.q = qattn_tensor_contiguous(bq, 0, QATTN_BF16, 4, (int64_t[]){1, 1, HQ, D});
    a.k_cache = a.v_cache = qattn_tensor_contiguous(bk, 0, QATTN_BF16, 3, (int64_t[]){SLOTS, HKV, D});
    a.kv_indptr = qattn_tensor_contiguous(bi, 0, QATTN_I32, 1, (int64_t[]){2});
    a.kv_indices = qattn_tensor_contiguous(bp, 0, QATTN_I32, 1, (int64_t[]){PAGES});
    a.kv_lens = qattn_tensor_contiguous(bl, 0, QATTN_I32, 1, (int64_t[]){1});
    a.o = qattn_tensor_contiguous(bo, 0, QATTN_BF16, 4, (int64_t[]){1, 1, HQ, D});
    a.page_size = P;
    a.max_kv_len = KEYS;
    a.sm_scale = 1.0f / sqrtf((float)D);
    a.window_left = -1;
    qattn_decode_plan plan;
    CHECK(qattn_decode_plan_create(ctx, &a, NULL, &plan) == QATTN_OK);
    if (plan.workspace_bytes) CHECK(qattn_buffer_alloc(ctx, plan.workspace_bytes, &ws) == QATTN_OK);

    /* Capture once: the graph keeps the buffers' device addresses. Uploads
     * wait for the device, so they stay outside the capture. */
    hipGraph_t graph;
    hipGraphExec_t exec;
    CHECK(hipStreamBeginCapture(stream, hipStreamCaptureModeThreadLocal) == hipSuccess);
    qattn_status s = qattn_decode_run(ctx, &plan, &a, ws, 0);
    CHECK(hipStreamEndCapture(stream, &graph) == hipSuccess && s == QATTN_OK);
    CHECK(hipGraphInstantiate(&exec, graph, NULL, NULL, 0) == hipSuccess);

    for (int step = 0; step < 2; ++step) { /* new inputs, same graph */
        for (int i = 0; i < HQ * D; ++i) q[i] = qattn_f32_to_bf16(sinf(0.1f * i + (float)step));
        CHECK(qattn_buffer_upload(ctx, bq, 0, q, sizeof q) == QATTN_OK);
        CHECK(hipGraphLaunch(exec, stream) == hipSuccess);
        CHECK(qattn_synchronize(ctx) == QATTN_OK);
        CHECK(qattn_buffer_download(ctx, bo, 0, o, sizeof o) == QATTN_OK);
        printf("replay %d: o[0] = %g\n", step, qattn_bf16_to_f32(o[0]));
    }
    hipGraphExecDestroy(exec);
    hipGraphDestroy(graph);
    qattn_buffer *all[] = {bq, bk, bo, bi, bp, bl, ws};
    for (int i = 0; i < 7; ++i) qattn_buffer_free(ctx, all[i]);
    qattn_context_free(ctx);
    hipStreamDestroy(stream);
    return 0;
}
