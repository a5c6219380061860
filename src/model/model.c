/* model.c — building a model (built-in or from a model file), its layout table, initialisation, the summary, and the
 * forward / backward walk over the layers. The per-layer math is in src/layers/; this file only chains them and
 * reads their tables (shapes, keys, tensors, GEMMs), never what a kind computes. */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_input.h"
#include "tt_model.h"

/* Every kind a model file may name, in the order the error message lists them. */
static const tt_layer_kind *const KINDS[] = {
    &tt_layer_dense,     &tt_layer_relu,      &tt_layer_softmax,        &tt_layer_conv2d,
    &tt_layer_maxpool2d, &tt_layer_conv1d,    &tt_layer_maxpool1d,      &tt_layer_globalmaxpool1d,
    &tt_layer_dropout,   &tt_layer_flatten,   &tt_layer_embedding,      &tt_layer_batchnorm,
};
#define N_KINDS (sizeof KINDS / sizeof KINDS[0])

static void model_reset(tt_model *m, const tt_model_input *in, const char *source)
{
    memset(m, 0, sizeof *m);
    m->input_shape = in->shape;
    m->input_dim = tt_shape_elems(&in->shape);
    m->n_classes = in->n_classes;
    m->vocab = in->vocab;
    tt_escape(source, m->source, sizeof m->source); /* for display only: a control byte in a path stays inert */
}

/* Appends a layer of `kind` (hyper-parameters from proto, may be NULL) named as Keras names it: the first of a
 * stem plain ("conv2d"), the later ones numbered ("conv2d_1"). */
static tt_status model_add(tt_model *m, const tt_layer_kind *kind, const tt_layer *proto, int fused, tt_error *err,
                           const char *where)
{
    if (m->n_layers == TT_MAX_LAYERS)
        return tt_fail(err, TT_ERR_MODEL, "%s: too many layers (at most %d)", where, TT_MAX_LAYERS);
    tt_layer *l = &m->layers[m->n_layers];
    if (proto)
        *l = *proto;
    else
        memset(l, 0, sizeof *l);
    int same = 0;
    for (size_t i = 0; i < m->n_layers; i++) same += m->layers[i].kind == kind;
    l->kind = kind;
    l->fused = fused;
    l->index = m->n_layers;
    if (same)
        snprintf(l->name, sizeof l->name, "%s_%d", kind->stem, same);
    else
        snprintf(l->name, sizeof l->name, "%s", kind->stem);
    m->n_layers++;
    return TT_OK;
}

