/* layers/maxpool2d.c — 2-D max pooling, Keras `MaxPooling2D` (channels last); and the pooling code maxpool1d and
 * globalmaxpool1d share (a 1-D pooling is this one with H = 1).
 *
 * B = rows, (H, W, C) = input, (KH, KW) = pool, strides default to the pool, padding valid by default (Keras).
 * forward:  y[oh, ow, c] = max of x over the window (tt_maxpool_pixel; the GPU's tt_maxpool_elem)
 * backward: dx[ih, iw, c] = Σ over the windows whose first maximum is (ih, iw) of dy (the CPU's tt_maxpool_scatter;
 *           the GPU's tt_maxpool_argmax per window where windows do not overlap, tt_maxpool_grad where they do) —
 *           where Keras/TF route a max-pool gradient; recomputed from x and y, so no argmax is stored.
 * No parameters. */
#include <stddef.h>

#include "layers.h"

static tt_status maxpool2d_setup(tt_layer *l, tt_error *err)
{
    char in[64];
    if (l->in_shape.ndim != 3)
        return tt_fail(err, TT_ERR_MODEL, "%s: maxpool2d needs an (H, W, C) input, got %s", l->name,
                       tt_shape_str(&l->in_shape, 0, in, sizeof in));
    tt_status s = tt_layer_geom(l, l->in_shape.d[0], l->in_shape.d[1], l->in_shape.d[2], err);
    if (s) return s;
    l->out_shape = tt_shape3(l->g.OH, l->g.OW, l->g.C);
    return TT_OK;
}

void tt_maxpool_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                        float *d_y, size_t B)
{
    (void)ps;
    (void)d_p;
    tt_dev_maxpool_fwd(dev, d_y, d_x, B, &l->g);
}

void tt_maxpool_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                         const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B)
{
    (void)ps;
    (void)d_p;
    (void)d_g;
    if (d_dx) tt_dev_maxpool_bwd(dev, d_dx, d_dy, d_x, d_y, B, &l->g);
}

const tt_layer_kind tt_layer_maxpool2d = {
    .name = "maxpool2d",
    .stem = "max_pooling2d",
    .keras = "MaxPooling2D",
    .keys = {{"pool", TT_KEY_PAIR, offsetof(tt_layer, kernel), 1, 4096, "2"},
             {"strides", TT_KEY_PAIR, offsetof(tt_layer, stride), 1, 4096, "pool"},
             {"padding", TT_KEY_PADDING, offsetof(tt_layer, same), 0, 1, "valid"},
             {NULL, 0, 0, 0, 0, NULL}},
    .setup = maxpool2d_setup,
    .forward = tt_maxpool_forward,
    .backward = tt_maxpool_backward,
};
