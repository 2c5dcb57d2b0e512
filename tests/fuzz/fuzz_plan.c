/* libFuzzer harness: the pure planners (decode, MQA logits, paged MQA
 * logits), called as fuzzers call them (no validation), with fuzzed device
 * capabilities, descriptors and options. Beyond "no crash, no UB": a plan
 * the planner returns must describe the shape it was given, launch within
 * the device's limits it was told, cover every key (decode, paged MQA) or
 * column (MQA), and be sealed (run would accept it). */
#include "fuzz_common.h"
#include "internal.h"

static struct qattn_buffer g_buf;

static qattn_device_caps fuzz_caps(fz *f) {
    qattn_device_caps c;
    memset(&c, 0, sizeof c);
    snprintf(c.arch, sizeof c.arch, "fuzz");
    c.compute_units = fz_i32(f, 132);
    c.subgroup_size_min = fz_u32(f, 32);
    c.subgroup_size_max = fz_u32(f, 32);
    c.max_shared_bytes = fz_u32(f, 49152);
    c.max_workgroup_size = fz_u32(f, 1024);
    c.features = fz_u32(f, 0x1ff);
    c.n_matrix_shapes = fz_i32(f, 2);
    c.matrix_shapes[0] = (qattn_matrix_shape){16, 16, 16, QATTN_F16, QATTN_F32};
    c.matrix_shapes[1] = (qattn_matrix_shape){8, 8, 8, QATTN_F16, QATTN_F32};
    for (int i = 0; i < 2; ++i) {
        if (fz_u8(f) < 200) continue;
        c.matrix_shapes[i].m = (uint16_t)fz_u32(f, c.matrix_shapes[i].m);
        c.matrix_shapes[i].n = (uint16_t)fz_u32(f, c.matrix_shapes[i].n);
        c.matrix_shapes[i].k = (uint16_t)fz_u32(f, c.matrix_shapes[i].k);
        c.matrix_shapes[i].a_type = (qattn_dtype)fz_i32(f, QATTN_F16);
        c.matrix_shapes[i].c_type = (qattn_dtype)fz_i32(f, QATTN_F32);
    }
    return c;
}

static qattn_tensor mk(fz *f, qattn_dtype dt, int32_t rank, int64_t a, int64_t b, int64_t c, int64_t d) {
    const int64_t s[4] = {a, b, c, d};
    qattn_tensor t = qattn_tensor_contiguous(&g_buf, 0, dt, rank, s);
    if (fz_u8(f) >= 160) fz_tensor(f, &t);
    return t;
}

static void reason_ok(const char *r) {
    if (!memchr(r, '\0', QATTN_REASON_BYTES)) fz_fail("plan.reason not terminated");
}

