/*
 * qattn_hip_kv_store_axes: the HIP KV store (backend_hip/kernels/kv_store.hip)
 * over the axes issue 27 added, against the CPU reference, bit for bit
 * (spec 4): every cache format (bf16, fp8 e4m3fn / e4m3fnuz / e5m2, int8)
 * x bf16 and f16 sources x head dims (D, Dv) equal and unequal, down to 16
 * and up to 256, in rank-3 and rank-4 (paged, head-major) caches.
 *
 * The sources mix random values with the rows the encoders must get
 * exactly right: all zeros (scale 1), -0.0, values on e5m2's and e4m3's
 * rounding ties, values past the format's largest (saturation), f16
 * subnormals, and one row with an inf and a NaN. Slots are shuffled, with
 * padding (-1) and slots past the cache, which must be skipped. Caches and
 * scales are poisoned identically on both sides and compared in full, so a
 * write to a slot that should be skipped, or a byte left unwritten, fails.
 * Exit 0: all bit-exact; 1: a difference (case, seed and first byte
 * printed); 77: no HIP device (skipped, never passed).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "qattn/convert.h"
#include "qattn/hip.h"
#include "qattn/qattn.h"
#include "test_rng.h"

#define SKIP 77

static qattn_context *dev, *ref;

typedef struct pair {
    qattn_buffer *d, *r;
} pair;

/* A descriptor of the given shape and strides (elements). */
static qattn_tensor strided(qattn_buffer *b, qattn_dtype dt, int rank, const int64_t *shape, const int64_t *st) {
    qattn_tensor t = qattn_tensor_contiguous(b, 0, dt, rank, shape);
    for (int i = 0; i < rank; ++i) t.strides[i] = st[i];
    return t;
}

static pair up(const void *data, size_t bytes) {
    pair p = {NULL, NULL};
    if (qattn_buffer_alloc(dev, bytes, &p.d) != QATTN_OK || qattn_buffer_alloc(ref, bytes, &p.r) != QATTN_OK ||
        qattn_buffer_upload(dev, p.d, 0, data, bytes) != QATTN_OK ||
        qattn_buffer_upload(ref, p.r, 0, data, bytes) != QATTN_OK) {
        fprintf(stderr, "buffer setup failed: %s %s\n", qattn_last_error(dev), qattn_last_error(ref));
        exit(1);
    }
    return p;
}

static void drop(pair p) {
    qattn_buffer_free(dev, p.d);
    qattn_buffer_free(ref, p.r);
}

/* The two sides' bytes of p are equal; prints the first difference. */
static int same(pair p, size_t bytes, const char *what, const char *name, const qt_rng *rng) {
    unsigned char *a = malloc(bytes), *b = malloc(bytes);
    if (qattn_buffer_download(dev, p.d, 0, a, bytes) != QATTN_OK ||
        qattn_buffer_download(ref, p.r, 0, b, bytes) != QATTN_OK) {
        fprintf(stderr, "download failed: %s\n", qattn_last_error(dev));
        exit(1);
    }
    int ok = 1;
    for (size_t i = 0; i < bytes && ok; ++i)
        if (a[i] != b[i]) {
            char desc[160];
            printf("FAIL %s: %s byte %zu: hip 0x%02x, cpu 0x%02x (%s)\n", name, what, i, a[i], b[i],
                   qt_rng_describe(rng, desc, sizeof desc));
            ok = 0;
        }
    free(a);
    free(b);
    return ok;
}

static uint16_t half_of(float x, qattn_dtype src) {
    return src == QATTN_F16 ? qattn_f32_to_f16(x) : qattn_f32_to_bf16(x);
}

