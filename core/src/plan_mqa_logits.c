/*
 * The FP8 MQA logits planner (spec section 3): picks a kernel variant and
 * its launch geometry from shapes and device capabilities alone.
 *
 * Variants (shaders/mqa_logits_*.comp implement them; the geometry formulas
 * below are mirrored there and must stay in step):
 * - direct: every thread owns DIRECT_COLS_PER_THREAD KV columns of a tile and
 *   reads their keys straight from memory; all subgroups keep all of the
 *   workgroup's rows (rows_per_workgroup == rows_per_subgroup). No shared
 *   memory, so it runs for every head dim on every device.
 * - staged: the workgroup decodes each KV tile once into shared memory (f16,
 *   exact for fp8) and each subgroup keeps only its own rows.
 * - coopmat: the q.k products run on the matrix unit (f16 x f16 -> f32
 *   cooperative matrices; fp8 codes decode to f16 exactly). A subgroup holds
 *   16*MT consecutive (row, head) pairs of q in registers for the whole KV
 *   range; the ReLU x weight epilogue and the head reduction follow each tile.
 *
 * Downgrade chain for AUTO, each step recorded in plan->reason:
 *   coopmat  (needs a cooperative-matrix f16 16x16x16 -> f32 shape, H % 16 == 0,
 *             its shared memory within the device limit, >= 16 rows)
 *   -> staged (needs its KV tile within the device's shared memory, >= 16 rows)
 *   -> direct (always possible).
 * A pinned variant (options or QATTN_MQA_VARIANT) that fails its gate is
 * QATTN_ERR_VARIANT_GATE naming the failed condition; the "fewer than 16
 * rows" rule is a preference, not a gate.
 *
 * The plan depends on shapes only, never on ks/ke values, so a graph-captured
 * call and an eager call of the same shape get the same split.
 *
 * Index arithmetic contract with the kernels: offsets inside a row of q,
 * weights or logits, inside one KV tile of k, column indices and slice/tile
 * bounds are int32, and the planner refuses shapes where one of those could
 * overflow. Row bases (row x row stride of q, weights, logits; column x row
 * stride of k) are int32 too unless one of them can pass INT32_MAX; then
 * plan->index64 = 1 and the kernels form them in 64 bits.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "qattn/experimental.h"

/* ---- geometry constants shared with the shaders ------------------------ */
#define DIRECT_THREADS 128        /* direct workgroup size (threads) */
#define DIRECT_COLS_PER_THREAD 2  /* q decodes shared by two columns */
#define STAGED_SUBGROUPS 4        /* staged: subgroups per workgroup */
#define STAGED_TILE 64            /* staged: KV columns per tile (>= subgroup) */
#define CM_DCHUNK 64              /* coopmat: q staged 16 pairs x 64 dims at a time */
#define CM_PAD 8                  /* coopmat: f16 padding per shared row (bank spread) */
#define MIN_ROWS_STAGED 16        /* fewer rows keep the direct variant */
#define SLICE_MIN_KV 16384        /* KV shorter than this is never split */
#define SLICE_MIN_COLS 4096       /* a slice amortises its q staging over >= this */
#define SLICE_WAVES 16            /* workgroups in flight x this = split target */
#define MAX_GRID 65535            /* Vulkan's guaranteed maxComputeWorkGroupCount */

const char *qattn_mqa_variant_name(qattn_mqa_variant v) {
    switch (v) {
    case QATTN_MQA_AUTO: return "auto";
    case QATTN_MQA_DIRECT: return "direct";
    case QATTN_MQA_STAGED: return "staged";
    case QATTN_MQA_COOPMAT: return "coopmat";
    default: return "invalid";
    }
}

typedef struct shape {
    int64_t S, H, D, S_kv;
} shape;

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

#define add_reason(p, ...) qattn__append_reason((p)->reason, sizeof (p)->reason, __VA_ARGS__)

/* Lanes the SIMT variants lay a subgroup out for. They use no subgroup
 * operations, so any real width works; the device's widest keeps a
 * subgroup's columns contiguous in one hardware subgroup. */
static int32_t simt_subgroup(const qattn_device_caps *c) {
    int64_t sg = c->subgroup_size_max ? c->subgroup_size_max : 32;
    return (int32_t)(sg < 1 ? 1 : sg > 128 ? 128 : sg);
}

