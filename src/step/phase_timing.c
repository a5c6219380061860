/* phase_timing.c — the probe's view of the step: the step's own phase functions run one at a time on every thread
 * that takes part, each started together and waited for before the next, so each is timed alone
 * (tt_trainer_time_phases). */

#include "step.h"

/* Serial section between phases: a stop request (a signal) ends the measurement at the end of a rep. */
static void phases_check_stop(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    if ((tr->cfg.stop && atomic_load(tr->cfg.stop)) || atomic_load(&tr->stop_request)) tr->halt = TT_HALT_STOP;
}

static void phases_begin_update(void *arg) { tt_optim_begin_step(&((tt_trainer *)arg)->opt); }

/* Thread i's clock readings of phase ph in rep r. */
static double *phase_slot(tt_trainer *tr, double *base, int i, size_t r, int ph)
{
    return base + ((size_t)i * tr->ph_reps + r) * TT_PHASE_COUNT + (size_t)ph;
}

/* The step's phases, each started together on every thread that takes part and waited for before the next, so
 * each is timed alone: tower phases on the N towers, the placement's reduce on the N towers, the host slice on all
 * T threads. The code is the step's own (tower_step's phase functions, the placement's reduce, host_slice). */
void crew_phases(tt_trainer *tr, int i, int T)
{
    const size_t N = tr->cfg.n_towers, n = tr->n;
    tt_tower *tw = (size_t)i < N ? &tr->towers[i] : NULL;
    if (tw) shard_of(n, N, (size_t)i, &tw->lo, &tw->rows);
    for (size_t r = 0; r <= tr->ph_reps && !tr->halt; r++) { /* rep 0 warms up and is not kept */
        const size_t k = r ? r - 1 : 0;
        for (int ph = 0; ph < TT_PHASE_COUNT; ph++) {
            const int tower_phase = ph != TT_PHASE_HOST;
            if (ph == TT_PHASE_REDUCE && !tr->place->reduce) continue;
            tt_barrier_wait(&tr->bar_push, ph == TT_PHASE_HOST ? phases_begin_update : NULL, tr);
            double t0 = tt_now(), sum = 0, upd = 0;
            if (tw && tower_phase) {
                switch (ph) {
                case TT_PHASE_PULL: phase_pull(tw); break;
                case TT_PHASE_DATA: phase_data(tw, tr->ds, tr->idx, tw->lo, tw->rows, 1); break;
                case TT_PHASE_COMPUTE: phase_compute(tw, n); break;
                case TT_PHASE_PUSH: phase_push(tw); break;
                case TT_PHASE_REDUCE: tr->place->reduce(tw); break;
                }
                tt_dev_sync(&tw->dev);
            } else if (!tower_phase) {
                const host_pass fused = fused_pass(tr);
                host_slice(tr, &fused, i, T, &sum, &upd);
            }
            double t1 = tt_now();
            if (tw && tower_phase && ph == TT_PHASE_PUSH) tower_count_stats(tw, tw->rows);
            if ((tw || !tower_phase) && r > 0) {
                *phase_slot(tr, tr->ph_start, i, k, ph) = t0;
                *phase_slot(tr, tr->ph_end, i, k, ph) = t1;
                if (!tower_phase) {
                    tr->ph_sum[(size_t)i * tr->ph_reps + k] = sum;
                    tr->ph_upd[(size_t)i * tr->ph_reps + k] = upd;
                }
            }
        }
        tt_barrier_wait(&tr->bar_push, phases_check_stop, tr);
    }
}

/* Median over reps of f(rep). */
static double median_reps(double *v, size_t reps) { return tt_median(v, reps); }

