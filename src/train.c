/* train.c — a training run: load, build, init, then epochs of shuffled steps with validation after each, the
 * test set at the end; Keras-style console lines (a live bar on a terminal) and a JSON-lines log. */
#include <math.h>
#include <string.h>
#include <unistd.h>

#include "tt_backend.h"
#include "tt_blas.h"
#include "tt_ledger.h"
#include "tt_rng.h"
#include "tt_train.h"

void tt_run_config_defaults(tt_run_config *c)
{
    memset(c, 0, sizeof *c);
    c->data = "fashion-mnist";
    c->model = "mlp";
    c->device = "cpu";
    c->towers = 1;
    c->batch = 256;
    c->epochs = 10;
    c->optim = tt_optim_defaults(TT_OPT_ADAM);
    c->lr_scaling = TT_LR_NONE;
    c->seed = 1;
    c->val_samples = 10000;
    c->progress = TT_PROGRESS_AUTO;
    c->reduce = TT_REDUCE_CPU;
}

/* ---- console ----------------------------------------------------------------------------------------------- */

static void print_bar(FILE *out, size_t step, size_t steps, double elapsed, double loss, double acc, int final)
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
        double eta = step ? elapsed / (double)step * (double)(steps - step) : 0;
        fprintf(out, " - ETA: %.0fs - loss: %.4f - accuracy: %.4f\033[K", eta, loss, acc);
        fflush(out);
    }
}

static void add_times(tt_step_times *a, const tt_step_times *b)
{
    a->launch += b->launch;
    a->pull += b->pull;
    a->data += b->data;
    a->compute += b->compute;
    a->push += b->push;
    a->wait += b->wait;
    a->towers += b->towers;
    a->reduce += b->reduce;
    a->update += b->update;
    a->total += b->total;
}

/* ---- the run ----------------------------------------------------------------------------------------------- */

