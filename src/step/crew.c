/* crew.c — the crew: T = max(N towers, H host threads) persistent pthreads, thread t < N being tower t. A job
 * (init, a run of steps, an evaluation, the diagnosis, the probe's phases, free) wakes every thread once; a run of
 * steps goes to the sync mode's own loop (sync.c's table). The barriers between a step's phases charge their wait
 * to the tower's ledger here. */

#include "step.h"

/* Waits at a barrier, charging the time to the tower's ledger (crew threads beyond the towers are not charged). */
void tower_barrier(tt_trainer *tr, tt_barrier *b, int i, void (*serial)(void *), void *arg)
{
    double t0 = tt_now();
    if ((size_t)i < tr->cfg.n_towers) live(&tr->towers[i], TT_LIVE_WAIT);
    tt_barrier_wait(b, serial, arg);
    if ((size_t)i < tr->cfg.n_towers) tr->towers[i].led.wait += tt_now() - t0;
}

/* The body of crew thread i: one job, then back to sleep. */
void crew_job(void *arg, int i, int T)
{
    tt_trainer *tr = (tt_trainer *)arg;
    tt_tower *tw = (size_t)i < tr->cfg.n_towers ? &tr->towers[i] : NULL;
    switch (tr->job) {
    case JOB_INIT:
        if (tw) tw->status = tower_alloc(tw);
        break;
    case JOB_STEPS:
        tr->mode->run(tr, i, T); /* the --sync mode's own loop */
        break;
    case JOB_EVAL:
        if (tw) tower_eval(tw);
        break;
    case JOB_DIAGNOSE:
        if (tw) tower_diagnose(tw);
        break;
    case JOB_PHASES:
        crew_phases(tr, i, T);
        break;
    case JOB_FREE:
        if (tw) tower_release(tw);
        break;
    }
}

void run_job(tt_trainer *tr, int job)
{
    tr->job = job;
    tt_pool_run(&tr->crew, tr->crew.n, crew_job, tr);
}

/* The samples of a run of steps (or of a phase timing), and a clean slate for its halt decisions. */
void job_begin(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n)
{
    tr->ds = ds;
    tr->idx = idx;
    tr->n = n;
    tr->halt = TT_HALT_NONE;
    atomic_store(&tr->stop_request, 0); /* a request is for the job in flight: one left from an earlier job is void */
    tr->loss_nonfinite = 0;
    atomic_store(&tr->grad_nonfinite, 0);
    tr->node_status = TT_OK;
}

tt_status towers_status(tt_trainer *tr, tt_error *err)
{
    for (size_t t = 0; t < tr->cfg.n_towers; t++)
        if (tr->towers[t].status != TT_OK)
            return tt_fail(err, tr->towers[t].status, "tower %zu (%s device %d): %s", t, tr->cfg.ops->name,
                           tr->towers[t].dev.ordinal, tr->towers[t].err.msg);
    return TT_OK;
}
