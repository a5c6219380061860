/* dev.c — the thin tt_dev_* wrappers around a backend's table: argument checks, allocation counting, and the
 * fallbacks for optional members. Tower code calls these, never the table directly. The wrappers of the list's OP
 * and RET entries (include/tt_dev.h, TT_DEV_OPS) are made from it below; the OWN entries' are written out after
 * them. Not for: what any op computes (the backends). */
#include "tt_dev.h"

#include <string.h>
#include <stdio.h>

/* An OP entry's wrapper: nothing when `skip` holds, else `check` asserted and the op called on the tower's context;
 * a RET entry's returns what the op returns. */
#define WRAP_OP(name, launches, skip, check, ...)                                                                      \
    void tt_dev_##name(tt_dev *dev TT_DEV_EACH(TT_DEV_PARAM, __VA_ARGS__))                                             \
    {                                                                                                                  \
        if (skip) return;                                                                                              \
        TT_ASSERT(check);                                                                                              \
        dev->ops->name(dev->ctx TT_DEV_EACH(TT_DEV_ARG, __VA_ARGS__));                                                 \
    }
#define WRAP_RET(name, need, ret, check, ...)                                                                          \
    ret tt_dev_##name(tt_dev *dev TT_DEV_EACH(TT_DEV_PARAM, __VA_ARGS__))                                              \
    {                                                                                                                  \
        TT_ASSERT(check);                                                                                              \
        return dev->ops->name(dev->ctx TT_DEV_EACH(TT_DEV_ARG, __VA_ARGS__));                                          \
    }
TT_DEV_OPS(WRAP_OP, WRAP_RET, TT_DEV_NONE, TT_DEV_NONE)

/* Every OP entry, and the RET, OWN and BACKEND entries whose need is MUST: the first one ops lacks. */
#define MISSING_MUST(name) if (!ops->name) return #name;
#define MISSING_MAY(name)
#define MISSING_OP(name, ...) MISSING_MUST(name)
#define MISSING(name, need, ...) MISSING_##need(name)

const char *tt_dev_ops_missing(const tt_dev_ops *ops)
{
    TT_DEV_OPS(MISSING_OP, MISSING, MISSING, MISSING)
    return NULL;
}

tt_status tt_dev_init(tt_dev *dev, const tt_dev_ops *ops, int ordinal, tt_error *err)
{
    memset(dev, 0, sizeof *dev);
    TT_ASSERT(ops != NULL);
    const char *missing = tt_dev_ops_missing(ops);
    if (missing)
        return tt_fail(err, TT_ERR_DEVICE,
                       "the %s backend's table has no %s, an op every backend must have (include/tt_dev.h, TT_DEV_OPS)",
                       ops->name ? ops->name : "unnamed", missing);
    dev->ops = ops;
    dev->ordinal = ordinal;
    tt_status s = ops->init(&dev->ctx, ordinal, err);
    if (s != TT_OK) dev->ops = NULL;
    return s;
}

void tt_dev_free(tt_dev *dev)
{
    if (dev->ops && dev->ctx) dev->ops->destroy(dev->ctx);
    dev->ops = NULL;
    dev->ctx = NULL;
}

void tt_dev_bind(tt_dev *dev)
{
    if (dev->ops->bind) dev->ops->bind(dev->ctx);
}

void *tt_dev_alloc(tt_dev *dev, size_t bytes)
{
    void *d = dev->ops->alloc(dev->ctx, bytes ? bytes : 4);
    if (d) dev->n_alloc++;
    return d;
}

float *tt_dev_alloc_f32(tt_dev *dev, size_t n)
{
    size_t bytes;
    if (tt_mul_size(n, sizeof(float), &bytes)) return NULL;
    return (float *)tt_dev_alloc(dev, bytes);
}

void tt_dev_dfree(tt_dev *dev, void *d)
{
    if (d && dev->ops) dev->ops->dfree(dev->ctx, d);
}

void *tt_dev_host_alloc(tt_dev *dev, size_t bytes)
{
    if (dev->ops->host_alloc) return dev->ops->host_alloc(dev->ctx, bytes ? bytes : 4);
    return tt_malloc(bytes);
}

void tt_dev_host_free(tt_dev *dev, void *h)
{
    if (!h) return;
    if (dev->ops && dev->ops->host_free)
        dev->ops->host_free(dev->ctx, h);
    else
        tt_free(h);
}

void tt_dev_peer_copy(tt_dev *dst, void *d_dst, tt_dev *src, const void *d_src, size_t bytes)
{
    if (bytes == 0) return;
    TT_ASSERT(d_dst && d_src && dst->ops == src->ops);
    if (dst == src) {
        tt_dev_d2d(dst, d_dst, d_src, bytes);
        return;
    }
    dst->ops->peer_copy(dst->ctx, d_dst, src->ctx, d_src, bytes);
}

