/* sync_ssp.c — --sync ssp:S and async: each tower takes the next shard, pulls the newest master weights, and
 * applies its gradient alone as it arrives, under the master variables' lock; under ssp a tower runs at most S shards
 * ahead of the slowest (async: no bound). */
#include <math.h>

#include "step.h"

static size_t clock_min(const sync_state *sy, size_t N)
{
    size_t m = SIZE_MAX;
    for (size_t t = 0; t < N; t++) m = sy->clock[t] < m ? sy->clock[t] : m;
    return m;
}

/* The step holding shard j, and the first shard after that step. */
static size_t sync_step_of(const sync_state *sy, size_t j, size_t N) { return j / N < sy->steps ? j / N : sy->steps - 1; }
static size_t sync_step_end(const sync_state *sy, size_t st, size_t N)
{
    return st + 1 < sy->steps ? (st + 1) * N : sy->shards;
}

/* A stop (a signal, tt_trainer_request_stop) or a halt (under mu). A stop: the towers take the rest of the step in
 * flight — the step of the last shard taken — and no shard after it, so every gradient applied belongs to a finished
 * step (the log's, a checkpoint's). A non-finite gradient (shard j_bad): the run ends with that shard's step, as bsp's
 * ends with its step; shards of later steps in flight are dropped, not applied. The earliest such step wins, and a
 * non-finite gradient's halt outranks a stop. */
static void sync_close(tt_trainer *tr, tt_halt why, size_t j_bad)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers;
    if (tr->halt == TT_HALT_NONE || why == TT_HALT_NONFINITE) tr->halt = why;
    size_t end;
    if (why == TT_HALT_NONFINITE) {
        end = sync_step_end(sy, sync_step_of(sy, j_bad, N), N);
    } else {
        if (sy->stop) return;
        const size_t taken = tr->cfg.sync.round_robin ? sy->pulled : sy->next;
        end = taken ? sync_step_end(sy, sync_step_of(sy, taken - 1, N), N) : 0;
    }
    sy->stop = 1;
    sy->limit = end < sy->limit ? end : sy->limit;
}

/* Shard j's step's results get this shard (under mu); a step whose shards are all applied is done, and the run's
 * finished steps are its prefix of done steps. */
static void sync_account(tt_trainer *tr, tt_tower *tw, size_t st, size_t s, double t_begin, int applied)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers, shards = sync_step_shards(tr, st);
    tt_step_result *res = &tr->results[st];
    const tt_tower_ledger *l = &tw->led;
    if (sy->left[st] == shards) {
        memset(res, 0, sizeof *res);
        res->t.step0 = t_begin;
    }
    res->n += tw->rows;
    res->loss_sum += tw->loss_sum;
    res->top1 += tw->top1;
    res->top5 += tw->top5;
    res->t.pull += l->pull1 - l->pull0;
    res->t.data += l->data1 - l->pull1;
    res->t.compute += l->compute1 - l->data1;
    res->t.push += l->push1 - l->compute1;
    res->t.wait += l->wait;
    res->t.update += l->update1 - l->update0;
    res->t.step0 = t_begin < res->t.step0 ? t_begin : res->t.step0;
    res->t.step1 = l->update1 > res->t.step1 ? l->update1 : res->t.step1;
    res->t.update0 = l->update0;
    res->t.update1 = l->update1;
    sy->span[st] += l->update1 - t_begin;
    res->applied += applied != 0; /* a non-finite gradient came back but was not applied */
    res->staleness_sum += l->staleness;
    res->staleness_max = l->staleness > res->staleness_max ? l->staleness : res->staleness_max;
    res->lr = tr->opt.lr_now;
    if (tr->ledger) tr->ledger[st * N + s] = *l;
    if (--sy->left[st]) return;
    for (size_t e = shards; tr->ledger && e < N; e++) { /* a short last step's empty shards: nobody ran them */
        memset(&tr->ledger[st * N + e], 0, sizeof *tr->ledger);
        tr->ledger[st * N + e].tower = e;
    }
    /* the means over the step's shards; total is a shard's mean span, the rest of it the gaps between phases */
    const double k = (double)shards;
    tt_step_times *t = &res->t;
    t->pull /= k, t->data /= k, t->compute /= k, t->push /= k, t->wait /= k, t->update /= k;
    t->total = sy->span[st] / k;
    t->towers = t->total - t->update;
    t->launch = t->towers - (t->pull + t->data + t->compute + t->push + t->wait);
    if (t->launch < 0) t->launch = 0;
    while (tr->cur_step < sy->steps && sy->left[tr->cur_step] == 0) {
        tr->cur_step++;
        tr->steps++;
    }
    atomic_store(&tr->steps_done, tr->cur_step);
}

