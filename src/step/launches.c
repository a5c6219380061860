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

/* The ops the list counts (include/tt_dev.h, TT_DEV_OPS: every OP entry, each with its `launches`); sgemm and the
 * cuBLASLt epilogues below are counted by hand. */
#define COUNTED(name, launches, skip, check, ...)                                                                      \
    static void c_##name(void *ctx TT_DEV_EACH(TT_DEV_PARAM, __VA_ARGS__)) { COUNT(ctx, launches); }
TT_DEV_OPS(COUNTED, TT_DEV_NONE, TT_DEV_NONE, TT_DEV_NONE)

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

/* The counted ops and the three counted by hand; the wrappers never reach the other members (the compute phase calls
 * none of them). */
#define COUNTER_ENTRY(name, ...) .name = c_##name,
static const tt_dev_ops counter_ops = {
    .name = "launch counter",
    .no_memory = 1,
    TT_DEV_OPS(COUNTER_ENTRY, TT_DEV_NONE, TT_DEV_NONE, TT_DEV_NONE)
    .sgemm = c_sgemm,
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
