/* bench.c — `towertrain bench`: sweeps ranks x towers x batch x placement x update x --sync, training --epochs epochs
 * a row, and prints per row s/epoch, ms/step, accuracy, the step split, the cost model's prediction (the median of
 * three probes: before the row, before its middle epoch, after it) and the GEMM floor (re-measured before every
 * epoch), as a table and (--csv) as CSV for tools/plot. Under mpirun -np K, rank 0 prints and writes for the job.
 * Not for: training itself (tt_train.h), the measurements (tt_probe.h), or the probe and compare subcommands
 * (probe.c, compare.c). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "bench.h"
#include "measure.h"
#include "tt_blas.h"
#include "tt_cli.h"
#include "tt_ledger.h"
#include "tt_out.h"
#include "tt_probe.h"
#include "tt_signal.h"

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

typedef struct bench_run {
    tt_probe_config pc;
    tt_node *sub;            /* the row's ranks: they agree on the probes before every epoch's collectives */
    double floor_step[1024]; /* GEMM floor per epoch, measured just before it */
    tt_probe probes[3];      /* before the row, before its middle epoch, after it */
    int n_probes;
    size_t epochs;
} bench_run;

/* The probes are this rank's own work (a signal on one rank stops them there): the row's ranks agree on them before
 * the epoch's collectives, or a rank that stopped alone would wait in the run's agreement while the others step. */
static tt_status bench_before_epoch(void *ctx, size_t epoch, tt_error *err)
{
    bench_run *br = (bench_run *)ctx;
    tt_status s = TT_OK;
    if (epoch > 1 && epoch == br->epochs / 2 + 1 && br->n_probes == 1) { /* before the middle epoch */
        s = tt_probe_run(&br->pc, &br->probes[br->n_probes], err);
        if (!s) br->n_probes++;
    }
    if (!s && epoch <= 1024) s = tt_probe_gemm_floor(&br->pc, &br->floor_step[epoch - 1], err);
    return tt_node_agree(br->sub, s, err);
}

/* One row of the sweep, as the console and the CSV show it. */
typedef struct bench_row {
    int ranks;
    size_t towers, batch, epochs, steps; /* steps: per epoch */
    double per_tower_batch;              /* the global batch over the job's towers */
    const char *reduce, *update, *scaling, *node_reduce, *overlap, *graphs, *data_on;
    char sync[32];           /* --sync's mode */
    const char *precision;   /* --precision's format */
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
    {"graphs", COL_STR, ROW(graphs)}, {"data_on", COL_STR, ROW(data_on)}, {"precision", COL_STR, ROW(precision)},
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
    br->pc.precision = c->precision;
    br->pc.push_fp32 = c->push_fp32;
    /* the prediction is the median of probes before, during and after the row's training */
    br->epochs = c->epochs;
    br->n_probes = 0;
    br->sub = sub;
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
    if (!tt_sync_summed(c->sync.kind)) tt_probe_predict_sync(&probe, &br->pc, &c->sync, &r->pred); /* one rank */
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
    r->precision = tt_precision_names[c->precision];
    r->node_reduce = tt_node_reduce_name(c->node_reduce);
    r->s_per_epoch = tt_median(secs, ne);
    /* ssp, async, weights: a step's total is its shards' (or towers') mean span beside other steps: the epoch's wall
     * over its steps is the time per global batch */
    r->ms = tt_sync_summed(c->sync.kind) ? tt_median(step_ms, ne) : 1e3 * r->s_per_epoch / (double)steps;
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
    printf("       sync %s, precision %s: %.0f samples/s, staleness mean %.2f, test accuracy %.4f\n", r->sync,
           r->precision, r->samples_per_s, r->staleness_mean, r->test_accuracy);
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
    printf("  --precision LIST fp32, bf16, fp16: the towers' formats (docs/precision.md; a design the 16-bit step\n"
           "                   does not run with is skipped, with why) [fp32]\n");
    printf("  --scaling strong the global batch stays as given while towers grow: each tower gets less work\n"
           "  --scaling weak   each tower keeps the batch as given: the global batch grows with the towers\n"
           "  --csv FILE       also write the rows as CSV (for tools/plot)\n"
           "  --reps N         reps of every probe and floor measurement [30]\n\ntrain options:\n");
    tt_cli_train_help(stdout);
}

