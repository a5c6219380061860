/* train.c — a training run's flow: load, build, init, then epochs of shuffled steps with validation after each, the
 * test set at the end; stops and halts. It decides when, as a table of phases (g_phases) that every rank of a job walks
 * together, agreeing at the return of each (tt_run_phases); the checkpoint side (train_ckpt.c), the reporting side
 * (train_report.c: console lines, the JSON-lines log, the trace) and the ranks' part (train_ranks.c) do what, each
 * opening and closing its part of the run's state, through the run's private header train_run.h. Not for: the step
 * itself (trainer.c), or what an option means to the run (the options table, train_opts.c). */
#include <errno.h>
#include <math.h>
#include <string.h>
#include <stdlib.h>
#include <unistd.h>

#include "tt_input.h"
#include "tt_rng.h"
#include "tt_signal.h"
#include "train_run.h"

int tt_run_host_threads(const tt_node *nd, int given)
{
    if (given > 0 || nd->local_size <= 1) return given;
    const int share = tt_cpu_count() / nd->local_size;
    return share > 1 ? share : 1;
}

void tt_run_config_defaults(tt_run_config *c)
{
    memset(c, 0, sizeof *c);
    c->data = "fashion-mnist";
    c->model = "mlp";
    c->device = "auto";
    c->towers = 1;
    c->batch = 256;
    c->epochs = 10;
    c->optim = tt_optim_defaults(TT_OPT_ADAM);
    c->lr_scaling = TT_LR_NONE;
    c->seed = 1;
    c->val_samples = 10000;
    c->progress = TT_PROGRESS_AUTO;
    c->reduce = TT_REDUCE_CPU;
    c->keep = 3;
}

/* ---- the run ----------------------------------------------------------------------------------------------- */

/* The whole run's memory, before anything large is allocated: the trainer's buffers and the run's own. */
static tt_status run_check_memory(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    tt_status s = tt_trainer_plan(rs->model, &rs->tc, &plan, err);
    if (s) return s;
    const double P = (double)rs->model->n_params, steps = (double)rs->steps, N = (double)c->towers;
    tt_mem_add(&plan, "initial and final weights", TT_MEM_HOST, 2 * P * sizeof(float), TT_MEM_BY_PARAMS);
    tt_mem_add(&plan, "shuffle index", TT_MEM_HOST, (double)rs->train->n * sizeof(uint32_t), TT_MEM_BY_RUN);
    const double slots = (double)tt_optim_state_floats(&rs->tc.optim);
    if (c->resume) /* the file's bytes (broadcast by rank 0 to a job's ranks), and its tensors parsed from them */
        tt_mem_add(&plan, "--resume checkpoint", TT_MEM_HOST, 2 * (1 + slots) * P * sizeof(float), TT_MEM_BY_PARAMS);
    tt_mem_add(&plan, "step records", TT_MEM_HOST,
               steps * (sizeof(tt_step_result) + sizeof(double) + N * sizeof(tt_tower_ledger)), TT_MEM_BY_RUN);
    if (c->trace && rs->ranks.K > 1)
        tt_mem_add(&plan, "--trace: every rank's step records", TT_MEM_HOST,
                   (double)rs->ranks.K * steps * (sizeof(tt_step_result) + N * sizeof(tt_tower_ledger)), TT_MEM_BY_RUN);
    cb_plan(rs, &plan); /* restore_best_weights: the best epoch's weights */
    if (rs->ranks.K > 1 && rs->ranks.rank0 && c->checkpoint_dir && c->node_reduce == TT_NODE_PS)
        tt_mem_add(&plan, "optimizer state gathered for checkpoints (ps)", TT_MEM_HOST, slots * P * sizeof(float),
                   TT_MEM_BY_PARAMS);
    if (rs->ranks.nd->local_size > 1) { /* ranks on one machine share its memory: each plans for all of them */
        const double mine = tt_mem_total(&plan, TT_MEM_HOST) + (rs->ops->mem_info ? 0 : tt_mem_total(&plan, 0));
        tt_mem_add(&plan, "the other ranks on this machine", TT_MEM_HOST, (rs->ranks.nd->local_size - 1) * mine,
                   TT_MEM_BY_RUN);
    }
    return tt_mem_check(&plan, rs->ops, err);
}

/* This rank's part of opening: model, trainer configuration, memory check, buffers, the ranks' part, checkpoint
 * directory and options, the reporting side's files — in that order, so nothing large is allocated before the budget
 * says it fits. */
/* The optimizer's rate: --lr, times --lr-scaling linear's factor (the towers of every rank), on every rate of the
 * schedule; Goyal's warm-up over --warmup-epochs, in optimizer steps (ssp, async: one a gradient, N a step). */
