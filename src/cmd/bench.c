/* bench.c — the measuring subcommands:
 *   towertrain bench    sweeps towers x batch x placement: s/epoch, ms/step, accuracy, the step split, the cost
 *                       model's prediction and the GEMM floor (re-measured before every epoch), table + CSV;
 *   towertrain probe    measures what the cost model needs and predicts each placement's step time;
 *   towertrain compare  trains the same steps under every placement that adds in tower order (tt_reduce_info), from
 *                       the same seed: max |dw| and times.
 * Not for: training itself (tt_train.h) or the measurements (tt_probe.h). */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tt_cost_model.h"
#include "tt_backend.h"
#include "tt_blas.h"
#include "tt_build.h"
#include "tt_cli.h"
#include "tt_ledger.h"
#include "tt_out.h"
#include "tt_probe.h"
#include "tt_profile.h"
#include "tt_signal.h"

#define MAX_LIST 16

typedef struct bench_opts {
    size_t ranks[MAX_LIST], n_ranks; /* under mpirun -np K: sub-jobs of the first k ranks */
    size_t towers[MAX_LIST], n_towers;
    size_t batches[MAX_LIST], n_batches;
    tt_reduce reduces[TT_REDUCE_COUNT];
    size_t n_reduces;
    tt_update updates[TT_UPDATE_COUNT];
    size_t n_updates;
    tt_sync syncs[MAX_LIST]; /* --sync LIST */
    size_t n_syncs;
    int weak;           /* --scaling weak: the batch list is per tower */
    size_t reps;        /* probe and floor reps */
    const char *csv;
} bench_opts;

/* "1,2,4" into v (values lo..hi). */
static tt_status parse_list(const char *opt, const char *value, size_t lo, size_t hi, size_t *v, size_t *n,
                            tt_error *err)
{
    if (!value) return tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
    *n = 0;
    for (const char *p = value; *p;) {
        char num[24];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof num || *n == MAX_LIST)
            return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not a list like 1,2,4 (at most %d entries)", opt, value,
                           MAX_LIST);
        memcpy(num, p, len);
        num[len] = '\0';
        tt_status s = tt_cli_size(opt, num, lo, hi, &v[(*n)++], err);
        if (s) return s;
        p += len;
        if (*p == ',' && !*++p) return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' ends with a comma", opt, value);
    }
    return *n ? TT_OK : tt_fail(err, TT_ERR_ARG, "%s: empty list", opt);
}

static int bench_extra(const char *opt, const char *value, void *ctx, tt_error *err, tt_status *st)
{
    bench_opts *b = (bench_opts *)ctx;
    if (strcmp(opt, "--towers") == 0) {
        *st = parse_list(opt, value, 1, 64, b->towers, &b->n_towers, err);
        return 1;
    }
    if (strcmp(opt, "--ranks") == 0) {
        *st = parse_list(opt, value, 1, TT_MAX_RANKS, b->ranks, &b->n_ranks, err);
        for (size_t i = 0; !*st && i < b->n_ranks; i++)
            if (b->ranks[i] > (size_t)tt_node_world()->size)
                *st = tt_fail(err, TT_ERR_ARG, "--ranks: %zu, but the job has %d rank%s (mpirun -np K, K >= the "
                              "largest)", b->ranks[i], tt_node_world()->size, tt_node_world()->size == 1 ? "" : "s");
        return 1;
    }
    if (strcmp(opt, "--batch") == 0) {
        *st = parse_list(opt, value, 1, 1 << 20, b->batches, &b->n_batches, err);
        return 1;
    }
    if (strcmp(opt, "--reduce") == 0) {
        if (!value) {
            *st = tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
            return 1;
        }
        b->n_reduces = 0;
        for (const char *p = value; *p;) {
            char name[16];
            size_t len = strcspn(p, ",");
            tt_reduce r;
            char names[128];
            if (len == 0 || len >= sizeof name || b->n_reduces == TT_REDUCE_COUNT) {
                *st = tt_fail(err, TT_ERR_ARG, "--reduce: '%.64s' is not a list like %s", value,
                              tt_reduce_list(names, sizeof names, ",", ",", 0));
                return 1;
            }
            memcpy(name, p, len);
            name[len] = '\0';
            if (tt_reduce_parse(name, &r)) {
                *st = tt_fail(err, TT_ERR_ARG, "--reduce: '%.64s' is not %s", name,
                              tt_reduce_list(names, sizeof names, ", ", " or ", 0));
                return 1;
            }
            b->reduces[b->n_reduces++] = r;
            p += len;
            if (*p == ',') p++;
        }
        return 1;
    }
    if (strcmp(opt, "--update") == 0) { /* a list of update placements, each a word of tt_update_names */
        b->n_updates = 0;
        for (const char *p = value ? value : ""; *p || !b->n_updates;) {
            size_t len = strcspn(p, ","), u = 0;
            while (tt_update_names[u] && (strlen(tt_update_names[u]) != len || strncmp(p, tt_update_names[u], len)))
                u++;
            if (!tt_update_names[u] || b->n_updates == TT_UPDATE_COUNT) {
                *st = tt_fail(err, TT_ERR_ARG, "--update: '%.64s' is not a list of host, device, replicated",
                              value ? value : "");
                return 1;
            }
            b->updates[b->n_updates++] = (tt_update)u;
            p += len;
            if (*p == ',') p++;
        }
        return 1;
    }
    if (strcmp(opt, "--sync") == 0) { /* a list of modes, each as train's --sync takes it */
        b->n_syncs = 0;
        for (const char *p = value ? value : ""; *p || !b->n_syncs;) {
            char one[32];
            const size_t len = strcspn(p, ",");
            if (len == 0 || len >= sizeof one || b->n_syncs == MAX_LIST) {
                *st = tt_fail(err, TT_ERR_ARG, "--sync: '%.64s' is not a list like bsp,ssp:4,async,weights:16 (at "
                              "most %d)", value ? value : "", MAX_LIST);
                return 1;
            }
            memcpy(one, p, len);
            one[len] = '\0';
            tt_sync sy = {TT_SYNC_BSP, 0, 0};
            if ((*st = tt_sync_parse("--sync", one, &sy, err))) return 1;
            b->syncs[b->n_syncs++] = sy;
            p += len;
            if (*p == ',' && !*++p) {
                *st = tt_fail(err, TT_ERR_ARG, "--sync: '%.64s' ends with a comma", value);
                return 1;
            }
        }
        return 1;
    }
    if (strcmp(opt, "--scaling") == 0) {
        if (value && strcmp(value, "strong") == 0)
            b->weak = 0;
        else if (value && strcmp(value, "weak") == 0)
            b->weak = 1;
        else
            *st = tt_fail(err, TT_ERR_ARG, "--scaling: '%.64s' is not strong or weak", value ? value : "");
        return 1;
    }
    if (strcmp(opt, "--reps") == 0) {
        *st = value ? tt_cli_size(opt, value, 1, 64, &b->reps, err)
                    : tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
        return 1;
    }
    if (strcmp(opt, "--csv") == 0) {
        if (!value || !*value) *st = tt_fail(err, TT_ERR_ARG, "--csv: missing file name");
        b->csv = value;
        return 1;
    }
    return 0;
}

/* What bench and compare share: the backend, the data sets and the model of a run, as tt_run would have them. */
typedef struct measure_setup {
    const tt_dev_ops *ops;
    tt_backend be;
    tt_dataset train, val, test;
    tt_model *model;
    tt_run_result *res;
} measure_setup;

static tt_status setup_open(const tt_run_config *c, measure_setup *m, tt_error *err)
{
    memset(m, 0, sizeof *m);
    tt_status s = tt_backend_open(c->device, c->gpus, &m->be, err);
    if (s) return s;
    m->ops = m->be.ops;
    if (m->be.notice[0]) tt_report_notice(m->be.notice);
    m->model = (tt_model *)tt_calloc(1, sizeof *m->model);
    m->res = (tt_run_result *)tt_calloc(1, sizeof *m->res);
    if (!m->model || !m->res) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    s = tt_run_load(c, &m->train, &m->val, &m->test, err);
    return s ? s : tt_run_model(c, &m->train, &m->val, &m->test, m->model, err);
}

static void setup_close(measure_setup *m)
{
    tt_dataset_free(&m->train);
    tt_dataset_free(&m->val);
    tt_dataset_free(&m->test);
    tt_free(m->model);
    tt_free(m->res);
}

