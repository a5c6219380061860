/* shards.c — how a run's samples are cut: a step's shards over the towers (and, across K ranks, over every tower of
 * the job), a rank's slice of the buffer, and the shard schedule of the sync modes that take shards one at a time
 * (ssp, async) or keep per-step accounts of their own (weights): sync_state's counters. */
#include "step.h"

/* Shard t of n samples over N towers: the first n % N towers take one extra row. */
void shard_of(size_t n, size_t N, size_t t, size_t *lo, size_t *rows)
{
    const size_t base = n / N, extra = n % N;
    *rows = base + (t < extra);
    *lo = t * base + (t < extra ? t : extra);
}

/* Rows a tower must hold: the largest shard of a batch over every tower of the job. */
size_t shard_rows(const tt_trainer_config *cfg)
{
    const size_t G = cfg->n_towers * (multi_node(cfg) ? (size_t)cfg->node->size : 1);
    return (cfg->batch + G - 1) / G;
}

/* The part of the buffer this rank updates and keeps the optimizer's state of: its slice under ps, else all. */
void owned_slice(const tt_trainer_config *cfg, size_t P, size_t *lo, size_t *n)
{
    *lo = 0;
    *n = P;
    if (multi_node(cfg) && cfg->node_reduce == TT_NODE_PS) tt_node_slice(P, cfg->node->size, cfg->node->rank, lo, n);
}

/* Tower t's shard of a step (or an evaluation) of n samples: with K ranks, global tower rank*N + t of K*N, so K
 * ranks of N towers take exactly the shards one process of K*N towers would. */
void tower_shard(const tt_trainer_config *cfg, size_t n, size_t t, size_t *lo, size_t *rows)
{
    const size_t N = cfg->n_towers, K = multi_node(cfg) ? (size_t)cfg->node->size : 1;
    const size_t rank = K > 1 ? (size_t)cfg->node->rank : 0;
    shard_of(n, K * N, rank * N + t, lo, rows);
}

/* The samples of step st of the run and its shard count. */
size_t sync_step_n(const tt_trainer *tr, size_t st)
{
    const size_t B = tr->cfg.batch;
    return tr->n - st * B < B ? tr->n - st * B : B;
}
size_t sync_step_shards(const tt_trainer *tr, size_t st)
{
    const size_t n = sync_step_n(tr, st), N = tr->cfg.n_towers;
    return n < N ? n : N;
}

/* A stop asked for (by a signal or tt_trainer_request_stop). */
int stop_asked(const tt_trainer *tr)
{
    return (tr->cfg.stop && atomic_load(tr->cfg.stop)) || atomic_load(&tr->stop_request);
}

/* A run of steps under ssp or async: room for its steps' counters, every counter at the start. */
tt_status sync_begin(tt_trainer *tr, size_t steps, tt_error *err)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers;
    if (steps > sy->cap) {
        uint32_t *left = (uint32_t *)tt_calloc(steps, sizeof *left);
        double *span = (double *)tt_calloc(steps, sizeof *span);
        struct wstat *ws = (struct wstat *)tt_calloc(steps * N, sizeof *ws);
        if (!left || !span || !ws) {
            tt_free(left);
            tt_free(span);
            tt_free(ws);
            return tt_fail(err, TT_ERR_NOMEM, "out of host memory for %zu steps' counters", steps);
        }
        tt_free(sy->left);
        tt_free(sy->span);
        tt_free(sy->ws);
        sy->left = left;
        sy->span = span;
        sy->ws = ws;
        sy->cap = steps;
    }
    sy->steps = steps;
    sy->shards = 0;
    for (size_t st = 0; st < steps; st++) {
        sy->left[st] = (uint32_t)sync_step_shards(tr, st);
        sy->span[st] = 0;
        sy->shards += sy->left[st];
    }
    sy->next = sy->pulled = sy->applied = 0;
    sy->limit = sy->shards;
    sy->bad_step = SIZE_MAX;
    sy->version = 0;
    sy->stop = 0;
    for (size_t t = 0; t < N; t++) sy->clock[t] = 0;
    return TT_OK;
}

/* --sync other than bsp: the shards' schedule (ssp, async) and the averages' accounts (weights). */
tt_status sync_init(tt_trainer *tr, int T, tt_error *err)
{
    const size_t N = tr->cfg.n_towers;
    sync_state *sy = (sync_state *)tt_calloc(1, sizeof *sy);
    if (sy) {
        sy->clock = (size_t *)tt_calloc(N, sizeof *sy->clock);
        sy->dist = (double *)tt_calloc((size_t)T * N, sizeof *sy->dist);
        sy->tw_done = (size_t *)tt_calloc(N, sizeof *sy->tw_done);
        sy->bad_loss = (int *)tt_calloc(2 * N, sizeof(int));
        sy->bad_grad = sy->bad_loss ? sy->bad_loss + N : NULL;
    }
    if (!sy || !sy->clock || !sy->dist || !sy->tw_done || !sy->bad_loss) {
        if (sy) tt_free(sy->clock), tt_free(sy->dist), tt_free(sy->tw_done), tt_free(sy->bad_loss), tt_free(sy);
        return tt_fail(err, TT_ERR_NOMEM, "out of host memory for --sync's counters");
    }
    pthread_mutex_init(&sy->mu, NULL);
    pthread_cond_init(&sy->cv, NULL);
    tr->sy = sy;
    return TT_OK;
}

void sync_free(tt_trainer *tr)
{
    sync_state *sy = tr->sy;
    if (!sy) return;
    pthread_mutex_destroy(&sy->mu);
    pthread_cond_destroy(&sy->cv);
    tt_free(sy->clock);
    tt_free(sy->dist);
    tt_free(sy->left);
    tt_free(sy->span);
    tt_free(sy->ws);
    tt_free(sy->tw_done);
    tt_free(sy->bad_loss);
    tt_free(sy);
    tr->sy = NULL;
}