/* Threads a workgroup may have (the device's limit, or Vulkan's minimum). */
static int64_t max_threads(const qattn_device_caps *c) {
    return c->max_workgroup_size ? c->max_workgroup_size : 128;
}

/* Rows per subgroup of the SIMT variants.
 * - Head count (register budget): each lane keeps one partial sum per row
 *   and column for a chunk of heads, and a row's work per column is H dot
 *   products, so rows x heads per subgroup stays <= 128: 4 rows up to 32
 *   heads, 2 up to 64, 1 above.
 * - Rows and KV length: rows of a workgroup compute the union of their
 *   windows. Without a cached prefix (S_kv < 2 S: causal prefill) windows
 *   differ by a column per row, so 2 rows per subgroup only pay from 4096
 *   rows and 1 below; packed sequences (S_kv < S: many short windows) keep
 *   1; with a cached prefix (S_kv >= 2 S) windows are long and alike and the
 *   head-count limit stands. */
static int32_t simt_rows_per_subgroup(const shape *s) {
    int32_t r = s->H <= 32 ? 4 : s->H <= 64 ? 2 : 1;
    if (s->S_kv < s->S) return 1;
    if (s->S_kv < 2 * s->S) return s->S >= 4096 ? (r < 2 ? r : 2) : 1;
    return r;
}

/* Shared bytes of each variant (the shaders declare exactly these). */
static int64_t staged_shared(int64_t kt, int64_t D) {
    return kt * D * 2 /* f16 key tile */ + kt * 4 /* k_scale */;
}

/* Pins of the coopmat geometry (qattn_experimental_mqa_logits_plan_create,
 * for tuning tools and tests): 0 = planner. */
typedef qattn_mqa_logits_geometry cm_pin;

typedef struct cm_geom {
    int32_t mt, nt, nsg, spr, rpsg, sg, tm;
    int64_t shared;
} cm_geom;

static int64_t coopmat_shared(const cm_geom *g, int64_t D) {
    int64_t bn = 16 * g->nt;
    /* The key tile, and before the KV loop each subgroup's 16 x CM_DCHUNK
     * chunk of q on its way into registers, share one f16 array. */
    int64_t kbuf = max64(bn * (D + CM_PAD), (int64_t)g->nsg * 16 * (CM_DCHUNK + CM_PAD));
    /* Per-row TM x bn partials, f32, column-major with TM + 4 floats per
     * column (conflict-free vec4 reads of the head sum). */
    int64_t scratch = (int64_t)g->nsg * g->rpsg * bn * (g->tm + 4);
    int64_t rows = (int64_t)g->nsg / g->spr * g->rpsg;
    return kbuf * 2 + scratch * 4 + 2 * bn * 4 /* |k_scale| of two tiles */ + rows * 8 /* windows */;
}

/* The matrix-unit shape the coopmat kernel uses: an f16 x f16 -> f32
 * subgroup shape whose M, N and K divide 16 (the kernel composes 16 x 16 x 16
 * blocks from it), the largest one listed (16x16x16 on NVIDIA and AMD, 8x8x8
 * on lavapipe). The plan carries it (matrix_shape) to the backend. Returns
 * 0 when none is listed. */
static int pick_coopmat_shape(const qattn_device_caps *c, qattn_matrix_shape *out) {
    int found = 0;
    for (int32_t i = 0; i < c->n_matrix_shapes && i < QATTN_MAX_MATRIX_SHAPES; ++i) {
        const qattn_matrix_shape *m = &c->matrix_shapes[i];
        if (m->a_type != QATTN_F16 || m->c_type != QATTN_F32) continue;
        if ((m->m != 8 && m->m != 16) || (m->n != 8 && m->n != 16) || (m->k != 8 && m->k != 16))
            continue;
        if (!found || m->m * m->n * m->k > out->m * out->n * out->k ||
            (m->m * m->n * m->k == out->m * out->n * out->k && m->m > out->m)) {
            *out = *m;
            found = 1;
        }
    }
    return found;
}

/* The matrix shape of the staged variant where a backend's staged kernel
 * issues fp8 matrix products (gfx942: 16x16x32 fp8 -> f32 MFMA, listed by
 * the HIP backend for exactly that kernel, head dims up to 256); zero, the
 * FMA form, everywhere else. */