static tt_status run_schedule(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    if (c->warmup_epochs && c->lr_scaling != TT_LR_LINEAR)
        return tt_fail(err, TT_ERR_ARG, "--warmup-epochs: ramps the rate from --lr to the rate --lr-scaling linear "
                       "scales it to; give --lr-scaling linear (or a --lr-schedule cosine warm-up)");
    if (c->reduce_lr.kind && (c->lr_schedule.kind != TT_SCHED_CONSTANT || c->warmup_epochs)) /* as Keras refuses */
        return tt_fail(err, TT_ERR_ARG, "--reduce-lr-on-plateau: not with %s (the rate of every step is the "
                       "schedule's; Keras's ReduceLROnPlateau refuses a LearningRateSchedule too)",
                       c->warmup_epochs ? "--warmup-epochs" : "--lr-schedule");
    if (c->lr_given && c->lr_schedule.kind == TT_SCHED_STEP) /* Keras's PiecewiseConstantDecay: its values are it */
        return tt_fail(err, TT_ERR_ARG, "--lr: not with --lr-schedule step (its values are the rates)");
    tt_optim_config *o = &rs->tc.optim;
    const float k = c->lr_scaling == TT_LR_LINEAR ? (float)(c->towers * (size_t)rs->ranks.K) : 1.0f;
    o->lr = c->optim.lr * k;
    o->sched = c->lr_schedule;
    o->sched.scale = k;
    const size_t per_step = c->sync.kind == TT_SYNC_SSP || c->sync.kind == TT_SYNC_ASYNC ? c->towers : 1;
    o->sched.ramp_steps = (uint64_t)c->warmup_epochs * rs->steps * per_step;
    return TT_OK;
}

static tt_status run_open_local(void *ctx, tt_error *err)
{
    run_state *rs = (run_state *)ctx;
    const tt_run_config *c = rs->c;
    tt_status s = tt_backend_open(c->device, c->gpus, &rs->be, err);
    if (s) return s;
    rs->ops = rs->be.ops;
    rs->model = (tt_model *)tt_calloc(1, sizeof *rs->model);
    if (!rs->model) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    s = tt_run_model(c, rs->train, rs->val, rs->test, rs->model, err);
    if (s) return s;
    tt_trainer_config *tc = &rs->tc;
    tt_run_opts_to_trainer(c, tc); /* the options table's rows with a trainer field; what the run derives: */
    tc->ops = rs->ops;
    tc->n_devices = rs->be.n_devices;
    tc->devices = rs->be.devices;
    /* buffers are sized by the smaller of the batch and the data: a batch beyond the data is one step of it all */
    tc->batch = c->batch < rs->train->n ? c->batch : rs->train->n;
    if (tc->batch < c->towers) tc->batch = c->towers;
    tc->host_threads = tt_run_host_threads(rs->ranks.nd, c->host_threads); /* ranks on one machine share its cores */
    tc->bucket_bytes = c->bucket_kib << 10;
    tc->loss_scale = tt_run_loss_scale(c); /* given, or the precision's default */
    tc->train_set = rs->train;
    tc->stop = tt_signal_flag();
    tc->node = rs->ranks.K > 1 ? rs->ranks.nd : NULL;
    rs->steps = (rs->train->n + tc->batch - 1) / tc->batch;
    if ((s = run_schedule(rs, err))) return s;
    s = run_check_memory(rs, err);
    if (s) return s;

    rs->h_init = (float *)tt_malloc(rs->model->n_params * sizeof(float));
    rs->idx = (uint32_t *)tt_malloc(rs->train->n * sizeof(uint32_t));
    rs->step_secs = (double *)tt_malloc(rs->steps * sizeof(double));
    rs->results = (tt_step_result *)tt_calloc(rs->steps, sizeof(tt_step_result));
    rs->ledger = (tt_tower_ledger *)tt_calloc(rs->steps * c->towers, sizeof(tt_tower_ledger));
    if (!rs->h_init || !rs->idx || !rs->step_secs || !rs->results || !rs->ledger)
        return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    if ((s = ranks_open(rs, err)) || (s = cb_open(rs, err))) return s;
    tt_model_init_params(rs->model, rs->h_init, c->seed);
    if ((s = ckpt_open(rs, err))) return s;
    /* which training set: a resume on other data with as many steps is refused; every rank of a job must have it */
    if (c->checkpoint_dir || c->resume || rs->ranks.K > 1) {
        uint32_t crc = tt_crc32(0, rs->train->x, rs->train->n * tt_dataset_sample_bytes(rs->train));
        rs->data_crc = tt_crc32(crc, rs->train->y, rs->train->n * sizeof(int32_t));
    }
    size_t text_len;
    if (tt_model_file(rs->model) && (c->checkpoint_dir || rs->ranks.K > 1) &&
        (s = tt_input_read_text(c->model, "model file", (size_t)1 << 20, &rs->model_text, &text_len, err)))
        return s;
    if (c->checkpoint_dir && (s = run_ckpt_options(rs, err))) return s;
    if ((s = report_open(rs, err))) return s;
    return rs->report.live ? live_open(rs, err) : TT_OK; /* the live view draws with the report's flush */
}

/* ---- opening, after this rank's part and the ranks' check: each a phase (g_phases, below) ------------------- */

/* The banner, then --resume's checkpoint (a failed banner is recorded: agreed at the phase's return). */
static tt_status run_open_resume(void *ctx, tt_error *err)
{
    run_state *rs = (run_state *)ctx;
    const tt_run_config *c = rs->c;
    print_banner(rs);
    if (c->resume && !rs->ranks.pending.s && rs->ranks.rank0) resume_notice_busy(c->resume);
    return c->resume ? run_resume_load(rs, err) : TT_OK;
}

/* The towers, --resume's optimizer state, the trace and the event files, every rank's clock; or, for a --resume of a
 * run that finished, its line and record (no towers, no trace: the run ends there). */