/* Fills row (t, g) of a [T, H, n] source: random, or one of the special rows. */
static void fill_row(qt_rng *rng, uint16_t *row, int n, int kind, qattn_dtype src, qattn_dtype cache) {
    const float fmax = cache == QATTN_I8 ? 127.0f : cache == QATTN_BF16 ? 448.0f : qattn_fp8_max(cache);
    for (int d = 0; d < n; ++d) {
        float x = qt_signed(rng, 0.01f, 3.0f);
        switch (kind) {
        case 1: x = d == 1 ? -0.0f : 0.0f; break; /* amax 0: scale 1, -0 */
        case 2: /* amax = fmax: the scale is 1 and the codes are the values; ties of every format */
            x = d == 0 ? fmax : (float)(int)qt_int(rng, -64, 64) * 0.125f + 0.0625f;
            break;
        case 3: x = d % 7 == 0 ? -5e-6f : x * 1e-4f; break; /* f16 subnormals, small scales */
        case 4: x = d == 3 ? INFINITY : d == 5 ? NAN : x; break; /* inf and NaN in the row */
        case 5: x = d % 3 == 0 ? 60000.0f : x * 100.0f; break; /* near f16's and e5m2's largest */
        default: break;
        }
        row[d] = half_of(x, src);
    }
}

/* One case: T tokens of Hkv heads into a cache of n_slots slots. */
static int kv_case(int idx, qattn_dtype cache, qattn_dtype src, int D, int Dv, int paged) {
    char name[160];
    snprintf(name, sizeof name, "hip_kv_store/%s_src%s_D%d_Dv%d%s", qattn_dtype_name(cache), qattn_dtype_name(src), D,
             Dv, paged ? "_paged" : "");
    qt_rng rng = qt_rng_for(name);
    qt_rng_case(&rng, (uint64_t)idx);
    const int64_t T = 37, H = 3, P = 8, n_pages = 7, n_slots = n_pages * P;
    const size_t es = qattn_dtype_size(cache);
    const int scaled = cache != QATTN_BF16;
    uint16_t *kn = malloc((size_t)(T * H * D) * 2), *vn = malloc((size_t)(T * H * Dv) * 2);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t g = 0; g < H; ++g) {
            const int kind = (int)((t * H + g) % 9); /* kinds 1..5 on some rows, random on the rest */
            fill_row(&rng, kn + (t * H + g) * D, D, kind <= 5 ? kind : 0, src, cache);
            fill_row(&rng, vn + (t * H + g) * Dv, Dv, kind <= 5 ? (kind + 2) % 6 : 0, src, cache);
        }
    /* slots: a shuffled subset of the cache, padding, and slots past it */
    int32_t *slots = malloc((size_t)T * 4), *perm = malloc((size_t)n_slots * 4);
    for (int64_t s = 0; s < n_slots; ++s) perm[s] = (int32_t)s;
    qt_shuffle_i32(&rng, perm, (size_t)n_slots);
    for (int64_t t = 0; t < T; ++t) slots[t] = t % 11 == 4 ? -1 : t % 13 == 6 ? (int32_t)(n_slots + t) : perm[t];

    const size_t kc = (size_t)(n_slots * H * D) * es, vc = (size_t)(n_slots * H * Dv) * es;
    const size_t sc = (size_t)(n_slots * H) * 4;
    unsigned char *poison = malloc(kc > vc ? kc : vc);
    memset(poison, 0xA5, kc > vc ? kc : vc);
    pair bkn = up(kn, (size_t)(T * H * D) * 2), bvn = up(vn, (size_t)(T * H * Dv) * 2), bsl = up(slots, (size_t)T * 4);
    pair bkc = up(poison, kc), bvc = up(poison, vc), bks = up(poison, sc), bvs = up(poison, sc);

    int ok = 1;
    for (int w = 0; w < 2; ++w) {
        const int d = w == 0;
        qattn_kv_store_args a;
        memset(&a, 0, sizeof a);
        const int64_t sk[3] = {T, H, D}, sv[3] = {T, H, Dv}, s1[1] = {T};
        a.k_new = qattn_tensor_contiguous(d ? bkn.d : bkn.r, 0, src, 3, sk);
        a.v_new = qattn_tensor_contiguous(d ? bvn.d : bvn.r, 0, src, 3, sv);
        a.slot_mapping = qattn_tensor_contiguous(d ? bsl.d : bsl.r, 0, QATTN_I32, 1, s1);
        if (!paged) {
            const int64_t ck[3] = {n_slots, H, D}, cv[3] = {n_slots, H, Dv}, cs[2] = {n_slots, H};
            a.k_cache = qattn_tensor_contiguous(d ? bkc.d : bkc.r, 0, cache, 3, ck);
            a.v_cache = qattn_tensor_contiguous(d ? bvc.d : bvc.r, 0, cache, 3, cv);
            if (scaled) {
                a.k_scale = qattn_tensor_contiguous(d ? bks.d : bks.r, 0, QATTN_F32, 2, cs);
                a.v_scale = qattn_tensor_contiguous(d ? bvs.d : bvs.r, 0, QATTN_F32, 2, cs);
            }
        } else {
            /* head-major pages: [page, P, head, d] with strides of [page, head, P, d]
             * (scales keep the head contiguous, as the API requires) */
            const int64_t ck[4] = {n_pages, P, H, D}, cv[4] = {n_pages, P, H, Dv}, cs[3] = {n_pages, P, H};
            const int64_t tk[4] = {H * P * D, D, P * D, 1}, tv[4] = {H * P * Dv, Dv, P * Dv, 1};
            const int64_t ts[3] = {P * H, H, 1};
            a.k_cache = strided(d ? bkc.d : bkc.r, cache, 4, ck, tk);
            a.v_cache = strided(d ? bvc.d : bvc.r, cache, 4, cv, tv);
            if (scaled) {
                a.k_scale = strided(d ? bks.d : bks.r, QATTN_F32, 3, cs, ts);
                a.v_scale = strided(d ? bvs.d : bvs.r, QATTN_F32, 3, cs, ts);
            }
        }
        const qattn_status s = qattn_kv_store(d ? dev : ref, &a);
        if (s != QATTN_OK) {
            printf("FAIL %s: %s: %s\n", name, d ? "hip" : "cpu", qattn_last_error(d ? dev : ref));
            ok = 0;
        }
    }
    if (ok) {
        ok &= same(bkc, kc, "k_cache", name, &rng);
        ok &= same(bvc, vc, "v_cache", name, &rng);
        if (scaled) {
            ok &= same(bks, sc, "k_scale", name, &rng);
            ok &= same(bvs, sc, "v_scale", name, &rng);
        }
    }
    drop(bkn), drop(bvn), drop(bsl), drop(bkc), drop(bvc), drop(bks), drop(bvs);
    free(kn), free(vn), free(slots), free(perm), free(poison);
    return ok;
}