static void fuzz_decode(fz *f, const qattn_device_caps *c) {
    fz_decode_shape s = fz_decode_shape_of(f);
    /* Large shapes too: the planner must bound them itself. */
    if (fz_u8(f) >= 192) {
        s.B = fz_i64(f, s.B);
        s.Hq = fz_i64(f, s.Hq);
        s.Hkv = fz_i64(f, s.Hkv);
    }
    qattn_decode_args a;
    memset(&a, 0, sizeof a);
    g_buf.bytes = UINT64_MAX;
    a.q = mk(f, QATTN_BF16, 4, s.B, s.R, s.Hq, s.D);
    a.k_cache = mk(f, s.kv, 3, s.slots, s.Hkv, s.D, 0);
    a.v_cache = mk(f, s.kv, 3, s.slots, s.Hkv, s.D, 0);
    if (s.kv != QATTN_BF16) {
        a.k_scale = mk(f, QATTN_F32, 2, s.slots, s.Hkv, 0, 0);
        a.v_scale = mk(f, QATTN_F32, 2, s.slots, s.Hkv, 0, 0);
    }
    a.kv_indptr = mk(f, QATTN_I32, 1, fz_inc(s.B), 0, 0, 0);
    a.kv_indices = mk(f, QATTN_I32, 1, s.pages, 0, 0, 0);
    a.kv_lens = mk(f, QATTN_I32, 1, s.B, 0, 0, 0);
    a.o = mk(f, QATTN_BF16, 4, s.B, s.R, s.Hq, s.D);
    a.page_size = fz_i32(f, (int32_t)s.P);
    a.max_kv_len = fz_i32(f, 4096);
    a.sm_scale = 0.125f;
    a.window_left = -1;
    qattn_decode_options o = QATTN_DECODE_OPTIONS_INIT;
    o.variant = (qattn_decode_variant)fz_i32(f, QATTN_DECODE_AUTO);
    o.num_splits = fz_i32(f, 0);
    if (fz_u8(f) & 1) o.variant = (qattn_decode_variant)fz_pick(f, QATTN_DECODE_VARIANT_COUNT);
    qattn_decode_plan p;
    char err[512] = "";
    qattn_status st = qattn_decode_plan_compute(c, &a, fz_u8(f) & 1 ? &o : NULL, &p, err, sizeof err);
    fz_check_status(st, err, "decode_plan_compute");
    if (st != QATTN_OK) return;
    if (p.batch != a.q.shape[0] || p.rows != a.q.shape[1] || p.q_heads != a.q.shape[2] ||
        p.kv_heads != a.k_cache.shape[1] || p.head_dim != a.q.shape[3] || p.max_kv_len != a.max_kv_len)
        fz_fail("decode plan describes another shape");
    if (p.num_splits < 1 || p.num_splits > QATTN_MAX_SPLITS || p.keys_per_split < 1)
        fz_fail("decode plan: %d splits of %d keys", (int)p.num_splits, (int)p.keys_per_split);
    /* The last split runs to the request's end; only a split length clamped
     * below INT32_MAX may leave the product short of max_kv_len. */
    if ((int64_t)p.num_splits * p.keys_per_split < a.max_kv_len && p.keys_per_split != INT32_MAX / 16 * 16)
        fz_fail("decode plan: %d x %d keys do not cover max_kv_len %d", (int)p.num_splits,
                (int)p.keys_per_split, (int)a.max_kv_len);
    if (p.workgroup_size < 1 || p.keys_per_tile < 1 || p.q_heads_per_workgroup < 1 ||
        (p.q_heads / p.kv_heads) % p.q_heads_per_workgroup != 0)
        fz_fail("decode plan: geometry wg %d tile %d qh %d", (int)p.workgroup_size, (int)p.keys_per_tile,
                (int)p.q_heads_per_workgroup);
    if (p.shared_bytes > c->max_shared_bytes)
        fz_fail("decode plan: %u shared bytes > the device's %u", (unsigned)p.shared_bytes,
                (unsigned)c->max_shared_bytes);
    if (p.num_splits > 1) {
        const uint64_t rows = (uint64_t)p.batch * p.rows * p.q_heads * p.num_splits;
        if (p.workspace_bytes < rows * ((uint64_t)p.head_dim_v + 1) * 4)
            fz_fail("decode plan: workspace %llu B cannot hold the partials",
                    (unsigned long long)p.workspace_bytes);
    }
    reason_ok(p.reason);
    qattn_decode_plan sealed;
    qattn__seal_decode_plan(&sealed, &p, &a);
    if (sealed.integrity != p.integrity) fz_fail("decode plan not sealed");
}