static tt_status run_start(void *ctx, tt_error *err)
{
    run_state *rs = (run_state *)ctx;
    const tt_run_config *c = rs->c;
    if (rs->ckpt.nothing_left[0]) { /* "nothing_to_train": one line, a record, exit 0 */
        if (rs->out) {
            fprintf(rs->out, "%s\n", rs->ckpt.nothing_left);
            print_flush(rs);
        }
        log_nothing_left(rs);
        return TT_OK;
    }
    tt_status s = TT_OK;
    if (!rs->ranks.pending.s && rs->ranks.rank0 && c->checkpoint_dir)
        s = tt_ckpt_none_ahead(c->checkpoint_dir, rs->start_epoch, rs->start_step, rs->steps, err);
    if (!s && !rs->ranks.pending.s) s = tt_trainer_init(&rs->tr, rs->model, &rs->tc, rs->h_init, err);
    if (!s && !rs->ranks.pending.s && c->resume) run_resume_optim(rs);
    run_fail(rs, s, err);
    report_start(rs);
    ranks_clocks(rs);
    return TT_OK;
}

/* K ranks: what every rank holds, in rank 0's log; then the epochs begin (the step loop's allocations are counted
 * from here). */
static tt_status run_ranks_record(void *ctx, tt_error *err)
{
    run_state *rs = (run_state *)ctx;
    (void)err;
    if (rs->ranks.K > 1) log_ranks(rs);
    rs->allocs_mark = tt_alloc_count() + tt_trainer_device_allocs(rs->tr);
    rs->epoch = rs->start_epoch;
    return TT_OK;
}

/* Runs started steps first.. of epoch `epoch` on the crew (the epoch began at step `begin` in this process); the
 * calling thread only draws the bar (and notices a console that fails) and writes --tensorboard-every-steps's
 * records as steps finish. */
static void run_steps(run_state *rs, size_t epoch, double e0, size_t begin, size_t first, size_t *done_steps)
{
    size_t drawn = begin, seen = 0, top1 = 0;
    double loss_sum = 0;
    const int tb_steps_on = rs->c->tensorboard_every_steps && rs->report.tb.f[0].buf;
    int live = rs->report.live && live_fits(rs), bar = rs->bar || (rs->report.live && !live); /* too small: the bar */
    while (!tt_trainer_wait(rs->tr, bar || live || tb_steps_on ? 0.1 : -1, done_steps)) {
        /* results[begin..first + done_steps) are final: fold them in and redraw the bar */
        for (; drawn < first + *done_steps; drawn++) {
            loss_sum += rs->results[drawn].loss_sum;
            top1 += rs->results[drawn].top1;
            seen += rs->results[drawn].n;
        }
        tb_steps(rs, epoch, first + *done_steps);
        if (live && !rs->ranks.pending.s &&
            !live_draw(rs, begin, first + *done_steps, e0, seen ? loss_sum / (double)seen : 0,
                       seen ? (double)top1 / (double)seen : 0)) {
            live = 0; /* resized too small: the bar for the rest of these steps */
            bar = 1;
        }
        if (bar && seen && !rs->ranks.pending.s) {
            print_bar(rs->out, begin, first + *done_steps, rs->steps, tt_now() - e0, loss_sum / (double)seen,
                      (double)top1 / (double)seen, 0);
            print_flush(rs);
        }
        if (rs->ranks.pending.s) tt_trainer_request_stop(rs->tr); /* stop now, not after training */
    }
    tb_steps(rs, epoch, first + *done_steps); /* the last steps, or all of them without a bar */
    live_end(rs);                             /* the view erased: the epoch's line (or the stop's) takes its place */
    if (bar && !rs->bar && rs->out) fputs("\r\033[K", rs->out); /* the small terminal's bar, likewise */
}

/* The steps of an epoch that ran in this process, first..end-1 (all of them; from a resumed step; or those before a
 * halt): stats, console, log, trace. */
static void epoch_stats(run_state *rs, size_t epoch, size_t first, size_t end, tt_epoch_stats *es)
{
    memset(es, 0, sizeof *es);
    es->epoch = epoch;
    es->first_step = first;
    es->steps = end - first;
    double loss_sum = 0;
    size_t top1 = 0, top5 = 0, seen = 0;
    for (size_t st = first; st < end; st++) {
        const tt_step_result *r = &rs->results[st];
        loss_sum += r->loss_sum;
        top1 += r->top1;
        top5 += r->top5;
        seen += r->n;
        tt_step_times_add(&es->split, &r->t);
        es->applied += r->applied;
        es->staleness_sum += r->staleness_sum;
        es->staleness_max = r->staleness_max > es->staleness_max ? r->staleness_max : es->staleness_max;
        es->averages += r->averaged != 0;
        es->divergence_sum += r->divergence;
        es->loss_scale = tt_trainer_scaler(rs->tr).scale; /* in force after the epoch's last step */
        es->skipped += r->skipped != 0;
        es->grad_under += r->grad_under;
        es->grad_elems += r->grad_elems;
        es->lr = r->lr;
        rs->step_secs[st - first] = r->t.total;
    }
    es->step_median = tt_median(rs->step_secs, end - first);
    es->samples = seen;
    es->loss = seen ? loss_sum / (double)seen : NAN;
    es->accuracy = seen ? (double)top1 / (double)seen : NAN;
    es->top5 = seen ? (double)top5 / (double)seen : NAN;
}

/* ---- checkpoints ---------------------------------------------------------------------------------------------- */

/* The signal that stopped the job, agreed by every rank (tt_node_stop_signal). 0: none. */
static int run_signal(run_state *rs) { return tt_node_stop_signal(rs->ranks.nd); }

