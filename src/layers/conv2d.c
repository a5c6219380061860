/* layers/conv2d.c — 2-D convolution, Keras `Conv2D` (channels last), as im2col + sgemm; and the convolution code
 * conv1d shares (a 1-D convolution is this one with H = 1).
 *
 * B = rows in the shard, (H, W, C) = input, (KH, KW) = kernel, F = filters, (OH, OW) = output, P = OH·OW output
 * positions, KC = KH·KW·C. Parameters, in this order in the flat buffer:
 *   W: (KH, KW, C, F) — Keras's kernel layout, which viewed as (KC, F) is the GEMM's right operand
 *   b: (F)              (use_bias=false: none)
 * forward:  cols (B·P, KC) = im2col(x);  y (B·P, F) = cols · W + b        — y is (B, OH, OW, F) as it stands
 * backward: dW (KC, F) = colsᵀ · dy;  db (F) = Σ_rows dy;  dcols (B·P, KC) = dy · Wᵀ;  dx = col2im(dcols)
 * (a relu after it runs as its epilogue, per chunk in the forward: layers/relu.c)
 * Wᵀ (F, KC) is transposed once per backward into the workspace, so all three GEMMs are NN or TN: the forms
 * OpenBLAS's small-matrix kernels take. The B·P patches are processed in chunks whose GEMMs have M·N·K = n·KC·F at
 * most the backend's chunk_mnk: on the CPU 10^6 (108 patches for the cnn's second layer, 3,472 for its first),
 * columns that stay in cache between im2col and the GEMMs, and GEMMs OpenBLAS runs without packing their operands —
 * the columns of a whole shard (50 MB for that second layer at 64 rows) would stream through memory three times; on
 * a GPU the whole shard in one GEMM. dW accumulates over the chunks in a fixed order (beta = 1 after the first) and
 * col2im adds them in ascending order, so a run is bit-identical to itself.
 * Not for: Winograd or FFT convolutions (the GEMM is the point here). */
#include <stddef.h>
#include <stdio.h>

#include "layers.h"

/* Patches (rows of the column matrix) per chunk for a shard of B rows: as many as keep a chunk's GEMMs
 * (n x KC times KC x F, and their transposes) within chunk_mnk = M·N·K (at least one), or the whole shard when the
 * backend sets no limit. */
static size_t conv_chunk(const tt_layer *l, size_t B, size_t chunk_mnk)
{
    const size_t KC = l->g.KH * l->g.KW * l->g.C, Q = B * l->g.OH * l->g.OW;
    size_t ch = chunk_mnk ? chunk_mnk / KC / l->units : Q;
    if (ch < 1) ch = 1;
    return ch < Q ? ch : (Q ? Q : 1);
}

static tt_status conv2d_setup(tt_layer *l, tt_error *err)
{
    char in[64];
    if (l->in_shape.ndim != 3)
        return tt_fail(err, TT_ERR_MODEL, "%s: conv2d needs an (H, W, C) input, got %s", l->name,
                       tt_shape_str(&l->in_shape, 0, in, sizeof in));
    tt_status s = tt_layer_geom(l, l->in_shape.d[0], l->in_shape.d[1], l->in_shape.d[2], err);
    if (s) return s;
    l->out_shape = tt_shape3(l->g.OH, l->g.OW, l->units);
    return TT_OK;
}

int tt_conv_tensors(const tt_layer *l, tt_tensor_info *out)
{
    const tt_conv_geom *g = &l->g;
    if (l->in_shape.ndim == 3)
        tt_tensor_set(&out[0], l, "kernel", 4, g->KH, g->KW, g->C, l->units); /* conv2d: (KH, KW, C, F) */
    else
        tt_tensor_set(&out[0], l, "kernel", 3, g->KW, g->C, l->units, 0); /* conv1d: (K, C, F) */
    if (!l->use_bias) return 1;
    tt_tensor_set(&out[1], l, "bias", 1, l->units, 0, 0, 0);
    return 2;
}

/* Keras GlorotUniform for a conv kernel: fan_in = KH·KW·C, fan_out = KH·KW·F; zero bias. */
void tt_conv_init(const tt_layer *l, float *p, tt_rng *rng)
{
    const size_t rf = l->g.KH * l->g.KW, nw = rf * l->g.C * l->units;
    tt_glorot_uniform(p, nw, rf * l->g.C, rf * l->units, rng);
    for (size_t i = 0; l->use_bias && i < l->units; i++) p[nw + i] = 0.0f;
}

/* The columns of one chunk, then Wᵀ. */
size_t tt_conv_workspace(const tt_layer *l, size_t B, size_t chunk_mnk)
{
    const size_t KC = l->g.KH * l->g.KW * l->g.C;
    return (conv_chunk(l, B, chunk_mnk) + l->units) * KC;
}

