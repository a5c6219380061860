/* launches.c — the kernels one tower's compute phase launches, counted from the step as built: the model's own
 * forward, loss and backward (tt_model_forward, tt_dev_softmax_xent, tt_model_backward) run on a backend that
 * computes nothing and counts, for each op, the launches the CUDA backend makes for it (one kernel or cuBLAS call;
 * a column sum over more than one chunk of rows and the embedding gradient's sort take more: tt_math.h's
 * tt_col_sum_launches and tt_embed_bwd_launches). Copies are not launches and are not counted. So a fused epilogue,
 * a chunked convolution or a new layer changes the cost model's launch term without anyone editing a formula.
 * The same count lists the step's distinct GEMM shapes (tt_assume_gemm_list): what `probe --json` times one by one
 * and what a measured profile's GEMM table is matched against.
 * `tools/cuda-costs` counts the same launches on the CUDA stand-in (docs/cuda.md); test_assume checks they agree.
 * The counter never reads or writes memory: every buffer is one placeholder address (the layers' offsets from it
 * are never dereferenced), so the seam's checks on where buffers lie are off for it (tt_dev_ops.no_memory). */
#include <string.h>

#include "tt_cost_model.h"

/* The counter's context: launches first (COUNT), and the GEMMs' flops (the what-if's split of the compute phase
 * between the buckets of --overlap on). */
typedef struct counter {
    size_t launches;
    double flops;
    /* tt_assume_gemm_list: the distinct GEMM shapes in the order first issued, with how often each came (calls);
     * NULL: not listed */
    tt_gemm_shape *shapes;
    size_t n_shapes, max_shapes, lost_shapes;
    /* tt_assume_buckets: the bucket edges, the next bucket to complete, and the counts when each completed */
    const size_t *edge;
    size_t nb, next;
    size_t at_launches[TT_MAX_BUCKETS];
    double at_flops[TT_MAX_BUCKETS];
} counter;

#define COUNT(ctx, k) (((counter *)(ctx))->launches += (k))

static void c_copy(void *ctx, void *d_dst, const void *d_src, size_t bytes)
{
    (void)ctx, (void)d_dst, (void)d_src, (void)bytes;
}

static void c_sgemm(void *ctx, int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *a, size_t lda,
                    const float *b, size_t ldb, float beta, float *d_c, size_t ldc)
{
    (void)alpha, (void)a, (void)lda, (void)b, (void)ldb, (void)beta, (void)d_c, (void)ldc;
    COUNT(ctx, 1);
    counter *c = (counter *)ctx;
    c->flops += 2.0 * (double)M * (double)N * (double)K;
    if (!c->shapes) return;
    size_t i = 0;
    while (i < c->n_shapes && !(c->shapes[i].ta == ta && c->shapes[i].tb == tb && c->shapes[i].M == M &&
                                c->shapes[i].N == N && c->shapes[i].K == K))
        i++;
    if (i < c->n_shapes) c->shapes[i].calls++;
    else if (c->n_shapes < c->max_shapes) c->shapes[c->n_shapes++] = (tt_gemm_shape){ta, tb, M, N, K, 1};
    else c->lost_shapes++;
}

/* --epilogues lt: one cuBLASLt call, the GEMM and its epilogue in one launch; the GEMM listed as sgemm's (0, 0). */
static int c_gemm_bias_act(void *ctx, size_t M, size_t N, size_t K, const float *x, const float *w, const float *b,
                           float *y, int relu, void *mask)
{
    (void)b, (void)relu, (void)mask;
    c_sgemm(ctx, 0, 0, M, N, K, 1.0f, x, K, w, N, 0.0f, y, N);
    return 1;
}

/* --epilogues lt: a dx GEMM carrying the relu gradient and bias gradient below it, one launch; listed as sgemm's
 * (0, 1). Like c_gemm_bias_act it takes every call: a backend may decline a shape or a bias under 16 bytes of
 * alignment (then the kernels run, and the count is that many launches short) — the built-in models' dense biases
 * are all taken on the stand-in. */
static int c_gemm_drelu_bgrad(void *ctx, size_t M, size_t N, size_t K, const float *dy, const float *w,
                              const void *mask, float *dz, float *db)
{
    (void)mask, (void)db;
    c_sgemm(ctx, 0, 1, M, N, K, 1.0f, dy, K, w, K, 0.0f, dz, N);
    return 1;
}

static void c_fill(void *ctx, float *x, size_t n, float v)
{
    (void)x, (void)n, (void)v;
    COUNT(ctx, 1);
}

static void c_binary(void *ctx, float *y, const float *x, size_t n)
{
    (void)y, (void)x, (void)n;
    COUNT(ctx, 1);
}

static void c_rows(void *ctx, float *y, const float *b, size_t rows, size_t cols)
{
    (void)y, (void)b, (void)rows, (void)cols;
    COUNT(ctx, 1);
}

