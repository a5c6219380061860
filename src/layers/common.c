/* layers/common.c — helpers more than one layer kind needs: Keras's padding arithmetic and the Glorot-uniform
 * initializer. No layer's computation lives here (see layers.h). */
#include <math.h>
#include <stdio.h>

#include "layers.h"

int tt_layer_axis(size_t n, size_t k, size_t s, int same, size_t *out, size_t *pad)
{
    if (same) {
        *out = (n + s - 1) / s;
        size_t need = (*out - 1) * s + k, total = need > n ? need - n : 0;
        *pad = total / 2;
        return 1;
    }
    *pad = 0;
    if (n < k) return 0;
    *out = (n - k) / s + 1;
    return 1;
}

tt_status tt_layer_geom(tt_layer *l, size_t H, size_t W, size_t C, tt_error *err)
{
    tt_conv_geom *g = &l->g;
    g->H = H;
    g->W = W;
    g->C = C;
    g->KH = l->kernel[0];
    g->KW = l->kernel[1];
    g->SH = l->stride[0] ? l->stride[0] : l->kernel[0]; /* pooling: the strides default to the window */
    g->SW = l->stride[1] ? l->stride[1] : l->kernel[1];
    if (!tt_layer_axis(H, g->KH, g->SH, l->same, &g->OH, &g->PT) ||
        !tt_layer_axis(W, g->KW, g->SW, l->same, &g->OW, &g->PL)) {
        char in[64];
        return tt_fail(err, TT_ERR_MODEL, "%s: a %zux%zu window does not fit its %s input with padding valid",
                       l->name, g->KH, g->KW, tt_shape_str(&l->in_shape, 0, in, sizeof in));
    }
    return TT_OK;
}

void tt_tensor_set(tt_tensor_info *t, const tt_layer *l, const char *suffix, int ndim, size_t d0, size_t d1, size_t d2,
                   size_t d3)
{
    snprintf(t->name, sizeof t->name, "%s/%s", l->name, suffix);
    t->ndim = ndim;
    const size_t d[TT_MAX_DIMS] = {d0, d1, d2, d3};
    for (int i = 0; i < TT_MAX_DIMS; i++) t->shape[i] = i < ndim ? d[i] : 0;
}

void tt_glorot_uniform(float *p, size_t n, size_t fan_in, size_t fan_out, tt_rng *rng)
{
    float limit = sqrtf(6.0f / (float)(fan_in + fan_out));
    for (size_t i = 0; i < n; i++) p[i] = (2.0f * tt_rng_uniform(rng) - 1.0f) * limit;
}
