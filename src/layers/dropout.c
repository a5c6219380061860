/* layers/dropout.c — Keras `Dropout(rate)`: in a training step each element is dropped (0) with probability rate
 * and the kept ones are scaled by 1/(1 - rate); in evaluation it is the identity. Any shape, no parameters.
 * forward:  y = x · mask / (1 - rate);  backward: dx = dy · mask / (1 - rate) — the same op: the mask is a hash of
 * (seed, epoch, layer, the sample's index in the data set, the element) (tt_dropout in tt_math.h), recomputed, not
 * stored, and the same whichever tower holds the sample, so N towers drop exactly what 1 tower drops. */
#include <stddef.h>

#include "layers.h"

static tt_status dropout_setup(tt_layer *l, tt_error *err)
{
    (void)err;
    l->out_shape = l->in_shape;
    return TT_OK;
}

static void dropout_apply(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_src, float *d_dst,
                          size_t B)
{
    if (ps->training && l->rate > 0.0f)
        tt_dev_dropout(dev, d_dst, d_src, B, l->out, l->rate, tt_dropout_key(ps->seed, ps->epoch, l->index), ps->d_ids);
    else
        tt_dev_d2d(dev, d_dst, d_src, B * l->out * sizeof(float));
}

static void dropout_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                            float *d_y, size_t B)
{
    (void)d_p;
    dropout_apply(dev, l, ps, d_x, d_y, B);
}

static void dropout_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                             const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B)
{
    (void)d_p;
    (void)d_g;
    (void)d_x;
    (void)d_y;
    if (d_dx) dropout_apply(dev, l, ps, d_dy, d_dx, B);
}

const tt_layer_kind tt_layer_dropout = {
    .name = "dropout",
    .stem = "dropout",
    .keras = "Dropout",
    .keys = {{"rate", TT_KEY_FLOAT, offsetof(tt_layer, rate), 0, 0.99, NULL}, {NULL, 0, 0, 0, 0, NULL}},
    .setup = dropout_setup,
    .forward = dropout_forward,
    .backward = dropout_backward,
};
