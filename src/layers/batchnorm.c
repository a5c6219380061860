/* layers/batchnorm.c — Keras `BatchNormalization()` over the last axis (momentum 0.99, epsilon 1e-3, center and
 * scale): the C channels of any shape, every other position of a shard a row (rows = B * in / C).
 * https://keras.io/api/layers/normalization_layers/batch_normalization/
 *
 * Tensors: gamma (C, init 1) and beta (C, init 0), trainable; moving_mean (C, init 0) and moving_variance (C, init 1),
 * non-trainable, in the parameter buffer's tail (tt_model.n_trainable): pulled and checkpointed with the weights,
 * never touched by the optimizer.
 *
 * Training forward: the batch's mean and (biased) variance per channel, two passes (sum, then the sum of squared
 * deviations from that mean), y = (x - mean) * gamma / sqrt(var + epsilon) + beta (tt_bn_y). The batch is the
 * tower's rows, or with --bn-sync on the global batch: after each pass the towers' sums are added (tt_pass.xchg),
 * so every tower normalises with the statistics one tower would take over the whole batch. The forward also writes
 * the tower's step of each moving statistic into the gradient buffer's tail, (1 - momentum) * share * (stat -
 * moving) (tt_bn_moving_step), which the host adds up over the towers: moving += (1 - momentum) * (stat - moving),
 * Keras's moving = moving * momentum + stat * (1 - momentum) with stat the towers' (share-weighted) mean. With
 * --bn-sync on every tower's stat is the global one, so N towers step the moving statistics as one tower does.
 * Evaluation: the moving statistics in place of the batch's.
 * Backward (dy already carries the loss's 1/n): dbeta = sum dy, dgamma = sum dy * xhat, and dx = tt_bn_dx over the
 * batch the statistics were taken over — with --bn-sync on its sums are exchanged too (the towers' dgamma and dbeta
 * themselves are summed by the gradient reduction like any gradient). Three exchanges per layer and step.
 * Saved from forward to backward: the channels' mean and 1 / sqrt(var + epsilon) (2C floats). */
#include <stddef.h>

#include "layers.h"

static size_t channels(const tt_layer *l) { return l->in_shape.d[l->in_shape.ndim - 1]; }

static tt_status bn_setup(tt_layer *l, tt_error *err)
{
    if (l->in_shape.ndim < 1)
        return tt_fail(err, TT_ERR_MODEL, "%s: needs an input with a channel axis", l->name);
    l->out_shape = l->in_shape;
    return TT_OK;
}

static int bn_tensors(const tt_layer *l, tt_tensor_info *out)
{
    tt_tensor_set(&out[0], l, "gamma", 1, channels(l), 0, 0, 0);
    tt_tensor_set(&out[1], l, "beta", 1, channels(l), 0, 0, 0);
    return 2;
}

static int bn_stats(const tt_layer *l, tt_tensor_info *out)
{
    tt_tensor_set(&out[0], l, "moving_mean", 1, channels(l), 0, 0, 0);
    tt_tensor_set(&out[1], l, "moving_variance", 1, channels(l), 0, 0, 0);
    return 2;
}

static void bn_init(const tt_layer *l, float *h_p, tt_rng *rng)
{
    (void)rng;
    const size_t C = channels(l);
    for (size_t c = 0; c < C; c++) h_p[c] = 1.0f, h_p[C + c] = 0.0f;
}

static void bn_stats_init(const tt_layer *l, float *h_tail)
{
    const size_t C = channels(l);
    for (size_t c = 0; c < C; c++) h_tail[c] = 0.0f, h_tail[C + c] = 1.0f;
}

static size_t bn_saved(const tt_layer *l) { return 2 * channels(l); }

/* Scratch: two sums of C (forward), or dgamma and dbeta's copy for the exchange (backward). */
static size_t bn_workspace(const tt_layer *l, size_t B, size_t chunk_mnk)
{
    (void)B, (void)chunk_mnk;
    return 2 * channels(l);
}

static int bn_synced(const tt_pass *ps) { return ps->xchg != NULL; }

