/* crew.c — the crew: T = max(N towers, H host threads) persistent pthreads, thread t < N being tower t, and the
 * barriers between a step's phases. A job is a body every thread runs once (crew_body: the towers' allocation, a
 * sync mode's run of steps, an evaluation, the probe's phases, ...); the crew knows none of them. The barriers
 * spin briefly before sleeping when every thread has a core, so a step costs no thread wake-ups. */
#include "step.h"

int crew_threads(const tt_trainer_config *cfg)
{
    const int host = cfg->host_threads > 0 ? cfg->host_threads : tt_cpu_count();
    return (int)cfg->n_towers > host ? (int)cfg->n_towers : host;
}

tt_status crew_open(tt_trainer *tr, int T, tt_error *err)
{
    /* spin at the barriers only when every crew thread has a core; otherwise spinning steals from the workers */
    const double spin = T <= tt_cpu_count() ? 200e-6 : 0.0;
    tt_barrier_init(&tr->bar_push, T, spin);
    tt_barrier_init(&tr->bar_reduce, T, spin);
    tt_barrier_init(&tr->bar_update, T, spin);
    tt_barrier_init(&tr->bar_xchg, (int)tr->cfg.n_towers, spin);
    tr->bars_up = 1;
    tt_status s = tt_pool_init(&tr->crew, T, err);
    if (!s) tr->crew_up = 1;
    return s;
}

void crew_close(tt_trainer *tr)
{
    tt_pool_free(&tr->crew);
    tr->crew_up = 0;
    if (tr->bars_up) {
        tt_barrier_destroy(&tr->bar_push);
        tt_barrier_destroy(&tr->bar_reduce);
        tt_barrier_destroy(&tr->bar_update);
        tt_barrier_destroy(&tr->bar_xchg);
    }
    tr->bars_up = 0;
}

/* Crew thread i of T: the job's body, then back to sleep. */
static void crew_thread(void *arg, int i, int T)
{
    tt_trainer *tr = (tt_trainer *)arg;
    tr->body(tr, i, T);
}

void crew_run(tt_trainer *tr, crew_body *body)
{
    tr->body = body;
    tt_pool_run(&tr->crew, tr->crew.n, crew_thread, tr);
}

void crew_start(tt_trainer *tr, crew_body *body)
{
    tr->body = body;
    tt_pool_start(&tr->crew, tr->crew.n, crew_thread, tr);
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
    tr->skip_step = 0;
    atomic_store(&tr->grad_nonfinite, 0);
    tr->node_status = TT_OK;
}

/* Waits at a barrier, charging the time to the tower's ledger (crew threads beyond the towers are not charged). */
void tower_barrier(tt_trainer *tr, tt_barrier *b, int i, void (*serial)(void *), void *arg)
{
    double t0 = tt_now();
    if ((size_t)i < tr->cfg.n_towers) live(&tr->towers[i], TT_LIVE_WAIT);
    tt_barrier_wait(b, serial, arg);
    if ((size_t)i < tr->cfg.n_towers) tr->towers[i].led.wait += tt_now() - t0;
}