/* What one sweep holds: the lists, the run's config (each row sets its towers, batch, placements and sub-job), the
 * setup, the measurements' scratch, the CSV, and rank 0's pending failure (tt_pending: rank 0's writes record theirs,
 * and the job agrees on it before the sweep, after every row and at the end). */
typedef struct bench_sweep {
    const bench_opts *b;
    tt_run_config *c;
    measure_setup *setup;
    bench_run *br;
    tt_out *csv;
    tt_pending *pend;
} bench_sweep;

/* The row of list entries bi (batch), ti (towers) and rui (reduce x update x sync x precision) on the sub-job sub of K
 * ranks: a
 * console line instead where it cannot run (more towers than samples; a design the trainer refuses), else the row
 * measured, reported, and agreed on by the row's ranks. */
static tt_status bench_row_run(bench_sweep *x, tt_node *sub, const tt_net *net, int K, size_t bi, size_t ti,
                               size_t rui, tt_error *err)
{
    const bench_opts *b = x->b;
    tt_run_config *c = x->c;
    tt_error we;
    const size_t inner = b->n_syncs * b->n_precs, ri = rui / (b->n_updates * inner), ui = rui / inner % b->n_updates;
    const size_t si = rui / b->n_precs % b->n_syncs, pi = rui % b->n_precs;
    size_t N = b->towers[ti], B = b->weak ? b->batches[bi] * N * (size_t)K : b->batches[bi];
    if (N * (size_t)K > B) {
        printf("%5d %6zu %6zu %9s %10s   (skipped: more towers than samples in the batch)\n", K, N, B,
               tt_reduce_name(b->reduces[ri]), tt_update_name(b->updates[ui]));
        tt_pending_fail(x->pend, tt_flush_stdout(stdout, &we), &we); /* agreed with the next row's */
        return TT_OK;
    }
    tt_trainer_config tc = {.ops = x->setup->ops, .n_devices = x->setup->be.n_devices, .n_towers = N,
                            .reduce = b->reduces[ri], .update = b->updates[ui], .overlap = c->overlap, .node = sub,
                            .sync = b->syncs[si], .precision = b->precs[pi],
                            .push_fp32 = b->precs[pi] ? c->push_fp32 : 0,
                            .loss_scale = b->precs[pi] ? c->loss_scale : (tt_loss_scale){0, 0, 0}};
    memcpy(tc.slow, c->slow, sizeof tc.slow);
    tc.n_slow = c->n_slow;
    tt_error why;
    if (tt_trainer_check(&tc, &why)) { /* nccl with more towers than GPUs; an update it cannot serve */
        printf("%5d %6zu %6zu %9s %10s   (skipped: %s)\n", K, N, B, tt_reduce_name(b->reduces[ri]),
               tt_update_name(b->updates[ui]), why.msg);
        tt_pending_fail(x->pend, tt_flush_stdout(stdout, &we), &we);
        return TT_OK;
    }
    c->towers = N;
    c->batch = B;
    c->reduce = b->reduces[ri];
    c->update = b->updates[ui];
    c->sync = b->syncs[si];
    c->precision = b->precs[pi];
    /* --loss-scale and --push-precision are the 16-bit rows' (compat refuses them in FP32; bench_check refuses them
     * where the list has no 16-bit row) */
    const tt_loss_scale given = c->loss_scale;
    const int given_push = c->push_fp32;
    if (!c->precision) c->loss_scale = (tt_loss_scale){0, 0, 0}, c->push_fp32 = 0;
    c->node = sub;
    bench_row row = {.ranks = K, .towers = N, .batch = B, .scaling = b->weak ? "weak" : "strong"};
    tt_status s = row_measure(c, x->setup, x->br, b->reps, sub, net, &row, err);
    c->loss_scale = given;
    c->push_fp32 = given_push;
    if (s) return s;
    /* rank 0's stdout or CSV may have failed, a rank may have caught a signal: the row's ranks learn it together and
     * leave the sweep together */
    tt_pending_fail(x->pend, row_report(&row, x->setup->res, b->csv ? x->csv : NULL, &we), &we);
    const int sig = tt_node_stop_signal(sub);
    if (sig)
        tt_pending_fail(x->pend, tt_fail(&we, TT_ERR_STOPPED, "bench: stopped by %s after the row of %zu towers, "
                                         "batch %zu", tt_signal_name(sig), N, B), &we);
    return tt_pending_agree(sub, x->pend, TT_OK, err);
}

