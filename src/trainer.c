/* trainer.c — towers and the synchronous step (see tt_trainer.h for the picture).
 *
 * Threads: the caller's thread is the host (master variables, reduction, optimizer, with a tt_pool crew); each
 * tower is a persistent pthread that binds its device at its top, allocates everything it will ever need in its
 * INIT job, and then runs STEP and EVAL jobs until QUIT. A tower that fails records the error and still reports
 * done, so the host never waits for a thread that will not come; the host names the tower in the message.
 * No allocation happens after INIT: buffers are sized for the largest shard (ceil(B/N) rows). */
#include <math.h>
#include <string.h>

#include "tt_trainer.h"

enum { JOB_INIT, JOB_STEP, JOB_EVAL, JOB_FREE };

struct tt_tower {
    int id;
    tt_trainer *tr;
    tt_dev dev;
    /* device memory */
    float *d_params;    /* (P) this tower's copy of the weights */
    float *d_grads;     /* (P) */
    float **d_act;      /* n_layers + 1 activations, (rows, width) each; d_act[0] is the input */
    float *d_delta[2];  /* (rows, max_width) ping-pong back-propagation buffers */
    float *d_dlogits;   /* (rows, C) */
    int32_t *d_labels;  /* (rows) */
    float *d_stats;     /* (rows, 2): loss, rank */
    /* host staging (pinned on a GPU backend) */
    float *h_x;         /* (rows, D) */
    int32_t *h_labels;  /* (rows) */
    float *h_stats;     /* (rows, 2) */
    /* this job */
    size_t lo, rows;     /* step: shard = idx[lo .. lo+rows); eval: samples [lo, lo+rows) */
    double loss_sum;
    size_t top1, top5;
    tt_tower_times t;
    double busy;         /* seconds of work in this job */
    double t_start, t_end; /* clock at the start and end of this job's work */
    tt_status status;
    tt_error err;
};

/* ---- tower side -------------------------------------------------------------------------------------------- */

static tt_status tower_alloc(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const tt_model *m = tr->model;
    const size_t R = tr->shard_max, P = m->n_params;
    tt_status s = tt_dev_init(&tw->dev, tr->cfg.ops, tw->id % tr->cfg.n_devices, &tw->err);
    if (s) return s;
    tt_dev_bind(&tw->dev);
    tw->d_act = (float **)tt_calloc(m->n_layers + 1, sizeof(float *));
    if (!tw->d_act) return tt_fail(&tw->err, TT_ERR_NOMEM, "out of host memory");
    tw->d_params = tt_dev_alloc_f32(&tw->dev, P);
    tw->d_grads = tt_dev_alloc_f32(&tw->dev, P);
    int ok = tw->d_params && tw->d_grads;
    for (size_t i = 0; i <= m->n_layers && ok; i++) {
        size_t width = i == 0 ? m->input_dim : m->layers[i - 1].out;
        ok = (tw->d_act[i] = tt_dev_alloc_f32(&tw->dev, R * width)) != NULL;
    }
    for (int k = 0; k < 2 && ok; k++) ok = (tw->d_delta[k] = tt_dev_alloc_f32(&tw->dev, R * m->max_width)) != NULL;
    ok = ok && (tw->d_dlogits = tt_dev_alloc_f32(&tw->dev, R * m->n_classes));
    ok = ok && (tw->d_labels = (int32_t *)tt_dev_alloc(&tw->dev, R * sizeof(int32_t)));
    ok = ok && (tw->d_stats = tt_dev_alloc_f32(&tw->dev, 2 * R));
    ok = ok && (tw->h_x = (float *)tt_dev_host_alloc(&tw->dev, R * m->input_dim * sizeof(float)));
    ok = ok && (tw->h_labels = (int32_t *)tt_dev_host_alloc(&tw->dev, R * sizeof(int32_t)));
    ok = ok && (tw->h_stats = (float *)tt_dev_host_alloc(&tw->dev, 2 * R * sizeof(float)));
    ok = ok && (tr->h_slots[tw->id] = (float *)tt_dev_host_alloc(&tw->dev, P * sizeof(float)));
    if (!ok)
        return tt_fail(&tw->err, TT_ERR_NOMEM, "out of device memory for a %zu-row shard of a %zu-parameter model",
                       R, P);
    return TT_OK;
}