static void c_col_sum(void *ctx, float *out, const float *x, size_t rows, size_t cols)
{
    (void)out, (void)x, (void)cols;
    COUNT(ctx, tt_col_sum_launches(rows));
}

static void c_relu_bwd(void *ctx, float *dx, const float *dy, const float *y, size_t n)
{
    (void)dx, (void)dy, (void)y, (void)n;
    COUNT(ctx, 1);
}

static void c_drelu_bgrad(void *ctx, float *dz, float *db, const float *dy, const float *y, size_t rows, size_t cols)
{
    (void)dz, (void)db, (void)dy, (void)y, (void)cols;
    COUNT(ctx, tt_col_sum_launches(rows));
}

static void c_col_dev_sum(void *ctx, float *out, const float *x, const float *w, const float *center, float cscale,
                          const float *scale, size_t rows, size_t cols)
{
    (void)out, (void)x, (void)w, (void)center, (void)cscale, (void)scale, (void)cols;
    COUNT(ctx, tt_col_sum_launches(rows));
}

static void c_bn_stats(void *ctx, float *save, float *tail, const float *s1, const float *s2, const float *moving,
                       size_t C, float inv_n, float epsilon, float factor)
{
    (void)save, (void)tail, (void)s1, (void)s2, (void)moving, (void)C, (void)inv_n, (void)epsilon, (void)factor;
    COUNT(ctx, 1);
}

static void c_bn_fwd(void *ctx, float *y, const float *x, const float *save, const float *gb, size_t rows, size_t cols)
{
    (void)y, (void)x, (void)save, (void)gb, (void)rows, (void)cols;
    COUNT(ctx, 1);
}

static void c_bn_dx(void *ctx, float *dx, const float *dy, const float *x, const float *save, const float *gamma,
                    const float *sums, size_t rows, size_t cols, float inv_n)
{
    (void)dx, (void)dy, (void)x, (void)save, (void)gamma, (void)sums, (void)rows, (void)cols, (void)inv_n;
    COUNT(ctx, 1);
}

static void c_softmax_xent(void *ctx, float *dl, float *stats, const float *logits, const int32_t *labels,
                           size_t rows, size_t classes, float scale)
{
    (void)dl, (void)stats, (void)logits, (void)labels, (void)rows, (void)classes, (void)scale;
    COUNT(ctx, 1);
}

static void c_cols(void *ctx, float *a, const float *b, size_t q0, size_t n, const tt_conv_geom *g)
{
    (void)a, (void)b, (void)q0, (void)n, (void)g;
    COUNT(ctx, 1);
}

static void c_pool_fwd(void *ctx, float *y, const float *x, size_t rows, const tt_conv_geom *g)
{
    (void)y, (void)x, (void)rows, (void)g;
    COUNT(ctx, 1);
}

/* cu_maxpool_bwd: windows that do not overlap zero dx and route each dy to its maximum (two kernels); overlapping
 * ones gather per input element (one). */
static void c_pool_bwd(void *ctx, float *dx, const float *dy, const float *x, const float *y, size_t rows,
                       const tt_conv_geom *g)
{
    (void)dx, (void)dy, (void)x, (void)y, (void)rows;
    COUNT(ctx, g->SH >= g->KH && g->SW >= g->KW ? 2 : 1);
}

static void c_dropout(void *ctx, float *y, const float *x, size_t rows, size_t cols, float rate, uint64_t key,
                      const uint32_t *ids)
{
    (void)y, (void)x, (void)rows, (void)cols, (void)rate, (void)key, (void)ids;
    COUNT(ctx, 1);
}

static void c_embed_fwd(void *ctx, float *y, const float *w, const float *t, size_t n, size_t V, size_t E)
{
    (void)y, (void)w, (void)t, (void)n, (void)V, (void)E;
    COUNT(ctx, 1);
}

static void c_embed_bwd(void *ctx, float *dw, const float *dy, const float *t, size_t n, size_t V, size_t E)
{
    (void)dw, (void)dy, (void)t, (void)V, (void)E;
    COUNT(ctx, tt_embed_bwd_launches(n));
}

/* Only what a compute phase calls; the wrappers never reach the other members. */
static const tt_dev_ops counter_ops = {
    .name = "launch counter",
    .no_memory = 1,
    .d2d = c_copy,
    .sgemm = c_sgemm,
    .fill = c_fill,
    .bias_add = c_rows,
    .col_sum = c_col_sum,
    .relu_fwd = c_binary,
    .relu_bwd = c_relu_bwd,
    .bias_relu = c_rows,
    .drelu_bgrad = c_drelu_bgrad,
    .col_dev_sum = c_col_dev_sum,
    .bn_stats = c_bn_stats,
    .bn_fwd = c_bn_fwd,
    .bn_dx = c_bn_dx,
    .transpose = c_rows,
    .softmax_xent = c_softmax_xent,
    .im2col = c_cols,
    .col2im = c_cols,
    .maxpool_fwd = c_pool_fwd,
    .maxpool_bwd = c_pool_bwd,
    .dropout = c_dropout,
    .embed_fwd = c_embed_fwd,
    .embed_bwd = c_embed_bwd,
    .gemm_bias_act = c_gemm_bias_act,
    .gemm_drelu_bgrad = c_gemm_drelu_bgrad,
};

