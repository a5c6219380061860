/* dev_cpu.c — the CPU backend: a "device" is ordinary RAM owned by one tower, copies are memcpy, sgemm is CBLAS
 * (OpenBLAS, single-threaded inside each tower: the towers are the parallelism), and every other op is a loop
 * over a tt_math.h function. New device memory is poisoned with NaN so a missing zeroing shows up at once.
 * This is the reference every other backend is tested against; keep it plain. */
#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_blas.h"
#include "tt_dev.h"
#include "tt_math.h"

typedef struct cpu_ctx {
    int ordinal;
} cpu_ctx;

/* The towers are the parallelism: every BLAS call a tower makes runs on its own thread. OpenBLAS's threads on top
 * (its default: one per CPU) would have each tower's GEMM wake every CPU while the other towers hold them — on 2
 * cores with 2 towers, test_e2e's cnn slice spent 76 of 97 s spinning in sched_yield. So the backend sets it when its
 * first tower starts, whoever calls it (the CLI, tt_run in a test, a tool); once per process. */
static pthread_once_t g_blas_once = PTHREAD_ONCE_INIT;

/* And at most this many towers inside OpenBLAS at once: each caller takes one of its memory regions, of which a
 * build for 64 threads has 128 — with --towers 1024 on the CPU, the 129th concurrent sgemm crashed in
 * blas_memory_free (a review found it). The cores are far fewer than 32, so the wait costs nothing. */
enum { BLAS_CALLERS_MAX = 32 };
static sem_t g_blas_slots;

static void blas_setup(void)
{
    tt_blas_single_thread();
    TT_ASSERT(sem_init(&g_blas_slots, 0, BLAS_CALLERS_MAX) == 0);
}

static tt_status cpu_init(void **ctx, int ordinal, tt_error *err)
{
    pthread_once(&g_blas_once, blas_setup);
    cpu_ctx *c = (cpu_ctx *)tt_calloc(1, sizeof *c);
    if (!c) return tt_fail(err, TT_ERR_NOMEM, "cpu backend: out of memory for tower context");
    c->ordinal = ordinal;
    *ctx = c;
    return TT_OK;
}

static void cpu_destroy(void *ctx) { tt_free(ctx); }

static void *cpu_alloc(void *ctx, size_t bytes)
{
    (void)ctx;
    float *p = (float *)tt_malloc(bytes);
    if (p) {
        size_t n = bytes / sizeof(float);
        for (size_t i = 0; i < n; i++) p[i] = NAN;
    }
    return p;
}

static void cpu_dfree(void *ctx, void *d)
{
    (void)ctx;
    tt_free(d);
}

static void cpu_copy(void *ctx, void *dst, const void *src, size_t bytes)
{
    (void)ctx;
    memcpy(dst, src, bytes);
}

static void cpu_sync(void *ctx) { (void)ctx; }

static void cpu_peer_copy(void *ctx, void *dst, void *src_ctx, const void *src, size_t bytes)
{
    (void)ctx;
    (void)src_ctx;
    memcpy(dst, src, bytes);
}

static void cpu_add(void *ctx, float *restrict y, const float *restrict x, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) y[i] = tt_add(y[i], x[i]);
}

static void cpu_update(void *ctx, const tt_update_args *u, float *w, const float *g, float *m, float *v, float *a,
                       int32_t *bad, size_t n, int skip)
{
    (void)ctx;
    for (size_t b = 0; b * TT_UPDATE_BLOCK < n; b++) {
        const size_t lo = b * TT_UPDATE_BLOCK, hi = lo + TT_UPDATE_BLOCK < n ? lo + TT_UPDATE_BLOCK : n;
        int finite = 1;
        for (size_t i = lo; i < hi; i++) finite &= tt_finite(g[i]);
        bad[b] = !finite;
        if (skip || !finite) continue;
        tt_update_span(u, w + lo, g + lo, m, v, a, lo, hi); /* the host optimizer's loop (tt_optim_apply's) */
    }
}

