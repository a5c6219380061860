/* sync_bsp.c — --sync bsp, the seeds' step: every tower's phases, barrier A (the step's statistics), the
 * placement's reduce and barrier R, the host's sum + update (or a device's update), barrier B (the step's end and
 * its halt decision). N towers give the same weights as 1 tower, up to rounding. */
#include <math.h>

#include "step.h"

/* Tower tw's statistics, and its launch, pull and data phases, added to the step's (means over the towers). */
static void add_tower_start(const tt_trainer *tr, const tt_tower *tw, tt_step_result *res)
{
    const tt_tower_ledger *l = &tw->led;
    const double N = (double)tr->cfg.n_towers;
    res->n += tw->rows;
    res->loss_sum += tw->loss_sum;
    res->top1 += tw->top1;
    res->top5 += tw->top5;
    res->t.launch += (l->pull0 - tr->t_step) / N;
    res->t.pull += (l->pull1 - l->pull0) / N;
    res->t.data += (l->data1 - l->pull1) / N;
}

/* --precision bf16, fp16, at barrier A: the step's loss scale and the towers' counts of its pushed gradient — the
 * elements that underflowed to zero in 16 bits, and whether any overflowed: then, with --loss-scale dynamic, the
 * step is skipped (a loss that is not finite halts the run instead). */
static void scaler_before_update(tt_trainer *tr, tt_step_result *res)
{
    const size_t N = tr->cfg.n_towers;
    res->loss_scale = tr->scaler.scale;
    tr->skip_step = 0;
    if (!tr->cfg.precision) return;
    uint64_t bad = 0;
    for (size_t t = 0; t < N; t++) {
        res->grad_under += tr->towers[t].h_counts[0];
        bad += tr->towers[t].h_counts[1];
    }
    res->grad_elems = (uint64_t)N * tr->model->n_trainable;
    tr->skip_step = bad && tr->cfg.loss_scale.dynamic && !tr->loss_nonfinite;
    res->skipped = tr->skip_step;
}

/* --loss-scale dynamic, at barrier B: a skipped step halves the scale (below 1: the run halts, TT_HALT_SCALE), a run
 * of TT_SCALE_GROWTH_STEPS applied steps doubles it. */
static void scaler_after_update(tt_trainer *tr)
{
    tt_scaler_state *sc = &tr->scaler;
    if (!tr->cfg.loss_scale.dynamic) return;
    if (tr->skip_step) {
        sc->scale *= TT_SCALE_BACKOFF;
        sc->good = 0;
        sc->skipped++;
        if (sc->scale < 1.0 && tr->halt == TT_HALT_NONE) tr->halt = TT_HALT_SCALE;
    } else if (++sc->good >= (tr->cfg.loss_scale.growth_steps ? tr->cfg.loss_scale.growth_steps
                                                                : TT_SCALE_GROWTH_STEPS)) {
        /* at most TT_SCALE_MAX: bf16's range would let it grow past FLT_MAX, overflow, back off, every 2000 steps */
        sc->scale = sc->scale * TT_SCALE_GROWTH <= TT_SCALE_MAX ? sc->scale * TT_SCALE_GROWTH : sc->scale;
        sc->good = 0;
    }
}

/* Serial section of barrier A: every tower has finished its tower phase. Aggregate the step's statistics and
 * start the optimizer's step (its per-step scalars) before any slice applies it. */
static void after_towers(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    const size_t N = tr->cfg.n_towers;
    tt_step_result *res = &tr->results[tr->cur_step];
    double now = tt_now();
    memset(res, 0, sizeof *res);
    for (size_t t = 0; t < N; t++) {
        const tt_tower_ledger *l = &tr->towers[t].led;
        add_tower_start(tr, &tr->towers[t], res);
        res->t.compute += (l->compute1 - l->data1) / (double)N;
        res->t.push += (l->push1 - l->compute1) / (double)N;
        res->t.wait += (now - l->push1) / (double)N;
    }
    res->t.step0 = tr->t_step;
    res->t.towers = now - tr->t_step;
    tr->t_towers_done = now;
    /* a loss that is not finite: no slice applies this step (they still check the gradient, to report it) */
    tr->loss_nonfinite = !isfinite(res->loss_sum);
    scaler_before_update(tr, res);
    if (!multi_node(&tr->cfg) && !tr->skip_step) tt_optim_begin_step(&tr->opt); /* K ranks: after the combine */
}

