/* sync_weights.c — --sync weights:K, local SGD: every tower trains its own weights with its own optimizer state,
 * and every K steps the host averages the towers' weights (and at a run's end their optimizer vectors). */
#include <math.h>

#include "step.h"

/* Every tower's weights (or optimizer vector `vec`: 0 m, 1 v, 2 a) pushed into its slot; the host's crew averages
 * them in tower order into dst (whole blocks per thread); with dist, each thread's squared distances of every tower
 * from the average. Tower threads push, then every crew thread averages: two barriers. */
static float *optim_vec(tt_optim *o, int vec) { return vec == 0 ? o->m : vec == 1 ? o->v : o->a; }
static float *tower_vec(tt_tower *tw, int vec)
{
    return vec < 0 ? tw->d_params : vec == 0 ? tw->d_m : vec == 1 ? tw->d_v : tw->d_a;
}

static void weights_average(tt_trainer *tr, int i, int T, int vec, float *dst, double *dist)
{
    const size_t N = tr->cfg.n_towers, P = tr->model->n_params;
    tt_tower *tw = (size_t)i < N ? &tr->towers[i] : NULL;
    if (tw) {
        live(tw, TT_LIVE_PUSH);
        tt_dev_d2h(&tw->dev, tr->h_slots[i], tower_vec(tw, vec), P * sizeof(float));
        tt_dev_sync(&tw->dev);
        live(tw, TT_LIVE_HOST);
    }
    tt_barrier_wait(&tr->bar_reduce, NULL, NULL);
    size_t lo, hi;
    block_slice(0, P, i, T, &lo, &hi);
    double *d = dist ? dist + (size_t)i * N : NULL;
    if (d)
        for (size_t t = 0; t < N; t++) d[t] = 0;
    const float inv = (float)N;
    for (size_t b = lo; b < hi; b += TT_REDUCE_BLOCK) {
        const size_t len = hi - b < TT_REDUCE_BLOCK ? hi - b : TT_REDUCE_BLOCK;
        float *out = dst + b;
        tt_sum_slots(out, tr->h_slots, N, b, len);
        for (size_t k = 0; k < len; k++) out[k] = out[k] / inv;
        for (size_t t = 0; d && t < N; t++) {
            const float *w = tr->h_slots[t] + b;
            double acc = 0;
            for (size_t k = 0; k < len; k++) {
                const double e = (double)w[k] - (double)out[k];
                acc += e * e;
            }
            d[t] += acc;
        }
    }
    tt_barrier_wait(&tr->bar_reduce, NULL, NULL);
}

/* The window's end (a serial section, every crew thread there): the steps every tower finished are the run's
 * finished steps — their results the sums of the towers' statistics, their times the means of the towers' phases —
 * and a stop, a tower's halt or the run's last step ends the run after this average. */
static void weights_window_end(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers;
    size_t done = sy->win_end;
    for (size_t t = 0; t < N; t++) done = sy->tw_done[t] < done ? sy->tw_done[t] : done;
    const double now = tt_now();
    for (size_t st = sy->win0; st < done; st++) {
        tt_step_result *res = &tr->results[st];
        memset(res, 0, sizeof *res);
        for (size_t t = 0; t < N; t++) {
            const struct wstat *w = &sy->ws[st * N + t];
            res->n += w->rows;
            res->loss_sum += w->loss_sum;
            res->top1 += w->top1;
            res->top5 += w->top5;
            res->t.total += w->span / (double)N;
            res->t.data += w->data / (double)N;
            res->t.compute += w->compute / (double)N;
            res->t.push += w->push / (double)N;
            res->t.update += w->update / (double)N;
        }
        res->t.step0 = now - res->t.total; /* the towers' steps ran side by side: a nominal start */
        res->lr = tr->towers[0].opt.lr_now; /* every tower steps with the same rates: the window's last */
        res->t.step1 = now;
    }
    if (done > sy->win0) { /* the window's last step carries the meeting: the towers' waits for it */
        tt_step_result *res = &tr->results[done - 1];
        double wait = 0;
        for (size_t t = 0; t < N; t++) wait += (now - sy->ws[(done - 1) * N + t].t1) / (double)N;
        res->t.wait += wait > 0 ? wait : 0;
        res->t.total += wait > 0 ? wait : 0;
    }
    if (atomic_load(&tr->grad_nonfinite)) tr->halt = TT_HALT_NONFINITE;
    else if (stop_asked(tr) || done < sy->win_end) tr->halt = TT_HALT_STOP; /* after the run's last step too, as bsp's */
    tr->steps += done - sy->win0;
    tr->cur_step = done;
    sy->boundary = done == sy->win_end && tr->steps % tr->cfg.sync.k == 0;
    sy->t_avg0 = now;
}