static void cpu_sgemm(void *ctx, int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *a,
                      size_t lda, const float *b, size_t ldb, float beta, float *c, size_t ldc)
{
    (void)ctx;
    while (sem_wait(&g_blas_slots) != 0) /* EINTR: a signal (the stop flag's) landed; wait again */
        ;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, (int)M, (int)N,
                (int)K, alpha, a, (int)lda, b, (int)ldb, beta, c, (int)ldc);
    sem_post(&g_blas_slots);
}

static void cpu_fill(void *ctx, float *x, size_t n, float v)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) x[i] = v;
}

static void cpu_u8_to_f32(void *ctx, float *y, const uint8_t *x, size_t n, float scale)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) y[i] = tt_pixel(x[i], scale);
}

/* --augment: each sample's draw once, then its pixels row by row (tt_augment.h's formula, the CUDA kernel's). */
static void cpu_augment(void *ctx, float *y, const float *x, const uint32_t *ids, size_t rows, size_t H, size_t W,
                        size_t C, const tt_augment *a, uint64_t key)
{
    (void)ctx;
    const size_t img = H * W * C;
    for (size_t r = 0; r < rows; r++) {
        const tt_augment_draw d = tt_augment_sample(a, key, ids[r], H, W);
        const float *xs = x + r * img;
        float *ys = y + r * img;
        for (size_t i = 0; i < H; i++)
            for (size_t j = 0; j < W; j++)
                for (size_t c = 0; c < C; c++) ys[(i * W + j) * C + c] = tt_augment_pixel(xs, H, W, C, i, j, c, d);
    }
}

/* The 16-bit formats: a loop per format, so each inlines its conversion with the format known. */
static void cpu_round16(void *ctx, float *x, size_t n, int fmt)
{
    (void)ctx;
    if (fmt == TT_FMT_BF16)
        for (size_t i = 0; i < n; i++) x[i] = tt_round_fmt(x[i], TT_FMT_BF16);
    else
        for (size_t i = 0; i < n; i++) x[i] = tt_round_fmt(x[i], TT_FMT_FP16);
}

static void cpu_widen16(void *ctx, float *y, const uint16_t *x, size_t n, int fmt)
{
    (void)ctx;
    if (fmt == TT_FMT_BF16)
        for (size_t i = 0; i < n; i++) y[i] = tt_bf16_to_f32(x[i]);
    else
        for (size_t i = 0; i < n; i++) y[i] = tt_fp16_to_f32(x[i]);
}

/* narrow16 a chunk at a time, in two loops that each vectorise (one that also counted would not): the conversion,
 * into y or a chunk on the stack, then the counts over the chunk while it is in L1. */
static inline void narrow_loop(uint16_t *y, const float *x, size_t n, int fmt, uint32_t *counts)
{
    enum { CHUNK = 2048 };
    uint16_t scratch[CHUNK];
    uint32_t under = 0, bad = 0;
    for (size_t lo = 0; lo < n; lo += CHUNK) {
        const size_t len = n - lo < CHUNK ? n - lo : CHUNK;
        uint16_t *restrict h = y ? y + lo : scratch;
        const float *restrict xs = x + lo;
        for (size_t i = 0; i < len; i++) h[i] = tt_to16(xs[i], fmt);
        for (size_t i = 0; i < len; i++) {
            under += tt_narrow_under(xs[i], h[i]);
            bad += tt_narrow_bad(h[i], fmt);
        }
    }
    counts[0] = under;
    counts[1] = bad;
}

static void cpu_narrow16(void *ctx, uint16_t *y, const float *x, size_t n, int fmt, uint32_t *counts)
{
    (void)ctx;
    if (fmt == TT_FMT_BF16) narrow_loop(y, x, n, TT_FMT_BF16, counts);
    else narrow_loop(y, x, n, TT_FMT_FP16, counts);
}

static void cpu_bias_add(void *ctx, float *y, const float *b, size_t rows, size_t cols)
{
    (void)ctx;
    for (size_t r = 0; r < rows; r++) {
        float *yr = y + r * cols;
        for (size_t c = 0; c < cols; c++) yr[c] += b[c];
    }
}

/* The CUDA backend's order (k_col_sum_chunks, k_col_sum_partials): each chunk of TT_COL_CHUNK rows summed from 0.0f,
 * then the chunks' sums in order from 0.0f — the same bits on both backends, and 256 + rows/256 sequential additions
 * rather than rows (batchnorm's means and dbeta span B*H*W rows). dz (drelu_bgrad; NULL: x is summed as it is)
 * gets tt_relu_grad(x, y) first. */
