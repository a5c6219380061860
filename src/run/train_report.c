/* train_report.c — the reporting side of a training run: the banner, the Keras-style console lines (a live bar on
 * a terminal), the JSON-lines log's records (the start record from the options table's rows and the run's own
 * fields), the trace's steps, TensorBoard's scalars; and the side's part of the run's state, opened and closed here.
 * Not for: when they are written (the run's flow, train.c), a checkpoint's line and record (train_ckpt.c, with the
 * save), the live view's frames (train_live.c), or the step's ledger (ledger.c). */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

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
    char line[256];
    int n = snprintf(line, sizeof line, "%*zu/%zu [%s]", digits, step, steps, bar);
    if (!final) { /* a live line: never wider than the terminal, or each redraw would leave a wrapped line behind */
        double eta = step > first ? elapsed / (double)(step - first) * (double)(steps - step) : 0;
        snprintf(line + n, sizeof line - (size_t)n, " - ETA: %.0fs - loss: %.4f - accuracy: %.4f", eta, loss, acc);
        struct winsize w;
        if (ioctl(fileno(out), TIOCGWINSZ, &w) == 0 && w.ws_col > 1 && strlen(line) >= w.ws_col)
            line[w.ws_col - 1] = '\0';
    }
    fprintf(out, "\r%s%s", line, final ? "" : "\033[K");
    /* the caller flushes (print_flush): a flush here would take the failure's errno, leaving "I/O error" */
}

/* Rank 0's console after its lines: a failed write is the run's failure (stdout's own line). */
void print_flush(run_state *rs)
{
    tt_error e;
    if (rs->out && !rs->ranks.pending.s) run_fail(rs, tt_flush_stdout(rs->out, &e), &e);
}

/* The banner and the links between the towers' devices (peer access is enabled here: the trainer asks again, and
 * finds it enabled), before the towers start. */
void print_banner(run_state *rs)
{
    const tt_run_config *c = rs->c;
    FILE *out = rs->out;
    if (!out || rs->ranks.pending.s) return;
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
    const size_t G = N * (size_t)rs->ranks.K; /* every tower of the job */
    fprintf(out, " (shards of %zu..%zu) | --reduce %s", B / G, (B + G - 1) / G, tt_reduce_name(c->reduce));
    if (c->update != TT_UPDATE_HOST) fprintf(out, " --update %s", tt_update_name(c->update));
    if (c->data_on) { /* the design of the data phase: the training set held on the devices */
        char set[32];
        const tt_dataset *tr = rs->train;
        const double bytes = (double)tr->n * (double)(tt_dataset_sample_bytes(tr) + sizeof(int32_t));
        if (bytes < 1e6) snprintf(set, sizeof set, "%.1f kB", bytes / 1e3);
        else tt_mem_human(bytes, set, sizeof set);
        fprintf(out, " --data-on device (the training set, %s, on each device; a step copies in its indices)", set);
    }
    if (c->epilogues) fprintf(out, " --epilogues lt (a dense layer's GEMM, bias and relu as one cuBLASLt call where "
                              "the backend has one)");
    fputc('\n', out);
    if (rs->ranks.K > 1)
        fprintf(out, "job: %d ranks x %zu tower%s = %zu towers (mpirun; %d on this machine, %d host thread%s each) | "
                "--node-reduce %s\n", rs->ranks.K, N, N == 1 ? "" : "s", G, rs->ranks.nd->local_size,
                rs->tc.host_threads, rs->tc.host_threads == 1 ? "" : "s", tt_node_reduce_name(c->node_reduce));
    size_t n_bn = 0; /* layers with moving statistics (batchnorm): what --bn-sync decides for them */
    for (size_t i = 0; i < rs->model->n_layers; i++) n_bn += rs->model->layers[i].n_stats > 0;
    if (n_bn && G > 1)
        fprintf(out, "batchnorm: %zu layer%s, %s\n", n_bn, n_bn == 1 ? "" : "s",
                rs->tc.bn_sync ? "statistics over the global batch (--bn-sync on: the towers exchange their sums 3 "
                                 "times per layer and step; N towers compute what 1 tower would)"
                               : "statistics over each tower's own rows (--bn-sync off, as TF's towers did: N towers "
                                 "differ from 1 tower with this batch)");
    else if (!n_bn && rs->tc.bn_sync)
        fprintf(out, "batchnorm: --bn-sync on, but the model has no batchnorm layer: nothing to exchange\n");
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
    if (tt_augment_on(&c->augment)) {
        char words[96];
        fprintf(out, "augment: %s (ImageDataGenerator's shifts, fill_mode nearest, and flips: each training image on "
                "its tower's device, drawn from the seed, the epoch and its index; validation and test as they are)\n",
                tt_augment_words(&c->augment, words, sizeof words));
    }
    if (rs->model->notes[0]) fputs(rs->model->notes, out);
    tt_model_summary(rs->model, out);
    const tt_optim_config *o = &rs->tc.optim;
    fprintf(out, "optimizer: %s, lr %g", tt_optim_kind_name(o->kind), (double)o->lr);
    if (c->lr_scaling == TT_LR_LINEAR)
        fprintf(out, " (--lr-scaling linear: base %g x %zu towers)", (double)c->optim.lr, N * (size_t)rs->ranks.K);
    else
        fprintf(out, " (--lr-scaling none: the base rate%s)", c->lr_given ? "" : ", Keras default");
    char hyper[TT_OPTIM_WORDS];
    tt_optim_describe(o, hyper, sizeof hyper);
    fprintf(out, "%s\n", hyper);
    const tt_callback *cbs[2] = {&c->early_stopping, &c->reduce_lr};
    for (int k = 0; k < 2; k++) { /* their canonical SPECs, and which way the monitor must go */
        char words[TT_CALLBACK_WORDS];
        if (cbs[k]->kind)
            fprintf(out, "callbacks: %s %s (%s: %s is better)\n", k ? "ReduceLROnPlateau" : "EarlyStopping",
                    tt_callback_words(cbs[k], words, sizeof words), tt_cb_metric_names[cbs[k]->monitor],
                    tt_callback_maximizes(cbs[k]) ? "higher" : "lower");
    }
    tt_backend_print_links(out, "", rs->ops, ords, n, link);
    print_flush(rs);
}

