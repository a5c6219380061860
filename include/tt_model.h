/* tt_model.h — models as a list of layers over one flat parameter buffer.
 *
 * All parameters live in one float buffer of n_params elements, carved by a layout table (name, offset, shape of
 * any rank up to 4 — a conv kernel is (KH, KW, C, F)); gradients and optimizer state use the same layout. A pull is
 * one copy, a push is one copy, a reduction and an optimizer update are one loop each. Each layer kind lives in its
 * own file (src/layers/) and implements the tt_layer_kind table: it knows its shapes, parameters, scratch memory,
 * GEMMs, forward and backward; nothing outside src/layers/ knows what a kind computes. The loss (softmax
 * cross-entropy from logits) follows the last layer; a final `softmax` layer is fused into it, as Keras does when
 * a model's output comes from a softmax (the numerically stable form of the same loss).
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
#define TT_MAX_TENSORS (4 * TT_MAX_LAYERS) /* two trainable and two non-trainable (batchnorm) per layer at most */
#define TT_MAX_WIDTH 65536       /* units, filters, embedding width */
#define TT_MAX_CLASSES 16777216  /* --classes, and a checkpoint's classes: 2^24, exact as a float label */
#define TT_MAX_VOCAB 16777216    /* --vocab, an embedding's vocab=, and a checkpoint's vocab: token ids below 2^24 */
#define TT_MAX_SAMPLE_ELEMS ((size_t)1 << 26) /* elements of one sample's activation (the memory check does the rest) */

/* One named parameter tensor inside the flat buffer. */
typedef struct tt_tensor_info {
    char name[48];
    size_t offset; /* in floats, from the start of the flat buffer */
    size_t size;   /* elements: the product of shape (set by the model, not the kind) */
    int ndim;
    size_t shape[TT_MAX_DIMS];
} tt_tensor_info;

/* --bn-sync on with several towers: the towers' exchange in the middle of a pass. Every tower calls sum at the same
 * point of its pass with the same n; d_buf (n floats in this tower's device memory; NULL for a tower with no rows,
 * which adds zeros) then holds the sum over the towers, in tower order — the same bits on every tower. */
typedef struct tt_exchange {
    void (*sum)(void *arg, tt_dev *dev, float *d_buf, size_t n);
    void *arg; /* the tower */
} tt_exchange;

typedef struct tt_layer tt_layer;

/* A relu whose gradient crosses into the next layer's backward (--epilogues lt: tt_layer.lt_mask). */
typedef struct tt_relu_link {
    const tt_layer *l; /* the dense layer the relu ends (its bias gradient is written with the relu's) */
    void *d_mask;      /* its bit-mask, tt_relu_mask_bytes(rows, l->out) */
    const float *d_y;  /* its output, after the relu (what the kernels' fallback reads) */
} tt_relu_link;

/* What a layer's forward and backward know of the step beyond their tensors. */
typedef struct tt_pass {
    int training;   /* 1 in a training step (dropout drops), 0 in evaluation */
    uint64_t seed;  /* the run's --seed */
    uint64_t epoch; /* 1-based epoch of a training step */
    const uint32_t *d_ids; /* (B) device: the data-set index of every row of the shard (training steps): a sample's
                            * dropout mask depends on the sample, never on the tower that computes it */
    float *d_ws;    /* this tower's scratch: tt_model_workspace floats, shared by the layers (they run in turn) */
    size_t chunk_mnk; /* the backend's largest GEMM per chunk, M*N*K (tt_dev_ops.chunk_mnk; 0: no limit) */
    float *d_saved;   /* this tower's memory kept by layers from forward to backward (tt_model.n_saved floats) */
    float *d_grads;   /* a training step: the tower's whole gradient buffer, where a training forward writes the
                       * non-trainable tail's steps (BatchNorm's moving statistics); NULL: none written */
    float share;      /* this tower's rows / the rows whose gradients the host sums into one update */
    size_t rows_all;  /* the step's rows over all towers (what a synchronised batch statistic is taken over) */
    const tt_exchange *xchg; /* --bn-sync on, several towers: the exchange; NULL: statistics of the tower's rows */
    int lt_epilogues; /* --epilogues lt: a dense layer's GEMM and bias/relu as one backend call where it has one
                       * (tt_dev_gemm_bias_act); 0: sgemm then the fused kernels */
    /* --epilogues lt, a training pass: the relu bit-masks (tt_model_mask_bytes of this tower's rows; NULL: none, and
     * every relu's gradient is its own layer's kernel) and, host, one flag per layer: 1 where the last training
     * forward had the backend write that layer's mask (tt_layer.lt_mask), so the backward applies the relu's gradient
     * and its layer's bias gradient in the next layer's dx GEMM (cuBLASLt's RELU_AUX_BIAS, then DRELU_BGRAD). */
    void *d_masks;
    unsigned char *lt_masked;
    /* Set by tt_model_forward / tt_model_backward in the pass they give one layer (zero otherwise): forward, where
     * this layer's relu bit-mask goes (d_mask; NULL: none); backward, the relu whose gradient this layer's dx GEMM
     * applies (l NULL: none) — its layer, bit-mask and output —, and whether this layer's own relu gradient and bias
     * gradient were applied so by the layer above it (relu_applied: its mask_out was taken). */
    tt_relu_link mask_out, relu_in;
    int relu_applied;
    /* --precision (tt_math.h's TT_FMT_*): the format every value between layers is stored in — tt_model_forward
     * rounds the input (unless it holds token ids) and every layer's output to it, tt_model_backward the loss
     * gradient and every layer's dx; the layers compute in FP32 in between. TT_FMT_FP32 (0): nothing rounded. */
    int fmt;
} tt_pass;