/* Median over epochs first..last (1-based, inclusive) of one per-epoch figure, NAN when the run has none of them:
 * what = 0 s/epoch, 1 median ms/step, 2 the update's ms/step (what subnormal optimizer state slows down). */
static double epochs_median(const tt_run_result *res, size_t first, size_t last, int what)
{
    double v[1024];
    size_t n = 0;
    for (size_t e = first; e <= last && e <= res->n_epochs && e <= 1024; e++) {
        const tt_epoch_stats *es = &res->epochs[e - 1];
        v[n++] = what == 0   ? es->seconds
                 : what == 1 ? 1e3 * es->step_median
                             : 1e3 * es->split.update / (double)es->steps;
    }
    return n ? tt_median(v, n) : NAN;
}

static int fail(tt_status s, const tt_error *err)
{
    fflush(stdout);
    tt_report_error(err->msg);
    return tt_status_exit_code(s);
}

/* ---- bench --------------------------------------------------------------------------------------------------- */

typedef struct bench_run {
    tt_probe_config pc;
    double floor_step[1024]; /* GEMM floor per epoch, measured just before it */
    tt_probe probes[3];      /* before the row, before its middle epoch, after it */
    int n_probes;
    size_t epochs;
} bench_run;

static tt_status bench_before_epoch(void *ctx, size_t epoch, tt_error *err)
{
    bench_run *br = (bench_run *)ctx;
    if (epoch > 1 && epoch == br->epochs / 2 + 1 && br->n_probes == 1) { /* before the middle epoch */
        tt_status s = tt_probe_run(&br->pc, &br->probes[br->n_probes], err);
        if (s) return s;
        br->n_probes++;
    }
    return epoch <= 1024 ? tt_probe_gemm_floor(&br->pc, &br->floor_step[epoch - 1], err) : TT_OK;
}

/* One row of the sweep, as the console and the CSV show it. */
typedef struct bench_row {
    int ranks;
    size_t towers, batch, epochs, steps; /* steps: per epoch */
    double per_tower_batch;              /* the global batch over the job's towers */
    const char *reduce, *update, *scaling, *node_reduce, *overlap, *graphs, *data_on;
    char sync[32];           /* --sync's mode */
    double samples_per_s;    /* the epochs' samples over their seconds (medians) */
    double staleness_mean;   /* ssp, async: the last epoch's mean staleness (0 otherwise) */
    double test_accuracy;
    double s_per_epoch, ms, pred_ms, err_pc, pred_error, floor_ms, ratio, val_accuracy; /* medians over epochs */
    double k;                /* 1e3 / steps: seconds per epoch into ms per step */
    tt_step_times split;     /* the last epoch's split, seconds per epoch */
    tt_step_times pred;      /* the prediction, seconds per step */
    double early, late;      /* s/epoch over epochs 2-4 and 5-: NAN where the run has none */
    char verdict[128];
} bench_row;

/* The CSV's columns (tools/plot reads them by name), each a field of bench_row: a size_t, an int, a string, a
 * char array written in quotes, a double in %.4g or %.6g, or a tt_step_times field in ms per step (x k: split) or
 * in ms (x 1e3: pred). */
typedef enum { COL_SIZE, COL_INT, COL_STR, COL_QUOTED, COL_G4, COL_G6, COL_STEP_MS, COL_MS } col_kind;
#define ROW(f) offsetof(bench_row, f)
static const struct {
    const char *name;
    col_kind kind;
    size_t field;
} g_csv_cols[] = {
    {"towers", COL_SIZE, ROW(towers)}, {"batch", COL_SIZE, ROW(batch)},
    {"per_tower_batch", COL_G6, ROW(per_tower_batch)}, {"reduce", COL_STR, ROW(reduce)},
    {"scaling", COL_STR, ROW(scaling)}, {"epochs", COL_SIZE, ROW(epochs)}, {"s_per_epoch", COL_G6, ROW(s_per_epoch)},
    {"ms_per_step", COL_G6, ROW(ms)}, {"pred_ms_per_step", COL_G6, ROW(pred_ms)},
    {"pred_error", COL_G4, ROW(pred_error)}, {"floor_ms_per_step", COL_G6, ROW(floor_ms)},
    {"ratio", COL_G4, ROW(ratio)}, {"val_accuracy", COL_G6, ROW(val_accuracy)},
    {"launch_ms", COL_STEP_MS, ROW(split.launch)}, {"pull_ms", COL_STEP_MS, ROW(split.pull)},
    {"data_ms", COL_STEP_MS, ROW(split.data)}, {"compute_ms", COL_STEP_MS, ROW(split.compute)},
    {"push_ms", COL_STEP_MS, ROW(split.push)}, {"wait_ms", COL_STEP_MS, ROW(split.wait)},
    {"reduce_ms", COL_STEP_MS, ROW(split.reduce)}, {"update_ms", COL_STEP_MS, ROW(split.update)},
    {"pred_pull_ms", COL_MS, ROW(pred.pull)}, {"pred_data_ms", COL_MS, ROW(pred.data)},
    {"pred_compute_ms", COL_MS, ROW(pred.compute)}, {"pred_push_ms", COL_MS, ROW(pred.push)},
    {"pred_wait_ms", COL_MS, ROW(pred.wait)}, {"pred_reduce_ms", COL_MS, ROW(pred.reduce)},
    {"pred_update_ms", COL_MS, ROW(pred.update)}, {"s_per_epoch_2_4", COL_G6, ROW(early)},
    {"s_per_epoch_5_on", COL_G6, ROW(late)}, {"verdict", COL_QUOTED, ROW(verdict)}, {"ranks", COL_INT, ROW(ranks)},
    {"node_reduce", COL_STR, ROW(node_reduce)}, {"combine_ms", COL_STEP_MS, ROW(split.combine)},
    {"pred_combine_ms", COL_MS, ROW(pred.combine)}, {"update", COL_STR, ROW(update)},
    {"overlap", COL_STR, ROW(overlap)}, {"push_hidden_ms", COL_STEP_MS, ROW(split.push_hidden)},
    {"host_hidden_ms", COL_STEP_MS, ROW(split.host_hidden)}, {"host_exposed_ms", COL_STEP_MS, ROW(split.host_exposed)},
    {"sync", COL_QUOTED, ROW(sync)}, {"samples_per_s", COL_G6, ROW(samples_per_s)},
    {"staleness_mean", COL_G4, ROW(staleness_mean)}, {"test_accuracy", COL_G6, ROW(test_accuracy)},
    {"graphs", COL_STR, ROW(graphs)}, {"data_on", COL_STR, ROW(data_on)},
};
#undef ROW
enum { N_CSV_COLS = (int)(sizeof g_csv_cols / sizeof g_csv_cols[0]) };

static tt_status csv_header(tt_out *csv, tt_error *err)
{
    for (int i = 0; i < N_CSV_COLS; i++) tt_out_printf(csv, "%s%s", i ? "," : "", g_csv_cols[i].name);
    tt_out_printf(csv, "\n");
    return tt_out_commit(csv, err);
}

static void csv_row(tt_out *csv, const bench_row *r)
{
    for (int i = 0; i < N_CSV_COLS; i++) {
        const void *f = (const char *)r + g_csv_cols[i].field;
        const char *sep = i ? "," : "";
        switch (g_csv_cols[i].kind) {
        case COL_SIZE: tt_out_printf(csv, "%s%zu", sep, *(const size_t *)f); break;
        case COL_INT: tt_out_printf(csv, "%s%d", sep, *(const int *)f); break;
        case COL_STR: tt_out_printf(csv, "%s%s", sep, *(const char *const *)f); break;
        case COL_QUOTED: tt_out_printf(csv, "%s\"%s\"", sep, (const char *)f); break;
        case COL_G4: tt_out_printf(csv, "%s%.4g", sep, *(const double *)f); break;
        case COL_G6: tt_out_printf(csv, "%s%.6g", sep, *(const double *)f); break;
        case COL_STEP_MS: tt_out_printf(csv, "%s%.6g", sep, r->k * *(const double *)f); break;
        case COL_MS: tt_out_printf(csv, "%s%.6g", sep, 1e3 * *(const double *)f); break;
        }
    }
    tt_out_printf(csv, "\n");
}

/* One row's measurement into r (its ranks, towers, batch and scaling set; c's towers, batch, reduce and node too):
 * the probe before, the training (bench_before_epoch: the floor before every epoch, the probe before the middle
 * one), the probe after, and the figures of the row. */