/* The backward has issued every layer from lo up: the buckets that are complete take the counts so far (the trainer's
 * bucket_ready, counted). */
static void count_bucket(void *arg, size_t lo)
{
    counter *c = (counter *)arg;
    while (c->next + 1 < c->nb && lo <= c->edge[c->next + 1]) {
        c->at_launches[c->next] = c->launches;
        c->at_flops[c->next++] = c->flops;
    }
}

/* The model's compute phase on the counter, its GEMMs cut as a backend with chunk_mnk cuts them (0: a GPU, one GEMM
 * per shard); c->edge set: the counts at each bucket's completion too; lt: the pass asks for --epilogues lt. */
static void count_step(const tt_model *m, size_t rows, size_t chunk_mnk, int lt, counter *c)
{
    static float nowhere[1]; /* every buffer: the counter reads and writes none */
    tt_dev dev = {&counter_ops, c, 0, 0};
    float *act[TT_MAX_LAYERS + 1], *delta[2] = {nowhere, nowhere};
    for (size_t i = 0; i <= m->n_logits; i++) act[i] = nowhere;
    static const uint32_t ids[1];
    static const int32_t labels[1];
    /* one tower (no exchanges); lt: the relu bit-masks too (every layer's at the placeholder) */
    unsigned char masked[TT_MAX_LAYERS] = {0};
    const tt_pass ps = {.training = 1,
                        .epoch = 1,
                        .d_ids = ids,
                        .d_ws = nowhere,
                        .chunk_mnk = chunk_mnk,
                        .d_saved = nowhere,
                        .d_grads = nowhere,
                        .share = 1.0f,
                        .rows_all = rows,
                        .lt_epilogues = lt,
                        .d_masks = lt ? nowhere : NULL,
                        .lt_masked = masked};
    tt_model_forward(&dev, m, &ps, nowhere, act, rows);
    tt_dev_softmax_xent(&dev, nowhere, nowhere, tt_model_logits(m, act), labels, rows, m->n_classes, 1.0f);
    const size_t fwd_launches = c->launches;
    const double fwd_flops = c->flops;
    tt_model_backward_each(&dev, m, &ps, nowhere, nowhere, act, delta, nowhere, rows, c->edge ? count_bucket : NULL,
                           c);
    if (c->edge) {
        for (size_t k = c->nb; k-- > 1;) { /* cumulative to each bucket's own; the last bucket takes the rest */
            c->at_launches[k] = (k + 1 == c->nb ? c->launches : c->at_launches[k]) - c->at_launches[k - 1];
            c->at_flops[k] = (k + 1 == c->nb ? c->flops : c->at_flops[k]) - c->at_flops[k - 1];
        }
        c->at_launches[0] = (c->nb == 1 ? c->launches : c->at_launches[0]) - fwd_launches;
        c->at_flops[0] = (c->nb == 1 ? c->flops : c->at_flops[0]) - fwd_flops;
    }
}

size_t tt_assume_kernels(const tt_model *m, size_t rows) { return tt_assume_kernels_lt(m, rows, 0); }

size_t tt_assume_kernels_lt(const tt_model *m, size_t rows, int lt_epilogues)
{
    counter c = {0};
    count_step(m, rows, 0, lt_epilogues, &c);
    return c.launches;
}

size_t tt_assume_gemm_list(const tt_model *m, size_t rows, size_t chunk_mnk, tt_gemm_shape *out, size_t max,
                           size_t *launches)
{
    counter c = {0};
    c.shapes = out;
    c.max_shapes = max;
    count_step(m, rows, chunk_mnk, 0, &c);
    TT_ASSERT(c.lost_shapes == 0); /* max is the layers' bound, TT_MAX_LAYERS * TT_MAX_LAYER_GEMMS */
    if (launches) *launches = c.launches;
    return c.n_shapes;
}

void tt_assume_buckets(const tt_model *m, size_t rows, size_t bucket_bytes, tt_bucket_cost *out)
{
    memset(out, 0, sizeof *out);
    out->nb = tt_trainer_bucket_edges(m, bucket_bytes, out->edge);
    counter c = {0};
    c.edge = out->edge;
    c.nb = out->nb;
    count_step(m, rows, 0, 0, &c);
    out->launches = c.launches;
    out->flops = c.flops;
    for (size_t k = 0; k < out->nb; k++) {
        out->bwd_launches[k] = c.at_launches[k];
        out->bwd_flops[k] = c.at_flops[k];
    }
}