static void col_sum_chunked(float *out, float *dz, const float *x, const float *y, size_t rows, size_t cols)
{
    float part[256];
    for (size_t c = 0; c < cols; c++) out[c] = 0.0f;
    for (size_t c0 = 0; c0 < cols; c0 += 256) {
        const size_t nc = cols - c0 < 256 ? cols - c0 : 256;
        for (size_t r0 = 0; r0 < rows; r0 += TT_COL_CHUNK) {
            const size_t r1 = rows - r0 < TT_COL_CHUNK ? rows : r0 + TT_COL_CHUNK;
            for (size_t c = 0; c < nc; c++) part[c] = 0.0f;
            for (size_t r = r0; r < r1; r++) {
                const size_t i = r * cols + c0;
                if (dz)
                    for (size_t c = 0; c < nc; c++) {
                        dz[i + c] = tt_relu_grad(x[i + c], y[i + c]);
                        part[c] = tt_add(part[c], dz[i + c]);
                    }
                else
                    for (size_t c = 0; c < nc; c++) part[c] = tt_add(part[c], x[i + c]);
            }
            for (size_t c = 0; c < nc; c++) out[c0 + c] = rows > TT_COL_CHUNK ? tt_add(out[c0 + c], part[c]) : part[c];
        }
    }
}

static void cpu_col_sum(void *ctx, float *out, const float *x, size_t rows, size_t cols)
{
    (void)ctx;
    col_sum_chunked(out, NULL, x, NULL, rows, cols);
}

static void cpu_relu_fwd(void *ctx, float *y, const float *x, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) y[i] = tt_relu(x[i]);
}

static void cpu_relu_bwd(void *ctx, float *dx, const float *dy, const float *y, size_t n)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) dx[i] = tt_relu_grad(dy[i], y[i]);
}

static void cpu_bias_relu(void *ctx, float *y, const float *b, size_t rows, size_t cols)
{
    (void)ctx;
    for (size_t r = 0; r < rows; r++) {
        float *yr = y + r * cols;
        for (size_t c = 0; c < cols; c++) yr[c] = tt_relu(yr[c] + b[c]);
    }
}

/* col_sum's order (col_sum_chunked); dz may alias dy: each element is read before it is written. */
static void cpu_drelu_bgrad(void *ctx, float *dz, float *db, const float *dy, const float *y, size_t rows,
                            size_t cols)
{
    (void)ctx;
    col_sum_chunked(db, dz, dy, y, rows, cols);
}

/* The CUDA backend's order (cuda/dev_cuda.cu, k_col_dev_sum_chunks): every chunk of TT_COL_CHUNK rows summed from
 * 0.0f, the chunks' sums added in order from 0.0f, then scaled — the same bits on both backends, and the error of
 * 256 + rows/256 sequential additions rather than rows (a conv's channel spans B*H*W rows: 100,352 for 128 28x28
 * images). */
static void cpu_col_dev_sum(void *ctx, float *out, const float *x, const float *w, const float *center,
                            float center_scale, const float *scale, size_t rows, size_t cols)
{
    (void)ctx;
    float part[256];
    for (size_t c = 0; c < cols; c++) out[c] = 0.0f;
    for (size_t c0 = 0; c0 < cols; c0 += 256) { /* columns in blocks of 256: part stays on the stack */
        const size_t nc = cols - c0 < 256 ? cols - c0 : 256;
        float m[256];
        for (size_t c = 0; c < nc; c++) m[c] = center[c0 + c] * center_scale;
        for (size_t r0 = 0; r0 < rows; r0 += TT_COL_CHUNK) {
            const size_t r1 = rows - r0 < TT_COL_CHUNK ? rows : r0 + TT_COL_CHUNK;
            for (size_t c = 0; c < nc; c++) part[c] = 0.0f;
            for (size_t r = r0; r < r1; r++) {
                const float *xr = x + r * cols + c0;
                if (w) {
                    const float *wr = w + r * cols + c0;
                    for (size_t c = 0; c < nc; c++) part[c] = tt_add(part[c], tt_bn_dev_prod(xr[c], m[c], wr[c]));
                } else {
                    for (size_t c = 0; c < nc; c++) part[c] = tt_add(part[c], tt_bn_sq_dev(xr[c], m[c]));
                }
            }
            for (size_t c = 0; c < nc; c++) out[c0 + c] = rows > TT_COL_CHUNK ? tt_add(out[c0 + c], part[c]) : part[c];
        }
    }
    if (scale)
        for (size_t c = 0; c < cols; c++) out[c] *= scale[c];
}