/* A stop request seen between steps (during loading, validation or before the test set). */
static tt_status run_stopped(run_state *rs, const char *where, size_t epoch, size_t step, tt_error *err)
{
    int sig = run_signal(rs);
    char note[3100];
    run_save_on_stop(rs, epoch, step, note, sizeof note);
    tt_status s = tt_fail(err, TT_ERR_STOPPED, "stopped by %s %s%s", tt_signal_name(sig), where, note);
    char fields[128];
    snprintf(fields, sizeof fields, "\"signal\":\"%s\",\"epoch\":%zu,\"step\":%zu,", tt_signal_name(sig), epoch, step);
    log_end(rs, "stopped", fields, err);
    return s;
}

/* After TT_HALT_NONFINITE: which towers, then one line and the "error" record. */
static tt_status run_nonfinite(run_state *rs, size_t epoch, size_t step, tt_error *err)
{
    const size_t N = rs->c->towers, K = (size_t)rs->ranks.K;
    int *all = rs->ranks.records, *bad = all + K * 2 * N; /* loss, then gradient, per tower: every rank's, this one's */
    char *fields = (char *)tt_calloc(8 * N * K + 160, 1); /* the record's fields: every tower fits */
    double loss = rs->results[step - 1].loss_sum;
    char *list = fields;
    size_t len = 0;
    tt_trainer_nonfinite_towers(rs->tr, bad, bad + N);
    for (size_t t = 0; t < N; t++) /* --sync weights: a tower's loss at the step that went bad, not the last one's */
        if (bad[t]) loss = NAN;
    tt_error e; /* every rank's towers, named as the job's towers rank * N + t (one rank: its own) */
    const tt_status gs = tt_node_allgather(rs->ranks.nd, bad, all, 2 * N * sizeof(int), &e);
    if (fields) {
        list += sprintf(fields, "\"kind\":\"nonfinite\",\"epoch\":%zu,\"step\":%zu,\"towers\":[", epoch, step);
        for (size_t g = 0; !gs && g < N * K; g++) {
            const int *b = all + (g / N) * 2 * N;
            if (b[g % N] || b[N + g % N]) len += (size_t)sprintf(list + len, "%s%zu", len ? "," : "", g);
        }
    }
    /* a non-finite loss skips the whole update; a gradient that is non-finite only in places skips those blocks; a
     * fixed loss scale's overflow is the scale's, not the rate's */
    const int fixed_scale = rs->tc.precision == TT_FMT_FP16 && !rs->tc.loss_scale.dynamic && rs->tc.loss_scale.scale > 1;
    const char *hint = fixed_scale && isfinite(loss)
                           ? "the fixed --loss-scale overflows 16 bits: try a smaller one, or dynamic"
                           : "try a smaller --lr";
    tt_status s = tt_fail(err, TT_ERR_NUMERIC,
                          "epoch %zu, step %zu/%zu: the %s is not finite (towers with a non-finite gradient or loss: "
                          "%.200s); training stopped at this step, %s (%s)",
                          epoch, step, rs->steps, isfinite(loss) ? "summed gradient" : "loss",
                          len ? list : "none, the sum overflowed",
                          isfinite(loss) ? "its non-finite gradient blocks not applied" : "its update not applied",
                          hint);

    if (fields) {
        strcpy(list + len, "],");
        log_end(rs, "error", fields, err);
    }
    tt_free(fields);
    return s;
}

/* A run that halted after `steps` steps of this epoch, `first` of them before this process: their records, then the
 * reason. */