static void pick_staged_matrix(const qattn_device_caps *c, const shape *s, qattn_matrix_shape *out) {
    memset(out, 0, sizeof *out);
    if (s->D > 256) return;
    for (int32_t i = 0; i < c->n_matrix_shapes && i < QATTN_MAX_MATRIX_SHAPES; ++i) {
        const qattn_matrix_shape *m = &c->matrix_shapes[i];
        if (m->a_type == QATTN_FP8_E4M3FNUZ && m->c_type == QATTN_F32 && m->m == 16 && m->n == 16 &&
            m->k == 32) {
            *out = *m;
            return;
        }
    }
}

/* The widest q and k load (bytes, 16 at most) every row start allows: the
 * offsets and the strides of every dimension but the last (the backend
 * checks the buffers' own addresses at run). */
static int32_t load_bytes(const qattn_mqa_logits_args *a) {
    const qattn_tensor *t2[2] = {&a->q, &a->k};
    uint64_t bits = 16;
    for (int i = 0; i < 2; ++i) {
        const qattn_tensor *t = t2[i];
        bits |= t->offset;
        for (int d = 0; d + 1 < t->rank; ++d)
            if (t->shape[d] > 1) bits |= (uint64_t)t->strides[d] * qattn_dtype_size(t->dtype);
    }
    return (int32_t)(bits & (~bits + 1)); /* lowest set bit */
}

/* Coopmat geometry, or 0 with the reason in why.
 * - Shape: pick_coopmat_shape(); the geometry below counts in 16-blocks.
 * - Subgroup: 32 lanes where the device can run them (the matrix shapes of
 *   RDNA and NVIDIA are reported for 32), else its only width.
 * - MT (16-pair m-tiles of q per subgroup) from the register budget: q stays
 *   in registers as f16 fragments for the whole KV range, 16*MT*D/sg halves
 *   per lane: at most 128 registers at 32 lanes (MT = 4 at D = 128, 2 at
 *   D = 256, 1 at D = 512: the most q each B fragment loaded from shared
 *   memory is used against; docs/perf_mqa_notes.md has the timings). MT
 *   and H/16 must divide one another so a tile never straddles rows.
 * - A row may spread over up to H/16 subgroups; the workgroup always holds
 *   at least two rows: one-row geometries are the ones an open fault gives
 *   wrong results (docs/perf_mqa_notes.md).
 * - NT (16-column n-tiles per KV tile): accumulators MT*NT*256/sg floats per
 *   lane <= 32 (registers go to q first), at most 4; lowered until the
 *   shared memory fits.
 * - Subgroups: at least 4 and a multiple of the subgroups one row needs,
 *   and two rows' worth at least; the experimental geometry pin
 *   rows_per_workgroup may ask for any multiple of the rows a subgroup
 *   holds but one: the gate refuses the one-row geometries (the open fault
 *   above) and the parity suite's one-row cases report that refusal. */