/* Shapes layer by layer, then the layout table and the totals. */
static tt_status model_finish(tt_model *m, tt_error *err)
{
    if (m->n_layers == 0) return tt_fail(err, TT_ERR_MODEL, "%s: the model has no layers", m->source);
    if (m->input_shape.ndim == 0) { /* no data and no input line: the seed's 784 features */
        m->input_shape = tt_shape1(784);
        m->input_dim = 784;
    }
    tt_shape shape = m->input_shape;
    size_t off = 0;
    m->n_tensors = 0;
    m->max_width = m->input_dim;
    for (size_t i = 0; i < m->n_layers; i++) {
        tt_layer *l = &m->layers[i];
        if (l->kind->token_input) {
            if (i != 0)
                return tt_fail(err, TT_ERR_MODEL, "%s: %s: an %s must be the first layer (its input is token ids)",
                               m->source, l->name, l->kind->name);
            m->vocab_from_input = l->vocab == 0;
            if (l->vocab == 0) l->vocab = m->vocab; /* the input's (the data's) vocabulary */
        }
        l->in_shape = shape;
        l->in = tt_shape_elems(&shape);
        tt_status s = l->kind->setup(l, err);
        if (s) {
            char why[sizeof err->msg];
            memcpy(why, err->msg, sizeof why); /* tt_fail writes err->msg: format from a copy */
            return tt_fail(err, s, "%s: %s", m->source, why);
        }
        l->out = tt_shape_elems(&l->out_shape);
        if (l->out == 0 || l->out > TT_MAX_SAMPLE_ELEMS)
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %zu outputs per sample (at most %zu)", m->source, l->name,
                           l->out, TT_MAX_SAMPLE_ELEMS);
        if (l->kind->fused_into_loss && i + 1 != m->n_layers)
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s must be the last layer (the loss follows it)", m->source,
                           l->name, l->kind->name);
        shape = l->out_shape;
        l->offset = off;
        tt_tensor_info *t = &m->tensors[m->n_tensors];
        int nt = l->kind->tensors ? l->kind->tensors(l, t) : 0;
        size_t n = 0;
        for (int k = 0; k < nt; k++) {
            /* a tensor's size is the product of its shape, checked: one that wraps around (a 4096x4096 kernel over
             * 2^24 channels, 65536 filters: 2^64 = 0) is refused, not counted small */
            size_t elems = 1;
            int wrapped = 0;
            for (int d = 0; d < t[k].ndim; d++) wrapped |= tt_mul_size(elems, t[k].shape[d], &elems);
            if (wrapped || elems > ((size_t)1 << 40) - off - n)
                return tt_fail(err, TT_ERR_MODEL, "%s: %s: too many parameters", m->source, l->name);
            t[k].size = elems;
            t[k].offset = off + n;
            n += t[k].size;
        }
        l->n_params = n;
        off += n;
        m->n_tensors += (size_t)nt;
        if (l->out > m->max_width) m->max_width = l->out;
    }
    /* the non-trainable tail: every layer's stats tensors after all trainable ones (one split for the optimizer);
     * and each layer's floats kept from forward to backward */
    m->n_trainable = off;
    m->n_saved = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        tt_layer *l = &m->layers[i];
        l->stat_offset = off;
        l->n_stats = 0;
        tt_tensor_info *t = &m->tensors[m->n_tensors];
        int nt = l->kind->stats ? l->kind->stats(l, t) : 0;
        for (int k = 0; k < nt; k++) {
            size_t elems = 1;
            int wrapped = 0;
            for (int d = 0; d < t[k].ndim; d++) wrapped |= tt_mul_size(elems, t[k].shape[d], &elems);
            if (wrapped || elems > ((size_t)1 << 40) - off)
                return tt_fail(err, TT_ERR_MODEL, "%s: %s: too many parameters", m->source, l->name);
            t[k].size = elems;
            t[k].offset = off;
            off += elems;
            l->n_stats += elems;
        }
        m->n_tensors += (size_t)nt;
        l->save_offset = m->n_saved;
        m->n_saved += l->kind->saved ? l->kind->saved(l) : 0;
    }
    for (size_t i = 1; i < m->n_layers; i++) { /* the fused epilogues: a relu right after a layer that can run it */
        tt_layer *l = &m->layers[i];
        l->in_epilogue = l->kind == &tt_layer_relu && m->layers[i - 1].kind->relu_epilogue;
        m->layers[i - 1].relu_epilogue = l->in_epilogue;
    }
    for (size_t i = 0; i + 2 < m->n_layers; i++) { /* --epilogues lt: a relu's gradient in the next dx GEMM */
        tt_layer *l = &m->layers[i];
        l->lt_mask = l->kind->lt_relu_link && l->relu_epilogue && l->use_bias && m->layers[i + 2].kind->lt_relu_link;
    }
    const tt_layer *last = &m->layers[m->n_layers - 1];
    if (m->n_classes == 0) m->n_classes = last->out; /* no data: the classes are what the model says */
    m->n_logits = last->kind->fused_into_loss ? m->n_layers - 1 : m->n_layers;
    m->token_vocab = m->layers[0].kind->token_input ? m->layers[0].vocab : 0;
    if (last->out_shape.ndim != 1 || last->out != m->n_classes) {
        char out[64];
        return tt_fail(err, TT_ERR_MODEL, "%s: the last layer's output is %s but the data has %zu classes (end with "
                       "dense units=%zu)", m->source, tt_shape_str(&last->out_shape, 0, out, sizeof out),
                       m->n_classes, m->n_classes);
    }
    if (m->n_logits == 0) return tt_fail(err, TT_ERR_MODEL, "%s: a softmax alone is not a model", m->source);
    m->n_params = off;
    return TT_OK;
}

/* ---- built-in models ------------------------------------------------------------------------------------------ */

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

/* ---- the model file ---------------------------------------------------------------------------------------- */

static int parse_size(const char *v, size_t lo, size_t hi, size_t *out)
{
    if (!isdigit((unsigned char)v[0])) return -1;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi) return -1;
    *out = (size_t)x;
    return 0;
}