static void fuzz_mqa(fz *f, const qattn_device_caps *c) {
    static const int64_t DIMS[4] = {64, 128, 256, 512};
    int64_t S = 1 + fz_pick(f, 64), H = 16 * (1 + fz_pick(f, 8)), D = DIMS[fz_pick(f, 4)];
    int64_t Skv = 1 + (int64_t)fz_bits(f, 2);
    if (fz_u8(f) >= 192) {
        S = fz_i64(f, S);
        H = fz_i64(f, H);
        Skv = fz_i64(f, Skv);
    }
    g_buf.bytes = UINT64_MAX;
    qattn_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = mk(f, QATTN_FP8_E4M3FN, 3, S, H, D, 0);
    a.k = mk(f, QATTN_FP8_E4M3FN, 2, Skv, D, 0, 0);
    a.k_scale = mk(f, QATTN_F32, 1, Skv, 0, 0, 0);
    a.weights = mk(f, QATTN_F32, 2, S, H, 0, 0);
    a.ks = mk(f, QATTN_I32, 1, S, 0, 0, 0);
    a.ke = mk(f, QATTN_I32, 1, S, 0, 0, 0);
    a.logits = mk(f, QATTN_F32, 2, S, Skv, 0, 0);
    qattn_mqa_logits_options o = QATTN_MQA_LOGITS_OPTIONS_INIT;
    o.variant = (qattn_mqa_variant)fz_pick(f, QATTN_MQA_VARIANT_COUNT + 1);
    o.rows_per_subgroup = fz_i32(f, 0);
    o.kv_slices = fz_i32(f, 0);
    qattn_mqa_logits_plan p;
    char err[512] = "";
    qattn_status st = qattn_mqa_logits_plan_compute(c, &a, fz_u8(f) & 1 ? &o : NULL, &p, err, sizeof err);
    fz_check_status(st, err, "mqa_logits_plan_compute");
    if (st != QATTN_OK) return;
    if (p.rows != a.q.shape[0] || p.heads != a.q.shape[1] || p.head_dim != a.q.shape[2] ||
        p.kv_len != a.k.shape[0])
        fz_fail("mqa plan describes another shape");
    if (p.kv_tile < 1 || p.kv_slices < 1 || p.kv_per_slice < 1 || p.rows_per_workgroup < 1 ||
        p.subgroups_per_workgroup < 1 || p.subgroup_size < 1)
        fz_fail("mqa plan: geometry tile %d slices %d per slice %d rows/wg %d", (int)p.kv_tile,
                (int)p.kv_slices, (int)p.kv_per_slice, (int)p.rows_per_workgroup);
    if ((int64_t)p.kv_slices * p.kv_per_slice < p.kv_len)
        fz_fail("mqa plan: %d slices of %d columns do not cover S_kv %d", (int)p.kv_slices,
                (int)p.kv_per_slice, (int)p.kv_len);
    if (p.grid_x < 1 || p.grid_x > 65535 || p.grid_y < 1 || p.grid_y > 65535)
        fz_fail("mqa plan: grid %d x %d", (int)p.grid_x, (int)p.grid_y);
    if (p.shared_bytes > c->max_shared_bytes)
        fz_fail("mqa plan: %u shared bytes > the device's %u", (unsigned)p.shared_bytes,
                (unsigned)c->max_shared_bytes);
    reason_ok(p.reason);
    qattn_mqa_logits_plan sealed;
    qattn__seal_mqa_logits_plan(&sealed, &p, &a);
    if (sealed.integrity != p.integrity) fz_fail("mqa plan not sealed");
}

/* Paged MQA logits: the launch contract of qattn.h's
 * qattn_paged_mqa_logits_plan (grid[0] = num_splits ranges of
 * keys_per_split positions covering max_kv_len, grid[1] the requests up to
 * 65535, grid[2] = 1, no workspace), within the device's limits. */