/* One GEMM a layer runs per step for a shard: op(A) (M x K) times op(B) (K x N), `calls` times. The probe runs these
 * alone to measure the GEMM floor; FLOP counts come from them. */
typedef struct tt_gemm_shape {
    int ta, tb;
    size_t M, N, K;
    size_t calls;
} tt_gemm_shape;

#define TT_MAX_LAYER_GEMMS 6

/* A model-file key of a layer kind: `kind key=value`. Sizes and floats are range-checked; a key without a default
 * is required; every default applied is noted (the run prints the notes). */
typedef enum {
    TT_KEY_SIZE,      /* an integer into the size_t at offset */
    TT_KEY_PAIR,      /* "3" or "3,5" into the size_t[2] at offset ("3" -> 3,3) */
    TT_KEY_FLOAT,     /* a decimal into the float at offset */
    TT_KEY_PADDING,   /* same | valid into the int at offset (1 | 0) */
    TT_KEY_BOOL,      /* true | false into the int at offset */
    TT_KEY_ACTIVATION /* linear | relu | softmax: appends a fused relu or softmax layer (nothing stored) */
} tt_key_type;

typedef struct tt_layer_key {
    const char *name;
    tt_key_type type;
    size_t offset;  /* offsetof(tt_layer, field) */
    double lo, hi;  /* allowed range for sizes and floats */
    const char *def; /* the default as the file would spell it, or NULL: required */
} tt_layer_key;

#define TT_MAX_KEYS 8

