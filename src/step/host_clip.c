/* host_clip.c — --clipnorm and --global-clipnorm: Keras 3's clips that need the norm of the whole summed gradient
 * before any of it is applied (BaseOptimizer._clip_gradients; clipvalue and the weight decay are per element,
 * tt_decay_clip_elem). The step becomes three phases on the host crew: the sum into h_grad (where it is not there
 * already), each block's squares, then — after a barrier whose serial section turns them into the clip's factors —
 * the update, each block clipped on its way to the optimizer.
 *
 * The squares are summed in double in a fixed order: each block (TT_REDUCE_BLOCK floats, the crew's unit of work) by
 * the variables it holds ("pieces"), then every variable's pieces in block order. No thread count, placement or
 * tower count changes a bit: --reduce cpu, device and allreduce push the same sum, and their norms agree. Keras sums
 * in float32 in TensorFlow's order: the factors agree with its to float rounding.
 *   clipnorm c:         g <- g * c / max(||g_v||, c), for the variable v that holds g (every variable: Keras applies
 *                       it even below c, so the division rounds as Keras's does)
 *   global_clipnorm c:  g <- g * (c * min(1 / ||g||, 1 / c)), ||g|| over every trainable variable
 * The non-trainable tail (batchnorm's moving statistics) is neither counted nor clipped: it has no gradient. */
#include <math.h>

#include "step.h"

struct clip_state {
    size_t n_pieces;
    size_t *lo, *hi;   /* piece k is positions [lo[k], hi[k]) ... */
    size_t *var;       /* ... of variable var[k] (a tensor of the model) */
    size_t *first;     /* block b's pieces are first[b] .. first[b + 1] - 1 */
    double *sq;        /* this step's sum of squares of each piece */
    float *factor;     /* per variable: clipnorm's max(norm, c); global_clipnorm: the one scale (factor[0]) */
    size_t n_vars, n_blocks;
};

int clip_by_norm(const tt_trainer_config *cfg) { return cfg->optim.clipnorm > 0 || cfg->optim.global_clipnorm > 0; }

void clip_free(clip_state *c)
{
    if (!c) return;
    tt_free(c->lo);
    tt_free(c->hi);
    tt_free(c->var);
    tt_free(c->first);
    tt_free(c->sq);
    tt_free(c->factor);
    tt_free(c);
}

tt_status clip_init(tt_trainer *tr, tt_error *err)
{
    const tt_model *m = tr->model;
    const size_t T = m->n_trainable, blocks = (T + TT_REDUCE_BLOCK - 1) / TT_REDUCE_BLOCK;
    clip_state *c = (clip_state *)tt_calloc(1, sizeof *c);
    if (!c) return tt_fail(err, TT_ERR_NOMEM, "out of memory for the gradient clip");
    tr->clip = c;
    size_t vars = 0;
    while (vars < m->n_tensors && m->tensors[vars].offset < T) vars++; /* the trainable tensors come first */
    const size_t most = blocks + vars; /* each block boundary inside a variable splits one more piece */
    c->lo = (size_t *)tt_malloc(most * sizeof(size_t));
    c->hi = (size_t *)tt_malloc(most * sizeof(size_t));
    c->var = (size_t *)tt_malloc(most * sizeof(size_t));
    c->first = (size_t *)tt_malloc((blocks + 1) * sizeof(size_t));
    c->sq = (double *)tt_malloc(most * sizeof(double));
    c->factor = (float *)tt_malloc((vars ? vars : 1) * sizeof(float));
    if (!c->lo || !c->hi || !c->var || !c->first || !c->sq || !c->factor)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory for the gradient clip");
    c->n_vars = vars;
    c->n_blocks = blocks;
    size_t v = 0;
    for (size_t b = 0; b < blocks; b++) {
        const size_t b0 = b * TT_REDUCE_BLOCK, b1 = b0 + TT_REDUCE_BLOCK < T ? b0 + TT_REDUCE_BLOCK : T;
        c->first[b] = c->n_pieces;
        for (size_t at = b0; at < b1;) {
            while (v < vars && m->tensors[v].offset + m->tensors[v].size <= at) v++;
            TT_ASSERT(v < vars && m->tensors[v].offset <= at); /* the trainable tensors tile [0, T) */
            const size_t end = m->tensors[v].offset + m->tensors[v].size < b1 ? m->tensors[v].offset + m->tensors[v].size
                                                                               : b1;
            c->lo[c->n_pieces] = at;
            c->hi[c->n_pieces] = end;
            c->var[c->n_pieces++] = v;
            at = end;
        }
    }
    c->first[blocks] = c->n_pieces;
    return TT_OK;
}

