/* train_report.c — the reporting side of a training run: the banner, the Keras-style console lines (a live bar on
 * a terminal), the JSON-lines log's records and the trace's steps. Not for: when they are written (the run's flow,
 * train.c), a checkpoint's line and record (train_ckpt.c, with the save), or the step's ledger (ledger.c). */
#include <math.h>
#include <string.h>

#include "tt_blas.h"
#include "train_run.h"

/* step of steps done; `first` of them were done before this process (a resumed epoch): the ETA counts the rest. */
void print_bar(FILE *out, size_t first, size_t step, size_t steps, double elapsed, double loss, double acc,
                      int final)
{
    const int width = 30;
    int filled = steps ? (int)((double)width * (double)step / (double)steps) : width;
    char bar[64];
    for (int i = 0; i < width; i++) bar[i] = i < filled ? '=' : '.';
    if (filled > 0 && filled < width) bar[filled - 1] = '>';
    bar[width] = '\0';
    int digits = snprintf(NULL, 0, "%zu", steps);
    fprintf(out, "\r%*zu/%zu [%s]", digits, step, steps, bar);
    if (!final) {
        double eta = step > first ? elapsed / (double)(step - first) * (double)(steps - step) : 0;
        fprintf(out, " - ETA: %.0fs - loss: %.4f - accuracy: %.4f\033[K", eta, loss, acc);
    } /* the caller flushes (print_flush): a flush here would take the failure's errno, leaving "I/O error" */
}

/* Rank 0's console after its lines: a failed write is the run's failure (stdout's own line). */
void print_flush(run_state *rs)
{
    tt_error e;
    if (rs->out && !rs->pending.s) run_fail(rs, tt_flush_stdout(rs->out, &e), &e);
}

/* The banner and the links between the towers' devices (peer access is enabled here: the trainer asks again, and
 * finds it enabled), before the towers start. */
void print_banner(run_state *rs)
{
    const tt_run_config *c = rs->c;
    FILE *out = rs->out;
    if (!out || rs->pending.s) return;
    int ords[TT_MAX_DEVICES], link[TT_MAX_DEVICES * TT_MAX_DEVICES];
    const int n = tt_trainer_link_devices(&rs->tc, ords);
    tt_error e;
    tt_status s = tt_backend_links(rs->ops, ords, n, link, &e);
    if (s) {
        run_fail(rs, s, &e);
        return;
    }
    const size_t N = c->towers, B = rs->tc.batch;
    fprintf(out, "towertrain %s | backend %s (%d device%s) | %zu tower%s | batch %zu", TT_VERSION, rs->ops->name,
            rs->be.n_devices, rs->be.n_devices == 1 ? "" : "s", N, N == 1 ? "" : "s", c->batch);
    if (B < c->batch) fprintf(out, " (more than the %zu training samples: shards sized for %zu)", rs->train->n, B);
    const size_t G = N * (size_t)rs->K; /* every tower of the job */
    fprintf(out, " (shards of %zu..%zu) | --reduce %s", B / G, (B + G - 1) / G, tt_reduce_name(c->reduce));
    if (c->update != TT_UPDATE_HOST) fprintf(out, " --update %s", tt_update_name(c->update));
    fputc('\n', out);
    if (rs->K > 1)
        fprintf(out, "job: %d ranks x %zu tower%s = %zu towers (mpirun; %d on this machine, %d host thread%s each) | "
                "--node-reduce %s\n", rs->K, N, N == 1 ? "" : "s", G, rs->nd->local_size, rs->tc.host_threads,
                rs->tc.host_threads == 1 ? "" : "s", tt_node_reduce_name(c->node_reduce));
    fprintf(out, "BLAS: %s\n", tt_blas_describe());
    fprintf(out, "float: %s\n",
            tt_fpu_flushing() ? "subnormals flushed to zero (FTZ+DAZ) on tower and host threads"
                                     : "subnormals kept (this CPU has no flush-to-zero mode here)");
    char data[256];
    tt_escape(c->data, data, sizeof data);
    char shape[64];
    fprintf(out, "data: %s | %zu train, %zu validation, %zu test | %s %s, %zu classes\n", data, rs->train->n,
            rs->val->n, rs->test->n, tt_shape_str(&rs->train->shape, 0, shape, sizeof shape),
            rs->train->xtype == TT_X_U8 ? "bytes" : "float32", rs->train->n_classes);
    if (rs->model->notes[0]) fputs(rs->model->notes, out);
    tt_model_summary(rs->model, out);
    const tt_optim_config *o = &rs->tc.optim;
    fprintf(out, "optimizer: %s, lr %g", tt_optim_kind_name(o->kind), (double)o->lr);
    if (c->lr_scaling == TT_LR_LINEAR)
        fprintf(out, " (--lr-scaling linear: base %g x %zu towers)", (double)c->optim.lr, N * (size_t)rs->K);
    else
        fprintf(out, " (--lr-scaling none: the base rate%s)", c->lr_given ? "" : ", Keras default");
    char hyper[160];
    tt_optim_describe(o, hyper, sizeof hyper);
    fprintf(out, "%s\n", hyper);
    tt_backend_print_links(out, "", rs->ops, ords, n, link);
    print_flush(rs);
}