tt_status tt_run_on(const tt_run_config *c, const tt_dataset *train, const tt_dataset *val, const tt_dataset *test,
                    FILE *out, tt_run_result *res, tt_error *err)
{
    memset(res, 0, sizeof *res);
    if (train->n == 0) return tt_fail(err, TT_ERR_ARG, "no training samples");
    if (c->towers > c->batch)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       c->towers, c->batch);
    const tt_dev_ops *ops;
    int n_devices;
    tt_status s = tt_backend_find(c->device, &ops, &n_devices, err);
    if (s) return s;

    tt_model *model = (tt_model *)tt_calloc(1, sizeof *model);
    if (!model) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    s = tt_run_model(c, train, model, err);
    if (s) {
        tt_free(model);
        return s;
    }

    tt_trainer_config tc;
    memset(&tc, 0, sizeof tc);
    tc.ops = ops;
    tc.n_devices = n_devices;
    tc.n_towers = c->towers;
    tc.batch = c->batch;
    tc.optim = c->optim;
    tc.host_threads = c->host_threads;
    tc.reduce = c->reduce;
    if (c->lr_scaling == TT_LR_LINEAR) tc.optim.lr = c->optim.lr * (float)c->towers;

    float *h_init = (float *)tt_malloc(model->n_params * sizeof(float));
    uint32_t *idx = (uint32_t *)tt_malloc(train->n * sizeof(uint32_t));
    const size_t steps = (train->n + c->batch - 1) / c->batch;
    double *step_secs = (double *)tt_malloc(steps * sizeof(double));
    tt_step_result *results = (tt_step_result *)tt_calloc(steps, sizeof(tt_step_result));
    tt_tower_ledger *ledger = (tt_tower_ledger *)tt_calloc(steps * c->towers, sizeof(tt_tower_ledger));
    tt_trace trace;
    memset(&trace, 0, sizeof trace);
    tt_trainer tr;
    memset(&tr, 0, sizeof tr);
    FILE *log = NULL;
    if (!h_init || !idx || !step_secs || !results || !ledger) {
        s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
        goto done;
    }
    tt_model_init_params(model, h_init, c->seed);
    if (c->log_json) {
        log = fopen(c->log_json, "w");
        if (!log) {
            s = tt_fail(err, TT_ERR_IO, "--log-json %s: cannot open for writing", c->log_json);
            goto done;
        }
    }

    if (out) {
        fprintf(out,
                "towertrain %s | backend %s (%d device%s) | %zu tower%s | batch %zu (shards of %zu..%zu) | "
                "--reduce %s\n",
                TT_VERSION, ops->name, n_devices, n_devices == 1 ? "" : "s", c->towers, c->towers == 1 ? "" : "s",
                c->batch, c->batch / c->towers, (c->batch + c->towers - 1) / c->towers, tt_reduce_name(c->reduce));
        fprintf(out, "BLAS: %s\n", tt_blas_describe());
        fprintf(out, "data: %s | %zu train, %zu validation, %zu test | %zux%zu, %zu classes\n", c->data, train->n,
                val->n, test->n, train->rows, train->cols, train->n_classes);
        if (model->notes[0]) fputs(model->notes, out);
        tt_model_summary(model, out);
        fprintf(out, "optimizer: %s, lr %g", tt_optim_kind_name(tc.optim.kind), (double)tc.optim.lr);
        if (c->lr_scaling == TT_LR_LINEAR)
            fprintf(out, " (--lr-scaling linear: base %g x %zu towers)", (double)c->optim.lr, c->towers);
        else
            fprintf(out, " (--lr-scaling none: the base rate%s)", c->lr_given ? "" : ", Keras default");
        if (tc.optim.kind == TT_OPT_SGD)
            fprintf(out, ", momentum %g%s\n", (double)tc.optim.momentum, tc.optim.nesterov ? ", nesterov" : "");
        else
            fprintf(out, ", beta_1 %g, beta_2 %g, epsilon %g\n", (double)tc.optim.beta1, (double)tc.optim.beta2,
                    (double)tc.optim.epsilon);
        fflush(out);
    }
    if (log) {
        fprintf(log,
                "{\"event\":\"start\",\"version\":\"%s\",\"backend\":\"%s\",\"towers\":%zu,\"batch\":%zu,"
                "\"epochs\":%zu,\"optimizer\":\"%s\",\"lr\":%.7g,\"base_lr\":%.7g,\"lr_scaling\":\"%s\","
                "\"seed\":%llu,\"train_samples\":%zu,\"val_samples\":%zu,\"test_samples\":%zu,\"params\":%zu,"
                "\"model\":\"%s\",\"reduce\":\"%s\"}\n",
                TT_VERSION, ops->name, c->towers, c->batch, c->epochs, tt_optim_kind_name(tc.optim.kind),
                (double)tc.optim.lr, (double)c->optim.lr, c->lr_scaling == TT_LR_LINEAR ? "linear" : "none",
                (unsigned long long)c->seed, train->n, val->n, test->n, model->n_params,
                strcmp(c->model, "mlp") == 0 ? "mlp" : "file", tt_reduce_name(c->reduce));
        fflush(log);
    }

    s = tt_trainer_init(&tr, model, &tc, h_init, err);
    if (s) goto done;
    if (c->trace && (s = tt_trace_open(&trace, c->trace, c->towers, ops->name, tt_reduce_name(c->reduce), err)))
        goto done;

    int bar = c->progress == TT_PROGRESS_BAR || (c->progress == TT_PROGRESS_AUTO && out && isatty(fileno(out)));
    if (c->progress == TT_PROGRESS_QUIET) out = NULL;
    uint64_t allocs_mark = 0;
    for (size_t i = 0; i < train->n; i++) idx[i] = (uint32_t)i;

    for (size_t epoch = 1; epoch <= c->epochs; epoch++) {
        if (c->before_epoch && (s = c->before_epoch(c->before_epoch_ctx, epoch, err)) != TT_OK) goto done;
        tt_rng rng;
        tt_rng_seed(&rng, c->seed, epoch); /* reshuffled every epoch, from the seed */
        tt_rng_shuffle(&rng, idx, train->n);
        if (out) fprintf(out, "Epoch %zu/%zu\n", epoch, c->epochs);
        tt_epoch_stats es;
        memset(&es, 0, sizeof es);
        es.epoch = epoch;
        double loss_sum = 0, e0 = tt_now();
        size_t top1 = 0, top5 = 0, seen = 0;
        if (epoch == 1) allocs_mark = tt_alloc_count() + tt_trainer_device_allocs(&tr);
        s = tt_trainer_start_steps(&tr, train, idx, train->n, results, steps, ledger, err);
        if (s) goto done;
        size_t drawn = 0, done_steps = 0;
        while (!tt_trainer_wait(&tr, bar ? 0.1 : -1, &done_steps)) {
            /* results[0..done_steps) are final: fold them in and redraw the bar */
            for (; drawn < done_steps; drawn++) {
                loss_sum += results[drawn].loss_sum;
                top1 += results[drawn].top1;
                seen += results[drawn].n;
            }
            if (seen)
                print_bar(out, done_steps, steps, tt_now() - e0, loss_sum / (double)seen, (double)top1 / (double)seen, 0);
        }
        es.seconds = tt_now() - e0;
        loss_sum = 0;
        top1 = 0;
        seen = 0;
        for (size_t st = 0; st < steps; st++) {
            const tt_step_result *r = &results[st];
            loss_sum += r->loss_sum;
            top1 += r->top1;
            top5 += r->top5;
            seen += r->n;
            add_times(&es.split, &r->t);
            step_secs[st] = r->t.total;
        }
        es.steps = steps;
        es.step_median = tt_median(step_secs, steps);
        es.samples = seen;
        es.loss = loss_sum / (double)seen;
        es.accuracy = (double)top1 / (double)seen;
        es.top5 = (double)top5 / (double)seen;
        double v0 = tt_now();
        s = tt_trainer_evaluate(&tr, val, &es.val, err);
        if (s) goto done;
        if (trace.f) {
            char name[32];
            snprintf(name, sizeof name, "epoch %zu", epoch);
            tt_trace_span(&trace, name, e0, e0 + es.seconds);
            tt_trace_span(&trace, "validation", v0, tt_now());
            tt_trace_steps(&trace, results, ledger, steps);
        }
        if (out) {
            if (bar)
                print_bar(out, steps, steps, es.seconds, 0, 0, 1);
            else
                fprintf(out, "%zu/%zu", steps, steps);
            fprintf(out, " - %.2fs %.1fms/step - loss: %.4f - accuracy: %.4f - top5: %.4f", es.seconds,
                    1e3 * es.seconds / (double)steps, es.loss, es.accuracy, es.top5);
            if (val->n)
                fprintf(out, " - val_loss: %.4f - val_accuracy: %.4f - val_top5: %.4f", es.val.loss, es.val.accuracy,
                        es.val.top5);
            fprintf(out, "%s\n", bar ? "\033[K" : "");
            tt_ledger_split_line(out, &es.split);
            fflush(out);
        }
        if (log) {
            fprintf(log, "{\"event\":\"epoch\",\"epoch\":%zu,\"steps\":%zu,\"samples\":%zu,", epoch, steps, seen);
            tt_json_num(log, "seconds", es.seconds, 1);
            tt_json_num(log, "loss", es.loss, 1);
            tt_json_num(log, "accuracy", es.accuracy, 1);
            tt_json_num(log, "top5", es.top5, 1);
            tt_json_num(log, "val_loss", val->n ? es.val.loss : NAN, 1);
            tt_json_num(log, "val_accuracy", val->n ? es.val.accuracy : NAN, 1);
            tt_json_num(log, "val_top5", val->n ? es.val.top5 : NAN, 1);
            tt_json_num(log, "step_median", es.step_median, 1);
            char verdict[128];
            tt_ledger_verdict(&es.split, verdict, sizeof verdict);
            fprintf(log, "\"verdict\":\"%s\",\"split\":{", verdict);
            tt_ledger_json_split(log, &es.split);
            fprintf(log, "}}\n");
            tt_ledger_json_steps(log, epoch, results, ledger, steps, c->towers);
            fflush(log);
        }
        if (epoch <= sizeof res->epochs / sizeof res->epochs[0]) res->epochs[epoch - 1] = es;
        res->n_epochs = epoch;
    }
    res->allocs_after_first_step = tt_alloc_count() + tt_trainer_device_allocs(&tr) - allocs_mark;

    s = tt_trainer_evaluate(&tr, test, &res->test, err);
    if (s) goto done;
    if (out && test->n)
        fprintf(out, "test: %zu samples - loss: %.4f - accuracy: %.4f - top5: %.4f\n", res->test.n, res->test.loss,
                res->test.accuracy, res->test.top5);
    if (log && test->n) {
        fprintf(log, "{\"event\":\"test\",\"samples\":%zu,", res->test.n);
        tt_json_num(log, "loss", res->test.loss, 1);
        tt_json_num(log, "accuracy", res->test.accuracy, 1);
        tt_json_num(log, "top5", res->test.top5, 0);
        fprintf(log, "}\n");
    }
    res->n_params = model->n_params;
    res->final_params = (float *)tt_malloc(model->n_params * sizeof(float));
    if (res->final_params) memcpy(res->final_params, tr.h_params, model->n_params * sizeof(float));