/* Serial section of barrier R (device, allreduce): the reduced gradient is on the host. */
static void after_reduce(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    tt_step_result *res = &tr->results[tr->cur_step];
    double now = tt_now();
    res->t.reduce = now - tr->t_towers_done; /* the towers' reduce spans are in their ledgers */
}

/* Serial section of barrier B: the master weights are updated; the step is over. */
static void after_update(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    const size_t N = tr->cfg.n_towers;
    tt_step_result *res = &tr->results[tr->cur_step];
    double now = tt_now();
    if (tr->place->info.host_sum) {
        res->t.reduce = tr->t_reduce1 - tr->t_reduce0;
        res->t.reduce0 = tr->t_reduce0;
        res->t.reduce1 = tr->t_reduce1;
    }
    /* the end of a step is where a run may halt: a non-finite loss or gradient, or a stop request (a signal) */
    uint32_t flags[2] = {tr->loss_nonfinite || atomic_load_explicit(&tr->grad_nonfinite, memory_order_relaxed),
                         (tr->cfg.stop && atomic_load(tr->cfg.stop)) || atomic_load(&tr->stop_request)};
    if (multi_node(&tr->cfg)) { /* ps: every rank's updated slice of the weights; then every rank's halt flags */
        double g0 = tt_now();
        tt_status s = tr->node_status;
        if (!s && tr->cfg.node_reduce == TT_NODE_PS)
            s = tt_node_allgather_slices(tr->cfg.node, tr->h_params, tr->model->n_params, &tr->node_err);
        if (!s) s = tt_node_or(tr->cfg.node, flags, 2, &tr->node_err);
        tr->node_status = s;
        now = tt_now();
        res->t.combine = tr->t_combine1 - tr->t_combine0 + (now - g0);
        res->t.combine0 = tr->t_combine0;
        res->t.combine1 = tr->t_combine1;
    }
    res->t.update0 = tr->t_update0;
    res->t.update1 = tr->t_update1;
    res->lr = tr->opt.lr_now;
    /* the rest of the step: the host's update */
    res->t.update = now - tr->t_step - res->t.towers - res->t.reduce - res->t.combine;
    res->t.total = now - tr->t_step;
    res->t.step1 = now;
    if (tr->ledger)
        for (size_t t = 0; t < N; t++) tr->ledger[tr->cur_step * N + t] = tr->towers[t].led;
    tr->t_step = now;
    tr->cur_step++;
    tr->steps++;
    if (tr->node_status) tr->halt = TT_HALT_NODE;
    else if (flags[0]) tr->halt = TT_HALT_NONFINITE;
    scaler_after_update(tr); /* a scale that collapses halts before a stop request */
    if (!tr->halt && atomic_load_explicit(&tr->w16_range, memory_order_relaxed)) tr->halt = TT_HALT_RANGE;
    if (!tr->halt && flags[1]) tr->halt = TT_HALT_STOP;
    atomic_store(&tr->steps_done, tr->cur_step);
}

/* --overlap on, the serial section of the step's one barrier: every bucket is updated. The towers' phases as
 * after_towers adds them, except that the tower phase ends when the last gradient reached the host (t_pushed) and
 * push includes the buckets pushed during the backward; the host's reduce and update are the wall after that, in
 * the proportions of the exposed work; what ran before it is the hidden work. Then the counters for the next step,
 * and the step's end (after_update). */