/* Commits the record just written to the log (a failure is recorded). */
static void log_commit(run_state *rs)
{
    tt_error e;
    run_fail(rs, tt_out_commit(&rs->report.log, &e), &e);
}

/* A field of the run's own in a record written in the places order (the options' are the table's rows). */
typedef struct own_field {
    char text[TT_SCHED_WORDS + 80]; /* "key":value; empty: no field of the run's at that place */
} own_field;

static void own(own_field *f, int place, const char *key, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void own(own_field *f, int place, const char *key, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int k = snprintf(f[place].text, sizeof f[place].text, "\"%s\":", key);
    vsnprintf(f[place].text + k, sizeof f[place].text - (size_t)k, fmt, ap);
    va_end(ap);
}

/* The start record: the run's own fields (here, each at its place) and the options' (the options table's rows at
 * TT_AT_LOG), in the places' order. */
static void log_start(run_state *rs)
{
    enum { START_FIELDS = 39 };
    const tt_run_config *c = rs->c;
    tt_out *log = &rs->report.log;
    own_field f[START_FIELDS + 1];
    memset(f, 0, sizeof f);
    own(f, 1, "version", "\"%s\"", TT_VERSION);
    own(f, 2, "backend", "\"%s\"", rs->ops->name);
    own(f, 7, "lr", "%.7g", (double)rs->tc.optim.lr);
    own(f, 8, "base_lr", "%.7g", (double)c->optim.lr);
    own(f, 11, "train_samples", "%zu", rs->train->n);
    own(f, 12, "val_samples", "%zu", rs->val->n);
    own(f, 13, "test_samples", "%zu", rs->test->n);
    own(f, 14, "params", "%zu", rs->model->n_params);
    own(f, 15, "model", "\"%s\"", tt_model_file(rs->model) ? "file" : c->model);
    own(f, 18, "flush_denormals", "%s", tt_fpu_flushing() ? "true" : "false");
    own(f, 19, "ranks", "%d", rs->ranks.K);
    own(f, 26, "non_trainable_params", "%zu", rs->model->n_params - rs->model->n_trainable);
    const tt_optim_config *oc = &rs->tc.optim;
    char sched[TT_SCHED_WORDS];
    own(f, 33, "lr_schedule", "\"%s\"", tt_lr_schedule_words(&oc->sched, sched, sizeof sched));
    own(f, 34, "weight_decay", "%.9g", (double)oc->weight_decay);
    own(f, 35, "clipnorm", "%.9g", (double)oc->clipnorm);
    own(f, 36, "global_clipnorm", "%.9g", (double)oc->global_clipnorm);
    own(f, 37, "clipvalue", "%.9g", (double)oc->clipvalue);
    tt_out_printf(log, "{\"event\":\"start\"");
    for (int p = 1; p <= START_FIELDS; p++) {
        const tt_run_opt *o = tt_run_opt_at(TT_AT_LOG, p);
        TT_ASSERT(!o != !f[p].text[0]); /* every place is the run's or an option's */
        if (!o) {
            tt_out_printf(log, ",%s", f[p].text);
            continue;
        }
        char key[48], words[64];
        tt_run_opt_key(o, key, sizeof key);
        const uint64_t v = tt_run_opt_value(o, c);
        if (o->kind == TT_OPT_CALLBACK) { /* a callback: its canonical SPEC ("off": not given) */
            char spec[TT_CALLBACK_WORDS];
            tt_callback cb;
            memcpy(&cb, (const char *)c + o->field, sizeof cb);
            tt_out_printf(log, ",\"%s\":\"%s\"", key, tt_callback_words(&cb, spec, sizeof spec));
        } else if (o->kind == TT_OPT_SLOW) { /* --slow-tower: stragglers on purpose: the log's waits read right */
            tt_out_printf(log, ",\"%s\":[", key);
            for (size_t k = 0; k < c->n_slow; k++)
                tt_out_printf(log, "%s{\"tower\":%zu,\"ms\":%g,\"jitter_ms\":%g}", k ? "," : "", c->slow[k].tower,
                              c->slow[k].ms, c->slow[k].jitter_ms);
            tt_out_printf(log, "]");
        } else if (tt_run_opt_is_number(o)) {
            tt_out_printf(log, ",\"%s\":%llu", key, (unsigned long long)v);
        } else {
            tt_out_printf(log, ",\"%s\":\"%s\"", key, tt_run_opt_words(o, v, words, sizeof words));
        }
    }
    tt_out_printf(log, "}\n");
    log_commit(rs);
}

/* K ranks: what every rank holds, counted from its own allocations — the optimizer's floats (ps: 1/K each) — in a
 * "ranks" record of rank 0's log. Every rank calls it. */
void log_ranks(run_state *rs)
{
    tt_optim *o = tt_trainer_optim(rs->tr);
    const uint64_t mine = (uint64_t)o->n * tt_optim_state_floats(&o->cfg);
    uint64_t *all = (uint64_t *)(void *)rs->ranks.records; /* 8 * towers bytes a rank: room for one uint64_t */
    tt_error e;
    run_fail(rs, tt_node_allgather(rs->ranks.nd, &mine, all, sizeof mine, &e), &e);
    tt_out *log = &rs->report.log;
    if (!rs->ranks.pending.s && log->buf) {
        tt_out_printf(log, "{\"event\":\"ranks\",\"ranks\":%d,\"node_reduce\":\"%s\",\"params\":%zu,"
                      "\"optimizer_floats\":[",
                      rs->ranks.K, tt_node_reduce_name(rs->c->node_reduce), rs->model->n_params);
        for (int r = 0; r < rs->ranks.K; r++) tt_out_printf(log, "%s%llu", r ? "," : "", (unsigned long long)all[r]);
        tt_out_printf(log, "]}\n");
        log_commit(rs);
    }
}


void log_epoch(run_state *rs, const tt_epoch_stats *es)
{
    tt_out *log = &rs->report.log;
    if (!log->buf || rs->ranks.pending.s) return;
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
    tt_out_json_num(log, "learning_rate", es->lr, 1); /* the epoch's last step's (Keras's logs: the rate after it) */
    if (es->applied) { /* --sync ssp, async */
        tt_out_printf(log, "\"applied\":%zu,\"staleness_max\":%u,", es->applied, es->staleness_max);
        tt_out_json_num(log, "staleness_mean", es->staleness_sum / (double)es->applied, 1);
    }
    if (es->averages) { /* --sync weights */
        tt_out_printf(log, "\"averages\":%zu,", es->averages);
        tt_out_json_num(log, "divergence_mean", es->divergence_sum / (double)es->averages, 1);
    }
    if (rs->tc.precision) { /* --precision bf16, fp16: the scaler, and the gradient elements that underflowed */
        tt_out_json_num(log, "loss_scale", es->loss_scale, 1);
        tt_out_printf(log, "\"skipped_steps\":%zu,\"grad_underflow\":%llu,\"grad_elements\":%llu,", es->skipped,
                      (unsigned long long)es->grad_under, (unsigned long long)es->grad_elems);
        tt_out_json_num(log, "grad_underflow_share",
                        es->grad_elems ? (double)es->grad_under / (double)es->grad_elems : 0.0, 1);
    }
    char verdict[128];
    tt_ledger_verdict(&es->split, verdict, sizeof verdict);
    tt_out_printf(log, "\"verdict\":\"%s\",\"split\":{", verdict);
    tt_ledger_json_split(log, &es->split);
    tt_out_printf(log, "}}\n");
    log_commit(rs);
    tt_error e;
    if (!rs->ranks.pending.s)
        run_fail(rs, tt_ledger_json_steps(log, es->epoch, rs->results, rs->ledger, es->first_step,
                                          es->first_step + es->steps, rs->c->towers, &e), &e);
}

void print_epoch(run_state *rs, const tt_epoch_stats *es)
{
    FILE *out = rs->out;
    if (!out || rs->ranks.pending.s) return;
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
    /* the rate, as Keras's progbar shows it once a callback or a schedule logs it: 4 decimals, or 4 digits */
    const tt_lr_schedule *sc = &rs->tc.optim.sched;
    if (rs->c->reduce_lr.kind || sc->kind != TT_SCHED_CONSTANT || sc->ramp_steps)
        fprintf(out, fabs((double)es->lr) > 1e-3 ? " - learning_rate: %.4f" : " - learning_rate: %.4e",
                (double)es->lr);
    fprintf(out, "%s\n", rs->bar ? "\033[K" : "");
    tt_ledger_split_line(out, &es->split);
    char m[32];
    if (es->applied) {
        fprintf(out, "  sync %s: %zu gradients applied alone, staleness mean %.2f, max %u",
                tt_sync_format(&rs->c->sync, m, sizeof m), es->applied, es->staleness_sum / (double)es->applied,
                es->staleness_max);
        /* what the towers would process at their own speeds: each one's rows over its busy time (its shards' spans
         * without the waits), summed — the most any schedule could reach */
        const size_t T = rs->c->towers;
        double own = 0;
        for (size_t t = 0; t < T; t++) {
            double rows = 0, busy = 0;
            for (size_t k = es->first_step; k < end; k++)
                for (size_t e = 0; e < T; e++) {
                    const tt_tower_ledger *l = &rs->ledger[k * T + e];
                    if (l->tower != t) continue;
                    rows += (double)l->rows;
                    busy += (l->push1 - l->pull0) + (l->update1 - l->update0); /* pull..push, and its apply */
                }
            own += busy > 0 ? rows / busy : 0;
        }
        if (own > 0 && es->seconds > 0)
            fprintf(out, "; %.0f samples/s, %.0f%% of the towers' own rates summed (%.0f/s)",
                    (double)es->samples / es->seconds, 100 * (double)es->samples / es->seconds / own, own);
        fputc('\n', out);
    }
    if (es->averages)
        fprintf(out, "  sync %s: %zu averages, the towers' mean distance from the average before each %.4g\n",
                tt_sync_format(&rs->c->sync, m, sizeof m), es->averages, es->divergence_sum / (double)es->averages);
    if (rs->tc.precision) {
        char words[64];
        fprintf(out, "  precision %s: loss scale %s, %zu step%s skipped; %.4f%% of the gradient's elements were zero "
                "in 16 bits but not in FP32\n", tt_precision_names[rs->tc.precision],
                tt_loss_scale_words(&(tt_loss_scale){rs->tc.loss_scale.dynamic, es->loss_scale, 0}, words, sizeof words),
                es->skipped, es->skipped == 1 ? "" : "s",
                es->grad_elems ? 100.0 * (double)es->grad_under / (double)es->grad_elems : 0.0);
    }
    print_flush(rs);
}

/* The test set's line and its record (none for an empty test set). */
void print_test(run_state *rs, const tt_eval_result *test)
{
    if (!rs->out || rs->ranks.pending.s || !rs->test->n) return;
    fprintf(rs->out, "test: %zu samples - loss: %.4f - accuracy: %.4f - top5: %.4f\n", test->n, test->loss,
            test->accuracy, test->top5);
    print_flush(rs);
}

void log_test(run_state *rs, const tt_eval_result *test)
{
    if (!rs->report.log.buf || rs->ranks.pending.s || !rs->test->n) return;
    tt_out_printf(&rs->report.log, "{\"event\":\"test\",\"samples\":%zu,", test->n);
    tt_out_json_num(&rs->report.log, "loss", test->loss, 1);
    tt_out_json_num(&rs->report.log, "accuracy", test->accuracy, 1);
    tt_out_json_num(&rs->report.log, "top5", test->top5, 0);
    tt_out_printf(&rs->report.log, "}\n");
    log_commit(rs);
}

/* --resume of a finished run: its "nothing_to_train" record (the line is rs->ckpt.nothing_left). */
void log_nothing_left(run_state *rs)
{
    if (!rs->report.log.buf || rs->ranks.pending.s) return;
    tt_out_printf(&rs->report.log, "{\"event\":\"nothing_to_train\",\"epochs\":%zu,", rs->c->epochs);
    tt_out_json_str(&rs->report.log, "message", rs->ckpt.nothing_left, 0);
    tt_out_printf(&rs->report.log, "}\n");
    log_commit(rs);
}

/* The last record of a log whose run did not finish: {"event":"error"|"stopped",...,"message":the CLI's line}.
 * fields is the JSON in between (may be empty). Write errors here are not reported: the run is failing already. */
void log_end(run_state *rs, const char *event, const char *fields, const tt_error *why)
{
    if (!rs->report.log.buf) return;
    tt_error werr;
    tt_out_printf(&rs->report.log, "{\"event\":\"%s\",%s", event, fields);
    tt_out_json_str(&rs->report.log, "message", why->msg, 0);
    tt_out_printf(&rs->report.log, "}\n");
    tt_out_commit(&rs->report.log, &werr);
    rs->report.log_ended = 1;
}

/* The trace of steps first..end-1: this rank's, or (K ranks) every rank's gathered to rank 0, each rank a process
 * of the trace on rank 0's clock. Every rank calls it at the same point (whatever failed before: it gathers). */
void run_trace_steps(run_state *rs, size_t first, size_t end)
{
    const int write = rs->report.trace.out.buf && !rs->ranks.pending.s;
    tt_error e;
    if (rs->ranks.K <= 1) {
        if (write) run_fail(rs, tt_trace_steps(&rs->report.trace, rs->results, rs->ledger, first, end, &e), &e);
        return;
    }
    const size_t N = rs->c->towers, n = end - first, K = (size_t)rs->ranks.K;
    const size_t rb = n * sizeof(tt_step_result), lb = n * N * sizeof(tt_tower_ledger);
    tt_step_result *res = rs->ranks.trace_results; /* K epochs' worth, allocated while opening */
    tt_tower_ledger *led = rs->ranks.trace_ledger;
    tt_status s = tt_node_allgather(rs->ranks.nd, rs->results + first, res, rb, &e);
    if (!s) s = tt_node_allgather(rs->ranks.nd, rs->ledger + first * N, led, lb, &e);
    for (size_t r = 0; !s && write && r < K; r++) {
        tt_trace_rank(&rs->report.trace, (int)r, rs->ranks.clock_offsets[r]);
        s = tt_trace_steps(&rs->report.trace, res + r * n, led + r * n * N, 0, n, &e);
    }
    if (write) tt_trace_rank(&rs->report.trace, 0, 0);
    run_fail(rs, s, &e);
}

/* ---- --tensorboard: event files as Keras's TensorBoard callback writes them (docs/tensorboard.md) ------------- */

/* Are a and b one directory (b may be NULL)? */
static int same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    return b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* Creates the missing directories above dir, as Keras's callback does for its log_dir (logs/fit/run1). A parent
 * that cannot be made is named with the reason; one in the way as a file is left for tt_out_dir_ready to name. */
static tt_status make_parents(const char *dir, const char *what, tt_error *err)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p) return tt_fail(err, TT_ERR_IO, "%s: path too long", what);
    for (char *s = strchr(p + 1, '/'); s; s = strchr(s + 1, '/')) {
        *s = '\0';
        if (mkdir(p, 0777) != 0 && errno != EEXIST)
            return tt_fail(err, TT_ERR_IO, "%s: cannot create %s: %s", what, p, strerror(errno));
        *s = '/';
    }
    return TT_OK;
}