done:
    if (trace.f) {
        tt_status ts = tt_trace_close(&trace, c->trace, s ? NULL : err);
        if (!s) s = ts;
    }
    if (log && fclose(log) != 0 && s == TT_OK) s = tt_fail(err, TT_ERR_IO, "--log-json %s: write failed", c->log_json);
    tt_trainer_free(&tr);
    tt_free(idx);
    tt_free(step_secs);
    tt_free(results);
    tt_free(ledger);
    tt_free(h_init);
    tt_free(model);
    return s;
}

tt_status tt_run_load(const tt_run_config *c, tt_dataset *train, tt_dataset *val, tt_dataset *test, tt_error *err)
{
    memset(val, 0, sizeof *val);
    tt_status s = tt_dataset_load_dir(c->data, train, test, err);
    if (s) return s;
    s = tt_dataset_split_tail(train, c->val_samples, val, err);
    if (!s && c->train_samples) {
        if (c->train_samples > train->n)
            s = tt_fail(err, TT_ERR_ARG, "--train-samples %zu: only %zu training samples after the validation split",
                        c->train_samples, train->n);
        else
            tt_dataset_truncate(train, c->train_samples);
    }
    if (!s && c->test_samples) tt_dataset_truncate(test, c->test_samples);
    if (s) {
        tt_dataset_free(train);
        tt_dataset_free(val);
        tt_dataset_free(test);
    }
    return s;
}

tt_status tt_run_model(const tt_run_config *c, const tt_dataset *train, tt_model *m, tt_error *err)
{
    if (strcmp(c->model, "mlp") == 0) return tt_model_mlp(m, train->dim, train->n_classes, err);
    return tt_model_load(m, c->model, train->dim, train->n_classes, err);
}

tt_status tt_run(const tt_run_config *c, FILE *out, tt_run_result *res, tt_error *err)
{
    const tt_dev_ops *ops;
    int n_devices;
    tt_status s = tt_backend_find(c->device, &ops, &n_devices, err); /* before spending seconds on the data */
    if (s) return s;
    tt_dataset train, val, test;
    s = tt_run_load(c, &train, &val, &test, err);
    if (s) return s;
    s = tt_run_on(c, &train, &val, &test, out, res, err);
    tt_dataset_free(&train);
    tt_dataset_free(&val);
    tt_dataset_free(&test);
    return s;
}
