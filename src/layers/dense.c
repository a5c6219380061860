/* layers/dense.c — fully connected layer, Keras `Dense` (its activation is a layer of its own, fused in the summary;
 * a relu after it runs as its epilogue: layers/relu.c).
 *
 * B = rows in this tower's shard, D = in (features), O = out (units).
 * Parameters, in this order in the flat buffer:
 *   W: (D, O) row-major — Keras's `kernel` layout, so y = x W
 *   b: (O)                (use_bias=false: none)
 * forward:  y (B,O) = x (B,D) · W (D,O) + b
 * backward: dW (D,O) = xᵀ (D,B) · dy (B,O);  db (O) = Σ_rows dy;  dx (B,D) = dy (B,O) · Wᵀ (O,D)
 * The input must be flat (put a flatten before it), except for a model's first layer, which sees the sample
 * flattened — the seed MLP's x.reshape(-1, 784).
 * With a relu epilogue y is the relu's output and dy the gradient after the relu (see tt_bias_epilogue): db is then
 * Σ_rows of the gradient before it. --epilogues lt may move that relu's gradient and db into the next dense layer's
 * dx GEMM (tt_layer.lt_mask, ps->relu_in: cuBLASLt's DRELU_BGRAD). */
#include <stddef.h>
#include <stdio.h>

#include "layers.h"

static tt_status dense_setup(tt_layer *l, tt_error *err)
{
    if (l->in_shape.ndim != 1 && l->index != 0) {
        char in[64];
        return tt_fail(err, TT_ERR_MODEL, "%s: dense needs a flat input, got %s (put a flatten before it)", l->name,
                       tt_shape_str(&l->in_shape, 0, in, sizeof in));
    }
    l->out_shape = tt_shape1(l->units);
    return TT_OK;
}

static int dense_tensors(const tt_layer *l, tt_tensor_info *out)
{
    tt_tensor_set(&out[0], l, "kernel", 2, l->in, l->out, 0, 0);
    if (!l->use_bias) return 1;
    tt_tensor_set(&out[1], l, "bias", 1, l->out, 0, 0, 0);
    return 2;
}

/* Keras GlorotUniform kernel, zero bias. */
static void dense_init(const tt_layer *l, float *p, tt_rng *rng)
{
    size_t nw = l->in * l->out;
    tt_glorot_uniform(p, nw, l->in, l->out, rng);
    for (size_t i = 0; l->use_bias && i < l->out; i++) p[nw + i] = 0.0f;
}

static int dense_gemms(const tt_layer *l, size_t B, int need_dx, size_t chunk_mnk, tt_gemm_shape *out)
{
    (void)chunk_mnk;
    const size_t D = l->in, O = l->out;
    out[0] = (tt_gemm_shape){0, 0, B, O, D, 1}; /* y = x W */
    out[1] = (tt_gemm_shape){1, 0, D, O, B, 1}; /* dW = xᵀ dy */
    out[2] = (tt_gemm_shape){0, 1, B, D, O, 1}; /* dx = dy Wᵀ */
    return need_dx ? 3 : 2;
}

static void dense_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                          float *d_y, size_t B)
{
    const size_t D = l->in, O = l->out;
    const float *d_w = d_p, *d_b = l->use_bias ? d_p + D * O : NULL;
    /* sgemm then tt_bias_epilogue's kernels, or (--epilogues lt) one cuBLASLt call, its BIAS / RELU_BIAS epilogue —
     * RELU_AUX_BIAS where the next dense layer's dx GEMM applies this relu's gradient (ps->mask_out: tt_layer.lt_mask),
     * noted in ps->lt_masked when the backend took it */
    const int masked = tt_dev_gemm_bias_act(dev, ps->lt_epilogues, B, O, D, d_x, d_w, d_b, d_y, l->relu_epilogue,
                                            ps->mask_out.d_mask);
    if (ps->mask_out.d_mask) ps->lt_masked[l->index] = (unsigned char)masked;
}

static void dense_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                           const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B)
{
    const size_t D = l->in, O = l->out;
    const float *d_w = d_p;
    float *d_gw = d_g, *d_gb = d_g + D * O;
    /* --epilogues lt: where the next layer's dx GEMM already applied this relu's gradient and the bias's
     * (ps->relu_applied, set by the model's walk) */
    if (!ps->relu_applied) tt_bias_epilogue_bwd(dev, l, d_gb, d_dy, d_y, B, O);
    tt_dev_sgemm(dev, 1, 0, D, O, B, 1.0f, d_x, D, d_dy, O, 0.0f, d_gw, O);
    const tt_relu_link *r = &ps->relu_in;
    if (d_dx && r->l) { /* dx, then the gradient of the relu below and its dense layer's bias: cuBLASLt's DRELU_BGRAD */
        float *d_gb_below = d_g - l->offset + r->l->offset + r->l->in * r->l->out; /* the flat buffer's layout */
        tt_dev_gemm_drelu_bgrad(dev, ps->lt_epilogues, B, D, O, d_dy, d_w, r->d_mask, r->d_y, d_dx, d_gb_below);
    } else if (d_dx) {
        tt_dev_sgemm(dev, 0, 1, B, D, O, 1.0f, d_dy, O, d_w, O, 0.0f, d_dx, D);
    }
}

const tt_layer_kind tt_layer_dense = {
    .name = "dense",
    .stem = "dense",
    .keras = "Dense",
    .relu_epilogue = 1,
    .lt_relu_link = 1,
    .keys = {{"units", TT_KEY_SIZE, offsetof(tt_layer, units), 1, TT_MAX_WIDTH, NULL},
             {"activation", TT_KEY_ACTIVATION, 0, 0, 0, "linear"},
             {"use_bias", TT_KEY_BOOL, offsetof(tt_layer, use_bias), 0, 1, "true"},
             {NULL, 0, 0, 0, 0, NULL}},
    .setup = dense_setup,
    .tensors = dense_tensors,
    .init = dense_init,
    .gemms = dense_gemms,
    .forward = dense_forward,
    .backward = dense_backward,
};