static void cpu_bn_stats(void *ctx, float *save, float *tail, const float *s1, const float *s2, const float *moving,
                         size_t C, float inv_n, float epsilon, float factor)
{
    (void)ctx;
    for (size_t c = 0; c < C; c++) tt_bn_stats_channel(save, tail, s1, s2, moving, C, c, inv_n, epsilon, factor);
}

static void cpu_bn_fwd(void *ctx, float *y, const float *x, const float *save, const float *gb, size_t rows,
                       size_t cols)
{
    (void)ctx;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++)
            y[r * cols + c] = tt_bn_y(x[r * cols + c], save[c], save[cols + c], gb[c], gb[cols + c]);
}

static void cpu_bn_dx(void *ctx, float *dx, const float *dy, const float *x, const float *save, const float *gamma,
                      const float *sums, size_t rows, size_t cols, float inv_n)
{
    (void)ctx;
    for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < cols; c++) {
            const size_t i = r * cols + c;
            dx[i] = tt_bn_dx(dy[i], x[i], save[c], save[cols + c], gamma[c], sums[cols + c], sums[c], inv_n);
        }
}

static void cpu_transpose(void *ctx, float *y, const float *x, size_t rows, size_t cols)
{
    (void)ctx;
    for (size_t i = 0; i < rows * cols; i++) y[i] = x[tt_transpose_src(i, rows, cols)];
}

static void cpu_softmax_xent(void *ctx, float *dlogits, float *stats, const float *logits, const int32_t *labels,
                             size_t rows, size_t classes, float scale)
{
    (void)ctx;
    for (size_t r = 0; r < rows; r++) {
        int rank;
        float *dz = dlogits ? dlogits + r * classes : NULL;
        stats[2 * r] = tt_softmax_xent_row(logits + r * classes, (int)classes, labels[r], scale, dz, &rank);
        stats[2 * r + 1] = (float)rank;
    }
}

static void cpu_im2col(void *ctx, float *cols, const float *x, size_t q0, size_t n, const tt_conv_geom *g)
{
    (void)ctx;
    const size_t in = g->H * g->W * g->C, KC = g->KH * g->KW * g->C, P = g->OH * g->OW;
    size_t r = q0 / P, oh = q0 % P / g->OW, ow = q0 % g->OW; /* patch q = (r, oh, ow), stepped without divisions */
    for (size_t q = 0; q < n; q++) {
        tt_im2col_row(cols + q * KC, x + r * in, g, oh, ow);
        if (++ow == g->OW && (ow = 0, ++oh == g->OH)) oh = 0, r++;
    }
}

/* The scatter form, patch after patch in ascending order (tt_col2im_patch): the sums of the CUDA backend's gather
 * (tt_col2im_elem), in the same order. */
static void cpu_col2im(void *ctx, float *dx, const float *dcols, size_t q0, size_t n, const tt_conv_geom *g)
{
    (void)ctx;
    const size_t in = g->H * g->W * g->C, KC = g->KH * g->KW * g->C, P = g->OH * g->OW;
    size_t r = q0 / P, oh = q0 % P / g->OW, ow = q0 % g->OW;
    for (size_t q = 0; q < n; q++) {
        tt_col2im_patch(dx + r * in, dcols + q * KC, g, oh, ow);
        if (++ow == g->OW && (ow = 0, ++oh == g->OH)) oh = 0, r++;
    }
}

static void cpu_maxpool_fwd(void *ctx, float *y, const float *x, size_t rows, const tt_conv_geom *g)
{
    (void)ctx;
    const size_t in = g->H * g->W * g->C, out = g->OH * g->OW * g->C;
    for (size_t r = 0; r < rows; r++)
        for (size_t oh = 0; oh < g->OH; oh++)
            for (size_t ow = 0; ow < g->OW; ow++)
                tt_maxpool_pixel(y + r * out + (oh * g->OW + ow) * g->C, x + r * in, g, oh, ow);
}