/* The towers' mean distance from the average, into the window's last finished step (a serial section). */
static void weights_averaged(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers;
    double mean = 0;
    for (size_t t = 0; t < N; t++) {
        double sq = 0;
        for (int i = 0; i < tr->crew.n; i++) sq += sy->dist[(size_t)i * N + t];
        mean += sqrt(sq) / (double)N;
    }
    sy->divergence = mean;
}

/* The host's average into the master weights (every crew thread); at a multiple of K every tower then pulls it,
 * elsewhere (the end of a run of steps between two multiples: an epoch's end, a checkpoint, a stop) it is a
 * snapshot for the evaluation and the checkpoint, and the towers go on from their own weights. */
static void weights_step_average(tt_trainer *tr, int i, int T)
{
    tt_tower *tw = (size_t)i < tr->cfg.n_towers ? &tr->towers[i] : NULL;
    weights_average(tr, i, T, -1, tr->h_params, tr->sy->dist);
    tt_barrier_wait(&tr->bar_reduce, weights_averaged, tr);
    if (tw && tr->sy->boundary) {
        live(tw, TT_LIVE_PULL);
        tt_dev_h2d(&tw->dev, tw->d_params, tr->h_params, tr->model->n_params * sizeof(float));
        tt_dev_sync(&tw->dev);
    }
}

/* After the pulls: the average's wall and the divergence go to the window's last finished step; the finished steps
 * are reported. */
static void weights_pulled(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    sync_state *sy = tr->sy;
    const double now = tt_now();
    if (tr->cur_step > sy->win0) {
        tt_step_result *res = &tr->results[tr->cur_step - 1];
        res->averaged = sy->boundary;
        res->divergence = sy->boundary ? sy->divergence : 0;
        res->t.reduce0 = sy->t_avg0;
        res->t.reduce1 = now;
        res->t.reduce = now - sy->t_avg0;
        res->t.total += res->t.reduce;
        res->t.step1 = now;
    }
    for (size_t st = sy->win0; st < tr->cur_step; st++) { /* launch: what the phases leave of the total */
        tt_step_times *t = &tr->results[st].t;
        t->towers = t->total - t->reduce;
        t->launch = t->towers - (t->data + t->compute + t->push + t->update + t->wait);
        if (t->launch < 0) t->launch = 0;
    }
    atomic_store(&tr->steps_done, tr->cur_step);
}

/* One step of tower tw on its own weights: its shard's forward and backward, its own optimizer step (none for an
 * empty shard: nothing to learn from), its statistics and ledger. */
static void weights_tower_step(tt_trainer *tr, tt_tower *tw, size_t st)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers, i = (size_t)tw->id, n = sync_step_n(tr, st);
    const double t0 = tt_now();
    tower_shard(&tr->cfg, n, i, &tw->lo, &tw->rows);
    tower_step(tw, tr->idx + st * tr->cfg.batch, n, 0);
    live(tw, TT_LIVE_HOST);
    int grad_bad = 0;
    if (tw->rows) {
        tt_optim_begin_step(&tw->opt);
        grad_bad = tower_update(tw);
    }
    const int loss_bad = !isfinite(tw->loss_sum);
    if (loss_bad || grad_bad) {
        atomic_store(&tr->grad_nonfinite, 1);
        pthread_mutex_lock(&sy->mu);
        if (st < sy->bad_step) { /* an earlier step than any seen: its towers replace the record */
            sy->bad_step = st;
            memset(sy->bad_loss, 0, N * sizeof(int));
            memset(sy->bad_grad, 0, N * sizeof(int));
        }
        if (st == sy->bad_step) {
            sy->bad_loss[i] = loss_bad;
            sy->bad_grad[i] = grad_bad;
        }
        pthread_mutex_unlock(&sy->mu);
    }
    struct wstat *w = &sy->ws[st * N + i];
    w->loss_sum = tw->loss_sum;
    w->top1 = tw->top1;
    w->top5 = tw->top5;
    w->rows = tw->rows;
    w->t1 = tt_now();
    w->span = w->t1 - t0;
    const tt_tower_ledger *l = &tw->led;
    w->data = l->data1 - l->pull1;
    w->compute = l->compute1 - l->data1;
    w->push = l->push1 - l->push0;
    w->update = l->update1 - l->update0;
    if (tr->ledger) tr->ledger[st * N + i] = tw->led;
}

