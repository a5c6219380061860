/* layers/relu.c — elementwise ReLU, no parameters. B = rows, N = in = out features.
 * forward: y = max(x, 0);  backward: dx = dy · [y > 0]  (tt_relu / tt_relu_grad in tt_math.h). */
#include "tt_model.h"

static int relu_tensors(const tt_layer *l, tt_tensor_info *out)
{
    (void)l;
    (void)out;
    return 0;
}

static void relu_init(const tt_layer *l, float *p, tt_rng *rng)
{
    (void)l;
    (void)p;
    (void)rng;
}

static void relu_forward(tt_dev *dev, const tt_layer *l, const float *d_p, const float *d_x, float *d_y, size_t B)
{
    (void)d_p;
    tt_dev_relu_fwd(dev, d_y, d_x, B * l->out);
}

static void relu_backward(tt_dev *dev, const tt_layer *l, const float *d_p, float *d_g, const float *d_x,
                          const float *d_y, const float *d_dy, float *d_dx, size_t B)
{
    (void)d_p;
    (void)d_g;
    (void)d_x;
    if (d_dx) tt_dev_relu_bwd(dev, d_dx, d_dy, d_y, B * l->out);
}

const tt_layer_kind tt_layer_relu = {
    .name = "relu",
    .tensors = relu_tensors,
    .init = relu_init,
    .forward = relu_forward,
    .backward = relu_backward,
};