/* "--tensorboard DIR" for messages, a long DIR cut (the reason after it must fit the error line). */
static void tb_what(const char *dir, char *what, size_t len)
{
    snprintf(what, len, "--tensorboard %.300s%s", dir, strlen(dir) > 300 ? "..." : "");
}

/* Rank 0, while the run opens: DIR (and the directories above it) made ready and locked for this run (unless it is
 * this run's --checkpoint-dir, locked already). The event files come later (tb_open_files), once every check that
 * can refuse the run has passed: a run that never starts leaves none. */
static tt_status tb_prepare(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    char what[4200];
    tb_what(c->tensorboard, what, sizeof what);
    tt_status s = make_parents(c->tensorboard, what, err);
    if (!s) s = tt_out_dir_ready(c->tensorboard, what, err);
    if (!s && !same_dir(c->tensorboard, c->checkpoint_dir))
        s = tt_out_dir_lock(c->tensorboard, what, &rs->report.tb_lock, err);
    /* the towers' phase sums of an epoch, then of the steps since the last per-step records */
    if (!s && !(rs->report.tb_towers = (double *)tt_calloc(2 * c->towers * TT_TOWER_PHASES, sizeof(double))))
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
    return s;
}

static tt_status tb_open_files(run_state *rs, tt_error *err)
{
    char what[4200];
    tb_what(rs->c->tensorboard, what, sizeof what);
    return tt_tb_open(&rs->report.tb, rs->c->tensorboard, what, err);
}