static void fuzz_paged_mqa(fz *f, const qattn_device_caps *c) {
    static const int64_t DIMS[4] = {64, 128, 256, 512};
    int64_t B = 1 + fz_pick(f, 8), N = 1 + fz_pick(f, 8), H = 1 + fz_pick(f, 64), D = DIMS[fz_pick(f, 4)];
    int64_t P = 1 + fz_pick(f, 64), M = 1 + (int64_t)fz_bits(f, 3);
    if (fz_u8(f) >= 192) {
        B = fz_i64(f, B);
        N = fz_i64(f, N);
        H = fz_i64(f, H);
        M = fz_i64(f, M);
    }
    const int rank3 = fz_u8(f) & 1;
    g_buf.bytes = UINT64_MAX;
    qattn_paged_mqa_logits_args a;
    memset(&a, 0, sizeof a);
    a.q = mk(f, fz_u8(f) & 1 ? QATTN_FP8_E4M3FN : QATTN_FP8_E4M3FNUZ, 4, B, N, H, D);
    if (rank3) {
        a.k_cache = mk(f, QATTN_FP8_E4M3FN, 3, 1000, P, D, 0);
        a.k_scale = mk(f, QATTN_F32, 2, 1000, P, 0, 0);
    } else {
        a.k_cache = mk(f, QATTN_FP8_E4M3FN, 2, 1000 * P, D, 0, 0);
        a.k_scale = mk(f, QATTN_F32, 1, 1000 * P, 0, 0, 0);
    }
    a.weights = mk(f, QATTN_F32, 3, B, N, H, 0);
    a.kv_indptr = mk(f, QATTN_I32, 1, fz_inc(B), 0, 0, 0);
    a.kv_indices = mk(f, QATTN_I32, 1, 1000, 0, 0, 0);
    a.kv_lens = mk(f, QATTN_I32, 1, B, 0, 0, 0);
    a.logits = mk(f, QATTN_F32, 3, B, N, M, 0);
    a.page_size = fz_i32(f, (int32_t)P);
    a.max_kv_len = fz_i32(f, (int32_t)M);
    qattn_paged_mqa_logits_options o = QATTN_PAGED_MQA_LOGITS_OPTIONS_INIT;
    o.variant = (qattn_paged_mqa_variant)fz_pick(f, QATTN_PAGED_MQA_VARIANT_COUNT + 1);
    o.keys_per_split = fz_u8(f) & 1 ? 16 * fz_pick(f, 64) : fz_i32(f, 0);
    qattn_paged_mqa_logits_plan p;
    char err[512] = "";
    qattn_status st = qattn_paged_mqa_logits_plan_compute(c, &a, fz_u8(f) & 1 ? &o : NULL, &p, err, sizeof err);
    fz_check_status(st, err, "paged_mqa_logits_plan_compute");
    if (st != QATTN_OK) return;
    if (p.batch != a.q.shape[0] || p.rows != a.q.shape[1] || p.heads != a.q.shape[2] ||
        p.head_dim != a.q.shape[3] || p.page_size != a.page_size || p.max_kv_len != a.max_kv_len ||
        p.q_dtype != a.q.dtype || p.k_dtype != a.k_cache.dtype)
        fz_fail("paged mqa plan describes another shape");
    if (p.variant <= QATTN_PAGED_MQA_AUTO || p.variant >= QATTN_PAGED_MQA_VARIANT_COUNT)
        fz_fail("paged mqa plan: variant %d", (int)p.variant);
    if (p.workgroup_size < 1 || (uint32_t)p.workgroup_size > c->max_workgroup_size)
        fz_fail("paged mqa plan: workgroup of %d lanes on a device of %u", (int)p.workgroup_size,
                (unsigned)c->max_workgroup_size);
    if (p.shared_bytes > c->max_shared_bytes)
        fz_fail("paged mqa plan: %u shared bytes > the device's %u", (unsigned)p.shared_bytes,
                (unsigned)c->max_shared_bytes);
    if (p.kv_tile < 1 || p.keys_per_split < 1 || p.keys_per_split % p.kv_tile != 0 || p.num_splits < 1)
        fz_fail("paged mqa plan: %d splits of %d keys, tile %d", (int)p.num_splits, (int)p.keys_per_split,
                (int)p.kv_tile);
    if ((int64_t)p.num_splits * p.keys_per_split < a.max_kv_len ||
        (int64_t)(p.num_splits - 1) * p.keys_per_split >= a.max_kv_len ||
        (int64_t)p.num_splits * p.keys_per_split > INT32_MAX)
        fz_fail("paged mqa plan: %d x %d keys for max_kv_len %d", (int)p.num_splits, (int)p.keys_per_split,
                (int)a.max_kv_len);
    const int64_t Bp = a.q.shape[0];
    if (p.grid[0] != (uint32_t)p.num_splits || p.grid[0] > 65535 ||
        p.grid[1] != (uint32_t)(Bp < 65535 ? Bp : 65535) || p.grid[2] != 1)
        fz_fail("paged mqa plan: grid %u x %u x %u", (unsigned)p.grid[0], (unsigned)p.grid[1],
                (unsigned)p.grid[2]);
    if (p.workspace_bytes != 0) fz_fail("paged mqa plan: workspace %llu", (unsigned long long)p.workspace_bytes);
    reason_ok(p.reason);
    qattn_paged_mqa_logits_plan sealed;
    qattn__seal_paged_mqa_logits_plan(&sealed, &p, &a);
    if (sealed.integrity != p.integrity) fz_fail("paged mqa plan not sealed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fz f = {data, size};
    const int op = fz_pick(&f, 3);
    const qattn_device_caps c = fuzz_caps(&f);
    if (op == 0) fuzz_decode(&f, &c);
    else if (op == 1) fuzz_mqa(&f, &c);
    else fuzz_paged_mqa(&f, &c);
    return 0;
}
