/* model.c — a model's layout table and its walk: once a builder has listed the layers (model_builtin.c, model_file.c),
 * their shapes layer by layer and the flat buffer's tensors laid out (model_finish; the non-trainable tail last), the
 * initialisation, the Keras-style summary, the cost tables (GEMMs, FLOPs, workspace, relu masks), and the forward /
 * backward walk over the layers. The per-layer math is in src/layers/; this file only chains them and reads their
 * tables (shapes, keys, tensors, GEMMs), never what a kind computes.
 * Not for: where the list of layers comes from (the built-ins: model_builtin.c; model files: model_file.c). */
#include <stdio.h>
#include <string.h>

#include "model_build.h"

void model_reset(tt_model *m, const tt_model_input *in, const char *source)
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
tt_status model_add(tt_model *m, const tt_layer_kind *kind, const tt_layer *proto, int fused, tt_error *err,
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

/* A tensor's size: the product of its shape, checked — one that wraps around (a 4096x4096 kernel over 2^24
 * channels, 65536 filters: 2^64 = 0), or does not fit in the 2^40 floats after the `used` ones, is refused (0), not
 * counted small. */
static int tensor_size(tt_tensor_info *t, size_t used)
{
    size_t elems = 1;
    int wrapped = 0;
    for (int d = 0; d < t->ndim; d++) wrapped |= tt_mul_size(elems, t->shape[d], &elems);
    if (wrapped || elems > ((size_t)1 << 40) - used) return 0;
    t->size = elems;
    return 1;
}

/* Layer i on the shape before it (*shape, then its output's): its setup, and its trainable tensors laid out from
 * *off. */
static tt_status layout_layer(tt_model *m, size_t i, tt_shape *shape, size_t *off, tt_error *err)
{
    tt_layer *l = &m->layers[i];
    if (l->kind->token_input) {
        if (i != 0)
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: an %s must be the first layer (its input is token ids)",
                           m->source, l->name, l->kind->name);
        m->vocab_from_input = l->vocab == 0;
        if (l->vocab == 0) l->vocab = m->vocab; /* the input's (the data's) vocabulary */
    }
    l->in_shape = *shape;
    l->in = tt_shape_elems(shape);
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
    *shape = l->out_shape;
    l->offset = *off;
    tt_tensor_info *t = &m->tensors[m->n_tensors];
    int nt = l->kind->tensors ? l->kind->tensors(l, t) : 0;
    size_t n = 0;
    for (int k = 0; k < nt; k++) {
        if (!tensor_size(&t[k], *off + n))
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: too many parameters", m->source, l->name);
        t[k].offset = *off + n;
        n += t[k].size;
    }
    l->n_params = n;
    *off += n;
    m->n_tensors += (size_t)nt;
    if (l->out > m->max_width) m->max_width = l->out;
    return TT_OK;
}

/* Layer l's non-trainable tensors (its stats) laid out from *off, and its floats kept from forward to backward. */
static tt_status layout_stats(tt_model *m, tt_layer *l, size_t *off, tt_error *err)
{
    l->stat_offset = *off;
    l->n_stats = 0;
    tt_tensor_info *t = &m->tensors[m->n_tensors];
    int nt = l->kind->stats ? l->kind->stats(l, t) : 0;
    for (int k = 0; k < nt; k++) {
        if (!tensor_size(&t[k], *off))
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: too many parameters", m->source, l->name);
        t[k].offset = *off;
        *off += t[k].size;
        l->n_stats += t[k].size;
    }
    m->n_tensors += (size_t)nt;
    l->save_offset = m->n_saved;
    m->n_saved += l->kind->saved ? l->kind->saved(l) : 0;
    return TT_OK;
}

/* Which relus run fused into the layer before them, and which of those cross into the next dx GEMM (--epilogues lt). */
static void mark_epilogues(tt_model *m)
{
    for (size_t i = 1; i < m->n_layers; i++) { /* the fused epilogues: a relu right after a layer that can run it */
        tt_layer *l = &m->layers[i];
        l->in_epilogue = l->kind == &tt_layer_relu && m->layers[i - 1].kind->relu_epilogue;
        m->layers[i - 1].relu_epilogue = l->in_epilogue;
    }
    for (size_t i = 0; i + 2 < m->n_layers; i++) { /* --epilogues lt: a relu's gradient in the next dx GEMM */
        tt_layer *l = &m->layers[i];
        l->lt_mask = l->kind->lt_relu_link && l->relu_epilogue && l->use_bias && m->layers[i + 2].kind->lt_relu_link;
    }
}

/* Shapes layer by layer, then the layout table and the totals. */
tt_status model_finish(tt_model *m, tt_error *err)
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
        tt_status s = layout_layer(m, i, &shape, &off, err);
        if (s) return s;
    }
    /* the non-trainable tail: every layer's stats tensors after all trainable ones (one split for the optimizer);
     * and each layer's floats kept from forward to backward */
    m->n_trainable = off;
    m->n_saved = 0;
    for (size_t i = 0; i < m->n_layers; i++) {
        tt_status s = layout_stats(m, &m->layers[i], &off, err);
        if (s) return s;
    }
    mark_epilogues(m);
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
    if (ps->fmt && !m->token_vocab) tt_dev_round16(dev, d_act[0], B * m->input_dim, ps->fmt);
    for (size_t i = 0; i < m->n_logits; i++) {
        const tt_layer *l = &m->layers[i];
        if (l->in_epilogue) continue; /* the layer before ran it, in place */
        const int mask = ps->d_masks && ps->training && l->lt_mask;
        lp.mask_out = mask ? relu_link(m, ps, d_act, i, B) : (tt_relu_link){0};
        if (ps->lt_masked) ps->lt_masked[i] = 0; /* the layer's forward sets it where the backend wrote the mask */
        l->kind->forward(dev, l, &lp, d_params + l->offset, d_act[i], d_act[i + 1], B);
        if (ps->fmt) tt_dev_round16(dev, d_act[i + 1], B * l->out, ps->fmt); /* after its epilogue's relu too */
    }
}

void tt_model_backward_each(tt_dev *dev, const tt_model *m, const tt_pass *ps, const float *d_params, float *d_grads,
                            float *const *d_act, float *const *d_delta, float *d_dlogits, size_t B,
                            void (*ready)(void *arg, size_t lo), void *arg)
{
    float *d_dy = d_dlogits;
    int next = 0;
    tt_pass lp = *ps;
    if (ps->fmt) tt_dev_round16(dev, d_dlogits, B * m->n_classes, ps->fmt);
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
        if (d_dx && ps->fmt) tt_dev_round16(dev, d_dx, B * l->in, ps->fmt);
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
