/* trainer.c — the trainer as its callers see it (include/tt_trainer.h): init and free, runs of steps, the master
 * weights and the optimizer, evaluation and prediction, the memory plan. What a step does, and how its samples are
 * cut into the towers' shards (shards.c), is in the files the private header step.h lists; this one only starts
 * them. */
#include <math.h>

#include "tt_backend.h"
#include "step.h"

const char *const tt_graphs_names[] = {"off", "on", NULL};
const char *const tt_epilogues_names[] = {"kernels", "lt", NULL};
const char *const tt_overlap_names[] = {"off", "on", NULL};
const char *const tt_bn_sync_names[] = {"off", "on", NULL};
const char *const tt_data_on_names[] = {"host", "device", NULL};

int tt_trainer_link_devices(const tt_trainer_config *cfg, int *ords)
{
    int n = (size_t)cfg->n_devices < cfg->n_towers ? cfg->n_devices : (int)cfg->n_towers;
    if (n > TT_MAX_DEVICES) n = TT_MAX_DEVICES;
    for (int d = 0; d < n; d++) ords[d] = cfg->devices ? cfg->devices[d] : d;
    return n;
}

/* The first tower that failed its allocation, in its words. */
static tt_status towers_status(tt_trainer *tr, tt_error *err)
{
    for (size_t t = 0; t < tr->cfg.n_towers; t++)
        if (tr->towers[t].status != TT_OK)
            return tt_fail(err, tr->towers[t].status, "tower %zu (%s device %d): %s", t, tr->cfg.ops->name,
                           tr->towers[t].dev.ordinal, tr->towers[t].err.msg);
    return TT_OK;
}

/* Everything a trainer holds, built or half-built, released. */
static void trainer_release(tt_trainer *tr)
{
    if (tr->comm) tr->cfg.ops->comm_free(tr->comm);
    if (tr->crew_up) crew_run(tr, towers_release); /* device memory is released on each tower's own thread */
    crew_close(tr);
    if (tr->model) tt_optim_free(&tr->opt);
    overlap_free(tr);
    clip_free(tr->clip);
    sync_free(tr);
    tt_free(tr->h_slots);
    tt_free(tr->towers);
}

/* --precision fp16: weights beyond its range would be pulled as Inf — refused before any step or evaluation. */
static tt_status range_check(const tt_trainer *tr, tt_error *err)
{
    if (!atomic_load_explicit(&tr->w16_range, memory_order_relaxed)) return TT_OK;
    const int fp16 = tr->cfg.precision == TT_FMT_FP16;
    return tt_fail(err, TT_ERR_ARG, "--precision %s: the weights hold values whose %s copy would be Inf (|w| >= %s), "
                   "which a tower cannot compute with (give --precision %s)", fp16 ? "fp16" : "bf16",
                   fp16 ? "fp16" : "bf16", fp16 ? "65520" : "3.3961e38", fp16 ? "bf16 or fp32" : "fp32");
}

/* --augment shifts and flips images: a model whose input is H x W x C (not token ids, not a flat vector). */
static tt_status augment_check(const tt_model *m, const tt_trainer_config *cfg, tt_error *err)
{
    if (!tt_augment_on(&cfg->augment)) return TT_OK;
    char shape[64];
    tt_shape_str(&m->input_shape, 0, shape, sizeof shape);
    if (m->token_vocab)
        return tt_fail(err, TT_ERR_ARG, "--augment: the model reads token ids (its input is %s ids), not an image: "
                       "shifts and flips are for image data (give --augment none)", shape);
    if (m->input_shape.ndim != 3)
        return tt_fail(err, TT_ERR_ARG, "--augment: the model's input is %s, not an image (height x width x "
                       "channels): shifts and flips are for image data (give --augment none)", shape);
    return TT_OK;
}