static tt_status row_measure(tt_run_config *c, measure_setup *setup, bench_run *br, size_t reps, tt_node *sub,
                             const tt_net *net, bench_row *r, tt_error *err)
{
    const tt_model *model = setup->model;
    tt_run_result *res = setup->res;
    const size_t N = r->towers, B = r->batch, K = (size_t)r->ranks;
    memset(&br->pc, 0, sizeof br->pc);
    br->pc.model = model;
    br->pc.ops = setup->ops;
    br->pc.n_devices = setup->be.n_devices;
    br->pc.devices = setup->be.devices;
    br->pc.towers = N;
    br->pc.batch = (B + K - 1) / K; /* this rank's share */
    br->pc.optim = c->optim;
    br->pc.host_threads = tt_run_host_threads(sub, c->host_threads); /* as tt_run gives each rank */
    br->pc.reps = reps;
    memcpy(br->pc.slow, c->slow, sizeof br->pc.slow); /* --slow-tower: predicted, and slept in the probe's steps */
    br->pc.n_slow = c->n_slow;
    br->pc.data_on = c->data_on; /* the probe's data phase as the row's */
    /* the prediction is the median of probes before, during and after the row's training */
    br->epochs = c->epochs;
    br->n_probes = 0;
    /* the probes are this rank's own work: a stop (a signal on one rank) is agreed before the row's collectives */
    tt_status s = tt_node_agree(sub, tt_probe_run(&br->pc, &br->probes[br->n_probes++], err), err);
    if (s) return s;
    c->before_epoch = bench_before_epoch;
    c->before_epoch_ctx = br;
    if ((s = tt_run_on(c, &setup->train, &setup->val, &setup->test, NULL, res, err))) return s;
    if ((s = tt_node_agree(sub, tt_probe_run(&br->pc, &br->probes[br->n_probes++], err), err))) return s;
    tt_probe probe;
    tt_probe_median(br->probes, br->n_probes, &probe);
    tt_probe_predict_node(&probe, net, r->ranks, model->n_params, c->node_reduce, c->reduce, &r->pred);
    if (c->sync.kind != TT_SYNC_BSP) tt_probe_predict_sync(&probe, &br->pc, &c->sync, &r->pred); /* one rank */
    if (c->update != TT_UPDATE_HOST || c->overlap) { /* the measured probe times the host's update, phases one at a
                                                      * time: no prediction */
        const double nan = NAN;
        double *pd[] = {&r->pred.pull, &r->pred.data, &r->pred.compute, &r->pred.push, &r->pred.wait, &r->pred.reduce,
                        &r->pred.combine, &r->pred.update, &r->pred.total};
        for (size_t i = 0; i < sizeof pd / sizeof pd[0]; i++) *pd[i] = nan;
    }
    tt_free(res->final_params);
    size_t ne = res->n_epochs < 1024 ? res->n_epochs : 1024, steps = res->epochs[0].steps;
    double secs[1024], step_ms[1024], floor_ms[1024], ratio[1024];
    for (size_t e = 0; e < ne; e++) {
        secs[e] = res->epochs[e].seconds;
        step_ms[e] = 1e3 * res->epochs[e].step_median;
        floor_ms[e] = 1e3 * br->floor_step[e];
        ratio[e] = res->epochs[e].step_median / br->floor_step[e];
    }
    r->split = res->epochs[ne - 1].split;
    r->epochs = ne;
    r->steps = steps;
    r->per_tower_batch = (double)B / (double)(N * K);
    r->reduce = tt_reduce_name(c->reduce);
    r->update = tt_update_name(c->update);
    r->overlap = tt_overlap_names[c->overlap != 0];
    r->graphs = tt_graphs_names[c->graphs != 0];
    r->data_on = tt_data_on_names[c->data_on != 0];
    r->node_reduce = tt_node_reduce_name(c->node_reduce);
    r->s_per_epoch = tt_median(secs, ne);
    /* ssp, async, weights: a step's total is its shards' (or towers') mean span beside other steps: the epoch's wall
     * over its steps is the time per global batch */
    r->ms = c->sync.kind == TT_SYNC_BSP ? tt_median(step_ms, ne) : 1e3 * r->s_per_epoch / (double)steps;
    r->pred_ms = 1e3 * r->pred.total;
    r->err_pc = 100 * (r->pred_ms - r->ms) / r->ms;
    r->pred_error = r->err_pc / 100;
    r->floor_ms = tt_median(floor_ms, ne);
    r->ratio = tt_median(ratio, ne);
    r->val_accuracy = res->epochs[ne - 1].val.accuracy;
    r->test_accuracy = res->test.accuracy;
    tt_sync_format(&c->sync, r->sync, sizeof r->sync);
    double sps[1024];
    for (size_t e = 0; e < ne; e++) sps[e] = (double)res->epochs[e].samples / res->epochs[e].seconds;
    r->samples_per_s = tt_median(sps, ne);
    const tt_epoch_stats *last = &res->epochs[ne - 1];
    r->staleness_mean = last->applied ? last->staleness_sum / (double)last->applied : 0;
    r->k = 1e3 / (double)steps;
    r->early = epochs_median(res, 2, 4, 0);
    r->late = epochs_median(res, 5, ne, 0);
    tt_ledger_verdict(&r->split, r->verdict, sizeof r->verdict);
    return TT_OK;
}

/* One row on the console (the row, the measured and predicted splits, later epochs against early ones) and in the
 * CSV (csv NULL: none). */
static tt_status row_report(const bench_row *r, const tt_run_result *res, tt_out *csv, tt_error *err)
{
    printf("%5d %6zu %6zu %9s %10s %9.3f %11.3f %9.3f %9.3f %+6.0f%% %9.3f %6.2f %8.4f\n", r->ranks, r->towers,
           r->batch, r->reduce, r->update, r->s_per_epoch, r->floor_ms * 1e-3 * (double)r->steps, r->ms, r->pred_ms,
           r->err_pc, r->floor_ms, r->ratio, r->val_accuracy);
    const double k = r->k;
    const tt_step_times *sp = &r->split, *pr = &r->pred;
    printf("       measured ms/step: pull %.3f data %.3f compute %.3f push %.3f wait %.3f reduce %.3f "
           "combine %.3f update %.3f | %s\n",
           k * sp->pull, k * sp->data, k * sp->compute, k * sp->push, k * (sp->wait + sp->launch), k * sp->reduce,
           k * sp->combine, k * sp->update, r->verdict);
    printf("       sync %s: %.0f samples/s, staleness mean %.2f, test accuracy %.4f\n", r->sync, r->samples_per_s,
           r->staleness_mean, r->test_accuracy);
    printf("       predicted:        pull %.3f data %.3f compute %.3f push %.3f wait %.3f reduce %.3f "
           "combine %.3f update %.3f\n",
           1e3 * pr->pull, 1e3 * pr->data, 1e3 * pr->compute, 1e3 * pr->push, 1e3 * pr->wait, 1e3 * pr->reduce,
           1e3 * pr->combine, 1e3 * pr->update);
    /* later epochs must cost what early ones do (subnormals, leaks, growing state would show here) */
    const size_t ne = r->epochs;
    if (ne >= 5) {
        const double early = r->early, late = r->late;
        double m2 = epochs_median(res, 2, 4, 1), m5 = epochs_median(res, 5, ne, 1);
        double u2 = epochs_median(res, 2, 4, 2), u5 = epochs_median(res, 5, ne, 2);
        printf("       epochs 2-4 vs 5-%zu: s/epoch %.3f vs %.3f (%+.1f%%) | "
               "ms/step %.3f vs %.3f (%+.1f%%) | update ms/step %.3f vs %.3f (%+.1f%%)\n",
               ne, early, late, 100 * (late - early) / early, m2, m5, 100 * (m5 - m2) / m2, u2, u5,
               100 * (u5 - u2) / u2);
    }
    tt_status s = tt_flush_stdout(stdout, err);
    if (csv) csv_row(csv, r);
    if (!s && csv) s = tt_out_commit(csv, err);
    return s;
}