/* "3" or "3,5" */
static int parse_pair(const char *v, size_t lo, size_t hi, size_t out[2])
{
    char a[32];
    const char *comma = strchr(v, ',');
    if (!comma) {
        if (parse_size(v, lo, hi, &out[0])) return -1;
        out[1] = out[0];
        return 0;
    }
    size_t n = (size_t)(comma - v);
    if (n == 0 || n >= sizeof a) return -1;
    memcpy(a, v, n);
    a[n] = '\0';
    return parse_size(a, lo, hi, &out[0]) || parse_size(comma + 1, lo, hi, &out[1]) ? -1 : 0;
}

/* A decimal like 0.25 or .5 (no sign, exponent allowed), in [lo, hi]. */
static int parse_float(const char *v, double lo, double hi, float *out)
{
    if (!(isdigit((unsigned char)v[0]) || v[0] == '.') || strpbrk(v, "xXpP")) return -1;
    errno = 0;
    char *end;
    double x = strtod(v, &end);
    if (errno || *end || !(x >= lo && x <= hi)) return -1;
    const float f = (float)x;
    if (x != 0 && !(fabsf(f) >= FLT_MIN)) return -1; /* 0 or subnormal as a float32: not the value written */
    *out = f;
    return 0;
}

static void add_note(tt_model *m, size_t lineno, const char *kind, const char *key, const char *def)
{
    size_t len = strlen(m->notes);
    if (len + 1 >= sizeof m->notes) return;
    snprintf(m->notes + len, sizeof m->notes - len, "%s:%zu: %s: %s not given, using default '%s'\n", m->source,
             lineno, kind, key, def);
}

/* One key=value of a layer line into l (or *act for an activation). */
static tt_status parse_key(const tt_layer_key *k, const char *val, tt_layer *l, const tt_layer_kind **act,
                           const char *where, const char *kind, tt_error *err)
{
    char *field = (char *)l + k->offset;
    switch (k->type) {
    case TT_KEY_SIZE:
        if (strcmp(val, "pool") == 0 && k->def && strcmp(k->def, "pool") == 0) return TT_OK; /* 0: the pool size */
        if (parse_size(val, (size_t)k->lo, (size_t)k->hi, (size_t *)(void *)field))
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s must be an integer in %zu..%zu, got '%s'", where, kind,
                           k->name, (size_t)k->lo, (size_t)k->hi, val);
        return TT_OK;
    case TT_KEY_PAIR:
        if (strcmp(val, "pool") == 0 && k->def && strcmp(k->def, "pool") == 0) return TT_OK;
        if (parse_pair(val, (size_t)k->lo, (size_t)k->hi, (size_t *)(void *)field))
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s must be N or N,M with integers in %zu..%zu, got '%s'",
                           where, kind, k->name, (size_t)k->lo, (size_t)k->hi, val);
        return TT_OK;
    case TT_KEY_FLOAT:
        if (parse_float(val, k->lo, k->hi, (float *)(void *)field))
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s must be a number in [%g, %g], got '%s'", where, kind,
                           k->name, k->lo, k->hi, val);
        return TT_OK;
    case TT_KEY_PADDING:
    case TT_KEY_BOOL: {
        const char *yes = k->type == TT_KEY_PADDING ? "same" : "true",
                   *no = k->type == TT_KEY_PADDING ? "valid" : "false";
        if (strcmp(val, yes) != 0 && strcmp(val, no) != 0)
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s must be %s or %s, got '%s'", where, kind, k->name, yes, no,
                           val);
        *(int *)(void *)field = strcmp(val, yes) == 0;
        return TT_OK;
    }
    case TT_KEY_ACTIVATION:
        if (strcmp(val, "linear") == 0)
            *act = NULL;
        else if (strcmp(val, "relu") == 0)
            *act = &tt_layer_relu;
        else if (strcmp(val, "softmax") == 0)
            *act = &tt_layer_softmax;
        else
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: activation must be linear, relu or softmax, got '%s'", where,
                           kind, val);
        return TT_OK;
    }
    return TT_OK;
}