/* tt_trainer_init's work on a zeroed trainer; on failure tr is half-built (trainer_release frees what it holds). */
static tt_status trainer_build(tt_trainer *tr, const tt_model *m, const tt_trainer_config *cfg,
                               const float *h_init_params, tt_error *err)
{
    tr->cfg = *cfg;
    tr->model = m;
    const size_t N = cfg->n_towers, P = m->n_params;
    if (N < 1) return tt_fail(err, TT_ERR_ARG, "--towers must be at least 1");
    if (cfg->batch < N)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       N, cfg->batch);
    if (cfg->n_devices < 1) return tt_fail(err, TT_ERR_ARG, "the backend has no device");

    tt_status s = tt_trainer_check(cfg, err);
    if (!s) s = augment_check(m, cfg, err);
    if (s) return s;
    if (cfg->data_on && cfg->train_set->dim != m->input_dim)
        return tt_fail(err, TT_ERR_ARG, "--data-on device: the training set has %zu features, the model expects %zu",
                       cfg->train_set->dim, m->input_dim);
    tr->place = &placements[cfg->reduce];
    tr->mode = &sync_modes[cfg->sync.kind];
    if (multi_node(cfg)) {
        if ((unsigned)cfg->node_reduce >= TT_NODE_REDUCE_COUNT)
            return tt_fail(err, TT_ERR_ARG, "--node-reduce: unknown mode");
        if (cfg->batch < N * (size_t)cfg->node->size)
            return tt_fail(err, TT_ERR_ARG,
                           "--batch %zu is less than %d ranks x %zu towers: every tower needs at least one sample",
                           cfg->batch, cfg->node->size, N);
        tt_node_slice(P, cfg->node->size, cfg->node->rank, &tr->node_lo, &tr->node_n);
    }
    tr->scaler = (tt_scaler_state){cfg->loss_scale.scale > 0 ? cfg->loss_scale.scale : 1.0, 0, 0};
    tr->shard_max = shard_rows(cfg);
    tr->xchg_max = xchg_floats(m, cfg);
    tr->h_slots = (float **)tt_calloc(N, sizeof(float *));
    tr->towers = (tt_tower *)tt_calloc(N, sizeof(tt_tower));
    if (!tr->h_slots || !tr->towers)
        return tt_fail(err, TT_ERR_NOMEM, "out of host memory for %zu parameters", P);
    /* peer access between the towers' devices, enabled before any tower copies (once per pair, idempotent) */
    tr->n_links = tt_trainer_link_devices(cfg, tr->link_devs);
    s = tt_backend_links(cfg->ops, tr->link_devs, tr->n_links, tr->links, err);
    if (s) return s;
    /* ps: this rank is the parameter server of its slice, and holds the optimizer's state of that slice only */
    size_t own_lo, own_n;
    owned_slice(cfg, P, &own_lo, &own_n);
    s = tt_optim_init(&tr->opt, &cfg->optim, own_n, err);
    if (s) return s;
    /* the non-trainable tail (moving statistics) is added, not optimized: where it starts in this state's slice */
    tr->opt.n_train = m->n_trainable < own_lo ? 0 : m->n_trainable - own_lo < own_n ? m->n_trainable - own_lo : own_n;
    for (size_t t = 0; t < N; t++) {
        tr->towers[t].id = (int)t;
        tr->towers[t].tr = tr;
        tr->towers[t].xchg = (tt_exchange){tower_exchange, &tr->towers[t]};
    }
    const int T = crew_threads(cfg);
    s = crew_open(tr, T, err);
    if (s) return s;
    if (cfg->overlap) {
        s = overlap_init(tr, T, err);
        if (s) return s;
    }
    if (clip_by_norm(cfg) && (s = clip_init(tr, err))) return s;
    if (!(tr->mode->caps & SYNC_SUMMED)) { /* the shards' schedule, or the averages' accounts */
        s = sync_init(tr, T, err);
        if (s) return s;
    }
    crew_run(tr, towers_alloc);
    s = towers_status(tr, err);
    if (s) return s;
    for (size_t t = (size_t)cfg->n_devices; t < N; t++) { /* virtual towers read their device's one copy */
        tr->towers[t].d_set_x = tr->towers[t % (size_t)cfg->n_devices].d_set_x;
        tr->towers[t].d_set_y = tr->towers[t % (size_t)cfg->n_devices].d_set_y;
    }
    if (tr->place->needs & PLACE_COLLECTIVES) { /* one communicator over the towers' devices, from this thread */
        void *ctxs[TT_MAX_DEVICES];
        for (size_t t = 0; t < N; t++) ctxs[t] = tr->towers[t].dev.ctx;
        s = cfg->ops->comm_init(&tr->comm, ctxs, (int)N, err);
        if (s) return s;
    }
    tt_trainer_set_params(tr, h_init_params);
    return range_check(tr, err);
}