/* The console's head: the machine, the model, the sweep and the columns of the rows. */
static void bench_banner(const measure_setup *setup, const tt_run_config *c, int weak, const tt_node *world)
{
    const tt_model *model = setup->model;
    printf("towertrain bench | backend %s | %d CPUs | BLAS: %s\n", setup->ops->name, tt_cpu_count(),
           tt_blas_describe());
    printf("model %s (%zu params, %.2f MFLOP of GEMMs per training sample) | %zu training samples | %s scaling | "
           "%zu epochs per row, medians | --data-on %s\n\n",
           model->source, model->n_params, tt_model_train_flops(model) / 1e6, setup->train.n, weak ? "weak" : "strong",
           c->epochs, tt_data_on_names[c->data_on != 0]);
    if (world->size > 1)
        printf("job: %d ranks (mpirun; %d on this machine) | rows on the first --ranks of them | --node-reduce %s | "
               "towers: per rank; batch: the job's\n", world->size, world->local_size,
               tt_node_reduce_name(c->node_reduce));
    printf("%5s %6s %6s %9s %10s %9s %11s %9s %9s %7s %9s %6s %8s\n", "ranks", "towers", "batch", "reduce", "update",
           "s/epoch", "floor s/ep", "ms/step", "pred ms", "pred", "floor ms", "ratio", "val_acc");
}

/* Rank 0's outputs before the sweep: the CSV (--csv) and its header, then the banner — unless the CSV could not be
 * opened (one that opens but cannot be written still lets the banner say what the run was). A failure is recorded
 * in *pend (zeroed here) for the job's next agreement. */
static void bench_outputs_open(tt_out *csv, const bench_opts *b, const measure_setup *setup, const tt_run_config *c,
                               const tt_node *world, tt_pending *pend)
{
    memset(csv, 0, sizeof *csv);
    memset(pend, 0, sizeof *pend);
    char what[200];
    snprintf(what, sizeof what, "--csv %s", b->csv ? b->csv : "");
    tt_error e;
    const tt_status opened = b->csv ? tt_out_open(csv, b->csv, what, 4096, &e) : TT_OK;
    tt_pending_fail(pend, opened, &e);
    if (opened) return;
    if (b->csv) tt_pending_fail(pend, csv_header(csv, &e), &e);
    bench_banner(setup, c, b->weak, world);
    tt_pending_fail(pend, tt_flush_stdout(stdout, &e), &e);
}

static void bench_help(void)
{
    printf("usage: [mpirun -np K] towertrain bench [--ranks 1,2] [--towers 1,2] [--batch 256] [--reduce cpu]\n"
           "                        [--node-reduce allreduce|ps] [--scaling strong|weak]\n"
           "                        [--csv FILE] [--reps N] [train options]\n\n"
           "Trains --epochs epochs (default 3) for every combination of the lists and prints, per row, the median\n"
           "seconds per epoch and step, validation accuracy, the cost model's predicted step (towertrain probe,\n"
           "measured just before the row), and the GEMM floor (the step's GEMMs alone, re-measured before every\n"
           "epoch) with the ratio of the median step to it. The prediction is the phase-by-phase median of three\n"
           "probes: before the row, before its middle epoch, and after it.\n\n"
           "  --ranks LIST     under mpirun -np K: rows on the first k ranks of the job (the others sleep) [K]\n"
           "  --towers LIST    tower counts per rank [1,2]\n"
           "  --batch LIST     batch sizes [256]\n");
    char names[128];
    printf("  --reduce LIST    placements: %s [%s]\n", tt_reduce_list(names, sizeof names, ", ", ", ", 0),
           tt_reduce_name(TT_REDUCE_CPU));
    printf("  --update LIST    where the optimizer runs: host, device, replicated (a combination a placement cannot\n"
           "                   serve is skipped, with why; the cost model predicts host only) [host]\n");
    printf("  --sync LIST      modes, as train's --sync: bsp, ssp:S, async, weights:K (docs/sync.md) [bsp]\n");
    printf("  --scaling strong the global batch stays as given while towers grow: each tower gets less work\n"
           "  --scaling weak   each tower keeps the batch as given: the global batch grows with the towers\n"
           "  --csv FILE       also write the rows as CSV (for tools/plot)\n"
           "  --reps N         reps of every probe and floor measurement [30]\n\ntrain options:\n");
    tt_cli_train_help(stdout);
}

int tt_cmd_bench(int argc, char **argv)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.epochs = 3;
    c.progress = TT_PROGRESS_QUIET;
    bench_opts b = {{(size_t)tt_node_world()->size}, 1, {1, 2}, 2, {256}, 1, {TT_REDUCE_CPU}, 1, {TT_UPDATE_HOST}, 1,
                    {{TT_SYNC_BSP, 0, 0}}, 1, 0, 30, NULL};
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, "bench", bench_extra, &b, &help, &err);
    s = tt_node_agree(tt_node_world(), s, &err);
    tt_node *world = tt_node_world();
    if (!tt_node_speaks()) { /* rank 0 prints and writes the CSV for the job */
        if (!freopen("/dev/null", "w", stdout)) return fail(tt_fail(&err, TT_ERR_IO, "/dev/null: cannot open"), &err);
        b.csv = NULL;
        help = 0;
    }
    if (help && !tt_node_speaks()) return 0;
    if (help) {
        bench_help();
        return 0;
    }
    if (s) return fail(s, &err);
    measure_setup setup;
    s = setup_open(&c, &setup, &err);
    bench_run *br = (bench_run *)tt_calloc(1, sizeof *br);
    if (!s && !br) s = tt_fail(&err, TT_ERR_NOMEM, "out of memory");
    s = tt_node_agree(world, s, &err);
    if (s) {
        setup_close(&setup);
        tt_free(br);
        return fail(s, &err);
    }
    const tt_dev_ops *ops = setup.ops;
    const tt_model *model = setup.model;
    for (size_t ri = 0; ri < b.n_reduces && !s; ri++) { /* a placement this backend cannot run at all: refused now */
        tt_trainer_config tc = {.ops = ops, .n_devices = setup.be.n_devices, .n_towers = 1, .reduce = b.reduces[ri]};
        s = tt_trainer_check(&tc, &err);
    }
    if (s) {
        setup_close(&setup);
        tt_free(br);
        return fail(s, &err);
    }
    tt_run_result *res = setup.res;
    tt_out csv;
    /* rank 0's writes (the CSV, stdout) record their failure; the job agrees on it before the sweep, after every
     * row and at the end (tt_pending) */
    tt_pending pend;
    tt_error we;
    bench_outputs_open(&csv, &b, &setup, &c, world, &pend);
    s = tt_pending_agree(world, &pend, TT_OK, &err);
    for (size_t ki = 0; !s && ki < b.n_ranks; ki++) {
    const int K = (int)b.ranks[ki];
    tt_node sub;
    s = tt_node_split(world, K, &sub, &err);
    if (!s && world->size > 1 && sub.size > 0 && sub.local_size > K) sub.local_size = K; /* the others sleep */
    tt_net net;
    memset(&net, 0, sizeof net);
    if (!s && sub.size > 1) s = tt_probe_net(&sub, model->n_params, b.reps, &net, &err); /* one rank: no combine */
    for (size_t bi = 0; !s && sub.size > 0 && bi < b.n_batches; bi++)
        for (size_t ti = 0; !s && ti < b.n_towers; ti++)
            for (size_t rui = 0; !s && rui < b.n_reduces * b.n_updates * b.n_syncs; rui++) {
                const size_t ri = rui / (b.n_updates * b.n_syncs), ui = rui / b.n_syncs % b.n_updates,
                             si = rui % b.n_syncs;
                size_t N = b.towers[ti], B = b.weak ? b.batches[bi] * N * (size_t)K : b.batches[bi];
                if (N * (size_t)K > B) {
                    printf("%5d %6zu %6zu %9s %10s   (skipped: more towers than samples in the batch)\n", K, N, B,
                           tt_reduce_name(b.reduces[ri]), tt_update_name(b.updates[ui]));
                    tt_pending_fail(&pend, tt_flush_stdout(stdout, &we), &we); /* agreed with the next row's */
                    continue;
                }
                tt_trainer_config tc = {.ops = ops, .n_devices = setup.be.n_devices, .n_towers = N,
                                        .reduce = b.reduces[ri], .update = b.updates[ui], .overlap = c.overlap,
                                        .node = &sub, .sync = b.syncs[si]};
                memcpy(tc.slow, c.slow, sizeof tc.slow);
                tc.n_slow = c.n_slow;
                tt_error why;
                if (tt_trainer_check(&tc, &why)) { /* nccl with more towers than GPUs; an update it cannot serve */
                    printf("%5d %6zu %6zu %9s %10s   (skipped: %s)\n", K, N, B, tt_reduce_name(b.reduces[ri]),
                           tt_update_name(b.updates[ui]), why.msg);
                    tt_pending_fail(&pend, tt_flush_stdout(stdout, &we), &we);
                    continue;
                }
                c.towers = N;
                c.batch = B;
                c.reduce = b.reduces[ri];
                c.update = b.updates[ui];
                c.sync = b.syncs[si];
                c.node = &sub;
                bench_row row = {.ranks = K, .towers = N, .batch = B, .scaling = b.weak ? "weak" : "strong"};
                if ((s = row_measure(&c, &setup, br, b.reps, &sub, &net, &row, &err))) break;
                /* rank 0's stdout or CSV may have failed, a rank may have caught a signal: the row's ranks learn
                 * it together and leave the sweep together */
                tt_pending_fail(&pend, row_report(&row, res, b.csv ? &csv : NULL, &we), &we);
                const int sig = tt_node_stop_signal(&sub);
                if (sig)
                    tt_pending_fail(&pend, tt_fail(&we, TT_ERR_STOPPED, "bench: stopped by %s after the row of %zu "
                                                   "towers, batch %zu", tt_signal_name(sig), N, B), &we);
                s = tt_pending_agree(&sub, &pend, TT_OK, &err);
            }
    /* the ranks that sat this out wait, asleep, for the ones that ran the rows */
    if (sub.size > 0) tt_node_free(&sub);
    s = tt_pending_agree(world, &pend, s, &err); /* a skipped row's console line, a row's failure */
    tt_node_stop_signal(world); /* a stop's signal is every rank's exit code, the ranks that sat out too */
    if (!s) s = tt_node_idle_barrier(world, &err);
    }
    tt_pending_fail(&pend, tt_out_close(&csv, &we), &we);
    if (!s) s = tt_pending_agree(world, &pend, TT_OK, &err); /* the end: rank 0's last write (a failure is agreed) */
    setup_close(&setup);
    tt_free(br);
    return s ? fail(s, &err) : 0;
}