/* Thread i of T: the squares of its blocks' pieces of grad (the summed gradient, position 0 at grad[0]). */
static void clip_squares(tt_trainer *tr, const float *grad, int i, int T)
{
    clip_state *c = tr->clip;
    size_t lo, hi; /* the sum pass's slice (host_slice): this thread reads only the blocks it summed */
    block_slice(0, tr->model->n_params, i, T, &lo, &hi);
    hi = hi < tr->model->n_trainable ? hi : tr->model->n_trainable;
    if (lo >= hi) return; /* an empty slice (more threads than blocks): no block of its own to read */
    for (size_t b = lo / TT_REDUCE_BLOCK; b * TT_REDUCE_BLOCK < hi; b++)
        for (size_t k = c->first[b]; k < c->first[b + 1]; k++) c->sq[k] = tt_sum_squares(grad + c->lo[k], c->hi[k] - c->lo[k]);
}

/* The serial section after the squares: each variable's norm (its pieces in order), then the factors. */
static void clip_factors(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    clip_state *c = tr->clip;
    const tt_optim_config *o = &tr->opt.cfg;
    double total = 0;
    size_t k = 0;
    for (size_t v = 0; v < c->n_vars; v++) {
        double s = 0;
        for (; k < c->n_pieces && c->var[k] == v; k++) s += c->sq[k];
        total += s;
        if (o->clipnorm > 0) c->factor[v] = tt_clipnorm_divisor(o, s);
    }
    if (o->global_clipnorm > 0) c->factor[0] = tt_global_clip_scale(o, total);
}

void clip_block(const tt_trainer *tr, const float *g, float *out, size_t b, size_t len)
{
    const clip_state *c = tr->clip;
    const tt_optim_config *o = &tr->opt.cfg;
    const size_t T = tr->model->n_trainable, n = b >= T ? 0 : b + len <= T ? len : T - b;
    if (o->global_clipnorm > 0) {
        const float s = c->factor[0];
        for (size_t k = 0; k < n; k++) out[k] = g[k] * s;
    } else if (n) {
        const size_t blk = b / TT_REDUCE_BLOCK;
        for (size_t p = c->first[blk]; p < c->first[blk + 1]; p++) {
            const float cn = o->clipnorm, d = c->factor[c->var[p]];
            for (size_t at = c->lo[p]; at < c->hi[p]; at++) out[at - b] = tt_clipnorm_elem(g[at - b], cn, d);
        }
    }
    for (size_t k = n; k < len; k++) out[k] = g[k]; /* the tail */
}

/* The step's host part with a norm clip (bsp, --update host, one rank): the sum where the towers' slots hold it, the
 * squares, the factors (the barrier's serial section), the clipped update. */
void host_clip_step(tt_trainer *tr, int i, int T)
{
    const size_t P = tr->model->n_params, N = tr->cfg.n_towers;
    const int host_sum = tr->place->info.host_sum, summed = host_sum && (N > 1 || tr->h_params16);
    if (summed && !tr->skip_step) {
        const host_pass sum = {0, P, 1, tr->h_grad, NULL, 0, 0};
        host_slice(tr, &sum, i, T, NULL, NULL);
    }
    const float *grad = host_sum && !summed ? tr->h_slots[0] : tr->h_grad;
    if (!tr->skip_step) clip_squares(tr, grad, i, T);
    tt_barrier_wait(&tr->bar_reduce, clip_factors, tr);
    if (tr->skip_step) return; /* the 16-bit gradient overflowed: nothing applied (as the fused pass) */
    const host_pass upd = {0, P, 0, NULL, grad, 1, 0};
    host_slice(tr, &upd, i, T, NULL, NULL);
}