static void tower_release(tt_tower *tw)
{
    if (!tw->dev.ops) {
        tt_free(tw->d_act);
        return;
    }
    tt_trainer *tr = tw->tr;
    tt_dev_dfree(&tw->dev, tw->d_params);
    tt_dev_dfree(&tw->dev, tw->d_grads);
    for (size_t i = 0; tw->d_act && i <= tr->model->n_layers; i++) tt_dev_dfree(&tw->dev, tw->d_act[i]);
    tt_free(tw->d_act);
    tt_dev_dfree(&tw->dev, tw->d_delta[0]);
    tt_dev_dfree(&tw->dev, tw->d_delta[1]);
    tt_dev_dfree(&tw->dev, tw->d_dlogits);
    tt_dev_dfree(&tw->dev, tw->d_labels);
    tt_dev_dfree(&tw->dev, tw->d_stats);
    tt_dev_host_free(&tw->dev, tw->h_x);
    tt_dev_host_free(&tw->dev, tw->h_labels);
    tt_dev_host_free(&tw->dev, tw->h_stats);
    tt_dev_host_free(&tw->dev, tr->h_slots[tw->id]);
    tr->h_slots[tw->id] = NULL;
    tt_dev_free(&tw->dev);
}

/* Copies rows (by index, or a contiguous range when idx is NULL) into the staging buffers and on to the device. */
static void tower_load_rows(tt_tower *tw, const tt_dataset *ds, const uint32_t *idx, size_t first, size_t rows)
{
    const size_t D = ds->dim;
    for (size_t r = 0; r < rows; r++) {
        size_t s = idx ? idx[first + r] : first + r;
        memcpy(tw->h_x + r * D, ds->x + s * D, D * sizeof(float));
        tw->h_labels[r] = ds->y[s];
    }
    tt_dev_h2d(&tw->dev, tw->d_act[0], tw->h_x, rows * D * sizeof(float));
    tt_dev_h2d(&tw->dev, tw->d_labels, tw->h_labels, rows * sizeof(int32_t));
}

static void tower_count_stats(tt_tower *tw, size_t rows)
{
    for (size_t r = 0; r < rows; r++) {
        tw->loss_sum += tw->h_stats[2 * r];
        float rank = tw->h_stats[2 * r + 1];
        tw->top1 += rank < 1.0f;
        tw->top5 += rank < 5.0f;
    }
}

static void tower_step(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const tt_model *m = tr->model;
    const size_t P = m->n_params, B = tw->rows;
    tt_dev *dev = &tw->dev;
    tw->loss_sum = 0;
    tw->top1 = tw->top5 = 0;

    double t0 = tt_now();
    tt_dev_h2d(dev, tw->d_params, tr->h_params, P * sizeof(float));
    tt_dev_sync(dev);
    double t1 = tt_now();
    tower_load_rows(tw, tr->ds, tr->idx, tw->lo, B);
    tt_dev_sync(dev);
    double t2 = tt_now();
    if (B == 0) {
        tt_dev_fill(dev, tw->d_grads, P, 0.0f); /* a tower with an empty shard contributes zero */
    } else {
        tt_model_forward(dev, m, tw->d_params, tw->d_act, B);
        tt_dev_softmax_xent(dev, tw->d_dlogits, tw->d_stats, tw->d_act[m->n_layers], tw->d_labels, B, m->n_classes,
                            1.0f / (float)tr->n);
        tt_model_backward(dev, m, tw->d_params, tw->d_grads, tw->d_act, tw->d_delta, tw->d_dlogits, B);
    }
    tt_dev_sync(dev);
    double t3 = tt_now();
    tt_dev_d2h(dev, tr->h_slots[tw->id], tw->d_grads, P * sizeof(float));
    tt_dev_d2h(dev, tw->h_stats, tw->d_stats, 2 * B * sizeof(float));
    tt_dev_sync(dev);
    double t4 = tt_now();
    tower_count_stats(tw, B);
    tw->t.pull = t1 - t0;
    tw->t.data = t2 - t1;
    tw->t.compute = t3 - t2;
    tw->t.push = t4 - t3;
    tw->busy = t4 - t0;
    tw->t_start = t0;
    tw->t_end = t4;
}

