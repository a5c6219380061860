/* layers/globalmaxpool1d.c — Keras `GlobalMaxPooling1D`: (L, C) -> (C), the largest value of each channel over the
 * whole sequence. It is a 1-D max pooling whose window and stride are the sequence (layers/maxpool2d.c), so the
 * gradient goes to each channel's first maximum. */
#include <stddef.h>

#include "layers.h"

static tt_status globalmaxpool1d_setup(tt_layer *l, tt_error *err)
{
    char in[64];
    if (l->in_shape.ndim != 2)
        return tt_fail(err, TT_ERR_MODEL, "%s: globalmaxpool1d needs an (L, C) sequence input, got %s", l->name,
                       tt_shape_str(&l->in_shape, 0, in, sizeof in));
    l->kernel[0] = l->stride[0] = 1;
    l->kernel[1] = l->stride[1] = l->in_shape.d[0];
    l->same = 0;
    tt_status s = tt_layer_geom(l, 1, l->in_shape.d[0], l->in_shape.d[1], err);
    if (s) return s;
    l->out_shape = tt_shape1(l->g.C);
    return TT_OK;
}

const tt_layer_kind tt_layer_globalmaxpool1d = {
    .name = "globalmaxpool1d",
    .stem = "global_max_pooling1d",
    .keras = "GlobalMaxPooling1D",
    .keys = {{NULL, 0, 0, 0, 0, NULL}},
    .setup = globalmaxpool1d_setup,
    .forward = tt_maxpool_forward,
    .backward = tt_maxpool_backward,
};
