/* layers/softmax.c — a softmax output, Keras `Activation('softmax')` or a last layer's activation=softmax.
 *
 * It must be the last layer, over flat logits. The loss after it — cross-entropy of the softmax — is computed from
 * its input in one fused, max-shifted pass (tt_softmax_xent_row in tt_math.h: loss = log Σ exp(z - m) - (z_y - m),
 * dz = p - onehot), exactly as Keras does when a model's output comes from a softmax (it takes the logits behind
 * it, `from_logits`), instead of log(softmax(z)), which underflows. So the trainer never runs this layer's own
 * forward or backward: the loss is its forward and its gradient. A model without it is trained the same way from
 * its last layer's outputs as logits. */
#include "layers.h"

static tt_status softmax_setup(tt_layer *l, tt_error *err)
{
    char in[64];
    if (l->in_shape.ndim != 1)
        return tt_fail(err, TT_ERR_MODEL, "%s: softmax needs a flat input of logits, got %s (put a flatten before it)",
                       l->name, tt_shape_str(&l->in_shape, 0, in, sizeof in));
    l->out_shape = l->in_shape;
    return TT_OK;
}

const tt_layer_kind tt_layer_softmax = {
    .name = "softmax",
    .stem = "softmax",
    .keras = "Softmax",
    .fused_into_loss = 1,
    .keys = {{NULL, 0, 0, 0, 0, NULL}},
    .setup = softmax_setup,
};