static tt_status run_halted(run_state *rs, size_t epoch, size_t first, size_t steps, tt_error *err)
{
    tt_error werr;
    if (tt_trainer_halted(rs->tr) == TT_HALT_NODE) /* a collective failed: no other one can be trusted now */
        return tt_trainer_node_error(rs->tr, err);
    /* the console's failure while the crew ran (the only output then) is the halt's reason, returned below; the
     * stop's collectives and checkpoint go on without it, and the halted steps' records are written as far as they
     * go, their failures not the run's */
    const tt_status console = rs->ranks.pending.s;
    tt_error console_err = rs->ranks.pending.err;
    rs->ranks.pending.s = TT_OK;
    if (rs->report.log.buf && steps > first)
        tt_ledger_json_steps(&rs->report.log, epoch, rs->results, rs->ledger, first, steps, rs->c->towers, &werr);
    if (rs->c->trace && steps > first) run_trace_steps(rs, first, steps);
    rs->ranks.pending.s = TT_OK;
    if (rs->out && rs->bar && !console) fputc('\n', rs->out);
    if (tt_trainer_halted(rs->tr) == TT_HALT_NONFINITE) return run_nonfinite(rs, epoch, steps, err);
    if (tt_trainer_halted(rs->tr) == TT_HALT_RANGE) {
        char fields[96];
        snprintf(fields, sizeof fields, "\"kind\":\"fp16_range\",\"epoch\":%zu,\"step\":%zu,", epoch, steps);
        const int fp16 = rs->tc.precision == TT_FMT_FP16;
        tt_status s = tt_fail(err, TT_ERR_NUMERIC,
                              "epoch %zu, step %zu/%zu: a master weight grew to where its %s copy is Inf (|w| >= %s), "
                              "which the towers cannot compute with; training stopped after this step (try %sa smaller "
                              "--lr)", epoch, steps, rs->steps, fp16 ? "fp16" : "bf16", fp16 ? "65520" : "3.3961e38",
                              fp16 ? "--precision bf16, or " : "");
        log_end(rs, "error", fields, err);
        return s;
    }
    if (tt_trainer_halted(rs->tr) == TT_HALT_SCALE) {
        const tt_scaler_state sc = tt_trainer_scaler(rs->tr);
        char fields[160];
        snprintf(fields, sizeof fields, "\"kind\":\"loss_scale\",\"epoch\":%zu,\"step\":%zu,\"skipped\":%llu,", epoch,
                 steps, (unsigned long long)sc.skipped);
        tt_status s = tt_fail(err, TT_ERR_NUMERIC,
                              "epoch %zu, step %zu/%zu: the dynamic loss scale fell below 1 (%llu steps skipped): the "
                              "%s gradient overflows even unscaled; training stopped, the skipped steps not applied "
                              "(try a smaller --lr, or --precision bf16)",
                              epoch, steps, rs->steps, (unsigned long long)sc.skipped,
                              tt_precision_names[rs->tc.precision]);
        log_end(rs, "error", fields, err);
        return s;
    }
    if (rs->ranks.K > 1) {
        /* rank 0's stdout failed while the crew ran (its stop request halted every rank): every rank learns it first,
         * and it is the run's failure as in one process — no stop's checkpoint, an "error" record */
        if (console) *err = console_err;
        tt_status st = run_agree(rs, console, err);
        if (st) {
            log_end(rs, "error", "\"kind\":\"output\",", err);
            return st;
        }
        char at[128];
        snprintf(at, sizeof at, "in epoch %zu after step %zu/%zu (the master weights are those after that step)",
                 epoch, steps, rs->steps);
        return run_stopped(rs, at, epoch, steps, err); /* every rank: the stop's collectives (signal, checkpoint) */
    }
    if (console) { /* stdout failed while the crew ran: that is the error */
        *err = console_err;
        log_end(rs, "error", "\"kind\":\"output\",", err);
        return console;
    }
    char where[128];
    snprintf(where, sizeof where, "in epoch %zu after step %zu/%zu (the master weights are those after that step)",
             epoch, steps, rs->steps);
    return run_stopped(rs, where, epoch, steps, err);
}

void tt_epoch_order(uint32_t *idx, size_t n, uint64_t seed, uint64_t epoch)
{
    for (size_t i = 0; i < n; i++) idx[i] = (uint32_t)i;
    tt_rng rng;
    tt_rng_seed(&rng, seed, epoch);
    tt_rng_shuffle(&rng, idx, n);
}

/* The steps of an epoch from step `first` (0, or where a resumed checkpoint left off) to its end, in runs of steps
 * that end at every --save-every-steps boundary of the run's global step count, with a checkpoint there. */
static tt_status run_epoch_steps(run_state *rs, size_t epoch, size_t first, double e0, tt_error *err)
{
    const tt_run_config *c = rs->c;
    const size_t B = rs->tc.batch, n = rs->train->n, before = (epoch - 1) * rs->steps; /* global steps before */
    for (size_t k = first; k < rs->steps;) {
        size_t end = rs->steps;
        if (c->save_every_steps) { /* the next multiple of N after global step before + k */
            const size_t next = ((before + k) / c->save_every_steps + 1) * c->save_every_steps - before;
            end = next < end ? next : end;
        }
        const size_t lo = k * B, hi = end * B < n ? end * B : n;
        tt_trainer_set_steps(rs->tr, before + k); /* weights:K counts the training's steps */
        tt_status s = tt_trainer_start_steps(rs->tr, rs->train, rs->idx + lo, hi - lo, rs->results + k, end - k,
                                             rs->ledger + k * c->towers, err);
        if (s) return s;
        size_t done = 0;
        run_steps(rs, epoch, e0, first, k, &done);
        if (tt_trainer_halted(rs->tr)) return run_halted(rs, epoch, first, k + done, err);
        k = end;
        if (c->save_every_steps && k < rs->steps && (before + k) % c->save_every_steps == 0) {
            if (rs->bar && rs->out) fputc('\n', rs->out);
            if ((s = run_save(rs, epoch, k, NULL, err))) return s;
        }
    }
    return TT_OK;
}

/* The step loop's allocations so far (tt_run_result.allocs_after_first_step: none after the first step). */
static void run_count_allocs(run_state *rs)
{
    rs->res->allocs_after_first_step = tt_alloc_count() + tt_trainer_device_allocs(rs->tr) - rs->allocs_mark;
}

/* An epoch: its order, the steps (from `first`), validation, then console, log, trace and TensorBoard; a signal
 * that came between steps (while loading or validating) stops the run before it instead. */