static void tb_commit(run_state *rs)
{
    tt_error e;
    run_fail(rs, tt_tb_commit(&rs->report.tb, &e), &e);
}

/* The split's phases (seconds per step: sums over `steps` steps) and each tower's, under prefix_split/ and
 * prefix_tower/T/. */
static void tb_split(run_state *rs, const char *prefix, int64_t step, double wall, const tt_step_times *sum,
                     const double *towers, size_t steps)
{
    char tag[96];
    const double per = steps ? 1.0 / (double)steps : 0;
    for (int k = 0; k < TT_SPLIT_PHASES; k++) {
        if (tt_split_phases[k].off == offsetof(tt_step_times, combine) && rs->ranks.K < 2) continue; /* one rank: 0 */
        snprintf(tag, sizeof tag, "%s_split/%s", prefix, tt_split_phases[k].name);
        tt_tb_scalar(&rs->report.tb, TT_TB_TRAIN, tag, step, wall, per * tt_phase_value(sum, &tt_split_phases[k]));
    }
    for (size_t t = 0; t < rs->c->towers; t++) /* every phase of the ledger's table: a placement's reduce too */
        for (int k = 0; k < TT_TOWER_PHASES; k++) {
            snprintf(tag, sizeof tag, "%s_tower/%zu/%s", prefix, t, tt_tower_phase_fields[k].name);
            tt_tb_scalar(&rs->report.tb, TT_TB_TRAIN, tag, step, wall, per * towers[t * TT_TOWER_PHASES + k]);
        }
}

