/* tt_model.h — models as a list of layers over one flat parameter buffer.
 *
 * All parameters live in one float buffer of n_params elements, carved by a layout table (name, offset, shape);
 * gradients and optimizer state use the same layout. A pull is one copy, a push is one copy, a reduction and an
 * optimizer update are one loop each. Each layer kind lives in its own file (src/layers/) and implements the
 * tt_layer_kind table; the loss (softmax cross-entropy from logits) follows the last layer.
 * Not for: threads, optimizers or data. */
#ifndef TT_MODEL_H
#define TT_MODEL_H

#include "tt_common.h"
#include "tt_dev.h"
#include "tt_rng.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TT_MAX_LAYERS 64
#define TT_MAX_TENSORS (2 * TT_MAX_LAYERS)
#define TT_MAX_WIDTH 65536

/* One named parameter tensor inside the flat buffer. */
typedef struct tt_tensor_info {
    char name[48];
    size_t offset; /* in floats, from the start of the flat buffer */
    size_t size;   /* elements */
    int ndim;
    size_t shape[2];
} tt_tensor_info;

typedef struct tt_layer tt_layer;

typedef struct tt_layer_kind {
    const char *name;
    /* Describes the layer's parameter tensors (suffix names and shapes, offsets filled by the model); returns how
     * many (0..2). */
    int (*tensors)(const tt_layer *l, tt_tensor_info *out);
    /* Keras-default initialisation of this layer's parameters (p points at the layer's first parameter). */
    void (*init)(const tt_layer *l, float *h_p, tt_rng *rng);
    /* y (B, out) = f(x (B, in)); p points at the layer's parameters in device memory. */
    void (*forward)(tt_dev *dev, const tt_layer *l, const float *d_p, const float *d_x, float *d_y, size_t B);
    /* Given dy (B, out), writes the parameter gradient g (same layout as p) and, if d_dx != NULL, dx (B, in).
     * x and y are the forward input and output. d_dx may alias d_dy only for elementwise layers. */
    void (*backward)(tt_dev *dev, const tt_layer *l, const float *d_p, float *d_g, const float *d_x,
                     const float *d_y, const float *d_dy, float *d_dx, size_t B);
} tt_layer_kind;

struct tt_layer {
    const tt_layer_kind *kind;
    char name[24]; /* "dense_1", "relu_2" as Keras would name them */
    size_t in, out; /* features per sample */
    size_t offset;  /* first parameter in the flat buffer */
    size_t n_params;
};

extern const tt_layer_kind tt_layer_dense;
extern const tt_layer_kind tt_layer_relu;

typedef struct tt_model {
    size_t input_dim; /* D: features per sample */
    tt_shape input_shape; /* one sample's shape */
    size_t n_classes; /* C: width of the logits */
    size_t n_layers;
    tt_layer layers[TT_MAX_LAYERS];
    size_t n_tensors;
    tt_tensor_info tensors[TT_MAX_TENSORS]; /* the layout table */
    size_t n_params;                        /* P */
    size_t max_width;                       /* widest activation, input included */
    char source[128];                       /* "built-in mlp" or the model file's path, control bytes escaped */
    int builtin;                            /* 1 for tt_model_mlp, 0 for a model file */
    char notes[1024];                       /* "using default ..." lines from the model file, '\n'-separated */
} tt_model;

/* The seed model: input_dim-256-relu-256-relu-n_classes. */
tt_status tt_model_mlp(tt_model *m, size_t input_dim, size_t n_classes, tt_error *err);

/* Parses a model file (one layer per line: `dense units=N [activation=relu|linear]`, `relu`, optionally a first
 * line `input size=N` that must match the data; '#' starts a comment). Errors name the file and line. The last
 * layer must produce n_classes logits. */
tt_status tt_model_load(tt_model *m, const char *path, size_t input_dim, size_t n_classes, tt_error *err);

/* Same, from text in memory (path is used in messages only). */
tt_status tt_model_parse(tt_model *m, const char *text, const char *path, size_t input_dim, size_t n_classes,
                         tt_error *err);

/* The model file's path (escaped) for messages, or NULL for a built-in model. */
const char *tt_model_file(const tt_model *m);

/* Glorot-uniform weights, zero biases, from the seed (host buffer of n_params floats). */
void tt_model_init_params(const tt_model *m, float *h_params, uint64_t seed);

/* Prints a Keras-style summary (layer, output shape, params) to f (a FILE*). */
void tt_model_summary(const tt_model *m, void *f);

/* Floating-point operations of one training sample (forward + backward GEMMs) and of one forward pass. */
double tt_model_train_flops(const tt_model *m);
double tt_model_forward_flops(const tt_model *m);

/* Activations of one tower: act[0] is the input (B_max, D), act[l+1] the output of layer l. */
void tt_model_forward(tt_dev *dev, const tt_model *m, const float *d_params, float *const *d_act, size_t B);

/* Back-propagates d_dlogits (B, C) through every layer into d_grads (n_params), using two ping-pong buffers of
 * (B_max, max_width). The input gradient of the first layer is not computed. */
void tt_model_backward(tt_dev *dev, const tt_model *m, const float *d_params, float *d_grads,
                       float *const *d_act, float *const *d_delta, const float *d_dlogits, size_t B);

#ifdef __cplusplus
}
#endif
#endif
