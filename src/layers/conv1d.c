/* layers/conv1d.c — 1-D convolution over a sequence, Keras `Conv1D`: input (L, C), kernel K, F filters, output
 * (OL, F); parameters W (K, C, F) and b (F). It is conv2d's computation with H = 1 (layers/conv2d.c: im2col + sgemm,
 * same formulas with KH = 1), so only the shape rules live here. Keras's defaults: strides 1, padding valid. */
#include <stddef.h>

#include "layers.h"

static tt_status conv1d_setup(tt_layer *l, tt_error *err)
{
    char in[64];
    if (l->in_shape.ndim != 2)
        return tt_fail(err, TT_ERR_MODEL, "%s: conv1d needs an (L, C) sequence input, got %s", l->name,
                       tt_shape_str(&l->in_shape, 0, in, sizeof in));
    l->kernel[0] = 1;
    l->stride[0] = 1;
    tt_status s = tt_layer_geom(l, 1, l->in_shape.d[0], l->in_shape.d[1], err);
    if (s) return s;
    l->out_shape = tt_shape2(l->g.OW, l->units);
    return TT_OK;
}

const tt_layer_kind tt_layer_conv1d = {
    .name = "conv1d",
    .stem = "conv1d",
    .keras = "Conv1D",
    .relu_epilogue = 1,
    .keys = {{"filters", TT_KEY_SIZE, offsetof(tt_layer, units), 1, TT_MAX_WIDTH, NULL},
             {"kernel", TT_KEY_SIZE, offsetof(tt_layer, kernel) + sizeof(size_t), 1, 4096, NULL},
             {"strides", TT_KEY_SIZE, offsetof(tt_layer, stride) + sizeof(size_t), 1, 4096, "1"},
             {"padding", TT_KEY_PADDING, offsetof(tt_layer, same), 0, 1, "valid"},
             {"activation", TT_KEY_ACTIVATION, 0, 0, 0, "linear"},
             {"use_bias", TT_KEY_BOOL, offsetof(tt_layer, use_bias), 0, 1, "true"},
             {NULL, 0, 0, 0, 0, NULL}},
    .setup = conv1d_setup,
    .tensors = tt_conv_tensors,
    .init = tt_conv_init,
    .workspace = tt_conv_workspace,
    .gemms = tt_conv_gemms,
    .forward = tt_conv_forward,
    .backward = tt_conv_backward,
};