static tt_status run_epoch(void *ctx, tt_error *err)
{
    run_state *rs = (run_state *)ctx;
    const tt_run_config *c = rs->c;
    const size_t epoch = rs->epoch, first = epoch == rs->start_epoch ? rs->start_step : 0;
    tt_status s;
    if (epoch > c->epochs) return TT_OK; /* no epoch to run (--epochs 0) */
    if (run_signal(rs)) {
        char where[64];
        snprintf(where, sizeof where, "before epoch %zu", epoch);
        s = first ? run_stopped(rs, where, epoch, first, err)
                  : run_stopped(rs, where, epoch - 1, epoch > 1 ? rs->steps : 0, err);
        run_count_allocs(rs);
        return s;
    }
    if (c->before_epoch && (s = c->before_epoch(c->before_epoch_ctx, epoch, err)) != TT_OK) return s;
    tt_epoch_order(rs->idx, rs->train->n, c->seed, epoch);
    if (rs->out) fprintf(rs->out, "Epoch %zu/%zu\n", epoch, c->epochs);
    double e0 = tt_now();
    tt_trainer_set_epoch(rs->tr, epoch);
    tb_epoch_begin(rs, first);
    s = run_epoch_steps(rs, epoch, first, e0, err);
    run_count_allocs(rs);
    if (s) return s;
    tt_epoch_stats *es = &rs->es;
    epoch_stats(rs, epoch, first, rs->steps, es);
    es->seconds = tt_now() - e0;
    double v0 = tt_now();
    s = tt_trainer_evaluate(rs->tr, rs->val, &es->val, err);
    if (s) return s;
    if (c->trace) {
        char name[32];
        snprintf(name, sizeof name, "epoch %zu", epoch);
        if (rs->report.trace.out.buf) {
            tt_trace_span(&rs->report.trace, name, e0, e0 + es->seconds);
            tt_trace_span(&rs->report.trace, "validation", v0, tt_now());
        }
        run_trace_steps(rs, first, rs->steps); /* every rank gathers; rank 0 writes */
    }
    print_epoch(rs, es);
    log_epoch(rs, es);
    tb_epoch(rs, es);
    return TT_OK; /* K ranks: rank 0's trace, console or log may have failed: agreed before the checkpoints */
}

/* The epoch's figures in the result, and its checkpoints. */
static tt_status run_epoch_saves(void *ctx, tt_error *err)
{
    run_state *rs = (run_state *)ctx;
    const size_t epoch = rs->epoch;
    tt_run_result *res = rs->res;
    tt_status s = TT_OK;
    if (epoch <= rs->c->epochs) {
        if (epoch <= sizeof res->epochs / sizeof res->epochs[0]) res->epochs[epoch - 1] = rs->es;
        res->n_epochs = epoch;
        if (rs->cb.on) cb_epoch_end(rs, &rs->es); /* first: the epoch's checkpoints carry its decisions */
        if (rs->c->checkpoint_dir) s = run_save_epoch(rs, epoch, &rs->es, err);
    }
    run_count_allocs(rs);
    return s;
}

/* After an epoch's checkpoints: the next epoch's phase, or on past the epochs (or EarlyStopping's stop). */
static size_t run_next_epoch(void *ctx, size_t at, size_t n)
{
    run_state *rs = (run_state *)ctx;
    (void)n;
    if (rs->epoch >= cb_last_epoch(rs)) return at + 1;
    rs->epoch++;
    return at - 1;
}

/* The end of training: restore_best_weights' weights back (Keras's on_train_end), then its checkpoint — a finished
 * run's, after the last epoch run (EarlyStopping's too) — unless the last epoch's is it and nothing was restored. */
static tt_status run_end_save(void *ctx, tt_error *err)
{
    run_state *rs = (run_state *)ctx;
    const size_t last = cb_last_epoch(rs);
    rs->res->stopped_epoch = (size_t)rs->cb.st.es_stopped_epoch;
    const int restored = cb_train_end(rs);
    if (rs->c->checkpoint_dir && (restored || rs->ckpt.saved_step != (uint64_t)last * rs->steps))
        return run_save(rs, last, rs->steps, NULL, err);
    return TT_OK;
}

/* The test set, its line and record. A signal stops the evaluation at a batch boundary: no figures, and the final
 * checkpoint (written before it) stays as it is. */
static tt_status run_finish(void *ctx, tt_error *err)
{
    run_state *rs = (run_state *)ctx;
    tt_run_result *res = rs->res;
    if (run_signal(rs)) return run_stopped(rs, "before the test set", cb_last_epoch(rs), rs->steps, err);
    tt_status s = tt_trainer_evaluate_stoppable(rs->tr, rs->test, &res->test, err);
    const int cut = s == TT_ERR_STOPPED;
    if (cut) s = TT_OK;             /* this rank's flag: every rank decides alike below */
    const int sig = run_signal(rs); /* every rank calls it, whatever its own status */
    if (!s && sig) {
        memset(&res->test, 0, sizeof res->test);
        return run_stopped(rs, cut ? "while the test set was evaluated (stopped at a batch boundary: no test figures)"
                                   : "as the test set's evaluation ended (no test figures)",
                           cb_last_epoch(rs), rs->steps, err);
    }
    run_fail(rs, s, err); /* this rank's evaluation failed: no line, no record */
    print_test(rs, &res->test);
    log_test(rs, &res->test);
    return TT_OK;
}

/* The final weights; a signal during the test set's last batch stops the run here. */
static tt_status run_final(void *ctx, tt_error *err)
{
    run_state *rs = (run_state *)ctx;
    tt_run_result *res = rs->res;
    res->n_params = rs->model->n_params;
    res->final_params = (float *)tt_malloc(rs->model->n_params * sizeof(float));
    if (res->final_params) tt_trainer_get_params(rs->tr, res->final_params);
    if (run_signal(rs))
        return run_stopped(rs, "while the test set was evaluated (it was finished)", cb_last_epoch(rs), rs->steps,
                           err);
    return TT_OK;
}

/* The sides' files closed (report_close: the first error winning), then the run's last agreement (not after a step
 * whose cross-node collective failed: TT_HALT_NODE, where no other one can be trusted; another failed collective has
 * already left its failure to this one), and every part's memory. */