/* Adds steps [first, end) of the epoch's ledger into towers (towers x TT_TOWER_PHASES sums). */
static void tb_add_towers(const run_state *rs, double *towers, size_t first, size_t end)
{
    const size_t T = rs->c->towers;
    for (size_t k = first; k < end; k++)
        for (size_t t = 0; t < T; t++) {
            const tt_tower_ledger *l = &rs->ledger[k * T + t]; /* ssp, async: shard t, run by tower l->tower */
            const tt_tower_phases ph = tt_tower_phases_of(l);
            for (int p = 0; p < TT_TOWER_PHASES && l->tower < T; p++)
                towers[l->tower * TT_TOWER_PHASES + p] += tt_phase_value(&ph, &tt_tower_phase_fields[p]);
        }
}

/* The epoch's records, step = the epoch from 0 as Keras counts it: train epoch_loss, epoch_accuracy, epoch_top5,
 * epoch_learning_rate and the step split; validation the same three metrics. */
void tb_epoch(run_state *rs, const tt_epoch_stats *es)
{
    tt_tb *tb = &rs->report.tb;
    if (!tb->f[0].buf || rs->ranks.pending.s) return;
    const int64_t step = (int64_t)es->epoch - 1;
    const double wall = tt_wall_now();
    tt_tb_scalar(tb, TT_TB_TRAIN, "epoch_loss", step, wall, es->loss);
    tt_tb_scalar(tb, TT_TB_TRAIN, "epoch_accuracy", step, wall, es->accuracy);
    tt_tb_scalar(tb, TT_TB_TRAIN, "epoch_top5", step, wall, es->top5);
    tt_tb_scalar(tb, TT_TB_TRAIN, "epoch_learning_rate", step, wall, es->lr);
    if (rs->tc.precision) { /* --precision bf16, fp16 */
        tt_tb_scalar(tb, TT_TB_TRAIN, "epoch_loss_scale", step, wall, es->loss_scale);
        tt_tb_scalar(tb, TT_TB_TRAIN, "epoch_skipped_steps", step, wall, (double)es->skipped);
        tt_tb_scalar(tb, TT_TB_TRAIN, "epoch_grad_underflow_share", step, wall,
                     es->grad_elems ? (double)es->grad_under / (double)es->grad_elems : 0.0);
    }
    if (rs->val->n) { /* and, as Keras 3 writes them too, against the global batch count */
        const int64_t batches = (int64_t)(es->epoch * rs->steps);
        tt_tb_scalar(tb, TT_TB_VALIDATION, "epoch_loss", step, wall, es->val.loss);
        tt_tb_scalar(tb, TT_TB_VALIDATION, "epoch_accuracy", step, wall, es->val.accuracy);
        tt_tb_scalar(tb, TT_TB_VALIDATION, "epoch_top5", step, wall, es->val.top5);
        tt_tb_scalar(tb, TT_TB_VALIDATION, "evaluation_loss_vs_iterations", batches, wall, es->val.loss);
        tt_tb_scalar(tb, TT_TB_VALIDATION, "evaluation_accuracy_vs_iterations", batches, wall, es->val.accuracy);
        tt_tb_scalar(tb, TT_TB_VALIDATION, "evaluation_top5_vs_iterations", batches, wall, es->val.top5);
    }
    double *towers = rs->report.tb_towers;
    memset(towers, 0, rs->c->towers * TT_TOWER_PHASES * sizeof(double));
    tb_add_towers(rs, towers, es->first_step, es->first_step + es->steps);
    tb_split(rs, "epoch", step, wall, &es->split, towers, es->steps);
    tb_commit(rs);
}