static int coopmat_geometry(const qattn_device_caps *c, const shape *s, int32_t pin_rows,
                            const cm_pin *pin, cm_geom *g, char *why, size_t n) {
    if (!(c->features & QATTN_FEAT_COOPMAT)) {
        snprintf(why, n, "coopmat: device has no cooperative matrices");
        return 0;
    }
    qattn_matrix_shape shape;
    if (!pick_coopmat_shape(c, &shape)) {
        snprintf(why, n, "coopmat: device lists no f16 x f16 -> f32 matrix shape with M, N, K in {8, 16}");
        return 0;
    }
    if (s->H % 16 != 0) {
        snprintf(why, n, "coopmat: H = %" PRId64 " is not a multiple of 16", s->H);
        return 0;
    }
    int64_t sg;
    if (c->subgroup_size_min <= 32 && 32 <= c->subgroup_size_max) sg = 32;
    else sg = c->subgroup_size_max;
    if (sg < 4 || sg > 128) {
        snprintf(why, n, "coopmat: subgroup size %" PRId64 " unsupported (4..128)", sg);
        return 0;
    }
    if (c->subgroup_size_min != c->subgroup_size_max &&
        !(c->features & QATTN_FEAT_SUBGROUP_SIZE_CONTROL)) {
        snprintf(why, n, "coopmat: subgroup size varies (%u..%u) and cannot be pinned",
                 (unsigned)c->subgroup_size_min, (unsigned)c->subgroup_size_max);
        return 0;
    }
    const int64_t units = s->H / 16; /* m-tiles per row */
    int64_t mt;
    if (pin_rows > 1) {
        mt = pin_rows * units; /* whole rows per subgroup */
        if (mt > 4) {
            snprintf(why, n,
                     "coopmat: rows_per_subgroup %d of H = %" PRId64 " needs %" PRId64
                     " m-tiles of 16 heads per subgroup (at most 4)",
                     (int)pin_rows, s->H, mt);
            return 0;
        }
        if (16 * mt * s->D > 256 * sg) {
            snprintf(why, n,
                     "coopmat: rows_per_subgroup %d keeps %" PRId64 " q halves per lane (> 256) for "
                     "D = %" PRId64,
                     (int)pin_rows, 16 * mt * s->D / sg, s->D);
            return 0;
        }
    } else {
        mt = max64(1, min64(4, 16 * sg / s->D));
        if (pin_rows == 1) mt = min64(mt, units); /* never two rows in a subgroup */
    }
    while (mt > 1 && units % mt != 0 && mt % units != 0) --mt;
    if (pin->m_tiles) {
        if (pin->m_tiles != 1 && pin->m_tiles != 2 && pin->m_tiles != 4) {
            snprintf(why, n, "coopmat: geometry.m_tiles %d, expected 1, 2 or 4", (int)pin->m_tiles);
            return 0;
        }
        if (units % pin->m_tiles != 0 && pin->m_tiles % units != 0) {
            snprintf(why, n, "coopmat: geometry.m_tiles %d and H / 16 = %" PRId64 " do not divide one another",
                     (int)pin->m_tiles, units);
            return 0;
        }
        mt = pin->m_tiles;
    }
    g->sg = (int32_t)sg;
    g->tm = shape.m;
    g->mt = (int32_t)mt;
    g->spr = (int32_t)max64(1, units / mt);
    g->rpsg = (int32_t)max64(1, mt / units);
    g->nsg = (int32_t)(g->spr * max64(2, cdiv(4, g->spr))); /* >= 4 subgroups, >= 2 rows */
    if (pin->rows_per_workgroup == 1) {
        /* One row per workgroup hits the open fault (docs/perf_mqa_notes.md):
         * no plan, pinned or not, runs it. */
        snprintf(why, n, "coopmat: geometry.rows_per_workgroup 1: one row per workgroup gives wrong "
                         "results on the H200 (fault not located); 2 or more");
        return 0;
    }
    if (pin->rows_per_workgroup) {
        if (pin->rows_per_workgroup < 1 || pin->rows_per_workgroup % g->rpsg != 0 ||
            pin->rows_per_workgroup / g->rpsg * (int64_t)g->spr > 32) {
            snprintf(why, n, "coopmat: geometry.rows_per_workgroup %d is not a multiple of the %d rows a "
                     "subgroup holds (or needs more than 32 subgroups)", (int)pin->rows_per_workgroup,
                     (int)g->rpsg);
            return 0;
        }
        g->nsg = pin->rows_per_workgroup / g->rpsg * g->spr;
    }
    if ((int64_t)g->nsg * sg > max_threads(c)) {
        snprintf(why, n, "coopmat: %d subgroups of %" PRId64 " lanes exceed the %" PRId64
                 "-thread workgroup limit", (int)g->nsg, sg, max_threads(c));
        return 0;
    }
    int64_t nt = min64(4, max64(1, (sg / 8) / mt));
    if (pin->n_tiles) {
        if (pin->n_tiles < 1 || pin->n_tiles > 4) {
            snprintf(why, n, "coopmat: geometry.n_tiles %d, expected 1..4", (int)pin->n_tiles);
            return 0;
        }
        g->nt = pin->n_tiles;
        g->shared = coopmat_shared(g, s->D);
        if (g->shared <= c->max_shared_bytes) return 1;
        snprintf(why, n, "coopmat: geometry.n_tiles %d needs %" PRId64 " B of shared memory, device allows %u",
                 (int)pin->n_tiles, g->shared, (unsigned)c->max_shared_bytes);
        return 0;
    }
    for (; nt >= 1; --nt) {
        g->nt = (int32_t)nt;
        g->shared = coopmat_shared(g, s->D);
        if (g->shared <= c->max_shared_bytes) return 1;
    }
    g->nt = 1;
    g->shared = coopmat_shared(g, s->D);
    snprintf(why, n, "coopmat: needs %" PRId64 " B of shared memory for D = %" PRId64
             ", device allows %u", g->shared, s->D, (unsigned)c->max_shared_bytes);
    return 0;
}

/* Fills the per-variant part of the plan; returns 0 with why when the
 * variant's gate fails. */
