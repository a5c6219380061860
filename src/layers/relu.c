/* layers/relu.c — elementwise ReLU, no parameters; any shape. B = rows, N = in = out elements per sample.
 * forward: y = max(x, 0);  backward: dx = dy · [y > 0]  (tt_relu / tt_relu_grad in tt_math.h).
 * A layer's activation=relu adds one of these, shown folded into that layer in the summary (as Keras shows it).
 * Right after a dense or conv layer (activation=relu or a relu line) it runs as that layer's epilogue, fused with
 * its bias: tt_bias_epilogue below, the two passes that cuBLASLt's RELU_BIAS and DRELU_BGRAD epilogues fuse into the
 * GEMMs. The layer is then never run itself (tt_layer.in_epilogue), and the results are the same to the bit. */
#include "layers.h"

void tt_bias_epilogue(tt_dev *dev, const tt_layer *l, const float *d_b, float *d_y, size_t rows, size_t cols)
{
    if (!l->relu_epilogue) {
        if (l->use_bias) tt_dev_bias_add(dev, d_y, d_b, rows, cols);
    } else if (l->use_bias) {
        tt_dev_bias_relu(dev, d_y, d_b, rows, cols); /* y = relu(y + b) */
    } else {
        tt_dev_relu_fwd(dev, d_y, d_y, rows * cols);
    }
}

void tt_bias_epilogue_bwd(tt_dev *dev, const tt_layer *l, float *d_db, float *d_dy, const float *d_y, size_t rows,
                          size_t cols)
{
    if (!l->relu_epilogue) {
        if (l->use_bias) tt_dev_col_sum(dev, d_db, d_dy, rows, cols);
    } else if (l->use_bias) {
        tt_dev_drelu_bgrad(dev, d_dy, d_db, d_dy, d_y, rows, cols); /* dy = dy [y > 0]; db = its column sums */
    } else {
        tt_dev_relu_bwd(dev, d_dy, d_dy, d_y, rows * cols);
    }
}

static tt_status relu_setup(tt_layer *l, tt_error *err)
{
    (void)err;
    l->out_shape = l->in_shape;
    return TT_OK;
}

static void relu_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                         float *d_y, size_t B)
{
    (void)ps;
    (void)d_p;
    tt_dev_relu_fwd(dev, d_y, d_x, B * l->out);
}

static void relu_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                          const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B)
{
    (void)ps;
    (void)d_p;
    (void)d_g;
    (void)d_x;
    if (d_dx) tt_dev_relu_bwd(dev, d_dx, d_dy, d_y, B * l->out);
}

const tt_layer_kind tt_layer_relu = {
    .name = "relu",
    .stem = "re_lu",
    .keras = "ReLU",
    .keys = {{NULL, 0, 0, 0, 0, NULL}},
    .setup = relu_setup,
    .forward = relu_forward,
    .backward = relu_backward,
};