/* ---- probe --------------------------------------------------------------------------------------------------- */

typedef struct probe_opts {
    size_t reps;
    const char *assume; /* --assume SPEC: predict from assumed figures instead of measuring */
    const char *json;   /* --json FILE: the measured profile, written there (tt_profile.h) */
    double link_gbps, link_us; /* --link GBPS:US: the cross-node link the prediction assumes (0: the measured one) */
} probe_opts;

static int probe_extra(const char *opt, const char *value, void *ctx, tt_error *err, tt_status *st)
{
    probe_opts *po = (probe_opts *)ctx;
    if (strcmp(opt, "--reps") == 0) {
        *st = value ? tt_cli_size(opt, value, 1, 64, &po->reps, err)
                    : tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
        return 1;
    }
    if (strcmp(opt, "--link") == 0) {
        char *end = NULL;
        double g = value ? strtod(value, &end) : 0, u = end && *end == ':' ? strtod(end + 1, &end) : -1;
        if (!value || !(g > 0 && g < 1e4) || !(u >= 0 && u < 1e6) || *end || !isdigit((unsigned char)value[0]))
            *st = tt_fail(err, TT_ERR_ARG, "--link: '%.64s' is not GBPS:MICROSECONDS (a link's bandwidth in GB/s and "
                          "one-way latency, e.g. 3.1:20 for 25 Gb Ethernet)", value ? value : "");
        po->link_gbps = g;
        po->link_us = u;
        return 1;
    }
    if (strcmp(opt, "--json") == 0) {
        if (!value || !*value)
            *st = tt_fail(err, TT_ERR_ARG, "--json: missing value (the file to write the profile to)");
        else if (po->json) *st = tt_fail(err, TT_ERR_ARG, "--json: given twice");
        po->json = value;
        return 1;
    }
    if (strcmp(opt, "--assume") == 0) {
        if (!value || !*value)
            *st = tt_fail(err, TT_ERR_ARG, "--assume: missing value (a profile: %s, a measured profile's FILE, or "
                          "KEY=VALUE,...)", tt_assume_profiles());
        po->assume = value;
        return 1;
    }
    return 0;
}

/* The cross-node part of probe: the link, the combine measured against its model, the step of both --node-reduce
 * modes at this job's K, and the model's K = 1..16 on the link (measured, or --link's). */
static void probe_print_net(const tt_probe *p, const tt_net *measured, const probe_opts *po, int K, size_t P, size_t N,
                            size_t B)
{
    tt_net net = *measured;
    printf("\ncross-node combine (%zu floats = %.2f MB per rank, docs/scaleout.md):\n", P, 4e-6 * (double)P);
    if (K > 1) {
        printf("  measured over %d ranks: latency %.1f us, bandwidth %.2f GB/s (one message of a %.0f KB slice), "
               "rank-order sum %.2f GB/s\n", K, 1e6 * net.latency, net.bandwidth, 4e-3 * (double)P / K, net.sum_rate);
        printf("  the step's combine collectives: %.3f ms (of them statistics + halt flags %.3f ms); the model says "
               "%.3f ms\n", 1e3 * net.combine, 1e3 * net.small, 1e3 * tt_net_combine(&net, K, P));
        printf("  predicted step of %d ranks x %zu tower%s, batch %zu (ms):\n%12s %8s %8s %8s %8s %9s\n", K, N,
               N == 1 ? "" : "s", B, "node-reduce", "towers", "reduce", "combine", "update", "total");
        for (int m = 0; m < TT_NODE_REDUCE_COUNT; m++) {
            tt_step_times t;
            tt_probe_predict_node(p, &net, K, P, (tt_node_reduce)m, TT_REDUCE_CPU, &t);
            printf("%12s %8.3f %8.3f %8.3f %8.3f %9.3f\n", tt_node_reduce_name((tt_node_reduce)m), 1e3 * t.towers,
                   1e3 * t.reduce, 1e3 * t.combine, 1e3 * t.update, 1e3 * t.total);
        }
    } else if (po->link_gbps <= 0) {
        printf("  one process: nothing to measure (run it under mpirun -np K, or give --link GBPS:US)\n");
        return;
    }
    if (po->link_gbps > 0) {
        net.bandwidth = po->link_gbps;
        net.latency = 1e-6 * po->link_us;
        net.ranks = 1; /* the model, not this job's measurement */
    }
    printf("  the model on a link of %.2f GB/s and %.1f us%s, each rank as this one (its towers, its share of a batch "
           "that grows with K):\n%6s %12s %12s %12s %12s\n", net.bandwidth, 1e6 * net.latency,
           po->link_gbps > 0 ? " (--link)" : " (measured)", "ranks", "combine ms", "allreduce ms", "ps ms", "speedup");
    tt_step_times one;
    tt_probe_predict_node(p, &net, 1, P, TT_NODE_ALLREDUCE, TT_REDUCE_CPU, &one);
    for (int k = 1; k <= 16; k *= 2) {
        tt_step_times a, b;
        tt_probe_predict_node(p, &net, k, P, TT_NODE_ALLREDUCE, TT_REDUCE_CPU, &a);
        tt_probe_predict_node(p, &net, k, P, TT_NODE_PS, TT_REDUCE_CPU, &b);
        const double best = a.total < b.total ? a.total : b.total;
        printf("%6d %12.3f %12.3f %12.3f %11.2fx\n", k, 1e3 * a.combine, 1e3 * a.total, 1e3 * b.total,
               (double)k * one.total / best);
    }
}

/* Under mpirun every rank probes its share with the same model, towers, batch and reps: the combine's collectives are
 * sized by the parameters and repeated reps times, so a rank started differently would wait in one for ever. Each
 * rank compares with rank 0 and the first difference is named with both values; every rank learns it. */
static tt_status probe_same_on_ranks(tt_node *nd, const tt_run_config *c, size_t P, size_t reps, tt_error *err)
{
    if (nd->size <= 1) return TT_OK;
    static const char *const names[] = {"the model's parameter count", "--towers", "--batch", "--reps", "--optimizer"};
    enum { N = sizeof names / sizeof *names };
    const uint64_t mine[N] = {P, c->towers, c->batch, reps, (uint64_t)c->optim.kind};
    uint64_t all[N * TT_MAX_RANKS];
    tt_status s = tt_node_allgather(nd, mine, all, sizeof mine, err);
    for (int f = 0; !s && f < N; f++)
        if (mine[f] != all[f]) {
            char here[32], there[32];
            snprintf(here, sizeof here, "%llu", (unsigned long long)mine[f]);
            snprintf(there, sizeof there, "%llu", (unsigned long long)all[f]);
            if (f == N - 1) { /* the optimizer by its name */
                snprintf(here, sizeof here, "%s", tt_optim_kind_name(c->optim.kind));
                snprintf(there, sizeof there, "%s", all[f] < 16 ? tt_optim_kind_name((tt_optim_kind)all[f]) : "?");
            }
            s = tt_fail(err, TT_ERR_ARG, "probe: started otherwise than rank 0: %s is %s here, %s on rank 0 (every "
                        "rank must probe the same model, towers, batch and reps)", names[f], here, there);
        }
    return tt_node_agree(nd, s, err);
}