int main(void) {
    char err[1024] = "";
    qattn_status s = qattn_context_create(qattn_backend_hip(), NULL, &dev, err, sizeof err);
    if (s == QATTN_ERR_BACKEND_UNAVAILABLE) {
        printf("SKIP: %s\n", err);
        return SKIP;
    }
    if (s != QATTN_OK || qattn_context_create(qattn_backend_cpu(), NULL, &ref, err, sizeof err) != QATTN_OK) {
        fprintf(stderr, "context: %s: %s\n", qattn_status_name(s), err);
        return 1;
    }
    qattn_device_caps caps;
    qattn_get_caps(dev, &caps);
    printf("hip kv_store axes on %s, seed 0x%016llx\n", caps.arch, (unsigned long long)qt_base_seed());
    static const qattn_dtype caches[] = {QATTN_BF16, QATTN_FP8_E4M3FN, QATTN_FP8_E4M3FNUZ, QATTN_I8, QATTN_FP8_E5M2};
    static const qattn_dtype srcs[] = {QATTN_BF16, QATTN_F16};
    static const int dims[][2] = {{128, 128}, {96, 96}, {192, 128}, {16, 48}, {256, 80}};
    int idx = 0, n_ok = 0;
    for (size_t c = 0; c < sizeof caches / sizeof caches[0]; ++c)
        for (size_t f = 0; f < 2; ++f)
            for (size_t d = 0; d < sizeof dims / sizeof dims[0]; ++d) {
                const int paged = (int)((c + f + d) % 2);
                n_ok += kv_case(idx++, caches[c], srcs[f], dims[d][0], dims[d][1], paged);
            }
    qattn_context_free(dev);
    qattn_context_free(ref);
    printf("hip kv_store axes: %d of %d cases bit-exact\n", n_ok, idx);
    return n_ok == idx ? 0 : 1;
}