static void tower_eval(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const tt_model *m = tr->model;
    tt_dev *dev = &tw->dev;
    tw->loss_sum = 0;
    tw->top1 = tw->top5 = 0;
    double t0 = tt_now();
    tt_dev_h2d(dev, tw->d_params, tr->h_params, m->n_params * sizeof(float));
    for (size_t done = 0; done < tw->rows;) {
        size_t rows = tw->rows - done < tr->shard_max ? tw->rows - done : tr->shard_max;
        tower_load_rows(tw, tr->ds, NULL, tw->lo + done, rows);
        tt_model_forward(dev, m, tw->d_params, tw->d_act, rows);
        tt_dev_softmax_xent(dev, NULL, tw->d_stats, tw->d_act[m->n_layers], tw->d_labels, rows, m->n_classes, 0.0f);
        tt_dev_d2h(dev, tw->h_stats, tw->d_stats, 2 * rows * sizeof(float));
        tt_dev_sync(dev);
        tower_count_stats(tw, rows);
        done += rows;
    }
    tw->busy = tt_now() - t0;
}

/* The body of tower thread i (crew worker i): one job, then back to sleep. */
static void tower_job(void *arg, int i, int n)
{
    (void)n;
    tt_trainer *tr = (tt_trainer *)arg;
    tt_tower *tw = &tr->towers[i];
    switch (tr->job) {
    case JOB_INIT:
        tw->status = tower_alloc(tw);
        break;
    case JOB_STEP:
        if (tw->status == TT_OK) tower_step(tw);
        break;
    case JOB_EVAL:
        if (tw->status == TT_OK) tower_eval(tw);
        break;
    case JOB_FREE:
        tower_release(tw);
        break;
    }
}

/* Wakes every tower with `job` and waits until all of them report done. */
static void run_towers(tt_trainer *tr, int job)
{
    tr->job = job;
    tt_pool_run(&tr->crew, (int)tr->cfg.n_towers, tower_job, tr);
}

static tt_status towers_status(tt_trainer *tr, tt_error *err)
{
    for (size_t t = 0; t < tr->cfg.n_towers; t++)
        if (tr->towers[t].status != TT_OK)
            return tt_fail(err, tr->towers[t].status, "tower %zu (%s device %d): %s", t, tr->cfg.ops->name,
                           tr->towers[t].dev.ordinal, tr->towers[t].err.msg);
    return TT_OK;
}

/* Shard t of n samples over N towers: the first n % N towers take one extra row. */
static void assign_shards(tt_trainer *tr, size_t n)
{
    const size_t N = tr->cfg.n_towers, base = n / N, extra = n % N;
    size_t lo = 0;
    for (size_t t = 0; t < N; t++) {
        tr->towers[t].lo = lo;
        tr->towers[t].rows = base + (t < extra);
        lo += tr->towers[t].rows;
    }
}