/* `input shape=H,W,C` (or the older `input size=N`): must match the data. */
static tt_status parse_input(tt_model *m, char **save, const char *where, tt_error *err)
{
    char *tok = strtok_r(NULL, " \t\r", save);
    if (!tok) return tt_fail(err, TT_ERR_MODEL, "%s: input: shape= is required", where);
    char *eq = strchr(tok, '=');
    if (!eq) return tt_fail(err, TT_ERR_MODEL, "%s: input: expected key=value, got '%s'", where, tok);
    *eq = '\0';
    tt_shape want = {0, {0, 0, 0, 0}};
    if (strcmp(tok, "size") == 0 || strcmp(tok, "shape") == 0) {
        const char *v = eq + 1;
        const size_t vlen = strlen(v);
        if (vlen == 0 || v[0] == ',' || v[vlen - 1] == ',' || strstr(v, ",,")) /* strtok would skip an empty size */
            return tt_fail(err, TT_ERR_MODEL, "%s: input: %s must be 1 to 3 positive integers, like 28,28,1", where,
                           tok);
        char *psave = NULL;
        for (char *part = strtok_r(eq + 1, ",", &psave); part; part = strtok_r(NULL, ",", &psave)) {
            if (want.ndim == 3 || parse_size(part, 1, (size_t)1 << 24, &want.d[want.ndim]))
                return tt_fail(err, TT_ERR_MODEL, "%s: input: %s must be 1 to 3 positive integers, like 28,28,1",
                               where, tok);
            want.ndim++;
        }
    } else {
        return tt_fail(err, TT_ERR_MODEL, "%s: input: unknown key '%s' (known: shape)", where, tok);
    }
    if ((tok = strtok_r(NULL, " \t\r", save)) != NULL)
        return tt_fail(err, TT_ERR_MODEL, "%s: input: unexpected '%s'", where, tok);
    size_t elems = 1;
    for (int i = 0; i < want.ndim; i++)
        if (tt_mul_size(elems, want.d[i], &elems) || elems > TT_MAX_SAMPLE_ELEMS)
            return tt_fail(err, TT_ERR_MODEL, "%s: input: a sample of more than %zu values", where,
                           TT_MAX_SAMPLE_ELEMS);
    if (m->input_shape.ndim == 0 && want.ndim) { /* no data: the file says what the model is for */
        m->input_shape = want;
        m->input_dim = tt_shape_elems(&want);
        return TT_OK;
    }
    const int flat = want.ndim == 1 && want.d[0] == m->input_dim; /* size=784 for a 28x28 image: flattened */
    if (want.ndim == 0 || (!tt_shape_eq(&want, &m->input_shape) && !flat)) {
        char a[64], b[64];
        return tt_fail(err, TT_ERR_MODEL, "%s: input shape %s but the data's samples are %s", where,
                       tt_shape_str(&want, 0, a, sizeof a), tt_shape_str(&m->input_shape, 0, b, sizeof b));
    }
    m->input_shape = want; /* a flat line over images: the model sees the sample flattened, as the line says */
    return TT_OK;
}

static const tt_layer_kind *find_kind(const char *name)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (strcmp(name, KINDS[i]->name) == 0) return KINDS[i];
    return NULL;
}

/* One layer line: the kind's keys (each at most once), defaults noted, then the layer and its fused activation. */
static tt_status parse_layer(tt_model *m, const tt_layer_kind *kind, char **save, const char *where, size_t lineno,
                             tt_error *err)
{
    tt_layer l;
    memset(&l, 0, sizeof l);
    const tt_layer_kind *act = NULL;
    int given[TT_MAX_KEYS] = {0};
    char *tok;
    while ((tok = strtok_r(NULL, " \t\r", save)) != NULL) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: expected key=value, got '%s'", where, kind->name, tok);
        *eq = '\0';
        int k = 0;
        while (kind->keys[k].name && strcmp(kind->keys[k].name, tok) != 0) k++;
        if (!kind->keys[k].name) {
            char known[160] = "";
            for (int j = 0; kind->keys[j].name; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "",
                         kind->keys[j].name);
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: unknown key '%s' (known: %s)", where, kind->name, tok,
                           known[0] ? known : "none");
        }
        if (given[k]) return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s given twice", where, kind->name, tok);
        given[k] = 1;
        tt_status s = parse_key(&kind->keys[k], eq + 1, &l, &act, where, kind->name, err);
        if (s) return s;
    }
    for (int k = 0; kind->keys[k].name; k++) {
        const tt_layer_key *key = &kind->keys[k];
        if (given[k]) continue;
        if (!key->def) return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s= is required", where, kind->name, key->name);
        add_note(m, lineno, kind->name, key->name, key->def);
        if (strcmp(key->def, "pool") == 0 || strcmp(key->def, "data") == 0) continue; /* 0: filled by setup */
        tt_status s = parse_key(key, key->def, &l, &act, where, kind->name, err);
        TT_ASSERT(s == TT_OK); /* the defaults in the tables parse */
    }
    tt_status s = model_add(m, kind, &l, 0, err, where);
    if (!s && act) s = model_add(m, act, NULL, 1, err, where);
    return s;
}