static int fill_variant(const qattn_device_caps *c, const shape *s, qattn_mqa_variant v,
                        int32_t pin_rows, const cm_pin *pin, qattn_mqa_logits_plan *p, char *why,
                        size_t n) {
    if (v == QATTN_MQA_COOPMAT) {
        cm_geom g;
        if (!coopmat_geometry(c, s, pin_rows, pin, &g, why, n)) return 0;
        p->subgroup_size = g.sg;
        p->rows_per_subgroup = g.rpsg;
        p->subgroups_per_workgroup = g.nsg;
        p->rows_per_workgroup = g.nsg / g.spr * g.rpsg;
        p->m_tiles = g.mt;
        p->subgroups_per_row = g.spr;
        p->n_tiles = g.nt;
        p->kv_tile = 16 * g.nt;
        p->shared_bytes = (uint32_t)g.shared;
        return 1;
    }
    const int32_t sg = simt_subgroup(c);
    const int32_t rps = pin_rows ? pin_rows : simt_rows_per_subgroup(s);
    p->subgroup_size = sg;
    p->rows_per_subgroup = rps;
    if (v == QATTN_MQA_STAGED) {
        int64_t nsg = STAGED_SUBGROUPS;
        while (nsg > 1 && nsg * sg > max_threads(c)) --nsg;
        int64_t kt = max64(STAGED_TILE, sg);
        int64_t sh = staged_shared(kt, s->D);
        if (sh > c->max_shared_bytes) {
            snprintf(why, n, "staged: needs %" PRId64 " B of shared memory for D = %" PRId64
                     ", device allows %u", sh, s->D, (unsigned)c->max_shared_bytes);
            return 0;
        }
        p->subgroups_per_workgroup = (int32_t)nsg;
        p->rows_per_workgroup = (int32_t)nsg * rps;
        p->kv_tile = (int32_t)kt;
        p->shared_bytes = (uint32_t)sh;
        pick_staged_matrix(c, s, &p->matrix_shape);
        return 1;
    }
    /* direct */
    int64_t threads = min64(DIRECT_THREADS, max_threads(c));
    threads = max64(sg, threads / sg * sg);
    p->subgroups_per_workgroup = (int32_t)(threads / sg);
    p->rows_per_workgroup = rps;
    p->kv_tile = (int32_t)(threads * DIRECT_COLS_PER_THREAD);
    p->shared_bytes = 0;
    return 1;
}

/* Workgroups of this plan one compute unit holds at a time: limited by
 * shared memory (the per-workgroup limit stands in for the per-unit budget,
 * which is at least as large) and capped at 4 for register pressure. */
static int64_t occupancy(const qattn_device_caps *c, const qattn_mqa_logits_plan *p) {
    if (p->shared_bytes == 0) return 4;
    return max64(1, min64(4, (int64_t)c->max_shared_bytes / p->shared_bytes));
}

/* KV slices (grid.y). Only KV ranges >= 16k are split. The count makes
 * SLICE_WAVES times the workgroups the device holds at once (compute units x
 * occupancy), so the last wave's imbalance is small; each slice keeps
 * >= SLICE_MIN_COLS columns so q staging stays amortised. Tiles are dealt
 * out evenly, the first (T mod G) slices one tile longer: the slices that
 * start last are the smallest. */
static void choose_slices(const qattn_device_caps *c, const shape *s, int32_t pinned,
                          qattn_mqa_logits_plan *p) {
    const int64_t tiles = cdiv(s->S_kv, p->kv_tile);
    const int64_t row_blocks = cdiv(s->S, p->rows_per_workgroup);
    int64_t g = 1;
    if (pinned > 0) {
        g = pinned;
        if (g > tiles || g > MAX_GRID) {
            g = min64(tiles, MAX_GRID);
            add_reason(p, "kv_slices %d clamped to %" PRId64 " (%" PRId64 " tiles of %d)",
                       (int)pinned, g, tiles, (int)p->kv_tile);
        }
    } else if (s->S_kv >= SLICE_MIN_KV) {
        int64_t cus = c->compute_units > 0 ? c->compute_units : 1;
        int64_t target = SLICE_WAVES * cus * occupancy(c, p);
        g = cdiv(target, row_blocks);
        int64_t most = max64(1, tiles / max64(1, SLICE_MIN_COLS / p->kv_tile));
        g = max64(1, min64(min64(g, most), MAX_GRID));
    }
    p->kv_slices = (int32_t)g;
    p->kv_per_slice = (int32_t)(cdiv(tiles, g) * p->kv_tile);
    p->kv_tiles = (int32_t)tiles;
    p->row_blocks = (int32_t)row_blocks;
    p->grid_x = (int32_t)min64(row_blocks, MAX_GRID);
    p->grid_y = (int32_t)g;
}