tt_status tt_trainer_init(tt_trainer *tr, const tt_model *m, const tt_trainer_config *cfg,
                          const float *h_init_params, tt_error *err)
{
    memset(tr, 0, sizeof *tr);
    tr->cfg = *cfg;
    tr->model = m;
    const size_t N = cfg->n_towers, P = m->n_params;
    if (N < 1) return tt_fail(err, TT_ERR_ARG, "--towers must be at least 1");
    if (cfg->batch < N)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       N, cfg->batch);
    tr->shard_max = (cfg->batch + N - 1) / N;
    tr->h_params = (float *)tt_malloc(P * sizeof(float));
    tr->h_grad = (float *)tt_malloc(P * sizeof(float));
    tr->h_slots = (float **)tt_calloc(N, sizeof(float *));
    tr->towers = (tt_tower *)tt_calloc(N, sizeof(tt_tower));
    if (!tr->h_params || !tr->h_grad || !tr->h_slots || !tr->towers)
        return tt_fail(err, TT_ERR_NOMEM, "out of host memory for %zu parameters", P);
    memcpy(tr->h_params, h_init_params, P * sizeof(float));
    tt_status s = tt_optim_init(&tr->opt, &cfg->optim, P, err);
    if (s) return s;
    int threads = cfg->host_threads > 0 ? cfg->host_threads : tt_cpu_count();
    s = tt_pool_init(&tr->pool, threads, 1, err);
    if (s) return s;
    for (size_t t = 0; t < N; t++) {
        tr->towers[t].id = (int)t;
        tr->towers[t].tr = tr;
    }
    s = tt_pool_init(&tr->crew, (int)N, 0, err);
    if (s) return s;
    tr->crew_up = 1;
    run_towers(tr, JOB_INIT);
    return towers_status(tr, err);
}

void tt_trainer_free(tt_trainer *tr)
{
    if (tr->crew_up) run_towers(tr, JOB_FREE); /* device memory is released on each tower's own thread */
    tt_pool_free(&tr->crew);
    tt_pool_free(&tr->pool);
    if (tr->model) tt_optim_free(&tr->opt);
    tt_free(tr->h_params);
    tt_free(tr->h_grad);
    tt_free(tr->h_slots);
    tt_free(tr->towers);
    memset(tr, 0, sizeof *tr);
}

/* Host crew job: worker i takes one slice of the buffer and, block by block (a block stays in L1), sums the
 * towers' slots in tower order into h_grad and applies the optimizer to the block. Summing in a fixed order makes
 * the result independent of which tower finished first and of how many host threads there are. */
typedef struct reduce_job {
    tt_trainer *tr;
    double t_reduce, t_update; /* measured by worker 0 */
} reduce_job;

enum { REDUCE_BLOCK = 2048 }; /* floats: 8 KiB per operand */

static void reduce_update_slice(void *arg, int i, int n)
{
    reduce_job *job = (reduce_job *)arg;
    tt_trainer *tr = job->tr;
    const size_t P = tr->model->n_params, N = tr->cfg.n_towers;
    size_t chunk = ((P + (size_t)n - 1) / (size_t)n + 15) & ~(size_t)15; /* 64-byte aligned slices */
    size_t lo = (size_t)i * chunk, hi = lo + chunk;
    if (lo > P) lo = P;
    if (hi > P) hi = P;
    const float *grad = N > 1 ? tr->h_grad : tr->h_slots[0]; /* one tower: its slot is the sum */
    double t_reduce = 0, t_update = 0, t = tt_now();
    for (size_t b = lo; b < hi; b += REDUCE_BLOCK) {
        size_t e = b + REDUCE_BLOCK < hi ? b + REDUCE_BLOCK : hi;
        if (N > 1) {
            float *restrict g = tr->h_grad;
            const float *restrict s0 = tr->h_slots[0];
            const float *restrict s1 = tr->h_slots[1];
            for (size_t k = b; k < e; k++) g[k] = s0[k] + s1[k];
            for (size_t w = 2; w < N; w++) {
                const float *restrict sw = tr->h_slots[w];
                for (size_t k = b; k < e; k++) g[k] += sw[k];
            }
        }
        double t1 = tt_now();
        tt_optim_apply(&tr->opt, tr->h_params, grad, b, e);
        double t2 = tt_now();
        t_reduce += t1 - t;
        t_update += t2 - t1;
        t = t2;
    }
    if (i == 0) {
        job->t_reduce = t_reduce;
        job->t_update = t_update;
    }
}