/* Commits the record just written to the log (a failure is recorded). */
static void log_commit(run_state *rs)
{
    tt_error e;
    run_fail(rs, tt_out_commit(&rs->log, &e), &e);
}

void log_start(run_state *rs)
{
    const tt_run_config *c = rs->c;
    tt_out *log = &rs->log;
    tt_out_printf(log,
                  "{\"event\":\"start\",\"version\":\"%s\",\"backend\":\"%s\",\"towers\":%zu,\"batch\":%zu,"
                  "\"epochs\":%zu,\"optimizer\":\"%s\",\"lr\":%.7g,\"base_lr\":%.7g,\"lr_scaling\":\"%s\","
                  "\"seed\":%llu,\"train_samples\":%zu,\"val_samples\":%zu,\"test_samples\":%zu,\"params\":%zu,"
                  "\"model\":\"%s\",\"reduce\":\"%s\",\"update\":\"%s\",\"flush_denormals\":%s,\"ranks\":%d,"
                  "\"node_reduce\":\"%s\"}\n",
                  TT_VERSION, rs->ops->name, c->towers, c->batch, c->epochs, tt_optim_kind_name(rs->tc.optim.kind),
                  (double)rs->tc.optim.lr, (double)c->optim.lr, tt_lr_scaling_names[c->lr_scaling],
                  (unsigned long long)c->seed, rs->train->n, rs->val->n, rs->test->n, rs->model->n_params,
                  tt_model_file(rs->model) ? "file" : c->model, tt_reduce_name(c->reduce), tt_update_name(c->update),
                  tt_fpu_flushing() ? "true" : "false", rs->K, tt_node_reduce_name(c->node_reduce));
    log_commit(rs);
}

/* K ranks: what every rank holds, counted from its own allocations — the optimizer's floats (ps: 1/K each) — in a
 * "ranks" record of rank 0's log. Every rank calls it. */
void log_ranks(run_state *rs)
{
    tt_optim *o = tt_trainer_optim(&rs->tr);
    const uint64_t mine = (uint64_t)o->n * tt_optim_state_floats(&o->cfg);
    uint64_t *all = (uint64_t *)(void *)rs->rank_records; /* 8 * towers bytes a rank: room for one uint64_t */
    tt_error e;
    run_fail(rs, tt_node_allgather(rs->nd, &mine, all, sizeof mine, &e), &e);
    if (!rs->pending.s && rs->log.buf) {
        tt_out_printf(&rs->log, "{\"event\":\"ranks\",\"ranks\":%d,\"node_reduce\":\"%s\",\"params\":%zu,"
                      "\"optimizer_floats\":[", rs->K, tt_node_reduce_name(rs->c->node_reduce), rs->model->n_params);
        for (int r = 0; r < rs->K; r++) tt_out_printf(&rs->log, "%s%llu", r ? "," : "", (unsigned long long)all[r]);
        tt_out_printf(&rs->log, "]}\n");
        log_commit(rs);
    }
}


void log_epoch(run_state *rs, const tt_epoch_stats *es)
{
    tt_out *log = &rs->log;
    if (!log->buf || rs->pending.s) return;
    const int v = rs->val->n > 0;
    tt_out_printf(log, "{\"event\":\"epoch\",\"epoch\":%zu,\"steps\":%zu,\"samples\":%zu,", es->epoch, es->steps,
                  es->samples);
    tt_out_json_num(log, "seconds", es->seconds, 1);
    tt_out_json_num(log, "loss", es->loss, 1);
    tt_out_json_num(log, "accuracy", es->accuracy, 1);
    tt_out_json_num(log, "top5", es->top5, 1);
    tt_out_json_num(log, "val_loss", v ? es->val.loss : NAN, 1);
    tt_out_json_num(log, "val_accuracy", v ? es->val.accuracy : NAN, 1);
    tt_out_json_num(log, "val_top5", v ? es->val.top5 : NAN, 1);
    tt_out_json_num(log, "step_median", es->step_median, 1);
    char verdict[128];
    tt_ledger_verdict(&es->split, verdict, sizeof verdict);
    tt_out_printf(log, "\"verdict\":\"%s\",\"split\":{", verdict);
    tt_ledger_json_split(log, &es->split);
    tt_out_printf(log, "}}\n");
    log_commit(rs);
    tt_error e;
    if (!rs->pending.s)
        run_fail(rs, tt_ledger_json_steps(log, es->epoch, rs->results, rs->ledger, es->first_step,
                                          es->first_step + es->steps, rs->c->towers, &e), &e);
}