typedef struct tt_layer_kind {
    const char *name;  /* model-file keyword: "conv2d", "maxpool2d" */
    const char *stem;  /* Keras's layer name stem: "conv2d", "max_pooling2d" (then _1, _2, ...) */
    const char *keras; /* Keras class, for the summary: "Conv2D" */
    tt_layer_key keys[TT_MAX_KEYS]; /* its model-file keys, ended by a NULL name */
    int token_input;     /* its input is token ids (l->vocab of them), not features: a first layer only (embedding) */
    int fused_into_loss; /* an output activation the loss computes itself: the last layer only, never run (softmax) */
    int relu_epilogue;   /* runs a relu that follows it as its epilogue (dense, conv): tt_layer.relu_epilogue */
    int lt_relu_link;    /* --epilogues lt: its forward can write its relu's bit-mask and its dx GEMM can apply the
                          * gradient of the relu before it (dense: tt_layer.lt_mask) */
    /* Checks the input shape and the hyper-parameters; sets l->out_shape. One line naming the layer on error. */
    tt_status (*setup)(tt_layer *l, tt_error *err);
    /* Describes the parameter tensors (names and shapes, tt_tensor_set; sizes and offsets are filled by the model);
     * returns how many (0..2). NULL: none. */
    int (*tensors)(const tt_layer *l, tt_tensor_info *out);
    /* Keras-default initialisation of this layer's parameters (p points at the layer's first parameter). */
    void (*init)(const tt_layer *l, float *h_p, tt_rng *rng);
    /* Non-trainable tensors (BatchNorm's moving statistics), laid out in the buffer's tail after every trainable
     * tensor (tt_model.n_trainable); returns how many (0..2), NULL: none. The optimizer never touches them: a
     * training forward writes this tower's step of each into the gradient buffer (tt_pass.d_grads) and the host adds
     * the towers' sum. stats_init: their initial values (h_tail at l->stat_offset). */
    int (*stats)(const tt_layer *l, tt_tensor_info *out);
    void (*stats_init)(const tt_layer *l, float *h_tail);
    /* Floats the layer keeps from its forward to its backward (tt_pass.d_saved + l->save_offset); NULL: none. */
    size_t (*saved)(const tt_layer *l);
    /* A tower with no rows in a step takes part in the exchanges the layer's forward (backward 0) or backward (1)
     * makes (tt_pass.xchg), contributing zeros; NULL: it makes none. */
    void (*idle)(tt_dev *dev, const tt_layer *l, const tt_pass *ps, int backward);
    /* Floats of scratch for a shard of B rows (im2col columns); NULL: none. Sized once, at the trainer's init. */
    size_t (*workspace)(const tt_layer *l, size_t B, size_t chunk_mnk);
    /* The GEMMs of forward + backward for a shard of B rows (need_dx: the input gradient is computed); returns how
     * many (0..TT_MAX_LAYER_GEMMS). NULL: none. */
    int (*gemms)(const tt_layer *l, size_t B, int need_dx, size_t chunk_mnk, tt_gemm_shape *out);
    /* y (B, out) = f(x (B, in)); p points at the layer's parameters in device memory. */
    void (*forward)(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, const float *d_x, float *d_y,
                    size_t B);
    /* Given dy (B, out), writes the parameter gradient g (same layout as p; every element, not accumulated) and, if
     * d_dx != NULL, dx (B, in). x and y are the forward input and output. d_dx never aliases d_dy. dy is consumed:
     * a layer with a relu epilogue turns it into the gradient before the relu, in place. */
    void (*backward)(tt_dev *dev, const tt_layer *l, const tt_pass *ps, const float *d_p, float *d_g,
                     const float *d_x, const float *d_y, float *d_dy, float *d_dx, size_t B);
} tt_layer_kind;

struct tt_layer {
    const tt_layer_kind *kind;
    char name[24];        /* "conv2d", "conv2d_1", "dense_2" as Keras names them */
    size_t index;         /* position in the model (a dropout layer's random stream) */
    tt_shape in_shape, out_shape;
    size_t in, out;       /* elements per sample */
    size_t offset;        /* first parameter in the flat buffer */
    size_t n_params;      /* trainable parameters, from offset */
    size_t stat_offset;   /* its non-trainable tensors in the buffer's tail (kind->stats), n_stats floats */
    size_t n_stats;
    size_t save_offset;   /* its floats in tt_pass.d_saved (kind->saved) */
    int fused;            /* an activation given as the previous layer's activation=: the summary folds it in */
    /* The fused epilogue (set by the model; the model file says nothing of it): a relu right after a layer whose
     * kind has relu_epilogue runs inside that layer — bias + relu in one pass after the forward GEMM, the relu's
     * gradient + the bias gradient in one pass before the backward GEMMs — in place, in that layer's output. */
    int relu_epilogue;    /* this layer applies the relu after it (its y is the relu's output) */
    int in_epilogue;      /* this relu is run by the layer before it: never run itself, its output is its input */
    /* --epilogues lt, training: this layer's relu (with its bias) has its gradient applied in the dx GEMM of the layer
     * after the relu — both kinds lt_relu_link, nothing between them: the forward's one call writes the relu's
     * bit-mask (tt_pass.d_masks) and the next layer's one dx call reads it (set by the model) */
    int lt_mask;
    /* hyper-parameters, each kind reading its own (set by the model file or a built-in model) */
    size_t units;         /* dense: units; conv: filters */
    size_t kernel[2];     /* conv: kernel (h, w); pool: pool size (h, w) */
    size_t stride[2];     /* conv, pool: strides (h, w) */
    int same;             /* conv, pool: padding same (1) or valid (0) */
    int use_bias;         /* dense, conv */
    float rate;           /* dropout: the fraction dropped */
    float momentum;       /* batchnorm: of the moving statistics */
    float epsilon;        /* batchnorm: added to the variance */
    size_t vocab;         /* embedding: input_dim (token ids are 0 .. vocab-1) */
    /* derived by setup */
    tt_conv_geom g;       /* conv and pool layers */
};

/* The layer kinds, one list: each is tt_layer_<name>, defined in src/layers/<name>.c (every .c file there is built),
 * and the model file knows them in this order (its "known kinds" message lists them so). A new kind is a line here
 * and its file. */
