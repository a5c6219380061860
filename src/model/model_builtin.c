/* model_builtin.c — the built-in models (--model mlp, cnn, cnn-bn, textcnn): each a table of steps (a kind, its
 * hyper-parameters, a fused activation) sized by the data's classes and checked against the data's samples, and the
 * input each describes when there is no data (tt_model_default_input).
 * Not for: laying the layers out (model.c) or model files (model_file.c). */
#include <stdio.h>
#include <string.h>

#include "model_build.h"

static tt_layer proto_dense(size_t units)
{
    tt_layer l;
    memset(&l, 0, sizeof l);
    l.units = units;
    l.use_bias = 1;
    return l;
}

static tt_layer proto_conv(size_t filters, size_t kh, size_t kw, int same)
{
    tt_layer l = proto_dense(filters);
    l.kernel[0] = kh;
    l.kernel[1] = kw;
    l.stride[0] = l.stride[1] = 1;
    l.same = same;
    return l;
}

static tt_layer proto_pool(size_t ph, size_t pw)
{
    tt_layer l;
    memset(&l, 0, sizeof l);
    l.kernel[0] = ph;
    l.kernel[1] = pw;
    return l;
}

static tt_layer proto_dropout(float rate)
{
    tt_layer l;
    memset(&l, 0, sizeof l);
    l.rate = rate;
    return l;
}

/* One step of a built-in model: a kind, its hyper-parameters and a fused activation (NULL: none). */
typedef struct builtin_step {
    const tt_layer_kind *kind;
    tt_layer proto;
    const tt_layer_kind *act;
} builtin_step;

static tt_status build_steps(tt_model *m, const builtin_step *steps, size_t n, tt_error *err)
{
    tt_status s = TT_OK;
    for (size_t i = 0; i < n && !s; i++) {
        s = model_add(m, steps[i].kind, &steps[i].proto, 0, err, m->source);
        if (!s && steps[i].act) s = model_add(m, steps[i].act, NULL, 1, err, m->source);
    }
    return s ? s : model_finish(m, err);
}

static tt_status build_mlp(tt_model *m, tt_error *err)
{
    const builtin_step steps[] = {
        {&tt_layer_dense, proto_dense(256), &tt_layer_relu},
        {&tt_layer_dense, proto_dense(256), &tt_layer_relu},
        {&tt_layer_dense, proto_dense(m->n_classes), &tt_layer_softmax},
    };
    return build_steps(m, steps, sizeof steps / sizeof steps[0], err);
}

/* A built-in convolutional model's input check: (H, W, C) images, or one line naming the model. */
static tt_status images_only(const tt_model *m, const char *name, tt_error *err)
{
    if (m->input_shape.ndim == 3) return TT_OK;
    char in[64];
    return tt_fail(err, TT_ERR_MODEL, "built-in %s: needs (H, W, C) images, the data's samples are %s", name,
                   tt_shape_str(&m->input_shape, 0, in, sizeof in));
}

/* The Keras cifar10_cnn example; with_bn (cnn-bn): the same with a BatchNormalization after each convolution, before
 * its relu (Keras's placement in its examples) — conv2d -> batchnorm -> relu, derived from the one table. */
static tt_status build_cnn_layers(tt_model *m, int with_bn, tt_error *err)
{
    const builtin_step cnn[] = {
        {&tt_layer_conv2d, proto_conv(32, 3, 3, 1), &tt_layer_relu},
        {&tt_layer_conv2d, proto_conv(32, 3, 3, 0), &tt_layer_relu},
        {&tt_layer_maxpool2d, proto_pool(2, 2), NULL},
        {&tt_layer_dropout, proto_dropout(0.25f), NULL},
        {&tt_layer_conv2d, proto_conv(64, 3, 3, 1), &tt_layer_relu},
        {&tt_layer_conv2d, proto_conv(64, 3, 3, 0), &tt_layer_relu},
        {&tt_layer_maxpool2d, proto_pool(2, 2), NULL},
        {&tt_layer_dropout, proto_dropout(0.25f), NULL},
        {&tt_layer_flatten, proto_pool(0, 0), NULL},
        {&tt_layer_dense, proto_dense(512), &tt_layer_relu},
        {&tt_layer_dropout, proto_dropout(0.5f), NULL},
        {&tt_layer_dense, proto_dense(m->n_classes), &tt_layer_softmax},
    };
    enum { N_CNN = sizeof cnn / sizeof cnn[0] };
    builtin_step steps[2 * N_CNN];
    size_t n = 0;
    tt_layer bn;
    memset(&bn, 0, sizeof bn);
    bn.momentum = 0.99f; /* Keras's defaults */
    bn.epsilon = 1e-3f;
    for (size_t i = 0; i < N_CNN; i++) {
        steps[n++] = cnn[i];
        if (with_bn && cnn[i].kind == &tt_layer_conv2d) { /* the relu moves behind the batchnorm */
            steps[n - 1].act = NULL;
            steps[n++] = (builtin_step){&tt_layer_batchnorm, bn, cnn[i].act};
        }
    }
    if (images_only(m, with_bn ? "cnn-bn" : "cnn", err)) return TT_ERR_MODEL;
    return build_steps(m, steps, n, err);
}