/* Every row on the first K ranks of the job (the others sleep meanwhile): the sub-job, its link measured (more than
 * one rank), the rows, then every rank of the job agreeing on the outcome. */
static tt_status bench_ranks(bench_sweep *x, tt_node *world, int K, tt_error *err)
{
    const bench_opts *b = x->b;
    tt_node sub;
    tt_status s = tt_node_split(world, K, &sub, err);
    if (!s && world->size > 1 && sub.size > 0 && sub.local_size > K) sub.local_size = K; /* the others sleep */
    tt_net net;
    memset(&net, 0, sizeof net);
    if (!s && sub.size > 1) /* one rank: no combine */
        s = tt_probe_net(&sub, x->setup->model->n_params, b->reps, &net, err);
    for (size_t bi = 0; !s && sub.size > 0 && bi < b->n_batches; bi++)
        for (size_t ti = 0; !s && ti < b->n_towers; ti++)
            for (size_t rui = 0; !s && rui < b->n_reduces * b->n_updates * b->n_syncs * b->n_precs; rui++)
                s = bench_row_run(x, &sub, &net, K, bi, ti, rui, err);
    if (sub.size > 0) tt_node_free(&sub);
    /* the ranks that sat this out wait, asleep, for the ones that ran the rows (an agreement first would spin on a core
     * the rows run on), then every rank agrees */
    tt_error ie;
    const tt_status idle = tt_node_idle_barrier(world, &ie);
    if (!s && idle) s = tt_fail(err, idle, "%s", ie.msg);
    s = tt_pending_agree(world, x->pend, s, err); /* a skipped row's console line, a row's failure */
    tt_node_stop_signal(world); /* a stop's signal is every rank's exit code, the ranks that sat out too */
    return s;
}

/* A placement this backend cannot run at all (whatever the towers, the update): refused before the sweep; and the
 * 16-bit rows' options with no 16-bit row to take them (the FP32 step's refusal, once). */
static tt_status bench_check_reduces(const bench_opts *b, const measure_setup *setup, const tt_run_config *c,
                                     tt_error *err)
{
    int half = 0;
    for (size_t pi = 0; pi < b->n_precs; pi++) half |= b->precs[pi] != TT_FMT_FP32;
    tt_trainer_config fp = {.ops = setup->ops, .n_devices = setup->be.n_devices, .n_towers = 1,
                            .loss_scale = c->loss_scale, .push_fp32 = c->push_fp32};
    tt_status s = half ? TT_OK : tt_trainer_check(&fp, err);
    for (size_t ri = 0; ri < b->n_reduces && !s; ri++) {
        tt_trainer_config tc = {.ops = setup->ops, .n_devices = setup->be.n_devices, .n_towers = 1,
                                .reduce = b->reduces[ri]};
        s = tt_trainer_check(&tc, err);
    }
    return s;
}

/* bench's flow after its options: phases every rank walks together, agreed at the return of each (tt_run_phases);
 * the rows agree among their own ranks inside the sweep (bench_ranks). */
typedef struct bench_flow {
    bench_opts *b;
    tt_run_config *c;
    tt_node *world;
    measure_setup setup;
    bench_run *br;
    tt_out csv;
    tt_pending pend; /* the walk's: what one rank's outputs failed at, agreed at the phase's return */
    size_t ki;       /* the sweep: the next entry of --ranks */
} bench_flow;