static tt_status run_close(run_state *rs, tt_status s, tt_error *err)
{
    run_fail(rs, s, err); /* this rank's first failure: one recorded before s, or s */
    if ((s = rs->ranks.pending.s)) *err = rs->ranks.pending.err;
    s = report_close(rs, s, err);
    if (tt_trainer_halted(rs->tr) != TT_HALT_NODE) s = run_agree(rs, s, err); /* the end: every rank alike */
    tt_trainer_free(rs->tr);
    rs->tr = NULL;
    ckpt_close(rs); /* the directory is free for the next run */
    ranks_close(rs);
    cb_close(rs);
    tt_free(rs->idx);
    tt_free(rs->step_secs);
    tt_free(rs->results);
    tt_free(rs->ledger);
    tt_free(rs->h_init);
    tt_free(rs->model_text);
    tt_free(rs->model);
    return s;
}

/* ---- the run's phases --------------------------------------------------------------------------------------- */

static tt_status run_ranks_check(void *rs, tt_error *err) { return ranks_check((run_state *)rs, err); }
/* A --resume of a finished run ends after its line: no towers, no epochs. */
static size_t run_next_start(void *rs, size_t at, size_t n)
{
    return ((run_state *)rs)->ckpt.nothing_left[0] ? n : at + 1;
}
/* A cross-node collective failed (TT_HALT_NODE): no agreement can be trusted. */
static int run_broken(void *rs) { return tt_trainer_halted(((run_state *)rs)->tr) == TT_HALT_NODE; }

/* Every rank walks these in this order; at each one's return every rank learns how it went on every rank (a
 * failure only one rank knows — rank 0's output, a checkpoint, a part of opening — ends the job there, on every rank,
 * with its line); only a failed collective is left to abort the job. */
static const tt_run_phase g_phases[] = {
    {run_open_local, NULL},              /* this rank's part of opening */
    {run_ranks_check, NULL},             /* every rank's configuration against rank 0's */
    {run_open_resume, NULL},             /* the banner, --resume's checkpoint */
    {run_start, run_next_start},         /* the towers, the trace, the event files */
    {run_ranks_record, NULL},            /* what every rank holds, in the log */
    {run_epoch, NULL},                   /* an epoch's steps, validation, lines and records */
    {run_epoch_saves, run_next_epoch},   /* its checkpoints; then the next epoch */
    {run_end_save, NULL},                /* the end of training's checkpoint */
    {run_finish, NULL},                  /* the test set */
    {run_final, NULL},                   /* the final weights */
};

tt_status tt_run_on(const tt_run_config *c, const tt_dataset *train, const tt_dataset *val, const tt_dataset *test,
                    FILE *out, tt_run_result *res, tt_error *err)
{
    memset(res, 0, sizeof *res);
    if (train->n == 0) return tt_fail(err, TT_ERR_ARG, "no training samples");
    if (c->towers > c->batch)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       c->towers, c->batch);
    tt_run_opts_check();
    run_state *rs = (run_state *)tt_calloc(1, sizeof *rs);
    if (!rs) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    rs->c = c;
    rs->res = res;
    rs->start_epoch = 1;
    rs->train = train;
    rs->val = val;
    rs->test = test;
    rs->out = c->progress == TT_PROGRESS_QUIET ? NULL : out;
    const int tty = rs->out && isatty(fileno(out));
    rs->bar = rs->out && (c->progress == TT_PROGRESS_BAR || (c->progress == TT_PROGRESS_AUTO && tty));
    ranks_init(rs);
    ckpt_init(rs);
    report_init(rs);
    rs->report.live = tty && c->progress == TT_PROGRESS_TOWERS; /* not a terminal: lines */
    const size_t n = sizeof g_phases / sizeof g_phases[0];
    tt_status s = tt_run_phases(g_phases, n, rs->ranks.nd, &rs->ranks.pending, run_broken, rs, err);
    s = run_close(rs, s, err);
    tt_free(rs);
    return s;
}

tt_status tt_run_load(const tt_run_config *c, tt_dataset *train, tt_dataset *val, tt_dataset *test, tt_error *err)
{
    memset(val, 0, sizeof *val);
    tt_status s = tt_dataset_load(c->data, train, test, err);
    if (s) return s;
    char notice[300], line[600];
    s = tt_dataset_classes(train, test, c->classes, notice, sizeof notice, err);
    if (!s && notice[0]) { /* the line's control characters are escaped by tt_report_notice */
        snprintf(line, sizeof line, "--data %.250s: %s", c->data, notice);
        tt_report_notice(line);
    }
    if (!s) s = tt_dataset_split_tail(train, c->val_samples, val, err);
    if (!s && c->train_samples) {
        if (c->train_samples > train->n)
            s = tt_fail(err, TT_ERR_ARG, "--train-samples %zu: only %zu training samples after the validation split",
                        c->train_samples, train->n);
        else
            tt_dataset_truncate(train, c->train_samples);
    }
    if (!s && c->test_samples) {
        if (c->test_samples > test->n)
            s = tt_fail(err, TT_ERR_ARG, "--test-samples %zu: the test set has only %zu samples", c->test_samples,
                        test->n);
        else
            tt_dataset_truncate(test, c->test_samples);
    }
    if (s) {
        tt_dataset_free(train);
        tt_dataset_free(val);
        tt_dataset_free(test);
    }
    return s;
}