void print_epoch(run_state *rs, const tt_epoch_stats *es)
{
    FILE *out = rs->out;
    if (!out || rs->pending.s) return;
    const size_t end = es->first_step + es->steps;
    if (rs->bar)
        print_bar(out, es->first_step, end, end, es->seconds, 0, 0, 1);
    else
        fprintf(out, "%zu/%zu", end, end);
    fprintf(out, " - %.2fs %.1fms/step - loss: %.4f - accuracy: %.4f - top5: %.4f", es->seconds,
            1e3 * es->seconds / (double)es->steps, es->loss, es->accuracy, es->top5);
    if (rs->val->n)
        fprintf(out, " - val_loss: %.4f - val_accuracy: %.4f - val_top5: %.4f", es->val.loss, es->val.accuracy,
                es->val.top5);
    fprintf(out, "%s\n", rs->bar ? "\033[K" : "");
    tt_ledger_split_line(out, &es->split);
    print_flush(rs);
}

/* The test set's line and its record (none for an empty test set). */
void print_test(run_state *rs, const tt_eval_result *test)
{
    if (!rs->out || rs->pending.s || !rs->test->n) return;
    fprintf(rs->out, "test: %zu samples - loss: %.4f - accuracy: %.4f - top5: %.4f\n", test->n, test->loss,
            test->accuracy, test->top5);
    print_flush(rs);
}

void log_test(run_state *rs, const tt_eval_result *test)
{
    if (!rs->log.buf || rs->pending.s || !rs->test->n) return;
    tt_out_printf(&rs->log, "{\"event\":\"test\",\"samples\":%zu,", test->n);
    tt_out_json_num(&rs->log, "loss", test->loss, 1);
    tt_out_json_num(&rs->log, "accuracy", test->accuracy, 1);
    tt_out_json_num(&rs->log, "top5", test->top5, 0);
    tt_out_printf(&rs->log, "}\n");
    log_commit(rs);
}

/* --resume of a finished run: its "nothing_to_train" record (the line is rs->nothing_left). */
void log_nothing_left(run_state *rs)
{
    if (!rs->log.buf || rs->pending.s) return;
    tt_out_printf(&rs->log, "{\"event\":\"nothing_to_train\",\"epochs\":%zu,", rs->c->epochs);
    tt_out_json_str(&rs->log, "message", rs->nothing_left, 0);
    tt_out_printf(&rs->log, "}\n");
    log_commit(rs);
}

/* The last record of a log whose run did not finish: {"event":"error"|"stopped",...,"message":the CLI's line}.
 * fields is the JSON in between (may be empty). Write errors here are not reported: the run is failing already. */
void log_end(run_state *rs, const char *event, const char *fields, const tt_error *why)
{
    if (!rs->log.buf) return;
    tt_error werr;
    tt_out_printf(&rs->log, "{\"event\":\"%s\",%s", event, fields);
    tt_out_json_str(&rs->log, "message", why->msg, 0);
    tt_out_printf(&rs->log, "}\n");
    tt_out_commit(&rs->log, &werr);
    rs->log_ended = 1;
}

/* The trace of steps first..end-1: this rank's, or (K ranks) every rank's gathered to rank 0, each rank a process
 * of the trace on rank 0's clock. Every rank calls it at the same point (whatever failed before: it gathers). */
void run_trace_steps(run_state *rs, size_t first, size_t end)
{
    const int write = rs->trace.out.buf && !rs->pending.s;
    tt_error e;
    if (rs->K <= 1) {
        if (write) run_fail(rs, tt_trace_steps(&rs->trace, rs->results, rs->ledger, first, end, &e), &e);
        return;
    }
    const size_t N = rs->c->towers, n = end - first, K = (size_t)rs->K;
    const size_t rb = n * sizeof(tt_step_result), lb = n * N * sizeof(tt_tower_ledger);
    tt_step_result *res = rs->trace_results; /* K epochs' worth, allocated while opening */
    tt_tower_ledger *led = rs->trace_ledger;
    tt_status s = tt_node_allgather(rs->nd, rs->results + first, res, rb, &e);
    if (!s) s = tt_node_allgather(rs->nd, rs->ledger + first * N, led, lb, &e);
    for (size_t r = 0; !s && write && r < K; r++) {
        tt_trace_rank(&rs->trace, (int)r, rs->clock_offsets[r]);
        s = tt_trace_steps(&rs->trace, res + r * n, led + r * n * N, 0, n, &e);
    }
    if (write) tt_trace_rank(&rs->trace, 0, 0);
    run_fail(rs, s, &e);
}