/* --tensorboard-every-steps: an epoch begins at its step `first` (0, or where a resumed run starts). */
void tb_epoch_begin(run_state *rs, size_t first)
{
    rs->report.tb_next = first;
    rs->report.tb_seen = rs->report.tb_top1 = rs->report.tb_top5 = 0;
    rs->report.tb_loss = 0;
}

/* --tensorboard-every-steps N: folds the epoch's finished steps [tb_next, end) in, and at every N-th step of the run
 * (the global batch count, from 1, as Keras's update_freq=N counts) writes batch_loss, batch_accuracy, batch_top5
 * (the epoch's running means, as Keras's batch logs), batch_learning_rate, and the split of the steps since the
 * last records. */
void tb_steps(run_state *rs, size_t epoch, size_t end)
{
    run_report *rp = &rs->report;
    const size_t N = rs->c->tensorboard_every_steps;
    if (!N || !rp->tb.f[0].buf) return;
    int wrote = 0;
    double *win = rp->tb_towers + rs->c->towers * TT_TOWER_PHASES;
    for (; rp->tb_next < end; rp->tb_next++) {
        const size_t k = rp->tb_next;
        const tt_step_result *r = &rs->results[k];
        rp->tb_loss += r->loss_sum;
        rp->tb_top1 += r->top1;
        rp->tb_top5 += r->top5;
        rp->tb_seen += r->n;
        tt_step_times_add(&rp->tb_win, &r->t);
        tb_add_towers(rs, win, k, k + 1);
        rp->tb_win_steps++;
        const uint64_t g = (uint64_t)(epoch - 1) * rs->steps + k + 1;
        if (g % N || !rp->tb_seen || rs->ranks.pending.s) continue;
        const double wall = tt_wall_now() - (tt_now() - r->t.step1), seen = (double)rp->tb_seen;
        tt_tb_scalar(&rp->tb, TT_TB_TRAIN, "batch_loss", (int64_t)g, wall, rp->tb_loss / seen);
        tt_tb_scalar(&rp->tb, TT_TB_TRAIN, "batch_accuracy", (int64_t)g, wall, (double)rp->tb_top1 / seen);
        tt_tb_scalar(&rp->tb, TT_TB_TRAIN, "batch_top5", (int64_t)g, wall, (double)rp->tb_top5 / seen);
        tt_tb_scalar(&rp->tb, TT_TB_TRAIN, "batch_learning_rate", (int64_t)g, wall, r->lr);
        tb_split(rs, "batch", (int64_t)g, wall, &rp->tb_win, win, rp->tb_win_steps);
        memset(&rp->tb_win, 0, sizeof rp->tb_win);
        memset(win, 0, rs->c->towers * TT_TOWER_PHASES * sizeof(double));
        rp->tb_win_steps = 0;
        wrote = 1;
    }
    if (wrote) tb_commit(rs);
}