/* The largest token id over the sets (each must hold non-negative integers), for an embedding's vocabulary. */
static tt_status token_max(const tt_dataset *const *sets, const char *const *names, double *max, tt_error *err)
{
    *max = 0;
    for (int i = 0; i < 3; i++) {
        double m;
        if (!sets[i]->n) continue;
        if (tt_dataset_token_max(sets[i], &m))
            return tt_fail(err, TT_ERR_FORMAT,
                           "the %s data hold %.9g, not a token id (an integer in 0..16777215): a model "
                           "that starts with an embedding needs token ids",
                           names[i], m);
        *max = m > *max ? m : *max;
    }
    return TT_OK;
}

/* --vocab is the vocabulary of a model that reads token ids: refused for a model without one, and for a model file
 * whose vocab= says otherwise (the file's value would win silently, and a message would blame --vocab for it). */
static tt_status vocab_flag_applies(const tt_run_config *c, const tt_model *m, tt_error *err)
{
    if (!c->vocab) return TT_OK;
    if (!m->token_vocab)
        return tt_fail(err, TT_ERR_ARG, "--vocab: %s does not start with an embedding (--vocab is its vocabulary)",
                       m->source);
    if (m->token_vocab != c->vocab)
        return tt_fail(err, TT_ERR_ARG, "--vocab: %zu, but %s sets vocab=%zu for its embedding (give one of them)",
                       c->vocab, m->source, m->token_vocab);
    return TT_OK;
}

tt_status tt_run_model(const tt_run_config *c, const tt_dataset *train, const tt_dataset *val,
                       const tt_dataset *test, tt_model *m, tt_error *err)
{
    const tt_dataset *sets[3] = {train, val, test};
    const char *names[3] = {"training", "validation", "test"};
    /* the vocabulary matters only to a model that reads token ids: build first (1 stands in for a vocabulary the
     * data will give), and scan the data only for such a model — once */
    tt_model_input in = {train->shape, train->n_classes, c->vocab ? c->vocab : 1};
    tt_status s = tt_model_make(m, c->model, &in, err);
    if (!s) s = vocab_flag_applies(c, m, err);
    if (s || !m->token_vocab) return s;
    double max;
    if ((s = token_max(sets, names, &max, err))) return s;
    if (m->vocab_from_input && !c->vocab) { /* the data's vocabulary: the largest id + 1 */
        in.vocab = (size_t)max + 1;
        if ((s = tt_model_make(m, c->model, &in, err))) return s;
    }
    const size_t V = m->token_vocab;
    if (max >= (double)V)
        return tt_fail(err, c->vocab ? TT_ERR_ARG : TT_ERR_MODEL, "%s: the data hold token id %.0f but the vocabulary "
                       "is %zu (ids 0..%zu)%s", c->vocab ? "--vocab" : m->source, max, V, V - 1,
                       c->vocab ? "" : ": give a larger vocab=, or none to take it from the data");
    return TT_OK;
}

tt_status tt_run(const tt_run_config *c, FILE *out, tt_run_result *res, tt_error *err)
{
    tt_backend be;
    tt_status s = tt_backend_open(c->device, c->gpus, &be, err); /* before spending seconds on the data */
    if (!s && be.notice[0] && out) tt_report_notice(be.notice);
    tt_trainer_config place = {.ops = be.ops, .n_devices = be.n_devices, .n_towers = c->towers, .reduce = c->reduce,
                               .update = c->update, .graphs = c->graphs, .overlap = c->overlap,
                               .node = c->node ? c->node : tt_node_world()};
    if (!s) s = tt_trainer_check(&place, err); /* --reduce nccl where it cannot run: before the data */
    tt_dataset train, val, test;
    memset(&train, 0, sizeof train);
    memset(&val, 0, sizeof val);
    memset(&test, 0, sizeof test);
    if (!s) s = tt_run_load(c, &train, &val, &test, err);
    /* K ranks: a rank whose backend or files failed ends the job, named (a failed load leaves its sets zeroed) */
    tt_node *nd = c->node ? c->node : tt_node_world();
    s = tt_node_agree(nd, s, err);
    /* loading takes seconds: a signal then (on any rank) stops the run before it starts, agreed by every rank */
    const int sig = s ? 0 : tt_node_stop_signal(nd);
    if (sig)
        s = tt_node_agree(nd, tt_fail(err, TT_ERR_STOPPED, "stopped by %s while loading the data", tt_signal_name(sig)),
                          err);
    if (s) {
        tt_dataset_free(&train);
        tt_dataset_free(&val);
        tt_dataset_free(&test);
        return s;
    }
    s = tt_run_on(c, &train, &val, &test, out, res, err);
    tt_dataset_free(&train);
    tt_dataset_free(&val);
    tt_dataset_free(&test);
    return s;
}

tt_status tt_run_describe_model(const tt_run_config *c, tt_model *m, tt_error *err)
{
    if (!c->data_given) {
        tt_model_input in;
        tt_status s = tt_model_default_input(c->model, &in, err);
        if (!s && c->vocab) in.vocab = c->vocab;
        if (!s) s = tt_model_make(m, c->model, &in, err);
        return s ? s : vocab_flag_applies(c, m, err);
    }
    tt_dataset train, val, test;
    tt_run_config whole = *c;
    whole.val_samples = 0; /* the shapes and tokens of every training sample */
    tt_status s = tt_run_load(&whole, &train, &val, &test, err);
    if (!s) s = tt_run_model(&whole, &train, &val, &test, m, err);
    tt_dataset_free(&train); /* zeroed by a load that failed */
    tt_dataset_free(&val);
    tt_dataset_free(&test);
    return s;
}