/* The scatter form: window after window (ascending) adds its dy to its argmax in a zeroed dx — the CUDA backend's
 * gather (tt_maxpool_grad) adds the same terms in the same order, and where windows do not overlap its one term per
 * input (tt_maxpool_argmax) is this scatter's 0 + dy. */
static void cpu_maxpool_bwd(void *ctx, float *dx, const float *dy, const float *x, const float *y, size_t rows,
                            const tt_conv_geom *g)
{
    (void)ctx;
    const size_t in = g->H * g->W * g->C, out = g->OH * g->OW * g->C;
    enum { BLOCK = 1024 }; /* channels per pass: the flags stay on the stack whatever C is */
    unsigned char routed[BLOCK];
    for (size_t k = 0; k < rows * in; k++) dx[k] = 0.0f;
    for (size_t r = 0; r < rows; r++)
        for (size_t oh = 0; oh < g->OH; oh++)
            for (size_t ow = 0; ow < g->OW; ow++) {
                const size_t o = r * out + (oh * g->OW + ow) * g->C;
                for (size_t c0 = 0; c0 < g->C; c0 += BLOCK)
                    tt_maxpool_scatter(dx + r * in, dy + o, x + r * in, y + o, g, oh, ow, c0,
                                       c0 + BLOCK < g->C ? c0 + BLOCK : g->C, routed);
            }
}

static void cpu_dropout(void *ctx, float *y, const float *x, size_t rows, size_t cols, float rate, uint64_t key,
                        const uint32_t *ids)
{
    (void)ctx;
    const float keep = 1.0f / (1.0f - rate);
    for (size_t r = 0; r < rows; r++)
        for (size_t j = 0; j < cols; j++) y[r * cols + j] = tt_dropout(x[r * cols + j], key, ids[r], j, rate, keep);
}

static void cpu_embed_fwd(void *ctx, float *y, const float *w, const float *t, size_t n, size_t V, size_t E)
{
    (void)ctx;
    for (size_t i = 0; i < n; i++) tt_embed_row(y + i * E, w, t[i], V, E);
}

/* Token order: each id's rows are added in ascending token position, as the CUDA kernel adds them (after sorting the
 * positions by id). */
static void cpu_embed_bwd(void *ctx, float *dw, const float *dy, const float *t, size_t n, size_t V, size_t E)
{
    (void)ctx;
    for (size_t k = 0; k < V * E; k++) dw[k] = 0.0f;
    for (size_t i = 0; i < n; i++) {
        size_t id;
        if (!tt_token_id(t[i], V, &id)) continue;
        for (size_t e = 0; e < E; e++) dw[id * E + e] = tt_add(dw[id * E + e], dy[i * E + e]);
    }
}

/* Row by row, a copy each; an index past the table gives a row of zero bytes (as the CUDA kernel writes). */
static void cpu_gather_rows(void *ctx, void *dst, const void *src, size_t n_src, const uint32_t *idx, size_t rows,
                            size_t row_bytes)
{
    (void)ctx;
    unsigned char *d = (unsigned char *)dst;
    const unsigned char *s = (const unsigned char *)src;
    for (size_t r = 0; r < rows; r++) {
        if (idx[r] < n_src)
            memcpy(d + r * row_bytes, s + (size_t)idx[r] * row_bytes, row_bytes);
        else
            memset(d + r * row_bytes, 0, row_bytes);
    }
}

/* An event is the clock when it was recorded: every op has finished by the time it returns. */
static void *cpu_event_create(void *ctx)
{
    (void)ctx;
    return tt_calloc(1, sizeof(double));
}

static void cpu_event_destroy(void *ctx, void *ev)
{
    (void)ctx;
    tt_free(ev);
}

static void cpu_event_record(void *ctx, void *ev)
{
    (void)ctx;
    *(double *)ev = tt_now();
}

static double cpu_event_elapsed(void *ctx, void *a, void *b)
{
    (void)ctx;
    return *(const double *)b - *(const double *)a;
}