/* The data, the model and the backend (measure_open); the probes' room. */
static tt_status bench_open(void *ctx, tt_error *err)
{
    bench_flow *f = (bench_flow *)ctx;
    tt_status s = measure_open(f->c, &f->setup, err);
    f->br = (bench_run *)tt_calloc(1, sizeof *f->br);
    if (!s && !f->br) s = tt_fail(err, TT_ERR_NOMEM, "out of memory");
    return s;
}

/* The lists alike on every rank, then the placements this backend runs. */
static tt_status bench_check(void *ctx, tt_error *err)
{
    bench_flow *f = (bench_flow *)ctx;
    tt_status s = bench_same_lists(f->world, f->b, err);
    return s ? s : bench_check_reduces(f->b, &f->setup, f->c, err);
}

/* --csv's file and header, the banner: rank 0's, its failures recorded for the agreement. */
static tt_status bench_outputs(void *ctx, tt_error *err)
{
    (void)err;
    bench_flow *f = (bench_flow *)ctx;
    bench_outputs_open(&f->csv, f->b, &f->setup, f->c, f->world, &f->pend);
    return TT_OK;
}

/* The rows on the first --ranks[ki] ranks of the job; the phase repeats for every entry. */
static tt_status bench_sweep_ranks(void *ctx, tt_error *err)
{
    bench_flow *f = (bench_flow *)ctx;
    if (f->ki >= f->b->n_ranks) return TT_OK; /* --ranks names none */
    bench_sweep x = {.b = f->b, .c = f->c, .setup = &f->setup, .br = f->br, .csv = &f->csv, .pend = &f->pend};
    return bench_ranks(&x, f->world, (int)f->b->ranks[f->ki++], err);
}

static size_t bench_next_ranks(void *ctx, size_t at, size_t n)
{
    (void)n;
    const bench_flow *f = (const bench_flow *)ctx;
    return f->ki < f->b->n_ranks ? at : at + 1;
}

/* The end: rank 0's last write (a failure is agreed). */
static tt_status bench_end(void *ctx, tt_error *err)
{
    (void)err;
    bench_flow *f = (bench_flow *)ctx;
    tt_error we;
    tt_pending_fail(&f->pend, tt_out_close(&f->csv, &we), &we);
    return TT_OK;
}

static const tt_run_phase g_bench_phases[] = {
    {bench_open, NULL},
    {bench_check, NULL},
    {bench_outputs, NULL},
    {bench_sweep_ranks, bench_next_ranks},
    {bench_end, NULL},
};

int tt_cmd_bench(int argc, char **argv)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.epochs = 3;
    c.progress = TT_PROGRESS_QUIET;
    bench_opts b = {{(size_t)tt_node_world()->size}, 1, {1, 2}, 2, {256}, 1, {TT_REDUCE_CPU}, 1, {TT_UPDATE_HOST}, 1,
                    {{TT_SYNC_BSP, 0, 0}}, 1, {TT_FMT_FP32}, 1, 0, 30, NULL};
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, "bench", bench_extra, &b, &help, &err);
    s = tt_node_agree(tt_node_world(), s, &err);
    tt_node *world = tt_node_world();
    if (!tt_node_speaks()) { /* rank 0 prints and writes the CSV for the job */
        if (!freopen("/dev/null", "w", stdout))
            return measure_fail(tt_fail(&err, TT_ERR_IO, "/dev/null: cannot open"), &err);
        b.csv = NULL;
        help = 0;
    }
    if (help && !tt_node_speaks()) return 0;
    if (help) {
        bench_help();
        return 0;
    }
    if (s) return measure_fail(s, &err);
    bench_flow f;
    memset(&f, 0, sizeof f);
    f.b = &b;
    f.c = &c;
    f.world = world;
    s = tt_run_phases(g_bench_phases, sizeof g_bench_phases / sizeof g_bench_phases[0], world, &f.pend, NULL, &f, &err);
    tt_error we;
    tt_out_close(&f.csv, &we); /* a phase before the end failed: nothing more is written */
    measure_close(&f.setup);
    tt_free(f.br);
    return s ? measure_fail(s, &err) : 0;
}