/* ---- the reporting side's part of the run: opened with it, closed with it ------------------------------------ */

void report_init(run_state *rs) { rs->report.tb_lock = -1; }

tt_status report_open(run_state *rs, tt_error *err)
{
    const tt_run_config *c = rs->c;
    tt_status s = TT_OK;
    if (c->log_json && rs->ranks.rank0) {
        char what[200];
        snprintf(what, sizeof what, "--log-json %s", c->log_json);
        s = tt_out_open(&rs->report.log, c->log_json, what, 4096 + 512 * c->towers, err);
        if (!s) log_start(rs);
    }
    if (!s && c->tensorboard && rs->ranks.rank0) s = tb_prepare(rs, err);
    return s;
}

void report_start(run_state *rs)
{
    const tt_run_config *c = rs->c;
    tt_error e;
    tt_status s = TT_OK;
    if (!rs->ranks.pending.s && c->trace && rs->ranks.rank0)
        s = tt_trace_open(&rs->report.trace, c->trace, c->towers, rs->ranks.K, rs->ops->name,
                          tt_reduce_name(c->reduce), &e);
    if (!s && !rs->ranks.pending.s && c->tensorboard && rs->ranks.rank0) s = tb_open_files(rs, &e);
    run_fail(rs, s, &e);
}