static tt_status build_cnn(tt_model *m, tt_error *err) { return build_cnn_layers(m, 0, err); }
static tt_status build_cnn_bn(tt_model *m, tt_error *err) { return build_cnn_layers(m, 1, err); }

static tt_status build_textcnn(tt_model *m, tt_error *err)
{
    tt_layer emb;
    memset(&emb, 0, sizeof emb);
    emb.units = 7;
    const builtin_step steps[] = {
        {&tt_layer_embedding, emb, NULL},
        {&tt_layer_conv1d, proto_conv(64, 1, 5, 0), &tt_layer_relu},
        {&tt_layer_maxpool1d, proto_pool(1, 2), NULL},
        {&tt_layer_conv1d, proto_conv(32, 1, 3, 0), &tt_layer_relu},
        {&tt_layer_maxpool1d, proto_pool(1, 2), NULL},
        {&tt_layer_flatten, proto_pool(0, 0), NULL},
        {&tt_layer_dense, proto_dense(m->n_classes), &tt_layer_softmax},
    };
    if (m->input_shape.ndim != 1) {
        char in[64];
        return tt_fail(err, TT_ERR_MODEL,
                       "built-in textcnn: needs sequences of token ids (L), the data's samples are %s",
                       tt_shape_str(&m->input_shape, 0, in, sizeof in));
    }
    return build_steps(m, steps, sizeof steps / sizeof steps[0], err);
}

static const struct {
    const char *name;
    tt_status (*build)(tt_model *m, tt_error *err);
    tt_model_input none; /* the input described when there is no data */
} BUILTINS[] = {
    {"mlp", build_mlp, {{1, {784, 0, 0, 0}}, 10, 0}},
    {"cnn", build_cnn, {{3, {32, 32, 3, 0}}, 10, 0}},          /* Keras cifar10_cnn */
    {"cnn-bn", build_cnn_bn, {{3, {32, 32, 3, 0}}, 10, 0}},    /* the same with BatchNormalization */
    {"textcnn", build_textcnn, {{1, {300, 0, 0, 0}}, 46, 30982}}, /* the seed's Reuters model */
};
#define N_BUILTINS (sizeof BUILTINS / sizeof BUILTINS[0])

const char *tt_model_builtins(void)
{
    static char list[64]; /* written once, the same bytes every time: harmless if two threads race */
    size_t n = 0;
    for (size_t i = 0; i < N_BUILTINS; i++)
        n += (size_t)snprintf(list + n, sizeof list - n, "%s%s", i ? ", " : "", BUILTINS[i].name);
    return list;
}

int tt_model_is_builtin(const char *name)
{
    for (size_t i = 0; i < N_BUILTINS; i++)
        if (strcmp(name, BUILTINS[i].name) == 0) return 1;
    return 0;
}

tt_status tt_model_builtin(tt_model *m, const char *name, const tt_model_input *in, tt_error *err)
{
    for (size_t i = 0; i < N_BUILTINS; i++)
        if (strcmp(name, BUILTINS[i].name) == 0) {
            char source[64];
            snprintf(source, sizeof source, "built-in %s", name);
            model_reset(m, in, source);
            m->builtin = 1;
            return BUILTINS[i].build(m, err);
        }
    return tt_fail(err, TT_ERR_ARG, "--model: '%.64s' is not a built-in model (%s) or a file", name,
                   tt_model_builtins());
}

tt_status tt_model_mlp(tt_model *m, size_t input_dim, size_t n_classes, tt_error *err)
{
    tt_model_input in = {tt_shape1(input_dim), n_classes, 0};
    return tt_model_builtin(m, "mlp", &in, err);
}

tt_status tt_model_default_input(const char *model, tt_model_input *in, tt_error *err)
{
    for (size_t i = 0; i < N_BUILTINS; i++)
        if (strcmp(model, BUILTINS[i].name) == 0) {
            *in = BUILTINS[i].none;
            return TT_OK;
        }
    (void)err;
    memset(in, 0, sizeof *in); /* a model file: its input line gives the shape (else 784), its last layer the classes */
    return TT_OK;
}
