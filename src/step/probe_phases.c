/* probe_phases.c — the probe's step, timed by the trainer's own code (tt_trainer_time_phases, tt_trainer_start_steps)
 * on synthetic samples: each placement's phases one at a time, for tt_probe_run and the prediction; every design's
 * whole steps (tt_probe_steps); and the optimizer alone, on one host thread and on a tower's device (--sync's
 * figures). Each trainer's memory plan is checked before it is built.
 * Not for: the links and rates (probe.c), `probe --json`'s kernels (probe_kernels.c) or predictions
 * (probe_predict.c). */
#include <stddef.h>
#include <string.h>

#include "probe_parts.h"
#include "tt_mem.h"
#include "tt_rng.h"
#include "tt_signal.h"

#define PROBE_DATA_ROWS 50000 /* synthetic inputs the data phase gathers from */

/* The synthetic set's shape, without its samples: what a memory plan reads (--data-on device holds it on the devices). */
static void probe_data_shape(const tt_model *m, tt_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    ds->n = PROBE_DATA_ROWS;
    ds->dim = m->input_dim;
    ds->shape = m->input_shape;
    ds->n_classes = m->n_classes;
    const int tokens = m->token_vocab != 0; /* then token ids below the vocabulary */
    ds->xtype = tokens ? TT_X_F32 : TT_X_U8;
    ds->scale = tokens ? 1.0f : 1.0f / 255.0f;
}

tt_status probe_data_make(const tt_model *m, size_t batch, probe_data *d, tt_error *err)
{
    memset(d, 0, sizeof *d);
    probe_data_shape(m, &d->ds);
    const size_t n = d->ds.n, D = d->ds.dim;
    const int tokens = d->ds.xtype == TT_X_F32;
    d->ds.x = (uint8_t *)tt_malloc(n * tt_dataset_sample_bytes(&d->ds));
    d->ds.y = (int32_t *)tt_malloc(n * sizeof(int32_t));
    d->idx = (uint32_t *)tt_malloc(batch * sizeof(uint32_t));
    if (!d->ds.x || !d->ds.y || !d->idx) return tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    for (size_t i = 0; i < n * D; i++) {
        const uint32_t h = (uint32_t)(i * 2654435761u);
        if (tokens)
            ((float *)(void *)d->ds.x)[i] = (float)(h % (uint32_t)m->token_vocab);
        else
            d->ds.x[i] = (uint8_t)(h >> 24);
    }
    for (size_t i = 0; i < n; i++) d->ds.y[i] = (int32_t)(i % m->n_classes);
    tt_rng rng;
    tt_rng_seed(&rng, 1, 0);
    for (size_t i = 0; i < batch; i++) d->idx[i] = (uint32_t)tt_rng_below(&rng, n);
    return TT_OK;
}

void probe_data_free(probe_data *d)
{
    tt_free(d->ds.x);
    tt_free(d->ds.y);
    tt_free(d->idx);
}

/* Host bytes of the synthetic samples as a memory plan counts them (a float and a label per input feature and row). */
static double synthetic_bytes(const tt_model *m)
{
    return (double)PROBE_DATA_ROWS * ((double)m->input_dim * sizeof(float) + sizeof(int32_t));
}

/* The trainer config of placement r's probe; set: the synthetic samples its steps read (--data-on device holds them on
 * the devices; for a memory plan, their shape alone). */
static tt_trainer_config placement_config(const tt_probe_config *c, tt_reduce r, const tt_dataset *set)
{
    tt_trainer_config tc;
    memset(&tc, 0, sizeof tc);
    tc.ops = c->ops;
    tc.n_devices = c->n_devices;
    tc.devices = c->devices;
    tc.n_towers = c->towers;
    tc.batch = c->batch;
    tc.optim = c->optim;
    tc.reduce = r;
    tc.host_threads = c->host_threads;
    tc.seed = 1;
    memcpy(tc.slow, c->slow, sizeof tc.slow);
    tc.n_slow = c->n_slow;
    tc.data_on = c->data_on;
    tc.precision = c->precision;
    tc.push_fp32 = c->push_fp32;
    tc.train_set = set;
    tc.stop = tt_signal_flag();
    return tc;
}