/* The int32 quantities the kernels compute, checked here. */
static qattn_status check_int32(const qattn_mqa_logits_args *a, const shape *s,
                                const qattn_mqa_logits_plan *p, char *err, size_t n) {
    const int64_t lim = INT32_MAX;
    /* Tile and slice ends: tiles x kv_tile may pass S_kv by up to a tile. */
    if (cdiv(s->S_kv, p->kv_tile) * p->kv_tile > lim)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "k: S_kv %" PRId64 " rounded up to %d-column tiles exceeds int32", s->S_kv,
                          (int)p->kv_tile);
    if (cdiv(s->S, p->rows_per_workgroup) * p->rows_per_workgroup > lim)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "q: S %" PRId64 " rounded up to %d-row blocks exceeds int32", s->S,
                          (int)p->rows_per_workgroup);
    /* Offsets inside one row of q / weights and inside one KV tile. */
    if ((s->H - 1) * a->q.strides[1] + s->D > lim)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW, "q: one row spans more than int32 elements");
    if ((s->H - 1) * a->weights.strides[1] + 1 > lim)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "weights: one row spans more than int32 elements");
    if ((int64_t)p->kv_tile * a->k.strides[0] + s->D > lim)
        return qattn__err(err, n, QATTN_ERR_OVERFLOW,
                          "k: one %d-column tile spans more than int32 elements", (int)p->kv_tile);
    return QATTN_OK;
}

/* Whether the largest row base of a tensor passes int32: (rows - 1) x row
 * stride plus the row's own extent. */
static int row_base_wide(const qattn_tensor *t, int64_t row_extent) {
    int64_t rows = t->shape[0];
    if (rows <= 1) return 0;
    int64_t st = t->strides[0];
    if (st > 0 && rows - 1 > (INT32_MAX - row_extent) / st) return 1;
    return 0;
}