#define TT_LAYER_KINDS(X) \
    X(dense) X(relu) X(softmax) X(conv2d) X(maxpool2d) X(conv1d) X(maxpool1d) X(globalmaxpool1d) X(dropout) \
    X(flatten) X(embedding) X(batchnorm)
#define TT_LAYER_EXTERN(name) extern const tt_layer_kind tt_layer_##name;
TT_LAYER_KINDS(TT_LAYER_EXTERN)
#undef TT_LAYER_EXTERN

typedef struct tt_model {
    size_t input_dim;     /* D: features per sample (the product of input_shape) */
    tt_shape input_shape; /* one sample's shape */
    size_t n_classes;     /* C: width of the logits */
    size_t vocab;         /* the input's vocabulary (tt_model_input.vocab): what a vocab-less embedding takes */
    size_t token_vocab;   /* the model reads token ids 0 .. token_vocab-1 (a first kind with token_input); 0: features */
    int vocab_from_input; /* token_vocab is the input's vocab, not a model file's vocab= */
    size_t n_layers;
    tt_layer layers[TT_MAX_LAYERS];
    size_t n_logits;      /* layers whose output leads to the loss: n_layers, or n_layers - 1 with a final softmax */
    size_t n_tensors;
    tt_tensor_info tensors[TT_MAX_TENSORS]; /* the layout table */
    size_t n_params;                        /* P */
    size_t n_trainable;                     /* the trainable parameters [0, n_trainable); the rest is the
                                             * non-trainable tail (moving statistics), which no optimizer updates */
    size_t n_saved;                         /* floats a tower keeps from forward to backward (tt_pass.d_saved) */
    size_t max_width;                       /* widest activation per sample, input included */
    char source[128];                       /* "built-in cnn" or the model file's path, control bytes escaped */
    int builtin;                            /* 1 for a built-in model, 0 for a model file */
    char notes[1024];                       /* "using default ..." lines, '\n'-separated */
} tt_model;

/* What a model is built for: the data's sample shape and classes, and (for token data) the vocabulary. */
typedef struct tt_model_input {
    tt_shape shape;
    size_t n_classes;
    size_t vocab; /* token ids are 0 .. vocab-1; 0: not known (a model with an embedding then needs vocab=) */
} tt_model_input;

/* A flat input of D features and C classes (tests, and models of vectors). */
#define TT_FLAT_INPUT(D, C) (&(tt_model_input){tt_shape1(D), (C), 0})

/* The built-in models' names ("mlp, cnn, cnn-bn, textcnn") and whether name is one. */
const char *tt_model_builtins(void);
int tt_model_is_builtin(const char *name);

/* The input a built-in model is described with when there is no data (summary, probe): mlp 784 -> 10; cnn
 * 32x32x3 -> 10 (the Keras cifar10_cnn example); textcnn length 300, vocab 30982, 46 classes (the seed's Reuters
 * model: 332,856 parameters). A model file: an empty input (shape ndim 0, 0 classes): its `input shape=` line gives
 * the shape (without one, 784 features) and its last layer the classes. */
tt_status tt_model_default_input(const char *model, tt_model_input *in, tt_error *err);

/* A built-in model by name for input in:
 *   mlp      dense 256 relu -> dense 256 relu -> dense classes softmax (the input flattened)
 *   cnn      the Keras cifar10_cnn example: conv2d 32 3x3 same relu -> conv2d 32 3x3 relu -> maxpool 2 ->
 *            dropout 0.25 -> conv2d 64 3x3 same relu -> conv2d 64 3x3 relu -> maxpool 2 -> dropout 0.25 ->
 *            flatten -> dense 512 relu -> dropout 0.5 -> dense classes softmax
 *   cnn-bn   cnn with a batchnorm after each conv2d, before its relu
 *   textcnn  embedding(vocab, 7) -> conv1d 64 k5 relu -> maxpool1d 2 -> conv1d 32 k3 relu -> maxpool1d 2 ->
 *            flatten -> dense classes softmax */
tt_status tt_model_builtin(tt_model *m, const char *name, const tt_model_input *in, tt_error *err);

/* The seed MLP (tt_model_builtin "mlp" for a flat input of input_dim features). */
tt_status tt_model_mlp(tt_model *m, size_t input_dim, size_t n_classes, tt_error *err);

/* Parses a model file (docs/model-file.md: one layer per line, `kind key=value ...`; an optional first line
 * `input shape=H,W,C` that must match the data; '#' starts a comment). Every default applied is noted; unknown
 * kinds and keys are errors naming the file and line. The last layer must produce n_classes logits. */
