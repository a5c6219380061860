/* layers/flatten.c — Keras `Flatten`: any sample shape to a flat vector of the same elements, in the same
 * (row-major, channels last) order. A copy forward and backward: activations are contiguous, so this only changes
 * the shape the next layer sees. No parameters. */
#include "layers.h"

static tt_status flatten_setup(tt_layer *l, tt_error *err)
{
    (void)err;
    l->out_shape = tt_shape1(tt_shape_elems(&l->in_shape));
    return TT_OK;
}

static void flatten_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                            float *d_y, size_t B)
{
    (void)ps;
    (void)d_p;
    tt_dev_d2d(dev, d_y, d_x, B * l->out * sizeof(float));
}

static void flatten_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                             const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B)
{
    (void)ps;
    (void)d_p;
    (void)d_g;
    (void)d_x;
    (void)d_y;
    if (d_dx) tt_dev_d2d(dev, d_dx, d_dy, B * l->in * sizeof(float));
}

const tt_layer_kind tt_layer_flatten = {
    .name = "flatten",
    .stem = "flatten",
    .keras = "Flatten",
    .keys = {{NULL, 0, 0, 0, 0, NULL}},
    .setup = flatten_setup,
    .forward = flatten_forward,
    .backward = flatten_backward,
};