static qattn_status plan_compute(const qattn_device_caps *caps, const qattn_mqa_logits_args *args,
                                 const qattn_mqa_logits_options *options, const cm_pin *pin,
                                 qattn_mqa_logits_plan *plan, char *err, size_t err_size) {
    if (!args) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "args: NULL");
    if (!plan) return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status bounds = qattn__check_caps(caps, err, err_size);
    if (bounds == QATTN_OK) bounds = qattn__check_mqa_logits_shapes(args, err, err_size);
    if (bounds != QATTN_OK) return bounds;
    qattn_mqa_logits_options opt; /* what follows reads this build's layout only */
    bounds = qattn__read_mqa_logits_options(options, &opt, err, err_size);
    if (bounds != QATTN_OK) return bounds;
    if ((int)opt.variant < QATTN_MQA_AUTO || opt.variant >= QATTN_MQA_VARIANT_COUNT)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "options.variant: %d is not a qattn_mqa_variant", (int)opt.variant);
    if (opt.rows_per_subgroup != 0 && opt.rows_per_subgroup != 1 && opt.rows_per_subgroup != 2 &&
        opt.rows_per_subgroup != 4)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "options.rows_per_subgroup: %d, expected 0 (planner), 1, 2 or 4",
                          (int)opt.rows_per_subgroup);
    if (opt.kv_slices < 0)
        return qattn__err(err, err_size, QATTN_ERR_INVALID_ARGUMENT,
                          "options.kv_slices: %d, expected 0 (planner) or >= 1", (int)opt.kv_slices);
    if (args->q.rank != 3 || args->k.rank != 2 || args->weights.rank != 2)
        return qattn__err(err, err_size, QATTN_ERR_SHAPE,
                          "q/k/weights: ranks %d/%d/%d, expected 3/2/2", (int)args->q.rank,
                          (int)args->k.rank, (int)args->weights.rank);
    if (!qattn__is_fp8(args->q.dtype) || !qattn__is_fp8(args->k.dtype))
        return qattn__err(err, err_size, QATTN_ERR_DTYPE, "q/k: dtypes %s/%s, expected fp8",
                          qattn_dtype_name(args->q.dtype), qattn_dtype_name(args->k.dtype));
    const shape s = {args->q.shape[0], args->q.shape[1], args->q.shape[2], args->k.shape[0]};
    if (s.S < 1 || s.H < 1 || s.S_kv < 1 || s.S > INT32_MAX || s.H > INT32_MAX ||
        s.S_kv > INT32_MAX || (s.D != 64 && s.D != 128 && s.D != 256 && s.D != 512))
        return qattn__err(err, err_size, QATTN_ERR_SHAPE,
                          "q/k: S=%" PRId64 " H=%" PRId64 " D=%" PRId64 " S_kv=%" PRId64
                          " outside 1..int32 / D in {64,128,256,512}",
                          s.S, s.H, s.D, s.S_kv);

    qattn_mqa_logits_plan p;
    memset(&p, 0, sizeof p);
    p.rows = (int32_t)s.S;
    p.kv_len = (int32_t)s.S_kv;
    p.heads = (int32_t)s.H;
    p.head_dim = (int32_t)s.D;
    p.q_dtype = args->q.dtype;
    p.k_dtype = args->k.dtype;
    p.workspace_bytes = 0; /* the op writes logits directly; no partials */

    char why[160];
    if (opt.variant != QATTN_MQA_AUTO) {
        if (!fill_variant(caps, &s, opt.variant, opt.rows_per_subgroup, pin, &p, why, sizeof why))
            return qattn__err(err, err_size, QATTN_ERR_VARIANT_GATE, "pinned variant %s cannot run: %s",
                              qattn_mqa_variant_name(opt.variant), why);
        p.variant = opt.variant;
    } else {
        /* coopmat -> staged -> direct; the first whose gate passes wins. */
        static const qattn_mqa_variant chain[] = {QATTN_MQA_COOPMAT, QATTN_MQA_STAGED};
        p.variant = QATTN_MQA_DIRECT;
        qattn_matrix_shape shape;
        if (s.S < MIN_ROWS_STAGED) {
            add_reason(&p, "direct: %" PRId64 " rows < %d", s.S, MIN_ROWS_STAGED);
        } else {
            for (size_t i = 0; i < sizeof chain / sizeof chain[0]; ++i) {
                /* 8-row matrix shapes are what emulating implementations
                 * (lavapipe) offer, where the staged path is faster: AUTO
                 * takes coopmat only with 16-row shapes; a pin takes any. */
                if (chain[i] == QATTN_MQA_COOPMAT && pick_coopmat_shape(caps, &shape) && shape.m < 16) {
                    add_reason(&p, "coopmat: only %ux%ux%u matrix shapes (AUTO wants 16 rows)",
                               (unsigned)shape.m, (unsigned)shape.n, (unsigned)shape.k);
                    continue;
                }
                if (fill_variant(caps, &s, chain[i], opt.rows_per_subgroup, pin, &p, why, sizeof why)) {
                    p.variant = chain[i];
                    break;
                }
                add_reason(&p, "%s", why);
            }
        }
        if (p.variant == QATTN_MQA_DIRECT)
            fill_variant(caps, &s, QATTN_MQA_DIRECT, opt.rows_per_subgroup, pin, &p, why, sizeof why);
    }
    if (p.variant == QATTN_MQA_COOPMAT) pick_coopmat_shape(caps, &p.matrix_shape);
    choose_slices(caps, &s, opt.kv_slices, &p);
    qattn_status st = check_int32(args, &s, &p, err, err_size);
    if (st != QATTN_OK) return st;
    p.load_bytes = load_bytes(args);
    if (p.load_bytes < 16) add_reason(&p, "q/k rows allow %d-byte loads", (int)p.load_bytes);
    p.index64 = row_base_wide(&args->q, (s.H - 1) * args->q.strides[1] + s.D) ||
                row_base_wide(&args->weights, (s.H - 1) * args->weights.strides[1] + 1) ||
                row_base_wide(&args->logits, s.S_kv) || row_base_wide(&args->k, s.D) ||
                row_base_wide(&args->ks, 1) || row_base_wide(&args->ke, 1) ||
                row_base_wide(&args->k_scale, 1);
    qattn__seal_mqa_logits_plan(plan, &p, args);
    return QATTN_OK;
}