tt_status tt_model_load(tt_model *m, const char *path, const tt_model_input *in, tt_error *err);

/* Same, from text in memory (path is used in messages only). */
tt_status tt_model_parse(tt_model *m, const char *text, const char *path, const tt_model_input *in, tt_error *err);

/* --model NAME|FILE: a built-in model or a model file. */
tt_status tt_model_make(tt_model *m, const char *model, const tt_model_input *in, tt_error *err);

/* The model file's path (escaped) for messages, or NULL for a built-in model. */
const char *tt_model_file(const tt_model *m);

/* Keras-default initialisation (Glorot-uniform kernels, zero biases, uniform embeddings) from the seed. */
void tt_model_init_params(const tt_model *m, float *h_params, uint64_t seed);

/* Prints the Keras-style summary table (layer (type), output shape, parameters; totals) to f (a FILE*). */
void tt_model_summary(const tt_model *m, void *f);

/* FLOPs of the GEMMs of one training sample (forward + backward). */
double tt_model_train_flops(const tt_model *m);

/* Every GEMM of a training step for a shard of B rows, over all layers, into out (room for max); returns the count. */
size_t tt_model_gemms(const tt_model *m, size_t B, size_t chunk_mnk, tt_gemm_shape *out, size_t max);

/* Bytes of the relu bit-masks a tower keeps for a shard of B rows under --epilogues lt (tt_pass.d_masks): one
 * tt_relu_mask_bytes(B, out) per layer with lt_mask, in layer order; 0: none (or an overflow, which no shard the
 * memory plan admits reaches). */
size_t tt_model_mask_bytes(const tt_model *m, size_t B);

/* Scratch floats a tower needs for a shard of B rows: the largest any layer asks for. */
size_t tt_model_workspace(const tt_model *m, size_t B, size_t chunk_mnk);

/* Activations of one tower: act[0] is the input (B_max, D), act[l+1] the output of layer l, for l < n_logits
 * (a final softmax is fused into the loss and not run). The output of a relu run as an epilogue is its input
 * buffer: act[l+1] == act[l] where tt_model_act_shared(m, l + 1) (the caller allocates one buffer for both). */
static inline int tt_model_act_shared(const tt_model *m, size_t i) { return i > 0 && m->layers[i - 1].in_epilogue; }
void tt_model_forward(tt_dev *dev, const tt_model *m, const tt_pass *ps, const float *d_params, float *const *d_act,
                      size_t B);

/* A tower with no rows in a training step: its part in the step's exchanges (tt_pass.xchg), forward then backward,
 * as tt_model_forward and tt_model_backward of a shard would make them. */
void tt_model_idle(tt_dev *dev, const tt_model *m, const tt_pass *ps);

/* Back-propagates d_dlogits (B, C) through the layers into d_grads[0, n_trainable), using two ping-pong buffers of
 * (B_max, max_width) (the tail [n_trainable, n_params) is the training forward's: tt_pass.d_grads). The input
 * gradient of the first layer is not computed. d_dlogits and the buffers are consumed (a layer's relu epilogue works
 * in place in its dy). */
void tt_model_backward(tt_dev *dev, const tt_model *m, const tt_pass *ps, const float *d_params, float *d_grads,
                       float *const *d_act, float *const *d_delta, float *d_dlogits, size_t B);
/* The same, calling ready(arg, lo) after each layer that has parameters is issued: the gradient d_grads[lo, P) is
 * then complete in stream order (layers are laid out in order, and backward walks them from the last), so a
 * bucket of it can be pushed while the layers below are still computing (--overlap on). */
void tt_model_backward_each(tt_dev *dev, const tt_model *m, const tt_pass *ps, const float *d_params, float *d_grads,
                            float *const *d_act, float *const *d_delta, float *d_dlogits, size_t B,
                            void (*ready)(void *arg, size_t lo), void *arg);

/* The bytes of the parameter buffer as one copy of it travels: the trainable part in 16 bits (half16: --precision
 * bf16, fp16), the non-trainable tail in FP32; half16 0: all FP32. A pull, a push and the cost model count these. */
static inline size_t tt_model_param_bytes(const tt_model *m, int half16)
{
    return half16 ? m->n_trainable * 2 + (m->n_params - m->n_trainable) * 4 : m->n_params * 4;
}

/* The logits: the output of layer n_logits - 1. */
static inline float *tt_model_logits(const tt_model *m, float *const *d_act) { return d_act[m->n_logits]; }

#ifdef __cplusplus
}
#endif
#endif
