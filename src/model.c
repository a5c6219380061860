/* model.c — building a model (built-in or from a model file), its layout table, initialisation, and the
 * forward / backward walk over the layers. The per-layer math is in src/layers/; this file only chains them. */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_input.h"
#include "tt_model.h"

static void model_reset(tt_model *m, size_t input_dim, size_t n_classes, const char *source)
{
    memset(m, 0, sizeof *m);
    m->input_dim = input_dim;
    m->input_shape = tt_shape1(input_dim);
    m->n_classes = n_classes;
    tt_escape(source, m->source, sizeof m->source); /* for display only: a control byte in a path stays inert */
}

/* Appends a layer whose input is the previous layer's output. Counts per kind give Keras-like names. */
static tt_status model_add(tt_model *m, const tt_layer_kind *kind, size_t out, tt_error *err, const char *where)
{
    if (m->n_layers == TT_MAX_LAYERS)
        return tt_fail(err, TT_ERR_MODEL, "%s: too many layers (at most %d)", where, TT_MAX_LAYERS);
    tt_layer *l = &m->layers[m->n_layers];
    int same = 1;
    for (size_t i = 0; i < m->n_layers; i++) same += m->layers[i].kind == kind;
    l->kind = kind;
    snprintf(l->name, sizeof l->name, "%s_%d", kind->name, same);
    l->in = m->n_layers ? m->layers[m->n_layers - 1].out : m->input_dim;
    l->out = out ? out : l->in;
    m->n_layers++;
    return TT_OK;
}

/* Fills offsets, the layout table and the totals once every layer is added. */
static tt_status model_finish(tt_model *m, tt_error *err)
{
    if (m->n_layers == 0) return tt_fail(err, TT_ERR_MODEL, "%s: the model has no layers", m->source);
    size_t last = m->layers[m->n_layers - 1].out;
    if (last != m->n_classes)
        return tt_fail(err, TT_ERR_MODEL,
                       "%s: the last layer has %zu outputs but the data has %zu classes (end with dense units=%zu)",
                       m->source, last, m->n_classes, m->n_classes);
    size_t off = 0;
    m->n_tensors = 0;
    m->max_width = m->input_dim;
    for (size_t i = 0; i < m->n_layers; i++) {
        tt_layer *l = &m->layers[i];
        l->offset = off;
        tt_tensor_info *t = &m->tensors[m->n_tensors];
        int nt = l->kind->tensors(l, t);
        size_t n = 0;
        for (int k = 0; k < nt; k++) {
            t[k].offset = off + n;
            n += t[k].size;
        }
        l->n_params = n;
        off += n;
        m->n_tensors += (size_t)nt;
        if (l->out > m->max_width) m->max_width = l->out;
    }
    m->n_params = off;
    return TT_OK;
}