tt_status tt_trainer_init(tt_trainer **out, const tt_model *m, const tt_trainer_config *cfg,
                          const float *h_init_params, tt_error *err)
{
    *out = NULL;
    tt_trainer *tr = (tt_trainer *)tt_calloc(1, sizeof *tr);
    if (!tr) return tt_fail(err, TT_ERR_NOMEM, "out of host memory for a trainer");
    const tt_status s = trainer_build(tr, m, cfg, h_init_params, err);
    if (s) {
        tt_trainer_free(tr);
        return s;
    }
    *out = tr;
    return TT_OK;
}

void tt_trainer_free(tt_trainer *tr)
{
    if (!tr) return;
    trainer_release(tr);
    tt_free(tr);
}

const tt_model *tt_trainer_model(const tt_trainer *tr) { return tr->model; }

size_t tt_trainer_optim_offset(const tt_trainer *tr)
{
    size_t lo, n;
    owned_slice(&tr->cfg, tr->model->n_params, &lo, &n);
    return lo;
}

tt_status tt_trainer_plan(const tt_model *m, const tt_trainer_config *cfg, tt_mem_plan *plan, tt_error *err)
{
    tt_status s = tt_trainer_check(cfg, err);
    if (!s) s = augment_check(m, cfg, err);
    if (s) return s;
    /* a trainer and towers that are never allocated: tower_buffers only reads the sizes */
    tt_trainer tr;
    memset(&tr, 0, sizeof tr);
    tr.cfg = *cfg;
    tr.model = m;
    tr.place = &placements[cfg->reduce];
    tr.mode = &sync_modes[cfg->sync.kind];
    tr.shard_max = shard_rows(cfg);
    tr.xchg_max = xchg_floats(m, cfg);
    tr.h_slots = (float **)tt_calloc(cfg->n_towers, sizeof(float *));
    if (!tr.h_slots) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    tt_tower tw;
    buf_list l;
    for (size_t t = 0; t < cfg->n_towers; t++) {
        memset(&tw, 0, sizeof tw);
        tw.id = (int)t;
        tower_buffers(&tr, &tw, &l);
        const int d = (int)(t % (size_t)cfg->n_devices), ord = cfg->devices ? cfg->devices[d] : d;
        for (int i = 0; i < l.n; i++)
            tt_mem_add(plan, l.b[i].part, l.b[i].on_host ? TT_MEM_HOST : ord, (double)l.b[i].bytes, l.b[i].driver);
        if (cfg->ops->lt_bytes) /* what the backend's context holds from init for gemm_bias_act */
            tt_mem_add(plan, "cuBLASLt workspace", ord, (double)cfg->ops->lt_bytes, TT_MEM_BY_RUN);
        if (cfg->graphs) /* what the backend allocates at the tower's first capture */
            tt_mem_add(plan, "graph workspace (--graphs on)", ord, (double)cfg->ops->capture_bytes, TT_MEM_BY_RUN);
    }
    tt_free(tr.h_slots);
    size_t lo, owned; /* ps: the optimizer's state of this rank's slice only */
    owned_slice(cfg, m->n_params, &lo, &owned);
    tt_mem_add(plan, "optimizer state", TT_MEM_HOST,
               (double)tt_optim_state_floats(&cfg->optim) * (double)owned * sizeof(float), TT_MEM_BY_PARAMS);
    plan->model = tt_model_file(m);
    plan->n_params = m->n_params;
    plan->towers = cfg->n_towers;
    plan->rows = tr.shard_max;
    if (cfg->data_on) {
        plan->samples = cfg->train_set->n;
        plan->sample_bytes = tt_dataset_sample_bytes(cfg->train_set);
    }
    return TT_OK;
}