static int cpu_event_done(void *ctx, void *ev)
{
    (void)ctx;
    (void)ev;
    return 1;
}

static void cpu_event_sync(void *ctx, void *ev)
{
    (void)ctx;
    (void)ev;
}

static void cpu_side_copy(void *ctx, void *dst, const void *src, size_t bytes, int to_device, void *after, void *done)
{
    (void)to_device;
    (void)after;
    if (bytes) memcpy(dst, src, bytes);
    cpu_event_record(ctx, done);
}

/* The processor's model name, as lscpu shows it: /proc/cpuinfo's first "model name" line (x86; other Linux
 * machines may have none: the backend's name then stands for it). */
static void cpu_device_name(int ordinal, char *out, size_t len)
{
    (void)ordinal;
    FILE *f = fopen("/proc/cpuinfo", "re");
    char line[512];
    while (f && fgets(line, sizeof line, f)) {
        const char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) != 0 || !colon) continue;
        colon += 1 + (colon[1] == ' ');
        snprintf(out, len, "%.*s", (int)strcspn(colon, "\n"), colon);
        break;
    }
    if (f) fclose(f);
}

/* Every op of include/tt_dev.h's list that a backend must have (tt_dev_init checks), and of the optional ones those the
 * CPU has; the others NULL, each with its fallback. */
const tt_dev_ops tt_dev_cpu_ops = {
    .name = "cpu",
    .inline_ops = 1,
    .chunk_mnk = 1000000, /* OpenBLAS's small-matrix limit (docs/perf.md): ~20% faster GEMMs at conv shapes */
    .init = cpu_init,
    .destroy = cpu_destroy,
    .mem_info = NULL, /* tower memory is host RAM: the budget counts it as host memory */
    .bind = NULL,
    .alloc = cpu_alloc,
    .dfree = cpu_dfree,
    .host_alloc = NULL,
    .host_free = NULL,
    .h2d = cpu_copy,
    .d2h = cpu_copy,
    .d2d = cpu_copy,
    .sync = cpu_sync,
    .peer_copy = cpu_peer_copy,
    .sgemm = cpu_sgemm,
    .fill = cpu_fill,
    .add = cpu_add,
    .u8_to_f32 = cpu_u8_to_f32,
    .augment = cpu_augment,
    .round16 = cpu_round16,
    .widen16 = cpu_widen16,
    .narrow16 = cpu_narrow16,
    .gemm_format = NULL, /* sgemm is exact on 16-bit operands: nothing to set */
    .bias_add = cpu_bias_add,
    .col_sum = cpu_col_sum,
    .relu_fwd = cpu_relu_fwd,
    .relu_bwd = cpu_relu_bwd,
    .bias_relu = cpu_bias_relu,
    .drelu_bgrad = cpu_drelu_bgrad,
    .col_dev_sum = cpu_col_dev_sum,
    .bn_stats = cpu_bn_stats,
    .bn_fwd = cpu_bn_fwd,
    .bn_dx = cpu_bn_dx,
    .transpose = cpu_transpose,
    .softmax_xent = cpu_softmax_xent,
    .im2col = cpu_im2col,
    .col2im = cpu_col2im,
    .maxpool_fwd = cpu_maxpool_fwd,
    .maxpool_bwd = cpu_maxpool_bwd,
    .dropout = cpu_dropout,
    .embed_fwd = cpu_embed_fwd,
    .embed_bwd = cpu_embed_bwd,
    .gather_rows = cpu_gather_rows,
    .update = cpu_update,
    .event_create = cpu_event_create,
    .event_destroy = cpu_event_destroy,
    .event_record = cpu_event_record,
    .event_elapsed = cpu_event_elapsed,
    .event_done = cpu_event_done,
    .event_sync = cpu_event_sync,
    .side_copy = cpu_side_copy,
    .stream_wait = cpu_event_sync, /* one thread, ops as issued: nothing to wait for */
    .peer_setup = NULL, /* every tower's memory is the host's: copies between towers are memcpy */
    .comm_init = NULL,  /* no collectives library: --reduce nccl is refused */
    .comm_free = NULL,
    .comm_reduce = NULL,
    .device_name = cpu_device_name,
};