/* Whether placement r's trainer and the synthetic inputs fit: probe_placements_fit asks for every placement before
 * tt_probe_run measures anything, and probe_placement again before it allocates. *ran = 0 for a placement that
 * cannot run here. */
static tt_status placement_check_memory(const tt_probe_config *c, tt_reduce r, int *ran, tt_error *err)
{
    tt_dataset shape;
    probe_data_shape(c->model, &shape);
    const tt_trainer_config tc = placement_config(c, r, &shape);
    tt_error ignored;
    *ran = 0;
    if (tt_trainer_check(&tc, &ignored)) return TT_OK;
    *ran = 1;
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    tt_status s = tt_trainer_plan(c->model, &tc, &plan, err);
    if (s) return s;
    tt_mem_add(&plan, "synthetic inputs", TT_MEM_HOST, synthetic_bytes(c->model), TT_MEM_BY_RUN);
    return tt_mem_check(&plan, c->ops, err);
}

/* Every placement's trainer, checked before tt_probe_run measures anything (a batch too large for the machine is
 * refused at once, not after minutes of GEMMs at its shapes). */
tt_status probe_placements_fit(const tt_probe_config *c, tt_error *err)
{
    tt_status s = TT_OK;
    for (int pl = 0; pl < TT_REDUCE_COUNT && !s; pl++) {
        int can;
        s = placement_check_memory(c, (tt_reduce)pl, &can, err);
    }
    return s;
}

/* The step's phases under placement r, timed by the trainer (a trainer of its own). A placement that cannot run
 * here (nccl on the CPU backend) is skipped: *ran = 0. */
tt_status probe_placement(const tt_probe_config *c, tt_reduce r, const probe_data *d, tt_phase_times *pt, tt_probe *p,
                          int *ran, tt_error *err)
{
    const tt_trainer_config tc = placement_config(c, r, &d->ds);
    int can;
    *ran = 0;
    tt_status s = placement_check_memory(c, r, &can, err);
    if (s || !can) return s;
    float *w = (float *)tt_malloc(c->model->n_params * sizeof(float));
    tt_trainer *tr = NULL;
    if (!w) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    if (!s) {
        tt_model_init_params(c->model, w, 1);
        s = tt_trainer_init(&tr, c->model, &tc, w, err);
    }
    if (!s) s = tt_trainer_time_phases(tr, &d->ds, d->idx, c->batch, probe_reps(c), pt, err);
    if (s == TT_ERR_STOPPED)
        tt_fail(err, s, "probe: stopped by %s while timing the %s placement's phases", tt_signal_name(tt_signal_caught()),
                tt_reduce_name(r));
    if (!s && r == TT_REDUCE_CPU) { /* the peer matrix, once */
        const int *ords, *link;
        p->n_links = tt_trainer_links(tr, &ords, &link);
        memcpy(p->link_devs, ords, (size_t)p->n_links * sizeof(int));
        memcpy(p->links, link, (size_t)p->n_links * (size_t)p->n_links * sizeof(int));
    }
    tt_trainer_free(tr);
    tt_free(w);
    *ran = !s;
    return s;
}

/* p->apply1: tt_optim_apply over all P parameters on this thread, median of reps (warm: one first), each from cold
 * caches, as in a step: a tower's apply follows its forward and backward, which have moved other data through them
 * (warm, the MLP's Adam apply measured 2-3x faster than the steps' own). */