tt_status tt_model_parse(tt_model *m, const char *text, const char *path, const tt_model_input *in, tt_error *err)
{
    model_reset(m, in, path);
    size_t lineno = 0;
    int seen_input = 0;
    const char *p = text;
    while (*p) {
        lineno++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[512];
        if (len >= sizeof line)
            return tt_fail(err, TT_ERR_MODEL, "%s:%zu: line too long (at most %zu characters)", path, lineno,
                           sizeof line - 1);
        memcpy(line, p, len);
        line[len] = '\0';
        p = eol ? eol + 1 : p + len;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *save = NULL;
        char *name = strtok_r(line, " \t\r", &save);
        if (!name) continue;
        for (char *c = name; *c; c++) /* in a value, the key's own message shows it (escaped) */
            if ((unsigned char)*c < 0x20)
                return tt_fail(err, TT_ERR_MODEL, "%s:%zu: control character in the model file", path, lineno);
        char where[160];
        snprintf(where, sizeof where, "%s:%zu", path, lineno);
        tt_status s;
        if (strcmp(name, "input") == 0) {
            if (m->n_layers) return tt_fail(err, TT_ERR_MODEL, "%s: input must come before every layer", where);
            if (seen_input) return tt_fail(err, TT_ERR_MODEL, "%s: input given twice", where);
            seen_input = 1;
            s = parse_input(m, &save, where, err);
        } else {
            const tt_layer_kind *kind = find_kind(name);
            if (!kind) {
                char known[256] = "input";
                for (size_t i = 0; i < N_KINDS; i++)
                    snprintf(known + strlen(known), sizeof known - strlen(known), ", %s", KINDS[i]->name);
                return tt_fail(err, TT_ERR_MODEL, "%s: unknown layer '%s' (known: %s)", where, name, known);
            }
            s = parse_layer(m, kind, &save, where, lineno, err);
        }
        if (s) return s;
    }
    return model_finish(m, err);
}

tt_status tt_model_load(tt_model *m, const char *path, const tt_model_input *in, tt_error *err)
{
    char *text = NULL;
    size_t len = 0;
    /* regular files only (a FIFO would block), at most 1 MiB, no NUL byte: tt_model_parse gets a C string */
    tt_status s = tt_input_read_text(path, "model file", (size_t)1 << 20, &text, &len, err);
    if (s) return s;
    s = tt_model_parse(m, text, path, in, err);
    tt_free(text);
    return s;
}