void tt_dev_gemm_format(tt_dev *dev, int fmt)
{
    TT_ASSERT(fmt == TT_FMT_FP32 || fmt == TT_FMT_BF16 || fmt == TT_FMT_FP16);
    if (dev->ops->gemm_format) dev->ops->gemm_format(dev->ctx, fmt);
}

void tt_dev_sgemm(tt_dev *dev, int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha, const float *d_a,
                  size_t lda, const float *d_b, size_t ldb, float beta, float *d_c, size_t ldc)
{
    if (M == 0 || N == 0) return;
    TT_ASSERT(d_a && d_b && d_c);
    TT_ASSERT(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N);
    dev->ops->sgemm(dev->ctx, trans_a, trans_b, M, N, K, alpha, d_a, lda, d_b, ldb, beta, d_c, ldc);
}

int tt_dev_gemm_bias_act(tt_dev *dev, int lt, size_t M, size_t N, size_t K, const float *d_x, const float *d_w,
                         const float *d_b, float *d_y, int relu, void *d_mask)
{
    if (M == 0 || N == 0) return 0;
    TT_ASSERT(d_x && d_w && d_y && (!d_mask || (relu && d_b)));
    if (lt && dev->ops->gemm_bias_act &&
        dev->ops->gemm_bias_act(dev->ctx, M, N, K, d_x, d_w, d_b, d_y, relu, d_mask))
        return d_mask != NULL;
    tt_dev_sgemm(dev, 0, 0, M, N, K, 1.0f, d_x, K, d_w, N, 0.0f, d_y, N);
    if (relu && d_b)
        tt_dev_bias_relu(dev, d_y, d_b, M, N);
    else if (d_b)
        tt_dev_bias_add(dev, d_y, d_b, M, N);
    else if (relu)
        tt_dev_relu_fwd(dev, d_y, d_y, M * N);
    return 0;
}

size_t tt_relu_mask_bytes(size_t rows, size_t cols)
{
    if (cols > SIZE_MAX - 127) return 0;
    const size_t row_bytes = (cols + 127) / 128 * 16;
    size_t bytes;
    if (tt_mul_size(rows, row_bytes, &bytes) || bytes > SIZE_MAX - 255) return 0;
    return (bytes + 255) / 256 * 256;
}

void tt_dev_gemm_drelu_bgrad(tt_dev *dev, int lt, size_t M, size_t N, size_t K, const float *d_dy, const float *d_w,
                             const void *d_mask, const float *d_y, float *d_dz, float *d_db)
{
    if (N == 0) return;
    TT_ASSERT(d_db && (M == 0 || (d_dy && d_w && d_y && d_dz)));
    if (M && lt && d_mask && dev->ops->gemm_drelu_bgrad &&
        dev->ops->gemm_drelu_bgrad(dev->ctx, M, N, K, d_dy, d_w, d_mask, d_dz, d_db))
        return;
    tt_dev_sgemm(dev, 0, 1, M, N, K, 1.0f, d_dy, K, d_w, K, 0.0f, d_dz, N);
    tt_dev_drelu_bgrad(dev, d_dz, d_db, d_dz, d_y, M, N);
}

void tt_dev_gather_rows(tt_dev *dev, void *d_dst, const void *d_src, size_t n_src, const uint32_t *d_idx, size_t rows,
                        size_t row_bytes)
{
    if (rows == 0 || row_bytes == 0) return;
    TT_ASSERT(d_dst && d_src && d_idx);
    size_t bytes; /* the output's extent: a table of n_src rows is an allocation, so its size cannot overflow */
    TT_ASSERT(!tt_mul_size(rows, row_bytes, &bytes));
    const char *dst = (const char *)d_dst, *src = (const char *)d_src;
    TT_ASSERT(dev->ops->no_memory || dst + bytes <= src || src + n_src * row_bytes <= dst);
    dev->ops->gather_rows(dev->ctx, d_dst, d_src, n_src, d_idx, rows, row_bytes);
}

void tt_dev_capture_begin(tt_dev *dev)
{
    TT_ASSERT(dev->ops->capture_begin && dev->ops->capture_end && dev->ops->graph_launch && dev->ops->graph_free);
    dev->ops->capture_begin(dev->ctx);
}

void tt_dev_graph_free(tt_dev *dev, void *graph)
{
    if (graph) dev->ops->graph_free(dev->ctx, graph);
}

void tt_dev_device_name(const tt_dev_ops *ops, int ordinal, char *out, size_t len)
{
    TT_ASSERT(out && len > 1);
    out[0] = '\0';
    if (ops->device_name) ops->device_name(ordinal, out, len);
    if (!out[0]) snprintf(out, len, "%s", ops->name);
}

void *tt_dev_event_create(tt_dev *dev)
{
    void *ev = dev->ops->event_create(dev->ctx);
    if (ev) dev->n_alloc++;
    return ev;
}

void tt_dev_event_destroy(tt_dev *dev, void *ev)
{
    if (ev && dev->ops) dev->ops->event_destroy(dev->ctx, ev);
}