/* probe --assume SPEC: the what-if report from assumed figures (refusing the options that only a measurement reads). */
/* Every design of the step this backend can run (--reduce x --update x --graphs x --overlap), each as whole steps
 * by the trainer (tt_probe_steps), beside the phase model's prediction where it has one (the host's update, no
 * graph, no overlap). Measured first, then printed (rank 0); one rank only. */
static tt_status probe_designs(const tt_probe_config *pc, const tt_probe *p, tt_profile *pf, tt_error *err)
{
    enum { MAX_DESIGNS = TT_REDUCE_COUNT * TT_UPDATE_COUNT * 4 };
    tt_probe_design d[MAX_DESIGNS];
    tt_step_times t[MAX_DESIGNS];
    int n = 0;
    tt_status s = TT_OK;
    for (int r = 0; r < TT_REDUCE_COUNT; r++)
        for (int u = 0; u < TT_UPDATE_COUNT; u++)
            for (int v = 0; v < 4 && !s; v++) {
                int ran;
                d[n] = (tt_probe_design){(tt_reduce)r, (tt_update)u, v & 1, v >> 1};
                if (d[n].graphs && d[n].overlap) continue; /* refused by the trainer: no need to ask */
                s = tt_probe_steps(pc, &d[n], &t[n], &ran, err);
                n += !s && ran;
            }
    for (int i = 0; pf && !s && i < n && pf->n_steps < TT_PROFILE_MAX_STEPS; i++) { /* --json: each design's split */
        tt_profile_step *st = &pf->steps[pf->n_steps++];
        snprintf(st->reduce, sizeof st->reduce, "%s", tt_reduce_name(d[i].reduce));
        snprintf(st->update, sizeof st->update, "%s", tt_update_name(d[i].update));
        st->graphs = d[i].graphs;
        st->overlap = d[i].overlap;
        st->measured = t[i];
        tt_step_times *q = &st->predicted;
        if (d[i].update == TT_UPDATE_HOST && !d[i].graphs && !d[i].overlap) tt_probe_predict(p, d[i].reduce, q);
        else q->launch = q->pull = q->data = q->compute = q->push = q->wait = q->reduce = q->update = q->total = NAN;
    }
    if (s || !tt_node_speaks()) return s;
    printf("\nmeasured whole steps (every design this backend runs, by the trainer: 2 warm-up steps, then the median "
           "of %zu; ms):\n%10s %10s %6s %7s |%8s %8s %8s %8s %8s %8s %8s |%9s %9s\n", pc->reps ? pc->reps : 30,
           "reduce", "update", "graphs", "overlap", "pull", "data", "compute", "push", "wait", "reduce", "update",
           "total", "predicted");
    for (int i = 0; i < n; i++) {
        char pred[16] = "-";
        if (d[i].update == TT_UPDATE_HOST && !d[i].graphs && !d[i].overlap) {
            tt_step_times m;
            tt_probe_predict(p, d[i].reduce, &m);
            snprintf(pred, sizeof pred, "%.3f", 1e3 * m.total);
        }
        printf("%10s %10s %6s %7s |%8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f |%9.3f %9s\n", tt_reduce_name(d[i].reduce),
               tt_update_name(d[i].update), tt_graphs_names[d[i].graphs], tt_overlap_names[d[i].overlap],
               1e3 * t[i].pull, 1e3 * t[i].data, 1e3 * t[i].compute, 1e3 * t[i].push, 1e3 * t[i].wait,
               1e3 * t[i].reduce, 1e3 * t[i].update, 1e3 * t[i].total, pred);
    }
    return TT_OK;
}

/* --json: what probe measured besides its tables (tt_probe_kernels_run: each GEMM shape alone, the launch floor and
 * a graph node, a copy's fixed cost, the compute phase's other kernels), the profile filled and written. */
static tt_status probe_json(tt_out *o, tt_profile *pf, const tt_probe_config *pc, const tt_probe *p,
                            const tt_run_config *c, const char *backend, tt_error *err)
{
    tt_probe_kernels *k = (tt_probe_kernels *)tt_calloc(1, sizeof *k);
    if (!k) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    tt_status s = tt_probe_kernels_run(pc, k, err);
    if (!s) {
        tt_profile_fill(pf, pc, p, k);
        tt_build_record rec;
        tt_build_record_of(&rec);
        tt_build_describe(&rec, pf->towertrain, sizeof pf->towertrain);
        snprintf(pf->backend, sizeof pf->backend, "%s", backend);
        snprintf(pf->blas, sizeof pf->blas, "%s", tt_blas_describe());
        snprintf(pf->model, sizeof pf->model, "%s", c->model ? c->model : "mlp");
        tt_profile_write(o, pf);
        s = tt_out_commit(o, err);
    }
    if (!s && tt_node_speaks()) {
        printf("\nprofile written (%s): %zu GEMM shapes timed alone, %zu other kernels %.3f ms; a launch %.3f us",
               o->what, k->n_gemms, k->others, 1e3 * k->others_s, 1e6 * k->launch);
        if (!isnan(k->graph_node)) printf(", a graph node %.3f us", 1e6 * k->graph_node);
        printf("\n");
    }
    tt_free(k);
    return s;
}

/* probe --assume SPEC --json FILE: every design's predicted step for 1-8 GPUs (strong scaling: the global batch as
 * given), one JSON object — what tools/gpu-check --bundle holds against the steps it measured. A design the cost
 * model has no formula for is left out. */
static tt_status what_if_json(const char *path, tt_assume *a, const tt_model *m, const tt_run_config *c,
                              tt_error *err)
{
    tt_out o;
    memset(&o, 0, sizeof o);
    char what[256];
    snprintf(what, sizeof what, "--json %.240s", path);
    tt_status s = tt_out_open(&o, path, what, 1 << 16, err);
    if (s) return s;
    tt_out_printf(&o, "{\"schema\":\"towertrain-whatif\",\"version\":1,\"profile\":\"%s\",\"model\":\"", a->name);
    for (const char *p = c->model ? c->model : "mlp"; *p; p++) /* a model file's path: escaped */
        tt_out_printf(&o, (*p == '"' || *p == '\\') ? "\\%c" : ((unsigned char)*p < 0x20 ? "?" : "%c"), *p);
    tt_out_printf(&o, "\",\"batch\":%zu,\"designs\":[", c->batch);
    const int graphs0 = a->graphs;
    int first = 1;
    for (size_t n = 1; n <= 8; n++)
        for (int r = 0; r < TT_REDUCE_COUNT; r++)
            for (int u = 0; u < TT_UPDATE_COUNT; u++)
                for (int g = 0; g < 2; g++)
                    for (int ov = 0; ov < 2; ov++) {
                        tt_step_times t;
                        a->graphs = g;
                        int ok;
                        if (ov)
                            ok = !g && r == TT_REDUCE_CPU && u == TT_UPDATE_HOST &&
                                 (tt_assume_overlap_step(a, m, n, c->batch, c->optim.kind, &t), 1);
                        else
                            ok = tt_assume_update_step(a, m, n, c->batch, c->optim.kind, (tt_reduce)r, (tt_update)u,
                                                       &t);
                        if (!ok) continue;
                        tt_out_printf(&o, "%s{\"towers\":%zu,\"reduce\":\"%s\",\"update\":\"%s\",\"graphs\":%s,"
                                      "\"overlap\":%s,\"pull_s\":%.9g,\"data_s\":%.9g,\"compute_s\":%.9g,"
                                      "\"push_s\":%.9g,\"wait_s\":%.9g,\"reduce_s\":%.9g,\"update_s\":%.9g,"
                                      "\"total_s\":%.9g}",
                                      first ? "" : ",", n, tt_reduce_name((tt_reduce)r), tt_update_names[u],
                                      g ? "true" : "false", ov ? "true" : "false", t.pull, t.data, t.compute, t.push,
                                      t.wait, t.reduce, t.update, t.total);
                        first = 0;
                    }
    a->graphs = graphs0;
    tt_out_printf(&o, "]}\n");
    s = tt_out_commit(&o, err);
    tt_error close_err;
    const tt_status closed = tt_out_close(&o, &close_err);
    if (!s && closed) {
        *err = close_err;
        s = closed;
    }
    return s;
}

