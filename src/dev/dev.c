/* dev.c — the thin tt_dev_* wrappers around a backend's table: argument checks, allocation counting, and the
 * fallbacks for optional members. Tower code calls these, never the table directly. */
#include "tt_dev.h"

#include <string.h>
#include <stdio.h>

tt_status tt_dev_init(tt_dev *dev, const tt_dev_ops *ops, int ordinal, tt_error *err)
{
    memset(dev, 0, sizeof *dev);
    TT_ASSERT(ops != NULL && ops->init != NULL);
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

void tt_dev_h2d(tt_dev *dev, void *d_dst, const void *h_src, size_t bytes)
{
    if (bytes == 0) return;
    TT_ASSERT(d_dst && h_src);
    dev->ops->h2d(dev->ctx, d_dst, h_src, bytes);
}

void tt_dev_d2h(tt_dev *dev, void *h_dst, const void *d_src, size_t bytes)
{
    if (bytes == 0) return;
    TT_ASSERT(h_dst && d_src);
    dev->ops->d2h(dev->ctx, h_dst, d_src, bytes);
}

void tt_dev_d2d(tt_dev *dev, void *d_dst, const void *d_src, size_t bytes)
{
    if (bytes == 0 || d_dst == d_src) return;
    TT_ASSERT(d_dst && d_src);
    dev->ops->d2d(dev->ctx, d_dst, d_src, bytes);
}

void tt_dev_sync(tt_dev *dev) { dev->ops->sync(dev->ctx); }

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

void tt_dev_add(tt_dev *dev, float *d_y, const float *d_x, size_t n)
{
    if (n == 0) return;
    TT_ASSERT(d_y && d_x);
    dev->ops->add(dev->ctx, d_y, d_x, n);
}

void tt_dev_update(tt_dev *dev, const tt_update_args *u, float *d_w, const float *d_g, float *d_m, float *d_v,
                   float *d_a, int32_t *d_bad, size_t n, int skip)
{
    if (n == 0) return;
    TT_ASSERT(u && d_w && d_g && d_bad);
    dev->ops->update(dev->ctx, u, d_w, d_g, d_m, d_v, d_a, d_bad, n, skip);
}

void tt_dev_sgemm(tt_dev *dev, int trans_a, int trans_b, size_t M, size_t N, size_t K, float alpha, const float *d_a,
                  size_t lda, const float *d_b, size_t ldb, float beta, float *d_c, size_t ldc)
{
    if (M == 0 || N == 0) return;
    TT_ASSERT(d_a && d_b && d_c);
    TT_ASSERT(lda >= (trans_a ? M : K) && ldb >= (trans_b ? K : N) && ldc >= N);
    dev->ops->sgemm(dev->ctx, trans_a, trans_b, M, N, K, alpha, d_a, lda, d_b, ldb, beta, d_c, ldc);
}

void tt_dev_fill(tt_dev *dev, float *d_x, size_t n, float value)
{
    if (n == 0) return;
    TT_ASSERT(d_x);
    dev->ops->fill(dev->ctx, d_x, n, value);
}

void tt_dev_u8_to_f32(tt_dev *dev, float *d_y, const uint8_t *d_x, size_t n, float scale)
{
    if (n == 0) return;
    TT_ASSERT(d_y && d_x);
    dev->ops->u8_to_f32(dev->ctx, d_y, d_x, n, scale);
}

void tt_dev_bias_add(tt_dev *dev, float *d_y, const float *d_b, size_t rows, size_t cols)
{
    if (rows == 0 || cols == 0) return;
    TT_ASSERT(d_y && d_b);
    dev->ops->bias_add(dev->ctx, d_y, d_b, rows, cols);
}

void tt_dev_col_sum(tt_dev *dev, float *d_out, const float *d_x, size_t rows, size_t cols)
{
    if (cols == 0) return;
    TT_ASSERT(d_out && (rows == 0 || d_x));
    dev->ops->col_sum(dev->ctx, d_out, d_x, rows, cols);
}

void tt_dev_relu_fwd(tt_dev *dev, float *d_y, const float *d_x, size_t n)
{
    if (n == 0) return;
    TT_ASSERT(d_y && d_x);
    dev->ops->relu_fwd(dev->ctx, d_y, d_x, n);
}

void tt_dev_relu_bwd(tt_dev *dev, float *d_dx, const float *d_dy, const float *d_y, size_t n)
{
    if (n == 0) return;
    TT_ASSERT(d_dx && d_dy && d_y);
    dev->ops->relu_bwd(dev->ctx, d_dx, d_dy, d_y, n);
}

void tt_dev_bias_relu(tt_dev *dev, float *d_y, const float *d_b, size_t rows, size_t cols)
{
    if (rows == 0 || cols == 0) return;
    TT_ASSERT(d_y && d_b);
    dev->ops->bias_relu(dev->ctx, d_y, d_b, rows, cols);
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

void tt_dev_drelu_bgrad(tt_dev *dev, float *d_dz, float *d_db, const float *d_dy, const float *d_y, size_t rows,
                        size_t cols)
{
    if (cols == 0) return;
    TT_ASSERT(d_db && (rows == 0 || (d_dz && d_dy && d_y)));
    dev->ops->drelu_bgrad(dev->ctx, d_dz, d_db, d_dy, d_y, rows, cols);
}

void tt_dev_col_dev_sum(tt_dev *dev, float *d_out, const float *d_x, const float *d_w, const float *d_center,
                        float center_scale, const float *d_scale, size_t rows, size_t cols)
{
    if (cols == 0) return;
    TT_ASSERT(d_out && d_center && (rows == 0 || d_x));
    dev->ops->col_dev_sum(dev->ctx, d_out, d_x, d_w, d_center, center_scale, d_scale, rows, cols);
}

void tt_dev_bn_stats(tt_dev *dev, float *d_save, float *d_tail, const float *d_s1, const float *d_s2,
                     const float *d_moving, size_t C, float inv_n, float epsilon, float factor)
{
    if (C == 0) return;
    TT_ASSERT(d_save && d_moving && (!d_s1 || d_s2) && (!d_tail || d_s1));
    dev->ops->bn_stats(dev->ctx, d_save, d_tail, d_s1, d_s2, d_moving, C, inv_n, epsilon, factor);
}

void tt_dev_bn_fwd(tt_dev *dev, float *d_y, const float *d_x, const float *d_save, const float *d_gb, size_t rows,
                   size_t cols)
{
    if (rows == 0 || cols == 0) return;
    TT_ASSERT(d_y && d_x && d_save && d_gb);
    dev->ops->bn_fwd(dev->ctx, d_y, d_x, d_save, d_gb, rows, cols);
}

void tt_dev_bn_dx(tt_dev *dev, float *d_dx, const float *d_dy, const float *d_x, const float *d_save,
                  const float *d_gamma, const float *d_sums, size_t rows, size_t cols, float inv_n)
{
    if (rows == 0 || cols == 0) return;
    TT_ASSERT(d_dx && d_dy && d_x && d_save && d_gamma && d_sums && d_dx != d_dy);
    dev->ops->bn_dx(dev->ctx, d_dx, d_dy, d_x, d_save, d_gamma, d_sums, rows, cols, inv_n);
}

void tt_dev_transpose(tt_dev *dev, float *d_y, const float *d_x, size_t rows, size_t cols)
{
    if (rows == 0 || cols == 0) return;
    TT_ASSERT(d_y && d_x);
    TT_ASSERT(dev->ops->no_memory || d_y + rows * cols <= d_x || d_x + rows * cols <= d_y);
    dev->ops->transpose(dev->ctx, d_y, d_x, rows, cols);
}

void tt_dev_softmax_xent(tt_dev *dev, float *d_dlogits, float *d_stats, const float *d_logits,
                         const int32_t *d_labels, size_t rows, size_t classes, float grad_scale)
{
    if (rows == 0) return;
    TT_ASSERT(d_stats && d_logits && d_labels && classes >= 1);
    dev->ops->softmax_xent(dev->ctx, d_dlogits, d_stats, d_logits, d_labels, rows, classes, grad_scale);
}

void tt_dev_im2col(tt_dev *dev, float *d_cols, const float *d_x, size_t q0, size_t n, const tt_conv_geom *g)
{
    if (n == 0) return;
    TT_ASSERT(d_cols && d_x && g->OH && g->OW && g->SH && g->SW);
    dev->ops->im2col(dev->ctx, d_cols, d_x, q0, n, g);
}

void tt_dev_col2im(tt_dev *dev, float *d_dx, const float *d_dcols, size_t q0, size_t n, const tt_conv_geom *g)
{
    if (n == 0) return;
    TT_ASSERT(d_dx && d_dcols && g->OH && g->OW && g->SH && g->SW);
    dev->ops->col2im(dev->ctx, d_dx, d_dcols, q0, n, g);
}

void tt_dev_maxpool_fwd(tt_dev *dev, float *d_y, const float *d_x, size_t rows, const tt_conv_geom *g)
{
    if (rows == 0) return;
    TT_ASSERT(d_y && d_x && g->OH && g->OW && g->SH && g->SW);
    dev->ops->maxpool_fwd(dev->ctx, d_y, d_x, rows, g);
}

void tt_dev_maxpool_bwd(tt_dev *dev, float *d_dx, const float *d_dy, const float *d_x, const float *d_y, size_t rows,
                        const tt_conv_geom *g)
{
    if (rows == 0) return;
    TT_ASSERT(d_dx && d_dy && d_x && d_y && g->SH && g->SW);
    dev->ops->maxpool_bwd(dev->ctx, d_dx, d_dy, d_x, d_y, rows, g);
}

void tt_dev_dropout(tt_dev *dev, float *d_y, const float *d_x, size_t rows, size_t cols, float rate, uint64_t key,
                    const uint32_t *d_ids)
{
    if (rows == 0 || cols == 0) return;
    TT_ASSERT(d_y && d_x && d_ids && rate >= 0.0f && rate < 1.0f);
    dev->ops->dropout(dev->ctx, d_y, d_x, rows, cols, rate, key, d_ids);
}

void tt_dev_embed_fwd(tt_dev *dev, float *d_y, const float *d_w, const float *d_t, size_t n, size_t V, size_t E)
{
    if (n == 0) return;
    TT_ASSERT(d_y && d_w && d_t && V && E);
    dev->ops->embed_fwd(dev->ctx, d_y, d_w, d_t, n, V, E);
}

void tt_dev_embed_bwd(tt_dev *dev, float *d_dw, const float *d_dy, const float *d_t, size_t n, size_t V, size_t E)
{
    TT_ASSERT(d_dw && V && E && (n == 0 || (d_dy && d_t)));
    dev->ops->embed_bwd(dev->ctx, d_dw, d_dy, d_t, n, V, E);
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

void *tt_dev_capture_end(tt_dev *dev) { return dev->ops->capture_end(dev->ctx); }

int tt_dev_graph_launch(tt_dev *dev, void *graph)
{
    TT_ASSERT(graph);
    return dev->ops->graph_launch(dev->ctx, graph);
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

void tt_dev_event_record(tt_dev *dev, void *ev)
{
    TT_ASSERT(ev);
    dev->ops->event_record(dev->ctx, ev);
}

double tt_dev_event_elapsed(tt_dev *dev, void *a, void *b)
{
    TT_ASSERT(a && b);
    return dev->ops->event_elapsed(dev->ctx, a, b);
}

int tt_dev_event_done(tt_dev *dev, void *ev)
{
    TT_ASSERT(ev);
    return dev->ops->event_done(dev->ctx, ev);
}

void tt_dev_event_sync(tt_dev *dev, void *ev)
{
    TT_ASSERT(ev);
    dev->ops->event_sync(dev->ctx, ev);
}

void tt_dev_side_copy(tt_dev *dev, void *dst, const void *src, size_t bytes, int to_device, void *after, void *done)
{
    TT_ASSERT(done && (bytes == 0 || (dst && src)));
    dev->ops->side_copy(dev->ctx, dst, src, bytes, to_device, after, done);
}

void tt_dev_stream_wait(tt_dev *dev, void *ev)
{
    TT_ASSERT(ev);
    dev->ops->stream_wait(dev->ctx, ev);
}