tt_status tt_trainer_evaluate(tt_trainer *tr, const tt_dataset *ds, tt_eval_result *res, tt_error *err)
{
    memset(res, 0, sizeof *res);
    if (ds->n == 0) return TT_OK;
    tt_status rs = range_check(tr, err);
    if (rs) return rs;
    if (ds->dim != tr->model->input_dim)
        return tt_fail(err, TT_ERR_ARG, "data has %zu features, the model expects %zu", ds->dim, tr->model->input_dim);
    tr->ds = ds;
    tr->idx = NULL;
    tr->n = ds->n;
    if (multi_node(&tr->cfg) && tr->h_logits)
        return tt_fail(err, TT_ERR_ARG, "predicting runs in one process (not under mpirun with more than one rank)");
    for (size_t t = 0; t < tr->cfg.n_towers; t++)
        tower_shard(&tr->cfg, ds->n, t, &tr->towers[t].lo, &tr->towers[t].rows);
    crew_run(tr, towers_eval);
    double loss = 0;
    size_t top1 = 0, top5 = 0;
    for (size_t t = 0; t < tr->cfg.n_towers; t++) {
        loss += tr->towers[t].loss_sum;
        top1 += tr->towers[t].top1;
        top5 += tr->towers[t].top5;
    }
    if (multi_node(&tr->cfg)) { /* every rank evaluated its part: the sums over all ranks, in rank order */
        double job[3] = {loss, (double)top1, (double)top5};
        tt_status s = tt_node_sum(tr->cfg.node, job, 3, err);
        if (s) return s;
        loss = job[0];
        top1 = (size_t)job[1];
        top5 = (size_t)job[2];
    }
    res->n = ds->n;
    res->loss = loss / (double)ds->n;
    res->accuracy = (double)top1 / (double)ds->n;
    res->top5 = (double)top5 / (double)ds->n;
    return TT_OK;
}

void tt_trainer_get_params(const tt_trainer *tr, float *h_out)
{
    memcpy(h_out, tr->h_params, tr->model->n_params * sizeof(float));
}

void tt_trainer_set_params(tt_trainer *tr, const float *h_params)
{
    memcpy(tr->h_params, h_params, tr->model->n_params * sizeof(float));
    atomic_store(&tr->w16_range, 0); /* these weights' own range, below */
    if (tr->h_params16) host_narrow_params(tr, 0, tr->model->n_trainable); /* what the towers pull next */
    if (tr->sy) tr->sy->towers_hold = 0; /* weights:K: the next run starts every tower from these */
}

tt_scaler_state tt_trainer_scaler(const tt_trainer *tr) { return tr->scaler; }

void tt_trainer_set_scaler(tt_trainer *tr, const tt_scaler_state *st) { tr->scaler = *st; }

tt_optim *tt_trainer_optim(tt_trainer *tr) { return &tr->opt; }

const float *tt_trainer_params(const tt_trainer *tr) { return tr->h_params; }

tt_status tt_trainer_start_steps(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n,
                                 tt_step_result *results, size_t n_results, tt_tower_ledger *ledger, tt_error *err)
{
    const size_t B = tr->cfg.batch;
    tt_status rs = range_check(tr, err);
    if (rs) return rs;
    if (n == 0) return tt_fail(err, TT_ERR_ARG, "a run of steps needs at least one sample");
    if ((n + B - 1) / B > n_results)
        return tt_fail(err, TT_ERR_ARG, "%zu samples make %zu steps but there is room for %zu results", n,
                       (n + B - 1) / B, n_results);
    if (ds->dim != tr->model->input_dim)
        return tt_fail(err, TT_ERR_ARG, "data has %zu features, the model expects %zu", ds->dim, tr->model->input_dim);
    job_begin(tr, ds, idx, n);
    if (tr->sy) {
        tt_status s = sync_begin(tr, (n + B - 1) / B, err);
        if (s) return s;
    }
    tr->results = results;
    tr->ledger = ledger;
    tr->cur_step = 0;
    atomic_store(&tr->steps_done, 0);
    tr->t_step = tt_now();
    crew_start(tr, tr->mode->run); /* the --sync mode's own loop */
    return TT_OK;
}

int tt_trainer_wait(tt_trainer *tr, double timeout_s, size_t *steps_done)
{
    int done = tt_pool_wait(&tr->crew, timeout_s);
    if (steps_done) *steps_done = (size_t)atomic_load(&tr->steps_done);
    return done;
}