static int probe_what_if(const tt_run_config *c, const char *spec, const char *json, int argc, char **argv)
{
    tt_error err;
    static const char *const measured[] = {"--towers", "--device", "--gpus", "--host-threads", "--reps",
                                           "--slow-tower", "--data-on", NULL};
    for (int i = 2; i < argc; i++)
        for (const char *const *o = measured; *o; o++) {
            size_t len = strlen(*o);
            if (strncmp(argv[i], *o, len) == 0 && (argv[i][len] == '\0' || argv[i][len] == '='))
                return fail(tt_fail(&err, TT_ERR_ARG,
                                    "probe --assume: %s does not apply (it predicts 1-8 GPUs from assumed figures, "
                                    "measuring nothing)", *o),
                            &err);
        }
    tt_assume a;
    tt_model *m = (tt_model *)tt_calloc(1, sizeof *m);
    if (!m) return fail(tt_fail(&err, TT_ERR_NOMEM, "out of memory"), &err);
    tt_status s = tt_assume_parse(spec, &a, &err);
    a.graphs = c->graphs;
    a.bucket_bytes = c->bucket_kib << 10;
    if (!s) s = tt_run_describe_model(c, m, &err);
    if (!s) s = tt_assume_report(stdout, &a, m, c->batch, c->optim.kind, &err);
    if (!s) s = tt_flush_stdout(stdout, &err);
    if (!s && json) s = what_if_json(json, &a, m, c, &err);
    tt_free(m);
    return s ? fail(s, &err) : 0;
}

int tt_cmd_probe(int argc, char **argv)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    probe_opts po = {.reps = 30};
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, "probe", probe_extra, &po, &help, &err);
    s = tt_node_agree(tt_node_world(), s, &err);
    if (help && !tt_node_speaks()) return 0;
    if (help) {
        printf("usage: towertrain probe [--model M] [--towers N] [--batch B] [--optimizer O] [--device D] "
               "[--reps N] [--json FILE]\n"
               "       towertrain probe --assume PROFILE|FILE|KEY=VALUE,... [--model M] [--batch B] [--optimizer O]\n\n"
               "Times every phase of a step with the trainer's own code, under every reduction placement, and the\n"
               "links that explain them — copy bandwidth host->device and device->host (pinned and pageable),\n"
               "device->device, host memcpy, sgemm at the model's shapes, barriers — and predicts the step time of\n"
               "each placement before any training; then runs every design this backend can (--reduce x --update x\n"
               "--graphs x --overlap, --bucket-kib for its buckets) as whole steps by the trainer, measured beside the\n"
               "prediction. Needs no data set: inputs are synthetic, shaped as --data's\n"
               "samples when given, else as the model's default input (mlp 784, cnn 32x32x3, textcnn the Reuters\n"
               "seed's 300 tokens of 30982; a model file: its `input shape=` line).\n\n"
               "options: the train options --model --data --vocab --towers --batch --optimizer --device --gpus\n"
               "  --host-threads, and\n"
               "  --reps N          reps per measurement, median [30]\n"
               "  --json FILE       also time every GEMM shape of the step alone, a kernel launch, a graph node\n"
               "                    (CUDA), a copy's fixed cost and the compute phase's other kernels, and write\n"
               "                    all of it, with the phases and the whole steps, to FILE as one JSON object: the\n"
               "                    measured profile that --assume FILE reads (docs/whatif.md lists its fields)\n"
               "  --link GBPS:US    the cross-node link to predict K ranks on (bandwidth GB/s : one-way latency\n"
               "                    microseconds), e.g. 3.1:20 for 25 Gb Ethernet [under mpirun: the measured one]\n"
               "Under mpirun -np K each rank probes its share of the batch, and the combine between the ranks is\n"
               "measured (ping-pong latency and bandwidth, the combine's own collectives); the table predicts both\n"
               "--node-reduce modes, and the cost model K = 1..16 ranks on the link (docs/scaleout.md).\n"
               "  --assume SPEC     measure nothing: predict 1-8 GPUs, strong and weak scaling, every placement, from\n"
               "                    assumed figures — a profile (%s),\n"
               "                    optionally followed by KEY=VALUE overrides, or KEY=VALUE alone (docs/whatif.md\n"
               "                    lists the keys) — or from\n"
               "                    a measured profile: an item holding a '/' or ending in .json is a file that\n"
               "                    probe --json wrote (or a report.json holding one under \"probe\"), and its name\n"
               "                    runs to the end of SPEC: [PROFILE,][KEY=VALUE,...]FILE (the keys win over the\n"
               "                    file, the file over the profile); with --graphs on, each tower's step predicted\n"
               "                    as one CUDA graph launch; with --json FILE, every design's predicted step\n"
               "                    for 1-8 GPUs also as one JSON object (docs/whatif.md)\n",
               tt_assume_profiles());
        return 0;
    }
    if (s) return fail(s, &err);
    if (po.assume) return probe_what_if(&c, po.assume, po.json, argc, argv); /* no backend, no measurement */
    if (c.graphs)
        return fail(tt_fail(&err, TT_ERR_ARG, "probe: --graphs on: the probe measures every design this backend runs, "
                            "graphs included where it has them (--graphs is the what-if's: give --assume)"), &err);
    const size_t reps = po.reps;
    tt_backend be;
    s = tt_backend_open(c.device, c.gpus, &be, &err);
    if (s) return fail(s, &err);
    if (be.notice[0]) tt_report_notice(be.notice);
    tt_model *model = (tt_model *)tt_calloc(1, sizeof *model);
    if (!model) return fail(tt_fail(&err, TT_ERR_NOMEM, "out of memory"), &err);
    s = tt_run_describe_model(&c, model, &err);
    if (s) {
        tt_free(model);
        return fail(s, &err);
    }
    tt_node *nd = tt_node_world();
    const int K = nd->size > 1 ? nd->size : 1;
    if ((s = probe_same_on_ranks(nd, &c, model->n_params, reps, &err))) {
        tt_free(model);
        return fail(s, &err);
    }
    /* --json: the file is opened now, so a bad path fails before minutes of measuring */
    tt_out json_out;
    memset(&json_out, 0, sizeof json_out);
    tt_profile *pf = NULL;
    if (po.json && K > 1)
        s = tt_fail(&err, TT_ERR_ARG, "probe --json: one process only (under mpirun, bench measures the job)");
    else if (po.json && !(pf = (tt_profile *)tt_calloc(1, sizeof *pf)))
        s = tt_fail(&err, TT_ERR_NOMEM, "out of memory");
    char what[256];
    snprintf(what, sizeof what, "--json %.240s", po.json ? po.json : "");
    if (!s && po.json) s = tt_out_open(&json_out, po.json, what, 1 << 16, &err);
    if (s) {
        tt_free(pf);
        tt_free(model);
        return fail(s, &err);
    }
    const int host = tt_run_host_threads(nd, c.host_threads);
    /* one rank's share of the batch: the shards of B over K x N towers */
    tt_probe_config pc = {.model = model, .ops = be.ops, .n_devices = be.n_devices, .devices = be.devices,
                          .towers = c.towers, .batch = (c.batch + (size_t)K - 1) / (size_t)K, .optim = c.optim,
                          .host_threads = host, .reps = reps, .bucket_bytes = c.bucket_kib << 10,
                          .n_slow = c.n_slow, .data_on = c.data_on};
    memcpy(pc.slow, c.slow, sizeof pc.slow);
    tt_probe p;
    tt_net net;
    s = tt_node_agree(nd, tt_probe_run(&pc, &p, &err), &err);
    if (!s) s = tt_node_agree(nd, tt_probe_net(nd, model->n_params, reps, &net, &err), &err);
    const int sig = tt_node_stop_signal(nd); /* every rank, whatever its status: the signal is the job's */
    if (!s && sig)
        s = tt_node_agree(nd, tt_fail(&err, TT_ERR_STOPPED, "probe: stopped by %s", tt_signal_name(sig)), &err);
    if (!s && tt_node_speaks()) {
        printf("BLAS: %s\n", tt_blas_describe());
        tt_probe_print(stdout, &p, &pc);
        printf("\npredicted step (ms):\n%10s %8s %8s %8s %8s %8s %8s %8s %9s\n", "reduce", "pull", "data", "compute",
               "push", "wait", "reduce", "update", "total");
        for (int r = 0; r < TT_REDUCE_COUNT; r++) {
            tt_step_times t;
            if (!p.can[r]) {
                tt_error why;
                tt_trainer_config tc = {.ops = be.ops, .n_devices = be.n_devices, .n_towers = c.towers,
                                        .reduce = (tt_reduce)r};
                tt_trainer_check(&tc, &why);
                printf("%10s   (not here: %s)\n", tt_reduce_name((tt_reduce)r), why.msg);
                continue;
            }
            tt_probe_predict(&p, (tt_reduce)r, &t);
            printf("%10s %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %8.3f %9.3f\n", tt_reduce_name((tt_reduce)r), 1e3 * t.pull,
                   1e3 * t.data, 1e3 * t.compute, 1e3 * t.push, 1e3 * t.wait, 1e3 * t.reduce, 1e3 * t.update,
                   1e3 * t.total);
        }
        probe_print_net(&p, &net, &po, K, model->n_params, c.towers, c.batch);
        if (K == 1) { /* the --sync modes (--reduce cpu, --update host): time per global batch, docs/sync.md */
            static const tt_sync modes[] = {{TT_SYNC_BSP, 0, 0},   {TT_SYNC_SSP, 1, 0},     {TT_SYNC_SSP, 4, 0},
                                            {TT_SYNC_ASYNC, 0, 0}, {TT_SYNC_WEIGHTS, 4, 0}, {TT_SYNC_WEIGHTS, 16, 0}};
            printf("\npredicted --sync modes (ms per global batch; the epoch's wall over its steps):");
            for (size_t m = 0; m < sizeof modes / sizeof modes[0]; m++) {
                tt_step_times t;
                char name[32];
                tt_probe_predict_sync(&p, &pc, &modes[m], &t);
                printf("%s %s %.3f", m ? " |" : "", tt_sync_format(&modes[m], name, sizeof name), 1e3 * t.total);
            }
            printf("\n");
        }
    }
    if (!s && K == 1) s = probe_designs(&pc, &p, pf, &err); /* under mpirun bench measures the job's designs */
    if (!s && pf) s = probe_json(&json_out, pf, &pc, &p, &c, be.ops->name, &err);
    tt_error close_err;
    const tt_status closed = tt_out_close(&json_out, &close_err);
    if (!s && closed) s = tt_fail(&err, closed, "%s", close_err.msg);
    if (!s) s = tt_node_agree(nd, tt_node_speaks() ? tt_flush_stdout(stdout, &err) : TT_OK, &err); /* rank 0's table */
    tt_free(pf);
    tt_free(model);
    return s ? fail(s, &err) : 0;
}