tt_status report_close(run_state *rs, tt_status s, tt_error *err)
{
    run_report *r = &rs->report;
    tt_error cerr;
    tt_status ts = tt_trace_close(&r->trace, &cerr);
    if (!s && ts) {
        *err = cerr;
        s = ts;
    }
    if (s && !r->log_ended) { /* any other way a run fails (a write, validation) still ends its log with a record */
        static const char *const kinds[] = {[TT_OK] = "ok",           [TT_ERR_ARG] = "arg",
                                            [TT_ERR_IO] = "io",       [TT_ERR_FORMAT] = "format",
                                            [TT_ERR_NOMEM] = "memory", [TT_ERR_DEVICE] = "device",
                                            [TT_ERR_MODEL] = "model", [TT_ERR_NUMERIC] = "nonfinite",
                                            [TT_ERR_STOPPED] = "stopped"};
        char fields[64];
        const char *kind = (unsigned)s < sizeof kinds / sizeof *kinds ? kinds[s] : "?";
        snprintf(fields, sizeof fields, "\"kind\":\"%s\",", kind);
        log_end(rs, "error", fields, err);
    }
    tt_status ls = tt_out_close(&r->log, &cerr);
    if (!s && ls) {
        *err = cerr;
        s = ls;
    }
    if ((ls = tt_tb_close(&r->tb, &cerr)) && !s) {
        *err = cerr;
        s = ls;
    }
    if (r->tb_lock >= 0) close(r->tb_lock);
    tt_free(r->tb_towers);
    tt_free(r->live_buf);
    tt_free(r->live_width);
    return s;
}