/* Serial: where a halting window ends — the furthest step a tower reached (0: no catching up). */
static void weights_agree_end(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    sync_state *sy = tr->sy;
    size_t lo = SIZE_MAX, hi = 0;
    for (size_t t = 0; t < tr->cfg.n_towers; t++) {
        lo = sy->tw_done[t] < lo ? sy->tw_done[t] : lo;
        hi = sy->tw_done[t] > hi ? sy->tw_done[t] : hi;
    }
    sy->catch_to = lo < hi ? hi : 0;
}

/* --sync weights:K, crew thread i: tower i runs its steps on its own weights with its own optimizer, with no
 * barrier, until the window's end — the next multiple of K of the training's steps, or the run's last step — then
 * every crew thread meets, the host averages the towers' weights and every tower pulls the average. A stop (or a
 * tower's non-finite loss or gradient) ends each tower's window at its current step; the average is still taken.
 * At the run's end the optimizer's vectors are averaged too, and the host's step count is the towers'. */
void weights_run(tt_trainer *tr, int i, int T)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers, K = tr->cfg.sync.k;
    const size_t steps = tr->sy->steps; /* sync_begin's count */
    tt_tower *tw = (size_t)i < N ? &tr->towers[i] : NULL;
    if (tw && !sy->towers_hold) {
        tower_master(tw, 1); /* the host's weights and optimizer vectors onto the tower */
        tw->opt = tr->opt;   /* and its scalars */
    }
    tt_barrier_wait(&tr->bar_update, NULL, NULL);
    while (!tr->halt && tr->cur_step < steps) {
        if (i == 0) { /* read by every thread only after the barrier below */
            sy->win0 = tr->cur_step;
            const uint64_t g = tr->steps;
            sy->win_end = sy->win0 + (size_t)(K - g % K);
            if (sy->win_end > steps) sy->win_end = steps;
        }
        tt_barrier_wait(&tr->bar_push, NULL, NULL);
        if (tw) { /* the window's steps; a stop or a halt ends them after the step in flight (at least one) */
            size_t st = sy->win0;
            while (st < sy->win_end) {
                weights_tower_step(tr, tw, st++);
                if (stop_asked(tr) || atomic_load(&tr->grad_nonfinite)) break;
            }
            sy->tw_done[i] = st;
            live(tw, TT_LIVE_WAIT);
        }
        /* a stop or a halt: the towers that stopped early catch up with the furthest one (no tower can undo a
         * step), so every tower holds the same steps — the run's finished steps, its checkpoint's */
        tt_barrier_wait(&tr->bar_push, weights_agree_end, tr);
        if (tw) {
            for (size_t st = sy->tw_done[i]; st < sy->catch_to; st++) weights_tower_step(tr, tw, st);
            if (sy->catch_to > sy->tw_done[i]) sy->tw_done[i] = sy->catch_to;
            live(tw, TT_LIVE_WAIT);
        }
        tt_barrier_wait(&tr->bar_push, weights_window_end, tr);
        weights_step_average(tr, i, T);
        tt_barrier_wait(&tr->bar_update, weights_pulled, tr);
    }
    /* the optimizer's vectors averaged into the host's, and its step count (every tower's is the same: each ran
     * every finished step) */
    for (int vec = 0; vec < 3; vec++) {
        float *dst = optim_vec(&tr->opt, vec);
        if (dst) weights_average(tr, i, T, vec, dst, NULL);
    }
    if (i == 0 && tw) {
        tr->opt.t = tw->opt.t;
        tr->opt.u_product = tw->opt.u_product;
    }
    tt_barrier_wait(&tr->bar_update, NULL, NULL); /* every thread has read towers_hold */
    if (i == 0) sy->towers_hold = 1;
    if (tw) live(tw, TT_LIVE_IDLE);
}