tt_status tt_trainer_step(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n, tt_step_result *res,
                          tt_error *err)
{
    const size_t N = tr->cfg.n_towers;
    if (n == 0 || n > tr->cfg.batch)
        return tt_fail(err, TT_ERR_ARG, "step of %zu samples: must be 1..%zu", n, tr->cfg.batch);
    if (ds->dim != tr->model->input_dim)
        return tt_fail(err, TT_ERR_ARG, "data has %zu features, the model expects %zu", ds->dim, tr->model->input_dim);
    double t0 = tt_now();
    tr->ds = ds;
    tr->idx = idx;
    tr->n = n;
    assign_shards(tr, n);
    run_towers(tr, JOB_STEP);
    double t1 = tt_now();
    tt_status s = towers_status(tr, err);
    if (s) return s;
    double last_end = t0;
    for (size_t t = 0; t < N; t++)
        if (tr->towers[t].t_end > last_end) last_end = tr->towers[t].t_end;

    reduce_job job = {tr, 0, 0};
    tt_optim_begin_step(&tr->opt);
    int use = tr->model->n_params >= 65536 ? tr->pool.n : 1; /* small buffers: threads cost more than they save */
    tt_pool_run(&tr->pool, use, reduce_update_slice, &job);
    double t2 = tt_now();
    tr->steps++;

    memset(res, 0, sizeof *res);
    res->n = n;
    for (size_t t = 0; t < N; t++) {
        const tt_tower *tw = &tr->towers[t];
        res->loss_sum += tw->loss_sum;
        res->top1 += tw->top1;
        res->top5 += tw->top5;
        res->t.tower.pull += tw->t.pull / (double)N;
        res->t.tower.data += tw->t.data / (double)N;
        res->t.tower.compute += tw->t.compute / (double)N;
        res->t.tower.push += tw->t.push / (double)N;
        res->t.launch += (tw->t_start - t0) / (double)N;
        res->t.wait += (last_end - tw->t_end) / (double)N;
    }
    res->t.towers = t1 - t0;
    res->t.notice = t1 - last_end;
    res->t.reduce = job.t_reduce;
    res->t.update = job.t_update;
    res->t.total = t2 - t0;
    return TT_OK;
}

tt_status tt_trainer_evaluate(tt_trainer *tr, const tt_dataset *ds, tt_eval_result *res, tt_error *err)
{
    memset(res, 0, sizeof *res);
    if (ds->n == 0) return TT_OK;
    if (ds->dim != tr->model->input_dim)
        return tt_fail(err, TT_ERR_ARG, "data has %zu features, the model expects %zu", ds->dim, tr->model->input_dim);
    tr->ds = ds;
    tr->idx = NULL;
    tr->n = ds->n;
    assign_shards(tr, ds->n);
    run_towers(tr, JOB_EVAL);
    tt_status s = towers_status(tr, err);
    if (s) return s;
    double loss = 0;
    size_t top1 = 0, top5 = 0;
    for (size_t t = 0; t < tr->cfg.n_towers; t++) {
        loss += tr->towers[t].loss_sum;
        top1 += tr->towers[t].top1;
        top5 += tr->towers[t].top5;
    }
    res->n = ds->n;
    res->loss = loss / (double)ds->n;
    res->accuracy = (double)top1 / (double)ds->n;
    res->top5 = (double)top5 / (double)ds->n;
    return TT_OK;
}

uint64_t tt_trainer_device_allocs(const tt_trainer *tr)
{
    uint64_t n = 0;
    for (size_t t = 0; tr->towers && t < tr->cfg.n_towers; t++) n += tr->towers[t].dev.n_alloc;
    return n;
}