tt_status tt_model_mlp(tt_model *m, size_t input_dim, size_t n_classes, tt_error *err)
{
    model_reset(m, input_dim, n_classes, "built-in mlp");
    m->builtin = 1;
    tt_status s = TT_OK;
    if (s == TT_OK) s = model_add(m, &tt_layer_dense, 256, err, m->source);
    if (s == TT_OK) s = model_add(m, &tt_layer_relu, 0, err, m->source);
    if (s == TT_OK) s = model_add(m, &tt_layer_dense, 256, err, m->source);
    if (s == TT_OK) s = model_add(m, &tt_layer_relu, 0, err, m->source);
    if (s == TT_OK) s = model_add(m, &tt_layer_dense, n_classes, err, m->source);
    if (s == TT_OK) s = model_finish(m, err);
    return s;
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

static void add_note(tt_model *m, const char *fmt, const char *a, size_t line, const char *b, const char *c)
{
    size_t len = strlen(m->notes);
    if (len + 1 >= sizeof m->notes) return;
    snprintf(m->notes + len, sizeof m->notes - len, fmt, a, line, b, c);
}

tt_status tt_model_parse(tt_model *m, const char *text, const char *path, size_t input_dim, size_t n_classes,
                         tt_error *err)
{
    model_reset(m, input_dim, n_classes, path);
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
        char *kind = strtok_r(line, " \t\r", &save);
        if (!kind) continue;
        for (char *c = line; *c; c++)
            if ((unsigned char)*c < 0x20 && *c != '\t' && *c != '\r')
                return tt_fail(err, TT_ERR_MODEL, "%s:%zu: control character in the model file", path, lineno);

        /* key=value pairs */
        size_t units = 0, size = 0;
        int has_units = 0, has_size = 0, has_act = 0, act_relu = 0;
        char *tok;
        int is_dense = strcmp(kind, "dense") == 0, is_relu = strcmp(kind, "relu") == 0,
            is_input = strcmp(kind, "input") == 0;
        if (!is_dense && !is_relu && !is_input)
            return tt_fail(err, TT_ERR_MODEL, "%s:%zu: unknown layer '%s' (known: input, dense, relu)", path, lineno,
                           kind);
        while ((tok = strtok_r(NULL, " \t\r", &save)) != NULL) {
            char *eq = strchr(tok, '=');
            if (!eq || eq == tok)
                return tt_fail(err, TT_ERR_MODEL, "%s:%zu: %s: expected key=value, got '%s'", path, lineno, kind,
                               tok);
            *eq = '\0';
            const char *key = tok, *val = eq + 1;
            if (is_dense && strcmp(key, "units") == 0) {
                if (has_units) return tt_fail(err, TT_ERR_MODEL, "%s:%zu: dense: units given twice", path, lineno);
                if (parse_size(val, 1, TT_MAX_WIDTH, &units))
                    return tt_fail(err, TT_ERR_MODEL, "%s:%zu: dense: units must be an integer in 1..%d, got '%s'",
                                   path, lineno, TT_MAX_WIDTH, val);
                has_units = 1;
            } else if (is_dense && strcmp(key, "activation") == 0) {
                if (has_act)
                    return tt_fail(err, TT_ERR_MODEL, "%s:%zu: dense: activation given twice", path, lineno);
                if (strcmp(val, "relu") == 0)
                    act_relu = 1;
                else if (strcmp(val, "linear") != 0)
                    return tt_fail(err, TT_ERR_MODEL,
                                   "%s:%zu: dense: activation must be relu or linear, got '%s'", path, lineno, val);
                has_act = 1;
            } else if (is_input && strcmp(key, "size") == 0) {
                if (parse_size(val, 1, (size_t)1 << 24, &size))
                    return tt_fail(err, TT_ERR_MODEL, "%s:%zu: input: size must be a positive integer, got '%s'",
                                   path, lineno, val);
                has_size = 1;
            } else {
                return tt_fail(err, TT_ERR_MODEL, "%s:%zu: %s: unknown key '%s'", path, lineno, kind, key);
            }
        }
        tt_status s = TT_OK;
        char where[160];
        snprintf(where, sizeof where, "%s:%zu", path, lineno);
        if (is_input) {
            if (m->n_layers)
                return tt_fail(err, TT_ERR_MODEL, "%s: input must come before every layer", where);
            if (seen_input) return tt_fail(err, TT_ERR_MODEL, "%s: input given twice", where);
            seen_input = 1;
            if (!has_size) return tt_fail(err, TT_ERR_MODEL, "%s: input: size= is required", where);
            if (size != input_dim)
                return tt_fail(err, TT_ERR_MODEL, "%s: input size=%zu but the data has %zu features per sample",
                               where, size, input_dim);
        } else if (is_dense) {
            if (!has_units) return tt_fail(err, TT_ERR_MODEL, "%s: dense: units= is required", where);
            if (!has_act)
                add_note(m, "%s:%zu: dense: %s%s\n", m->source, lineno, "activation not given, using default ",
                         "'linear'");
            s = model_add(m, &tt_layer_dense, units, err, where);
            if (s == TT_OK && act_relu) s = model_add(m, &tt_layer_relu, 0, err, where);
        } else {
            s = model_add(m, &tt_layer_relu, 0, err, where);
        }
        if (s != TT_OK) return s;
    }
    return model_finish(m, err);
}