static tt_status probe_apply1(const tt_probe_config *c, tt_probe *p, tt_error *err)
{
    const size_t P = c->model->n_params, reps = probe_reps(c);
    tt_optim o;
    tt_status s = tt_optim_init(&o, &c->optim, P, err);
    if (s) return s;
    float *w = (float *)tt_calloc(P, sizeof(float)), *g = (float *)tt_calloc(P, sizeof(float));
    double *v = (double *)tt_calloc(reps, sizeof(double));
    enum { FLUSH = 64 << 20 }; /* larger than any last-level cache of these machines */
    unsigned char *flush = (unsigned char *)tt_malloc(FLUSH);
    if (!w || !g || !v || !flush) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    for (size_t k = 0; g && k < P; k++) g[k] = 1e-3f * (float)((k % 7) + 1);
    for (size_t r = 0; !s && r <= reps; r++) {
        memset(flush, (int)r, FLUSH);
        const double t0 = tt_now();
        tt_optim_begin_step(&o);
        tt_optim_apply(&o, w, g, 0, P);
        if (r) v[r - 1] = tt_now() - t0;
    }
    if (!s) p->apply1 = tt_median(v, reps);
    /* the same update on a tower's device, through the backend (the CPU backend's is the host loop above) */
    tt_dev dev;
    memset(&dev, 0, sizeof dev);
    if (!s) s = tt_dev_init(&dev, c->ops, c->devices ? c->devices[0] : 0, err);
    float *d[5] = {NULL, NULL, NULL, NULL, NULL};
    int32_t *bad = NULL;
    if (!s) {
        tt_dev_bind(&dev);
        for (int k = 0; k < 5; k++) d[k] = tt_dev_alloc_f32(&dev, P);
        bad = (int32_t *)tt_dev_alloc(&dev, ((P + TT_UPDATE_BLOCK - 1) / TT_UPDATE_BLOCK) * sizeof(int32_t));
        if (!d[0] || !d[1] || !d[2] || !d[3] || !d[4] || !bad) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of device memory");
    }
    if (!s) {
        for (int k = 0; k < 5; k++) tt_dev_fill(&dev, d[k], P, k == 1 ? 1e-3f : 0.0f);
        tt_dev_sync(&dev);
        tt_update_args u;
        for (size_t r = 0; r <= reps; r++) {
            memset(flush, (int)r, FLUSH);
            tt_optim_begin_step(&o);
            tt_optim_update_args(&o, &u);
            const double t0 = tt_now();
            tt_dev_update(&dev, &u, d[0], d[1], o.m ? d[2] : NULL, o.v ? d[3] : NULL, o.a ? d[4] : NULL, bad, P, 0);
            tt_dev_sync(&dev);
            if (r) v[r - 1] = tt_now() - t0;
        }
        p->dev_update = tt_median(v, reps);
    }
    for (int k = 0; k < 5; k++)
        if (d[k]) tt_dev_dfree(&dev, d[k]);
    if (bad) tt_dev_dfree(&dev, bad);
    tt_dev_free(&dev);
    tt_free(flush);
    tt_free(w);
    tt_free(g);
    tt_free(v);
    tt_optim_free(&o);
    return s;
}

/* tt_probe_run's second half: each placement's phases by the trainer (the cpu placement's are the step's; the first
 * one that reduces on the towers gives the push without the gradient), --slow-tower's delays, the optimizer alone,
 * and each placement's reduce. */
tt_status probe_phases(const tt_probe_config *c, tt_probe *p, tt_error *err)
{
    const int N = (int)c->towers;
    const double bytes = (double)c->model->n_params * sizeof(float);
    probe_data d;
    tt_status s = probe_data_make(c->model, c->batch, &d, err);
    tt_phase_times pt[TT_REDUCE_COUNT];
    memset(pt, 0, sizeof pt);
    for (int pl = 0; pl < TT_REDUCE_COUNT && !s; pl++)
        s = probe_placement(c, (tt_reduce)pl, &d, &pt[pl], p, &p->can[pl], err);
    probe_data_free(&d);
    if (s) return s;
    const tt_phase_times *cpu = &pt[TT_REDUCE_CPU];
    p->pull = cpu->pull;
    p->data = cpu->data;
    p->compute = cpu->compute;
    p->straggle = cpu->straggle;
    for (size_t k = 0; k < c->n_slow; k++) /* --slow-tower: what the delays add, on average (MS + J/2) */
        p->slow_mean += 1e-3 * (c->slow[k].ms + 0.5 * c->slow[k].jitter_ms) / (double)c->towers;
    p->slow_max = probe_expected_max(c, 0, 1); /* and the barrier waits for the longest of the step's draws */
    p->push_stats = 0; /* the push without the gradient: that of the first placement that reduces on the towers */
    for (int pl = 0; pl < TT_REDUCE_COUNT; pl++)
        if (!tt_reduce_about((tt_reduce)pl)->host_sum) {
            if (p->can[pl]) p->push_stats = pt[pl].push;
            break;
        }
    p->push_grad = cpu->push - p->push_stats > 0 ? cpu->push - p->push_stats : 0;
    p->update = cpu->host_update;
    if (!s) s = probe_apply1(c, p, err);
    for (int pl = 0; pl < TT_REDUCE_COUNT; pl++)
        p->reduce[pl] = tt_reduce_about((tt_reduce)pl)->host_sum ? pt[pl].host_sum : pt[pl].reduce;
    p->host_sum = p->reduce[TT_REDUCE_CPU] > 0 ? (double)N * bytes / p->reduce[TT_REDUCE_CPU] / 1e9 : 0;
    return s;
}