static void bn_exchange(tt_dev *dev, const tt_pass *ps, float *d_buf, size_t n)
{
    ps->xchg->sum(ps->xchg->arg, dev, d_buf, n);
}

/* The rows the statistics are over: the tower's, or (synchronised) the step's over all towers. */
static size_t bn_rows_all(const tt_layer *l, const tt_pass *ps, size_t B)
{
    return (bn_synced(ps) ? ps->rows_all : B) * (l->in / channels(l));
}

static void bn_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                       float *d_y, size_t B)
{
    const size_t C = channels(l), R = B * (l->in / C);
    const float *d_moving = d_p + (l->stat_offset - l->offset);
    float *d_save = ps->d_saved + l->save_offset;
    if (!ps->training) {
        tt_dev_bn_stats(dev, d_save, NULL, NULL, NULL, d_moving, C, 0.0f, l->epsilon, 0.0f);
    } else {
        float *d_s1 = ps->d_ws, *d_s2 = ps->d_ws + C;
        const float inv_n = 1.0f / (float)bn_rows_all(l, ps, B);
        tt_dev_col_sum(dev, d_s1, d_x, R, C);
        if (bn_synced(ps)) bn_exchange(dev, ps, d_s1, C);
        tt_dev_col_dev_sum(dev, d_s2, d_x, NULL, d_s1, inv_n, NULL, R, C);
        if (bn_synced(ps)) bn_exchange(dev, ps, d_s2, C);
        float *d_tail = ps->d_grads ? ps->d_grads + l->stat_offset : NULL;
        tt_dev_bn_stats(dev, d_save, d_tail, d_s1, d_s2, d_moving, C, inv_n, l->epsilon,
                        (1.0f - l->momentum) * ps->share);
    }
    tt_dev_bn_fwd(dev, d_y, d_x, d_save, d_p, R, C);
}

static void bn_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                        const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B)
{
    (void)d_y;
    const size_t C = channels(l), R = B * (l->in / C);
    const float *d_save = ps->d_saved + l->save_offset;
    tt_dev_col_dev_sum(dev, d_g, d_x, d_dy, d_save, 1.0f, d_save + C, R, C); /* dgamma = sum dy * xhat */
    tt_dev_col_sum(dev, d_g + C, d_dy, R, C);                                /* dbeta = sum dy */
    if (!d_dx) return;
    const float *d_sums = d_g;
    if (bn_synced(ps)) {
        tt_dev_d2d(dev, ps->d_ws, d_g, 2 * C * sizeof(float));
        bn_exchange(dev, ps, ps->d_ws, 2 * C);
        d_sums = ps->d_ws;
    }
    tt_dev_bn_dx(dev, d_dx, d_dy, d_x, d_save, d_p, d_sums, R, C, 1.0f / (float)bn_rows_all(l, ps, B));
}

/* A tower without rows: zeros into the same exchanges (the backward's only where a dx is computed: not the first
 * layer's, tt_model_idle says which). */
static void bn_idle(tt_dev *dev, const tt_layer *l, const tt_pass *ps, int backward)
{
    if (!bn_synced(ps)) return;
    const size_t C = channels(l);
    if (!backward) {
        bn_exchange(dev, ps, NULL, C);
        bn_exchange(dev, ps, NULL, C);
    } else {
        bn_exchange(dev, ps, NULL, 2 * C);
    }
}

const tt_layer_kind tt_layer_batchnorm = {
    .name = "batchnorm",
    .stem = "batch_normalization",
    .keras = "BatchNormalization",
    .keys = {{"momentum", TT_KEY_FLOAT, offsetof(tt_layer, momentum), 0, 0.9999, "0.99"},
             {"epsilon", TT_KEY_FLOAT, offsetof(tt_layer, epsilon), 1e-12, 1.0, "0.001"},
             {NULL, 0, 0, 0, 0, NULL}},
    .setup = bn_setup,
    .tensors = bn_tensors,
    .init = bn_init,
    .stats = bn_stats,
    .stats_init = bn_stats_init,
    .saved = bn_saved,
    .idle = bn_idle,
    .workspace = bn_workspace,
    .forward = bn_forward,
    .backward = bn_backward,
};
