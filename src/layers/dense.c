/* layers/dense.c — fully connected layer, Keras `Dense` without activation (ReLU is its own layer).
 *
 * B = rows in this tower's shard, D = in (features), O = out (units).
 * Parameters, in this order in the flat buffer:
 *   W: (D, O) row-major — Keras's `kernel` layout, so y = x W
 *   b: (O)
 * forward:  y (B,O) = x (B,D) · W (D,O) + b
 * backward: dW (D,O) = xᵀ (D,B) · dy (B,O);  db (O) = Σ_rows dy;  dx (B,D) = dy (B,O) · Wᵀ (O,D)
 * Not for: fusing activations; that would hide the layer boundary students are looking for. */
#include <math.h>
#include <stdio.h>

#include "tt_model.h"

static int dense_tensors(const tt_layer *l, tt_tensor_info *out)
{
    snprintf(out[0].name, sizeof out[0].name, "%s/kernel", l->name);
    out[0].ndim = 2;
    out[0].shape[0] = l->in;
    out[0].shape[1] = l->out;
    out[0].size = l->in * l->out;
    snprintf(out[1].name, sizeof out[1].name, "%s/bias", l->name);
    out[1].ndim = 1;
    out[1].shape[0] = l->out;
    out[1].shape[1] = 1;
    out[1].size = l->out;
    return 2;
}

/* Keras GlorotUniform: U(-limit, limit), limit = sqrt(6 / (fan_in + fan_out)); bias zeros.
 * https://keras.io/api/layers/initializers/#glorotuniform-class */
static void dense_init(const tt_layer *l, float *p, tt_rng *rng)
{
    float limit = sqrtf(6.0f / (float)(l->in + l->out));
    size_t nw = l->in * l->out;
    for (size_t i = 0; i < nw; i++) p[i] = (2.0f * tt_rng_uniform(rng) - 1.0f) * limit;
    for (size_t i = 0; i < l->out; i++) p[nw + i] = 0.0f;
}

static void dense_forward(tt_dev *dev, const tt_layer *l, const float *d_p, const float *d_x, float *d_y, size_t B)
{
    const size_t D = l->in, O = l->out;
    const float *d_w = d_p, *d_b = d_p + D * O;
    tt_dev_sgemm(dev, 0, 0, B, O, D, 1.0f, d_x, D, d_w, O, 0.0f, d_y, O);
    tt_dev_bias_add(dev, d_y, d_b, B, O);
}

static void dense_backward(tt_dev *dev, const tt_layer *l, const float *d_p, float *d_g, const float *d_x,
                           const float *d_y, const float *d_dy, float *d_dx, size_t B)
{
    (void)d_y;
    const size_t D = l->in, O = l->out;
    const float *d_w = d_p;
    float *d_gw = d_g, *d_gb = d_g + D * O;
    tt_dev_sgemm(dev, 1, 0, D, O, B, 1.0f, d_x, D, d_dy, O, 0.0f, d_gw, O);
    tt_dev_col_sum(dev, d_gb, d_dy, B, O);
    if (d_dx) tt_dev_sgemm(dev, 0, 1, B, D, O, 1.0f, d_dy, O, d_w, O, 0.0f, d_dx, D);
}

const tt_layer_kind tt_layer_dense = {
    .name = "dense",
    .tensors = dense_tensors,
    .init = dense_init,
    .forward = dense_forward,
    .backward = dense_backward,
};