qattn_status qattn_mqa_logits_plan_compute(const qattn_device_caps *caps,
                                           const qattn_mqa_logits_args *args,
                                           const qattn_mqa_logits_options *options,
                                           qattn_mqa_logits_plan *plan, char *err,
                                           size_t err_size) {
    const cm_pin none = {0, 0, 0};
    return plan_compute(caps, args, options, &none, plan, err, err_size);
}

static qattn_status plan_create(qattn_context *ctx, const qattn_mqa_logits_args *args,
                                const qattn_mqa_logits_options *options, const cm_pin *pin,
                                qattn_mqa_logits_plan *plan) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!plan) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "plan: NULL");
    qattn_status s = qattn__validate_mqa_logits(args, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    qattn_mqa_logits_options opt;
    s = qattn__read_mqa_logits_options(options, &opt, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    const char *env = qattn__getenv("QATTN_MQA_VARIANT");
    if (opt.variant == QATTN_MQA_AUTO && env) {
        qattn_mqa_variant v = QATTN_MQA_VARIANT_COUNT;
        for (int i = 0; i < QATTN_MQA_VARIANT_COUNT; ++i)
            if (qattn__name_is(env, qattn_mqa_variant_name((qattn_mqa_variant)i))) v = (qattn_mqa_variant)i;
        if (v == QATTN_MQA_VARIANT_COUNT)
            return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT,
                               "QATTN_MQA_VARIANT=%s: expected auto, direct, staged or coopmat", env);
        opt.variant = v;
    }
    qattn_mqa_logits_plan p;
    s = plan_compute(&ctx->caps, args, &opt, pin, &p, ctx->last_error, sizeof ctx->last_error);
    if (s != QATTN_OK) return s;
    /* The backend may still refuse a plan its caps allowed (a shader it
     * lacks): a pinned variant is then a gate failure; AUTO steps down the
     * chain. */
    const qattn_backend_iface *ifc = ctx->iface;
    while (ifc->supports_op && !ifc->supports_op(ctx->be, QATTN_OP_MQA_LOGITS, &p)) {
        if (opt.variant != QATTN_MQA_AUTO || p.variant == QATTN_MQA_DIRECT)
            return qattn__fail(ctx, opt.variant != QATTN_MQA_AUTO ? QATTN_ERR_VARIANT_GATE
                                                                  : QATTN_ERR_UNSUPPORTED,
                               "mqa_logits: the %s backend cannot run variant %s on %s", ifc->name,
                               qattn_mqa_variant_name(p.variant), ctx->caps.arch);
        char refused[64];
        snprintf(refused, sizeof refused, "%s refused by the backend",
                 qattn_mqa_variant_name(p.variant));
        char prior[QATTN_REASON_BYTES];
        memcpy(prior, p.reason, sizeof prior);
        /* Next variant down whose gate passes (direct always does). */
        qattn_mqa_logits_options lower = opt;
        lower.variant = p.variant == QATTN_MQA_COOPMAT ? QATTN_MQA_STAGED : QATTN_MQA_DIRECT;
        s = plan_compute(&ctx->caps, args, &lower, pin, &p, ctx->last_error, sizeof ctx->last_error);
        if (s == QATTN_ERR_VARIANT_GATE) {
            lower.variant = QATTN_MQA_DIRECT;
            s = plan_compute(&ctx->caps, args, &lower, pin, &p, ctx->last_error, sizeof ctx->last_error);
        }
        if (s != QATTN_OK) return s;
        memcpy(p.reason, prior, sizeof prior);
        add_reason(&p, "%s", refused);
    }
    qattn__seal_mqa_logits_plan(plan, &p, args); /* the reason may have changed */
    return QATTN_OK;
}

qattn_status qattn_mqa_logits_plan_create(qattn_context *ctx, const qattn_mqa_logits_args *args,
                                          const qattn_mqa_logits_options *options,
                                          qattn_mqa_logits_plan *plan) {
    const cm_pin none = {0, 0, 0};
    return plan_create(ctx, args, options, &none, plan);
}

qattn_status qattn_experimental_mqa_logits_plan_create(qattn_context *ctx, const qattn_mqa_logits_args *args,
                                                       const qattn_mqa_logits_options *options,
                                                       const qattn_mqa_logits_geometry *geometry,
                                                       qattn_mqa_logits_plan *plan) {
    if (!ctx) return QATTN_ERR_INVALID_ARGUMENT;
    if (!geometry) return qattn__fail(ctx, QATTN_ERR_INVALID_ARGUMENT, "geometry: NULL");
    return plan_create(ctx, args, options, geometry, plan);
}
