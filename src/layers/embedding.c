/* layers/embedding.c — Keras `Embedding(input_dim=V, output_dim=E)`: a sequence of L token ids to (L, E) vectors.
 *
 * B = rows, L = tokens per sample, V = vocabulary (ids 0..V-1), E = width. Parameters: W (V, E) ("embeddings").
 * forward:  y[b, t, :] = W[id(b, t), :]
 * backward: dW[v, :] = Σ over tokens with id v, in token order, of dy[b, t, :]; no input gradient (ids are data).
 * The sum is in a fixed order on every backend (the CUDA kernel gives each thread whole rows of dW and walks the
 * tokens in order — no atomics), so runs stay bit-identical. It must be a model's first layer: its input is the
 * data's token ids, which travel as floats (exact below 2^24); the run checks them against V before training.
 * Keras's default initializer: uniform in [-0.05, 0.05]. */
#include <stddef.h>
#include <stdio.h>

#include "layers.h"

static tt_status embedding_setup(tt_layer *l, tt_error *err)
{
    char in[64];
    if (l->in_shape.ndim != 1)
        return tt_fail(err, TT_ERR_MODEL, "%s: embedding needs a sequence of token ids (L), got %s", l->name,
                       tt_shape_str(&l->in_shape, 0, in, sizeof in));
    if (l->vocab == 0)
        return tt_fail(err, TT_ERR_MODEL, "%s: the vocabulary size is unknown (give vocab=N, or data of token ids)",
                       l->name);
    l->out_shape = tt_shape2(l->in_shape.d[0], l->units);
    return TT_OK;
}

static int embedding_tensors(const tt_layer *l, tt_tensor_info *out)
{
    tt_tensor_set(&out[0], l, "embeddings", 2, l->vocab, l->units, 0, 0);
    return 1;
}

static void embedding_init(const tt_layer *l, float *p, tt_rng *rng)
{
    for (size_t i = 0; i < l->vocab * l->units; i++) p[i] = (2.0f * tt_rng_uniform(rng) - 1.0f) * 0.05f;
}

static void embedding_forward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x,
                              float *d_y, size_t B)
{
    (void)ps;
    tt_dev_embed_fwd(dev, d_y, d_p, d_x, B * l->in, l->vocab, l->units);
}

static void embedding_backward(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                               const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B)
{
    (void)ps;
    (void)d_p;
    (void)d_y;
    (void)d_dx; /* the first layer: never asked for */
    tt_dev_embed_bwd(dev, d_g, d_dy, d_x, B * l->in, l->vocab, l->units);
}

const tt_layer_kind tt_layer_embedding = {
    .name = "embedding",
    .stem = "embedding",
    .keras = "Embedding",
    .token_input = 1,
    .keys = {{"vocab", TT_KEY_SIZE, offsetof(tt_layer, vocab), 1, TT_MAX_VOCAB, "data"},
             {"dim", TT_KEY_SIZE, offsetof(tt_layer, units), 1, TT_MAX_WIDTH, NULL},
             {NULL, 0, 0, 0, 0, NULL}},
    .setup = embedding_setup,
    .tensors = embedding_tensors,
    .init = embedding_init,
    .forward = embedding_forward,
    .backward = embedding_backward,
};