/* Tower i's loop: take a shard (the next one; round robin: every N-th), wait for the bound, pull the newest master
 * weights under the lock, compute and push the gradient (the step's own phase functions), then apply it alone under
 * the lock, one optimizer step per gradient. Round robin makes the order fixed: shard j pulls after shard j - N + 1
 * - 1 is applied and before the next apply, and the applies go in shard order. */
void ssp_run(tt_trainer *tr, int i, int T)
{
    (void)T;
    const size_t N = tr->cfg.n_towers, B = tr->cfg.batch, P = tr->model->n_params;
    if ((size_t)i >= N) return; /* the host's own threads: each tower applies its gradient itself */
    tt_tower *tw = &tr->towers[i];
    sync_state *sy = tr->sy;
    const int rr = tr->cfg.sync.round_robin;
    const size_t S = tr->mode->caps & SYNC_BOUNDED ? tr->cfg.sync.k : SIZE_MAX;
    pthread_mutex_lock(&sy->mu);
    for (;;) {
        const double t_begin = tt_now();
        live(tw, TT_LIVE_WAIT);
        if (stop_asked(tr)) sync_close(tr, TT_HALT_STOP, 0);
        /* the bound: the slowest tower still working always may go on, so this wait ends */
        while (S != SIZE_MAX && sy->clock[i] > clock_min(sy, N) + S) pthread_cond_wait(&sy->cv, &sy->mu);
        const size_t j = rr ? (size_t)i + sy->clock[i] * N : sy->next;
        if (j >= sy->limit) break;
        if (rr) { /* pulls in shard order, shard j after shard j - N is applied; a stop may end the run before j */
            while (j < sy->limit && !(sy->pulled == j && j + 1 <= sy->applied + N)) pthread_cond_wait(&sy->cv, &sy->mu);
            if (j >= sy->limit) break;
        } else {
            sy->next++;
        }
        const size_t st = sync_step_of(sy, j, N), s = j - st * N;
        const size_t n = sync_step_n(tr, st);
        const double t_pull = tt_now();
        const double waited = t_pull - t_begin;
        live(tw, TT_LIVE_PULL);
        tt_dev_h2d(&tw->dev, tw->d_params, tr->h_params, P * sizeof(float)); /* the newest weights */
        tt_dev_sync(&tw->dev);
        const uint64_t v_pull = sy->version;
        if (rr) sy->pulled++;
        pthread_cond_broadcast(&sy->cv);
        pthread_mutex_unlock(&sy->mu);

        shard_of(n, N, s, &tw->lo, &tw->rows);
        tw->skip_pull = 1;
        tower_step(tw, tr->idx + st * B, n, 0);
        tw->skip_pull = 0;
        tt_tower_ledger *l = &tw->led;
        l->pull0 = t_pull;
        l->bytes_pull = P * sizeof(float);
        l->tower = (size_t)i;

        live(tw, TT_LIVE_WAIT);
        const double t_lock = tt_now();
        pthread_mutex_lock(&sy->mu);
        if (rr) /* applies in shard order, each after the pulls that must see the weights before it */
            while (j < sy->limit && !(sy->applied == j && sy->pulled >= (j + N < sy->limit ? j + N : sy->limit)))
                pthread_cond_wait(&sy->cv, &sy->mu);
        if (j >= sy->limit) { /* a later step's shard, after a non-finite gradient: dropped */
            sy->clock[i]++;
            pthread_cond_broadcast(&sy->cv);
            continue;
        }
        live(tw, TT_LIVE_HOST);
        l->update0 = tt_now();
        l->wait = waited + (l->update0 - t_lock);
        l->staleness = (uint32_t)(sy->version - v_pull);
        /* the whole gradient or none of it: a loss or a gradient that is not finite is not applied, and halts the
         * run at the end of its step */
        const int finite = isfinite(tw->loss_sum) && tt_all_finite(tr->h_slots[i], P);
        if (finite) {
            tt_optim_begin_step(&tr->opt);
            tt_optim_apply(&tr->opt, tr->h_params, tr->h_slots[i], 0, P);
            sy->version++;
        } else {
            tr->loss_nonfinite |= !isfinite(tw->loss_sum);
            atomic_store(&tr->grad_nonfinite, 1);
            sync_close(tr, TT_HALT_NONFINITE, j);
        }
        l->update1 = tt_now();
        if (rr) sy->applied++;
        sy->clock[i]++;
        sync_account(tr, tw, st, s, t_begin, finite);
        pthread_cond_broadcast(&sy->cv);
    }
    sy->clock[i] = SIZE_MAX; /* the bound no longer waits for this tower */
    pthread_cond_broadcast(&sy->cv);
    pthread_mutex_unlock(&sy->mu);
    live(tw, TT_LIVE_IDLE);
}