/* ---- compare ------------------------------------------------------------------------------------------------- */

int tt_cmd_compare(int argc, char **argv)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.epochs = 1;
    c.towers = 2;
    c.progress = TT_PROGRESS_QUIET;
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, "compare", NULL, NULL, &help, &err);
    /* the placements that add in tower order, each with every update placement it runs with: their weights must
     * agree to the last bit */
    enum { MAX_RUNS = TT_REDUCE_COUNT * TT_UPDATE_COUNT + 2 };
    tt_reduce order[MAX_RUNS];
    tt_update where[MAX_RUNS];
    int overlap[MAX_RUNS] = {0}, data_on[MAX_RUNS];
    int n_order = 0, n_reduce = 0;
    for (int r = 0; r < TT_REDUCE_COUNT; r++) {
        if (!tt_reduce_about((tt_reduce)r)->tower_order) continue;
        n_reduce++;
        for (int u = 0; u < TT_UPDATE_COUNT; u++)
            if (tt_update_reduces((tt_update)u) & (1u << r)) {
                order[n_order] = (tt_reduce)r;
                where[n_order++] = (tt_update)u;
            }
    }
    /* and the host's design with the push overlapped with the backward (--bucket-kib: its buckets) */
    const size_t bucket_kib = c.bucket_kib;
    order[n_order] = TT_REDUCE_CPU;
    where[n_order] = TT_UPDATE_HOST;
    overlap[n_order++] = 1;
    /* every run's data phase as --data-on says, and the host's design once more with the other one */
    const int given_data_on = c.data_on;
    for (int r = 0; r < n_order; r++) data_on[r] = given_data_on;
    order[n_order] = TT_REDUCE_CPU;
    where[n_order] = TT_UPDATE_HOST;
    data_on[n_order++] = !given_data_on;
    if (help) {
        static const char *const count[] = {"none", "one", "two", "three", "four", "five", "six", "seven", "eight"};
        char names[128];
        printf("usage: towertrain compare [train options]\n\n"
               "Trains the same steps (same seed, data order, towers and batch; default 1 epoch, 2 towers) once per\n"
               "reduction placement — %s — with the optimizer on the host, and again with it on\n"
               "the devices where the placement allows (--update device, replicated), once with the push\n"
               "overlapped with the backward (--overlap on, in --bucket-kib buckets), and once with the data phase\n"
               "on the other side (--data-on host or device, whichever was not given), and prints each run's time\n"
               "and the largest weight difference between the runs. All %s placements add the towers' gradients\n"
               "in the same order, every update runs the same formulas and both data phases read the same bytes,\n"
               "so the difference should be exactly 0.\n\ntrain options:\n",
               tt_reduce_list(names, sizeof names, ", ", ", ", 1), n_reduce < 9 ? count[n_reduce] : "of them");
        tt_cli_train_help(stdout);
        return 0;
    }
    if (s) return fail(s, &err);
    measure_setup setup;
    s = setup_open(&c, &setup, &err);
    if (s) {
        setup_close(&setup);
        return fail(s, &err);
    }
    const tt_dev_ops *ops = setup.ops;
    tt_run_result *res = setup.res;
    float *w[MAX_RUNS] = {NULL};
    printf("towertrain compare | backend %s | %zu towers | batch %zu | %zu epoch%s of %zu samples | seed %llu\n",
           ops->name, c.towers, c.batch, c.epochs, c.epochs == 1 ? "" : "s", setup.train.n, (unsigned long long)c.seed);
    char dw_head[32]; /* each placement's weights against the first one's */
    snprintf(dw_head, sizeof dw_head, "max|dw| %s", tt_reduce_name(order[0]));
    printf("%10s %10s %7s %7s %9s %9s %11s %9s  %s\n", "reduce", "update", "overlap", "data-on", "s/epoch", "ms/step",
           dw_head, "test_acc", "verdict");
    size_t P = 0;
    for (int r = 0; !s && r < n_order; r++) {
        c.reduce = order[r];
        c.update = where[r];
        c.overlap = overlap[r];
        c.bucket_kib = overlap[r] ? bucket_kib : 0;
        c.data_on = data_on[r];
        s = tt_run_on(&c, &setup.train, &setup.val, &setup.test, NULL, res, &err);
        if (s) break;
        w[r] = res->final_params;
        P = res->n_params;
        double secs[1024], steps_ms[1024];
        size_t ne = res->n_epochs < 1024 ? res->n_epochs : 1024;
        for (size_t e = 0; e < ne; e++) {
            secs[e] = res->epochs[e].seconds;
            steps_ms[e] = 1e3 * res->epochs[e].step_median;
        }
        double dw = 0;
        for (size_t i = 0; w[0] && i < P; i++) dw = fmax(dw, fabs((double)w[r][i] - w[0][i]));
        char verdict[128];
        tt_ledger_verdict(&res->epochs[ne - 1].split, verdict, sizeof verdict);
        printf("%10s %10s %7s %7s %9.3f %9.3f %11.3g %9.4f  %s\n", tt_reduce_name(order[r]),
               tt_update_name(where[r]), tt_overlap_names[overlap[r]], tt_data_on_names[data_on[r]],
               tt_median(secs, ne), tt_median(steps_ms, ne), dw, res->test.accuracy, verdict);
        s = tt_flush_stdout(stdout, &err);
    }
    if (!s) {
        double worst = 0, wmax = 0;
        for (int a = 0; a < n_order; a++)
            for (int b2 = a + 1; b2 < n_order; b2++)
                for (size_t i = 0; i < P; i++) worst = fmax(worst, fabs((double)w[a][i] - w[b2][i]));
        for (size_t i = 0; i < P; i++) wmax = fmax(wmax, fabs((double)w[0][i]));
        printf("max |dw| between any two placements: %.3g (largest weight %.3g; one float32 ulp there is %.3g)\n",
               worst, wmax, wmax * 1.1920929e-7);
    }
    for (int r = 0; r < n_order; r++) tt_free(w[r]);
    setup_close(&setup);
    return s ? fail(s, &err) : 0;
}