tt_status tt_model_make(tt_model *m, const char *model, const tt_model_input *in, tt_error *err)
{
    return tt_model_is_builtin(model) ? tt_model_builtin(m, model, in, err) : tt_model_load(m, model, in, err);
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

const char *tt_model_file(const tt_model *m) { return m->builtin ? NULL : m->source; }

/* ---- initialisation, summary, cost ------------------------------------------------------------------------- */

void tt_model_init_params(const tt_model *m, float *h_params, uint64_t seed)
{
    for (size_t i = 0; i < m->n_layers; i++) {
        const tt_layer *l = &m->layers[i];
        if (!l->kind->init) continue;
        tt_rng rng;
        tt_rng_seed(&rng, seed, 1000 + i); /* one stream per layer: adding a layer does not shift the others */
        l->kind->init(l, h_params + l->offset, &rng);
    }
    for (size_t i = 0; i < m->n_layers; i++) { /* the non-trainable tail */
        const tt_layer *l = &m->layers[i];
        if (l->kind->stats_init) l->kind->stats_init(l, h_params + l->stat_offset);
    }
}

/* 1234567 -> "1,234,567" */
static const char *thousands(size_t v, char *out, size_t len)
{
    char digits[32];
    int n = snprintf(digits, sizeof digits, "%zu", v), o = 0;
    for (int i = 0; i < n && (size_t)o + 2 < len; i++) {
        if (i && (n - i) % 3 == 0) out[o++] = ',';
        out[o++] = digits[i];
    }
    out[o] = '\0';
    return out;
}

/* A line of n copies of c. */
static void summary_rule(FILE *f, char c, int n)
{
    for (int i = 0; i < n; i++) fputc(c, f);
    fputc('\n', f);
}

void tt_model_summary(const tt_model *m, void *fp)
{
    FILE *f = (FILE *)fp;
    char in[64], shape[64], type[64], count[32];
    int wide = 34; /* the layer column: Keras's width, wider for "batch_normalization_1 (BatchNormalization)" */
    for (size_t i = 0; i < m->n_layers; i++) {
        const int w = (int)strlen(m->layers[i].name) + 3 + (int)strlen(m->layers[i].kind->keras);
        if (w > wide) wide = w;
    }
    const int width = wide + 39; /* 73 with Keras's 34 */
    fprintf(f, "Model: %s, input %s\n", m->source, tt_shape_str(&m->input_shape, 1, in, sizeof in));
    summary_rule(f, '_', width);
    fprintf(f, " %-*s %-24s %12s\n", wide, "Layer (type)", "Output Shape", "Param #");
    summary_rule(f, '=', width);
    for (size_t i = 0; i < m->n_layers; i++) {
        const tt_layer *l = &m->layers[i];
        if (l->fused) continue; /* activation=: part of the layer above, as Keras shows it */
        const char *act = i + 1 < m->n_layers && m->layers[i + 1].fused ? m->layers[i + 1].kind->name : NULL;
        snprintf(type, sizeof type, "%s (%s)", l->name, l->kind->keras);
        const tt_shape *out = act ? &m->layers[i + 1].out_shape : &l->out_shape;
        fprintf(f, " %-*s %-24s %12s%s%s\n", wide, type, tt_shape_str(out, 1, shape, sizeof shape),
                thousands(l->n_params + l->n_stats, count, sizeof count), act ? "   + " : "", act ? act : "");
    }
    summary_rule(f, '=', width);
    fprintf(f, "Total params: %s (%.2f MB as float32)\n", thousands(m->n_params, count, sizeof count),
            (double)m->n_params * 4.0 / 1e6);
    char frozen[32];
    fprintf(f, "Trainable params: %s\nNon-trainable params: %s\n", thousands(m->n_trainable, count, sizeof count),
            thousands(m->n_params - m->n_trainable, frozen, sizeof frozen));
    summary_rule(f, '_', width);
}

size_t tt_model_gemms(const tt_model *m, size_t B, size_t chunk_mnk, tt_gemm_shape *out, size_t max)
{
    size_t n = 0;
    for (size_t i = 0; i < m->n_logits; i++) {
        const tt_layer *l = &m->layers[i];
        if (!l->kind->gemms) continue;
        tt_gemm_shape g[TT_MAX_LAYER_GEMMS];
        int k = l->kind->gemms(l, B, i > 0, chunk_mnk, g); /* the first layer's dx is not computed */
        for (int j = 0; j < k && n < max; j++) out[n++] = g[j];
    }
    return n;
}

double tt_model_train_flops(const tt_model *m)
{
    tt_gemm_shape g[TT_MAX_LAYERS * TT_MAX_LAYER_GEMMS];
    size_t n = tt_model_gemms(m, 1, 0, g, sizeof g / sizeof g[0]);
    double f = 0;
    for (size_t i = 0; i < n; i++) f += 2.0 * (double)g[i].M * (double)g[i].N * (double)g[i].K * (double)g[i].calls;
    return f;
}

size_t tt_model_workspace(const tt_model *m, size_t B, size_t chunk_mnk)
{
    size_t ws = 0;
    for (size_t i = 0; i < m->n_logits; i++) {
        const tt_layer *l = &m->layers[i];
        size_t w = l->kind->workspace ? l->kind->workspace(l, B, chunk_mnk) : 0;
        ws = w > ws ? w : ws;
    }
    return ws;
}

size_t tt_model_mask_bytes(const tt_model *m, size_t B)
{
    size_t bytes = 0;
    for (size_t i = 0; i < m->n_logits; i++) {
        const size_t b = m->layers[i].lt_mask ? tt_relu_mask_bytes(B, m->layers[i].out) : 0;
        if (m->layers[i].lt_mask && (b == 0 || b > SIZE_MAX - bytes)) return 0;
        bytes += b;
    }
    return bytes;
}

/* ---- forward / backward ------------------------------------------------------------------------------------ */

/* Layer i's relu link in a pass with masks (tt_pass.d_masks): its bit-mask after those of the layers before it. */
static tt_relu_link relu_link(const tt_model *m, const tt_pass *ps, float *const *d_act, size_t i, size_t B)
{
    unsigned char *at = (unsigned char *)ps->d_masks;
    for (size_t k = 0; k < i; k++)
        if (m->layers[k].lt_mask) at += tt_relu_mask_bytes(B, m->layers[k].out);
    return (tt_relu_link){&m->layers[i], at, d_act[i + 1]};
}

/* Layer i's relu gradient goes into the dx GEMM of the layer above it: its kind links (lt_mask) and this pass's
 * training forward had the backend write its mask. The one test both sides of the link read. */
static int link_taken(const tt_model *m, const tt_pass *ps, size_t i)
{
    return ps->d_masks && ps->lt_masked && m->layers[i].lt_mask && ps->lt_masked[i];
}

void tt_model_forward(tt_dev *dev, const tt_model *m, const tt_pass *ps, const float *d_params, float *const *d_act,
                      size_t B)
{
    tt_pass lp = *ps;
    for (size_t i = 0; i < m->n_logits; i++) {
        const tt_layer *l = &m->layers[i];
        if (l->in_epilogue) continue; /* the layer before ran it, in place */
        const int mask = ps->d_masks && ps->training && l->lt_mask;
        lp.mask_out = mask ? relu_link(m, ps, d_act, i, B) : (tt_relu_link){0};
        if (ps->lt_masked) ps->lt_masked[i] = 0; /* the layer's forward sets it where the backend wrote the mask */
        l->kind->forward(dev, l, &lp, d_params + l->offset, d_act[i], d_act[i + 1], B);
    }
}

void tt_model_backward_each(tt_dev *dev, const tt_model *m, const tt_pass *ps, const float *d_params, float *d_grads,
                            float *const *d_act, float *const *d_delta, float *d_dlogits, size_t B,
                            void (*ready)(void *arg, size_t lo), void *arg)
{
    float *d_dy = d_dlogits;
    int next = 0;
    tt_pass lp = *ps;
    for (size_t i = m->n_logits; i-- > 0;) {
        const tt_layer *l = &m->layers[i];
        if (l->in_epilogue) continue; /* its dy goes on to the layer before, which applies the relu's gradient */
        float *d_dx = i == 0 ? NULL : d_delta[next];
        /* --epilogues lt: the relu two layers down wrote its mask in the forward — this dx GEMM applies its gradient;
         * and this layer's own, where the layer above applied it */
        lp.relu_in = i >= 2 && link_taken(m, ps, i - 2) ? relu_link(m, ps, d_act, i - 2, B) : (tt_relu_link){0};
        lp.relu_applied = link_taken(m, ps, i);
        l->kind->backward(dev, l, &lp, d_params + l->offset, d_grads + l->offset, d_act[i], d_act[i + 1], d_dy, d_dx,
                          B);
        if (ready && l->n_params) ready(arg, l->offset);
        d_dy = d_dx;
        next ^= 1;
    }
}

void tt_model_idle(tt_dev *dev, const tt_model *m, const tt_pass *ps)
{
    if (!ps->xchg) return;
    for (size_t i = 0; i < m->n_logits; i++)
        if (!m->layers[i].in_epilogue && m->layers[i].kind->idle) m->layers[i].kind->idle(dev, &m->layers[i], ps, 0);
    for (size_t i = m->n_logits; i-- > 1;) /* the first layer computes no dx: no backward exchange */
        if (!m->layers[i].in_epilogue && m->layers[i].kind->idle) m->layers[i].kind->idle(dev, &m->layers[i], ps, 1);
}

void tt_model_backward(tt_dev *dev, const tt_model *m, const tt_pass *ps, const float *d_params, float *d_grads,
                       float *const *d_act, float *const *d_delta, float *d_dlogits, size_t B)
{
    tt_model_backward_each(dev, m, ps, d_params, d_grads, d_act, d_delta, d_dlogits, B, NULL, NULL);
}