int tt_conv_gemms(const tt_layer *l, size_t B, int need_dx, size_t chunk_mnk, tt_gemm_shape *out)
{
    const size_t Q = B * l->g.OH * l->g.OW, KC = l->g.KH * l->g.KW * l->g.C, F = l->units;
    const size_t ch = conv_chunk(l, B, chunk_mnk), full = Q / ch, rest = Q % ch;
    int n = 0;
    const size_t rows[2] = {ch, rest}, calls[2] = {full, 1};
    for (int k = 0; k < 2; k++) {
        if (!rows[k] || !calls[k]) continue;
        const size_t M = rows[k];
        out[n++] = (tt_gemm_shape){0, 0, M, F, KC, calls[k]}; /* y = cols W */
        out[n++] = (tt_gemm_shape){1, 0, KC, F, M, calls[k]}; /* dW += colsᵀ dy */
        if (need_dx) out[n++] = (tt_gemm_shape){0, 0, M, KC, F, calls[k]}; /* dcols = dy Wᵀ */
    }
    return n;
}

void tt_conv_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                     float *d_y, size_t B)
{
    const tt_conv_geom *g = &l->g;
    const size_t Q = B * g->OH * g->OW, KC = g->KH * g->KW * g->C, F = l->units;
    const size_t ch = conv_chunk(l, B, ps->chunk_mnk);
    const float *d_w = d_p, *d_b = d_p + KC * F;
    for (size_t q0 = 0; q0 < Q; q0 += ch) {
        const size_t n = Q - q0 < ch ? Q - q0 : ch;
        tt_dev_im2col(dev, ps->d_ws, d_x, q0, n, g);
        tt_dev_sgemm(dev, 0, 0, n, F, KC, 1.0f, ps->d_ws, KC, d_w, F, 0.0f, d_y + q0 * F, F);
        tt_bias_epilogue(dev, l, d_b, d_y + q0 * F, n, F); /* while the chunk is in cache */
    }
}

void tt_conv_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                      const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B)
{
    const tt_conv_geom *g = &l->g;
    const size_t Q = B * g->OH * g->OW, KC = g->KH * g->KW * g->C, F = l->units;
    const size_t ch = conv_chunk(l, B, ps->chunk_mnk);
    const float *d_w = d_p;
    float *d_gw = d_g, *d_gb = d_g + KC * F, *d_wt = ps->d_ws + ch * KC;
    tt_bias_epilogue_bwd(dev, l, d_gb, d_dy, d_y, Q, F);
    if (d_dx) {
        tt_dev_fill(dev, d_dx, B * l->in, 0.0f); /* col2im adds the chunks */
        tt_dev_transpose(dev, d_wt, d_w, KC, F);
    }
    for (size_t q0 = 0; q0 < Q; q0 += ch) {
        const size_t n = Q - q0 < ch ? Q - q0 : ch;
        const float *d_dyc = d_dy + q0 * F;
        tt_dev_im2col(dev, ps->d_ws, d_x, q0, n, g); /* recomputed: cheaper than keeping a shard's columns */
        tt_dev_sgemm(dev, 1, 0, KC, F, n, 1.0f, ps->d_ws, KC, d_dyc, F, q0 ? 1.0f : 0.0f, d_gw, F);
        if (!d_dx) continue;
        tt_dev_sgemm(dev, 0, 0, n, KC, F, 1.0f, d_dyc, F, d_wt, KC, 0.0f, ps->d_ws, KC); /* dcols, over cols */
        tt_dev_col2im(dev, d_dx, ps->d_ws, q0, n, g);
    }
}

const tt_layer_kind tt_layer_conv2d = {
    .name = "conv2d",
    .stem = "conv2d",
    .keras = "Conv2D",
    .relu_epilogue = 1,
    .keys = {{"filters", TT_KEY_SIZE, offsetof(tt_layer, units), 1, TT_MAX_WIDTH, NULL},
             {"kernel", TT_KEY_PAIR, offsetof(tt_layer, kernel), 1, 4096, NULL},
             {"strides", TT_KEY_PAIR, offsetof(tt_layer, stride), 1, 4096, "1"},
             {"padding", TT_KEY_PADDING, offsetof(tt_layer, same), 0, 1, "valid"},
             {"activation", TT_KEY_ACTIVATION, 0, 0, 0, "linear"},
             {"use_bias", TT_KEY_BOOL, offsetof(tt_layer, use_bias), 0, 1, "true"},
             {NULL, 0, 0, 0, 0, NULL}},
    .setup = conv2d_setup,
    .tensors = tt_conv_tensors,
    .init = tt_conv_init,
    .workspace = tt_conv_workspace,
    .gemms = tt_conv_gemms,
    .forward = tt_conv_forward,
    .backward = tt_conv_backward,
};