tt_status tt_probe_steps(const tt_probe_config *c, const tt_probe_design *d, tt_step_times *t, int *ran,
                         tt_error *err)
{
    enum { WARM = 2 };
    memset(t, 0, sizeof *t);
    *ran = 0;
    tt_dataset shape;
    probe_data_shape(c->model, &shape);
    tt_trainer_config tc = placement_config(c, d->reduce, &shape);
    tc.update = d->update;
    tc.graphs = d->graphs;
    tc.overlap = d->overlap;
    tc.bucket_bytes = d->overlap ? c->bucket_bytes : 0;
    tt_error why;
    if (tt_trainer_check(&tc, &why)) return TT_OK; /* not here: the caller says why */
    const size_t reps = probe_reps(c), steps = WARM + reps, B = c->batch;
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    tt_status s = tt_trainer_plan(c->model, &tc, &plan, err);
    if (!s) {
        tt_mem_add(&plan, "synthetic inputs", TT_MEM_HOST,
                   synthetic_bytes(c->model) + (double)steps * (double)B * sizeof(uint32_t), TT_MEM_BY_RUN);
        s = tt_mem_check(&plan, c->ops, err);
    }
    if (s) return s;
    probe_data pd;
    s = probe_data_make(c->model, B, &pd, err);
    float *w = (float *)tt_malloc(c->model->n_params * sizeof(float));
    uint32_t *idx = (uint32_t *)tt_malloc(steps * B * sizeof(uint32_t));
    tt_step_result *res = (tt_step_result *)tt_calloc(steps, sizeof *res);
    double *v = (double *)tt_calloc(reps, sizeof(double));
    tt_trainer *tr = NULL;
    if (!s && (!w || !idx || !res || !v)) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    if (!s) {
        for (size_t k = 0; k < steps; k++) memcpy(idx + k * B, pd.idx, B * sizeof(uint32_t)); /* one shape */
        tt_model_init_params(c->model, w, 1);
        tc.train_set = &pd.ds; /* the samples themselves now (the plan read their shape) */
        s = tt_trainer_init(&tr, c->model, &tc, w, err);
    }
    if (!s) s = tt_trainer_start_steps(tr, &pd.ds, idx, steps * B, res, steps, NULL, err);
    if (!s) {
        tt_trainer_wait(tr, -1, NULL);
        const tt_halt h = tt_trainer_halted(tr);
        if (h == TT_HALT_STOP)
            s = tt_fail(err, TT_ERR_STOPPED, "probe: stopped by %s while timing whole steps",
                        tt_signal_name(tt_signal_caught()));
        else if (h != TT_HALT_NONE) /* random weights on random pixels: a diverged step is a broken trainer */
            s = tt_fail(err, TT_ERR_NUMERIC, "probe: a whole step of --reduce %s --update %s halted",
                        tt_reduce_name(d->reduce), tt_update_name(d->update));
    }
    if (!s) {
        double *part[] = {&t->launch, &t->pull, &t->data, &t->compute, &t->push, &t->wait, &t->towers, &t->reduce,
                          &t->update, &t->total, &t->push_hidden, &t->host_hidden, &t->host_exposed};
        for (size_t f = 0; f < sizeof part / sizeof part[0]; f++) { /* the same field of every kept step */
            const size_t off = (size_t)((const char *)part[f] - (const char *)t);
            for (size_t k = 0; k < reps; k++) v[k] = *(const double *)((const char *)&res[WARM + k].t + off);
            *part[f] = tt_median(v, reps);
        }
        *ran = 1;
    }
    tt_trainer_free(tr);
    tt_free(v);
    tt_free(res);
    tt_free(idx);
    tt_free(w);
    probe_data_free(&pd);
    return s;
}