tt_status tt_model_load(tt_model *m, const char *path, size_t input_dim, size_t n_classes, tt_error *err)
{
    char *text = NULL;
    size_t len = 0;
    /* regular files only (a FIFO would block), at most 1 MiB, no NUL byte: tt_model_parse gets a C string */
    tt_status s = tt_input_read_text(path, "model file", (size_t)1 << 20, &text, &len, err);
    if (s) return s;
    s = tt_model_parse(m, text, path, input_dim, n_classes, err);
    tt_free(text);
    return s;
}

const char *tt_model_file(const tt_model *m) { return m->builtin ? NULL : m->source; }

/* ---- initialisation, summary, cost ------------------------------------------------------------------------- */

void tt_model_init_params(const tt_model *m, float *h_params, uint64_t seed)
{
    for (size_t i = 0; i < m->n_layers; i++) {
        tt_rng rng;
        tt_rng_seed(&rng, seed, 1000 + i); /* one stream per layer: adding a layer does not shift the others */
        m->layers[i].kind->init(&m->layers[i], h_params + m->layers[i].offset, &rng);
    }
}

void tt_model_summary(const tt_model *m, void *fp)
{
    FILE *f = (FILE *)fp;
    fprintf(f, "Model (%s)\n", m->source);
    fprintf(f, "  %-12s %-14s %10s\n", "Layer", "Output shape", "Param #");
    for (size_t i = 0; i < m->n_layers; i++) {
        char shape[32];
        snprintf(shape, sizeof shape, "(None, %zu)", m->layers[i].out);
        fprintf(f, "  %-12s %-14s %10zu\n", m->layers[i].name, shape, m->layers[i].n_params);
    }
    fprintf(f, "  Total params: %zu (%.2f MB as float32)\n", m->n_params, (double)m->n_params * 4.0 / 1e6);
}

double tt_model_forward_flops(const tt_model *m)
{
    double f = 0;
    for (size_t i = 0; i < m->n_layers; i++)
        if (m->layers[i].kind == &tt_layer_dense) f += 2.0 * (double)m->layers[i].in * (double)m->layers[i].out;
    return f;
}

double tt_model_train_flops(const tt_model *m)
{
    /* forward GEMM + weight-gradient GEMM for every dense layer, input-gradient GEMM for all but the first */
    double f = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        if (m->layers[i].kind != &tt_layer_dense) continue;
        double g = 2.0 * (double)m->layers[i].in * (double)m->layers[i].out;
        f += i == 0 ? 2 * g : 3 * g;
    }
    return f;
}

/* ---- forward / backward ------------------------------------------------------------------------------------ */

void tt_model_forward(tt_dev *dev, const tt_model *m, const float *d_params, float *const *d_act, size_t B)
{
    for (size_t i = 0; i < m->n_layers; i++) {
        const tt_layer *l = &m->layers[i];
        l->kind->forward(dev, l, d_params + l->offset, d_act[i], d_act[i + 1], B);
    }
}

void tt_model_backward(tt_dev *dev, const tt_model *m, const float *d_params, float *d_grads,
                       float *const *d_act, float *const *d_delta, const float *d_dlogits, size_t B)
{
    const float *d_dy = d_dlogits;
    int next = 0;
    for (size_t i = m->n_layers; i-- > 0;) {
        const tt_layer *l = &m->layers[i];
        float *d_dx = i == 0 ? NULL : d_delta[next];
        l->kind->backward(dev, l, d_params + l->offset, d_grads + l->offset, d_act[i], d_act[i + 1], d_dy, d_dx, B);
        d_dy = d_dx;
        next ^= 1;
    }
}
