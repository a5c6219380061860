/* layers/maxpool1d.c — 1-D max pooling over a sequence, Keras `MaxPooling1D`: (L, C) -> (OL, C), pool 2 and
 * strides = pool by default, padding valid. The computation is maxpool2d's with H = 1 (layers/maxpool2d.c). */
#include <stddef.h>

#include "layers.h"

static tt_status maxpool1d_setup(tt_layer *l, tt_error *err)
{
    char in[64];
    if (l->in_shape.ndim != 2)
        return tt_fail(err, TT_ERR_MODEL, "%s: maxpool1d needs an (L, C) sequence input, got %s", l->name,
                       tt_shape_str(&l->in_shape, 0, in, sizeof in));
    l->kernel[0] = 1;
    l->stride[0] = 1;
    tt_status s = tt_layer_geom(l, 1, l->in_shape.d[0], l->in_shape.d[1], err);
    if (s) return s;
    l->out_shape = tt_shape2(l->g.OW, l->g.C);
    return TT_OK;
}

const tt_layer_kind tt_layer_maxpool1d = {
    .name = "maxpool1d",
    .stem = "max_pooling1d",
    .keras = "MaxPooling1D",
    .keys = {{"pool", TT_KEY_SIZE, offsetof(tt_layer, kernel) + sizeof(size_t), 1, 4096, "2"},
             {"strides", TT_KEY_SIZE, offsetof(tt_layer, stride) + sizeof(size_t), 1, 4096, "pool"},
             {"padding", TT_KEY_PADDING, offsetof(tt_layer, same), 0, 1, "valid"},
             {NULL, 0, 0, 0, 0, NULL}},
    .setup = maxpool1d_setup,
    .forward = tt_maxpool_forward,
    .backward = tt_maxpool_backward,
};