tt_status tt_trainer_step(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n, tt_step_result *res,
                          tt_error *err)
{
    if (n == 0 || n > tr->cfg.batch)
        return tt_fail(err, TT_ERR_ARG, "step of %zu samples: must be 1..%zu", n, tr->cfg.batch);
    tt_status s = tt_trainer_start_steps(tr, ds, idx, n, res, 1, NULL, err);
    if (s) return s;
    tt_trainer_wait(tr, -1, NULL);
    if (tr->halt == TT_HALT_NONFINITE)
        return tt_fail(err, TT_ERR_NUMERIC,
                       "the step's loss or gradient is not finite (no non-finite value was applied)");
    if (tr->halt == TT_HALT_SCALE)
        return tt_fail(err, TT_ERR_NUMERIC, "the dynamic loss scale fell below 1 (the step was skipped)");
    if (tr->halt == TT_HALT_RANGE)
        return tt_fail(err, TT_ERR_NUMERIC, "a master weight grew beyond what the towers' 16-bit copy holds");
    return TT_OK;
}

tt_halt tt_trainer_halted(const tt_trainer *tr) { return tr ? tr->halt : TT_HALT_NONE; }

tt_status tt_trainer_node_error(const tt_trainer *tr, tt_error *err)
{
    if (tr->node_status && err) *err = tr->node_err;
    return tr->node_status;
}

void tt_trainer_set_epoch(tt_trainer *tr, uint64_t epoch) { tr->epoch = epoch; }

void tt_trainer_set_steps(tt_trainer *tr, uint64_t steps) { tr->steps = steps; }

void tt_trainer_request_stop(tt_trainer *tr) { atomic_store(&tr->stop_request, 1); }

void tt_trainer_nonfinite_towers(tt_trainer *tr, int *loss_bad, int *grad_bad)
{
    if (tr->sy && own_weights(tr) && tr->sy->bad_step != SIZE_MAX) { /* recorded as it came */
        memcpy(loss_bad, tr->sy->bad_loss, tr->cfg.n_towers * sizeof(int));
        memcpy(grad_bad, tr->sy->bad_grad, tr->cfg.n_towers * sizeof(int));
        return;
    }
    crew_run(tr, towers_diagnose);
    for (size_t t = 0; t < tr->cfg.n_towers; t++) {
        loss_bad[t] = !isfinite(tr->towers[t].loss_sum);
        grad_bad[t] = tr->towers[t].grad_nonfinite;
    }
}

tt_status tt_trainer_predict(tt_trainer *tr, const tt_dataset *ds, float *h_logits, tt_eval_result *res,
                             tt_error *err)
{
    tr->h_logits = h_logits;
    tt_status s = tt_trainer_evaluate_stoppable(tr, ds, res, err);
    tr->h_logits = NULL;
    return s;
}

tt_status tt_trainer_evaluate_stoppable(tt_trainer *tr, const tt_dataset *ds, tt_eval_result *res, tt_error *err)
{
    tr->eval_stops = 1;
    tt_status s = tt_trainer_evaluate(tr, ds, res, err);
    tr->eval_stops = 0;
    if (!s && tr->cfg.stop && atomic_load(tr->cfg.stop)) /* the caller names the signal */
        s = tt_fail(err, TT_ERR_STOPPED, "stopped");
    return s;
}

uint64_t tt_trainer_device_allocs(const tt_trainer *tr)
{
    uint64_t n = 0;
    for (size_t t = 0; tr && tr->towers && t < tr->cfg.n_towers; t++) n += tr->towers[t].dev.n_alloc;
    return n;
}

int tt_trainer_links(const tt_trainer *tr, const int **ords, const int **link)
{
    *ords = tr->link_devs;
    *link = tr->links;
    return tr->n_links;
}

void tt_trainer_set_lr(tt_trainer *tr, float lr)
{
    tr->opt.cfg.lr = lr;
    for (size_t t = 0; tr->towers && t < tr->cfg.n_towers; t++) tr->towers[t].opt.cfg.lr = lr; /* copies of it */
}

float tt_trainer_lr(const tt_trainer *tr) { return tr->opt.cfg.lr; }