tt_status tt_trainer_time_phases(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n, size_t reps,
                                 tt_phase_times *out, tt_error *err)
{
    memset(out, 0, sizeof *out);
    const size_t N = tr->cfg.n_towers;
    const int T = tr->crew.n;
    if (multi_node(&tr->cfg)) return tt_fail(err, TT_ERR_ARG, "phase timing: one rank's trainer only");
    if (tr->ov)
        return tt_fail(err, TT_ERR_ARG, "phase timing: --overlap on runs the phases together (bench times it)");
    if (tr->cfg.update != TT_UPDATE_HOST)
        return tt_fail(err, TT_ERR_ARG, "phase timing: the host's update only (--update %s is timed by bench)",
                       tt_update_name(tr->cfg.update));
    if (n < N || n > tr->cfg.batch || reps < 1)
        return tt_fail(err, TT_ERR_ARG, "phase timing: %zu samples for %zu towers (batch %zu), %zu reps", n, N,
                       tr->cfg.batch, reps);
    if (ds->dim != tr->model->input_dim)
        return tt_fail(err, TT_ERR_ARG, "data has %zu features, the model expects %zu", ds->dim, tr->model->input_dim);
    const size_t cells = (size_t)T * reps * TT_PHASE_COUNT;
    tr->ph_start = (double *)tt_calloc(cells, sizeof(double));
    tr->ph_end = (double *)tt_calloc(cells, sizeof(double));
    tr->ph_sum = (double *)tt_calloc((size_t)T * reps, sizeof(double));
    tr->ph_upd = (double *)tt_calloc((size_t)T * reps, sizeof(double));
    double *v = (double *)tt_calloc(reps, sizeof(double)), *w = (double *)tt_calloc(reps, sizeof(double));
    tt_status s = TT_OK;
    if (!tr->ph_start || !tr->ph_end || !tr->ph_sum || !tr->ph_upd || !v || !w)
        s = tt_fail(err, TT_ERR_NOMEM, "phase timing: out of memory");
    if (!s) {
        job_begin(tr, ds, idx, n);
        tr->ph_reps = reps;
        crew_run(tr, crew_phases);
        if (tr->halt == TT_HALT_STOP) s = tt_fail(err, TT_ERR_STOPPED, "phase timing: stopped");
    }
    if (!s) {
        double *phase_mean[TT_PHASE_COUNT] = {&out->pull, &out->data, &out->compute, &out->push, &out->reduce,
                                              &out->host};
        for (int ph = 0; ph < TT_PHASE_COUNT; ph++) {
            const size_t who = ph == TT_PHASE_HOST ? (size_t)T : N;
            if (ph == TT_PHASE_REDUCE && !tr->place->reduce) continue;
            for (size_t k = 0; k < reps; k++) {
                double first = 0, last = 0, mean = 0;
                for (size_t i = 0; i < who; i++) {
                    double a = *phase_slot(tr, tr->ph_start, (int)i, k, ph);
                    double b = *phase_slot(tr, tr->ph_end, (int)i, k, ph);
                    first = i == 0 || a < first ? a : first;
                    last = i == 0 || b > last ? b : last;
                    mean += (b - a) / (double)who;
                }
                /* tower phases: the mean tower's time (as the step's split); reduce and host: the wall */
                v[k] = ph < TT_PHASE_REDUCE ? mean : last - first;
            }
            *phase_mean[ph] = median_reps(v, reps);
        }
        for (size_t k = 0; k < reps; k++) { /* the slowest tower's pull..push beyond the mean tower's */
            double worst = 0, mean = 0;
            for (size_t i = 0; i < N; i++) {
                double d = 0;
                for (int ph = TT_PHASE_PULL; ph <= TT_PHASE_PUSH; ph++)
                    d += *phase_slot(tr, tr->ph_end, (int)i, k, ph) - *phase_slot(tr, tr->ph_start, (int)i, k, ph);
                worst = d > worst ? d : worst;
                mean += d / (double)N;
            }
            v[k] = worst - mean;
            /* the host slice's split into summing and updating, in thread 0's proportions */
            double su = tr->ph_sum[k] + tr->ph_upd[k];
            w[k] = su > 0 ? tr->ph_sum[k] / su : 0;
        }
        out->straggle = median_reps(v, reps);
        out->host_sum = out->host * median_reps(w, reps);
        out->host_update = out->host - out->host_sum;
        out->reps = reps;
    }
    tt_free(tr->ph_start);
    tt_free(tr->ph_end);
    tt_free(tr->ph_sum);
    tt_free(tr->ph_upd);
    tr->ph_start = tr->ph_end = tr->ph_sum = tr->ph_upd = NULL;
    tt_free(v);
    tt_free(w);
    tr->halt = TT_HALT_NONE;
    return s;
}