static void after_overlap(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    overlap *o = tr->ov;
    const size_t N = tr->cfg.n_towers;
    tt_step_result *res = &tr->results[tr->cur_step];
    const double now = tt_now();
    double t_pushed = o->t_pushed, host_end = 0; /* the last gradient on the host; the host's last update done */
    for (size_t t = 0; t < N; t++) /* by the towers' event clocks too (a tower stamps its last push's end after) */
        t_pushed = tr->towers[t].led.push1 > t_pushed ? tr->towers[t].led.push1 : t_pushed;
    for (size_t k = 0; k < o->nb; k++) host_end = o->span[k][1] > host_end ? o->span[k][1] : host_end;
    const double upd_end = host_end > t_pushed ? host_end : t_pushed;
    memset(res, 0, sizeof *res);
    for (size_t t = 0; t < N; t++) {
        const tt_tower_ledger *l = &tr->towers[t].led;
        add_tower_start(tr, &tr->towers[t], res);
        /* a backend that runs ops as issued (CPU) made the backward's bucket copies on the tower's own time, inside
         * the compute's span: push time, none of it hidden; a GPU's side stream made them beside the kernels */
        const int inline_ops = tr->cfg.ops->inline_ops;
        const double inline_push = inline_ops ? l->push_hidden : 0;
        res->t.compute += (l->compute1 - l->data1 - inline_push) / (double)N;
        res->t.push += (l->push1 - l->compute1 + inline_push) / (double)N;
        res->t.push_hidden += (inline_ops ? 0 : l->push_hidden) / (double)N;
        res->t.wait += (t_pushed - l->push1) / (double)N;
    }
    /* after the host's last update: the towers' last pulls ahead landing, and the barrier — the next step's pull */
    res->t.pull += now - upd_end;
    res->t.step0 = tr->t_step;
    res->t.towers = t_pushed - tr->t_step + (now - upd_end);
    tr->t_towers_done = t_pushed;
    double w[4] = {0, 0, 0, 0};
    for (int i = 0; i < tr->crew.n; i++)
        for (int j = 0; j < 4; j++) {
            w[j] += o->work[i][j];
            o->work[i][j] = 0;
        }
    res->t.host_hidden = w[0] + w[1];
    res->t.host_exposed = w[2] + w[3];
    const double exposed = upd_end - t_pushed; /* the host's work after the last push, split as its work was */
    tr->t_reduce0 = t_pushed;
    tr->t_reduce1 = t_pushed + (w[2] + w[3] > 0 ? exposed * w[2] / (w[2] + w[3]) : 0);
    tr->t_update0 = tr->t_reduce1;
    tr->t_update1 = upd_end;
    res->n_buckets = (unsigned)o->nb;
    memcpy(res->bucket, o->span, sizeof o->span);
    overlap_reset(o);
    atomic_store(&o->towers_busy, N);
    after_update(tr);
}

void bsp_run(tt_trainer *tr, int i, int T)
{
    const size_t N = tr->cfg.n_towers, B = tr->cfg.batch;
    const size_t steps = (tr->n + B - 1) / B;
    tt_tower *tw = (size_t)i < N ? &tr->towers[i] : NULL;
    const host_pass fused = fused_pass(tr);
    const int on_device = tr->cfg.update != TT_UPDATE_HOST;
    if (on_device) { /* the masters from the host, before any tower pulls from tower 0 */
        if (tw) tower_master(tw, 1);
        tt_barrier_wait(&tr->bar_update, NULL, NULL);
    }
    if (tw) memset(tw->ahead, 0, sizeof tw->ahead); /* a run's first step pulls everything (the weights may be new) */
    for (size_t st = 0; st < steps; st++) {
        size_t first = st * B, n = tr->n - first < B ? tr->n - first : B;
        if (tw) {
            tower_shard(&tr->cfg, n, (size_t)i, &tw->lo, &tw->rows);
            tower_step(tw, tr->idx + first, n, st + 1 < steps);
        }
        if (tr->ov) { /* --overlap on: the buckets were summed and updated as they came; one barrier ends the step */
            if (!tw) overlap_run(tr, i, NULL, 0); /* a host-only thread: chunks (the towers did theirs in tower_step) */
            tt_barrier_wait(&tr->bar_update, after_overlap, tr);
            if (tr->halt) break;
            continue;
        }
        tower_barrier(tr, &tr->bar_push, i, after_towers, tr);
        if (tr->place->reduce) {
            if (tw) {
                live(tw, TT_LIVE_REDUCE);
                tr->place->reduce(tw);
            }
            tower_barrier(tr, &tr->bar_reduce, i, after_reduce, tr);
        }
        if (tw) live(tw, TT_LIVE_HOST);
        if (on_device) {
            if (tw) tower_update(tw);
        } else if (multi_node(&tr->cfg)) {
            host_node_step(tr, i, T);
        } else if (tr->clip) {
            host_clip_step(tr, i, T); /* the norms of the whole sum first */
        } else {
            host_slice(tr, &fused, i, T, NULL, NULL); /* one rank: the fused block-wise sum + update */
        }
        if (tw) live(tw, TT_LIVE_WAIT);
        tt_barrier_wait(&tr->bar_update, after_update, tr);
        if (tr->halt) break; /* set in the serial section above: every thread sees the same value */
    }
    if (on_device && tw) tower_master(tw, 0); /* tower 0's master back to the host */
}
