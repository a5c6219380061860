/* compare.c — `towertrain compare`: trains the same steps under every placement that adds in tower order
 * (tt_reduce_info), each with every update placement it runs with, once more with the push overlapped with the
 * backward and once with the other --data-on, all from the same seed, and prints each run's time and its largest
 * weight difference from the first (max |dw|): every one of them should be exactly 0.
 * Not for: timing a placement against its prediction (bench.c) or training itself (tt_train.h). */
#include <math.h>
#include <stdio.h>

#include "measure.h"
#include "tt_cli.h"
#include "tt_ledger.h"

/* The runs of one compare: a design each (placement, update, overlap, data phase, precision and push), in the order
 * they run. */
enum { MAX_RUNS = TT_REDUCE_COUNT * TT_UPDATE_COUNT + 3 };
typedef struct compare_runs {
    tt_reduce order[MAX_RUNS];
    tt_update where[MAX_RUNS];
    int overlap[MAX_RUNS], data_on[MAX_RUNS], precision[MAX_RUNS], push_fp32[MAX_RUNS];
    int n_order;  /* the runs */
    int n_reduce; /* the placements among them that add in tower order */
    int n_same;   /* the first n_same runs compute the same weights (the rest: another precision or push) */
} compare_runs;

/* --precision bf16, fp16: the designs the 16-bit step runs with (the host's sum and update, without overlap), each
 * data phase; then the same with the gradient pushed in FP32, and the FP32 step — what the precision changes. */
static void compare_designs16(const tt_run_config *c, compare_runs *x)
{
    const int prec[] = {c->precision, c->precision, c->precision, TT_FMT_FP32};
    const int push32[] = {c->push_fp32, c->push_fp32, !c->push_fp32, 0}, other_data[] = {0, 1, 0, 0};
    x->n_order = 0;
    x->n_reduce = 1;
    for (int r = 0; r < 4; r++) {
        x->order[r] = TT_REDUCE_CPU;
        x->where[r] = TT_UPDATE_HOST;
        x->overlap[r] = 0;
        x->data_on[r] = other_data[r] ? !c->data_on : c->data_on;
        x->precision[r] = prec[r];
        x->push_fp32[r] = push32[r];
        x->n_order++;
    }
    x->n_same = 2;
}

/* The placements that add in tower order, each with every update placement it runs with (their weights must agree
 * to the last bit); then the host's design with the push overlapped, and the host's design once more with the other
 * data phase than c's. */
static void compare_designs(const tt_run_config *c, compare_runs *x)
{
    if (c->precision != TT_FMT_FP32) {
        compare_designs16(c, x);
        return;
    }
    x->n_order = x->n_reduce = 0;
    /* a norm clip takes the summed gradient's norm on the host before it updates: the host's designs only */
    const int norm_clip = c->optim.clipnorm > 0 || c->optim.global_clipnorm > 0;
    if (norm_clip)
        fprintf(stderr, "towertrain: notice: --%s: compare runs the designs that update on the host, without "
                "--overlap (the host takes the summed gradient's norm before it updates)\n",
                c->optim.clipnorm > 0 ? "clipnorm" : "global-clipnorm");
    /* FP32 rows, as given: a --push-precision fp32 or --loss-scale there is refused at the first (compat.c) */
    for (int r = 0; r < MAX_RUNS; r++) x->overlap[r] = x->precision[r] = 0, x->push_fp32[r] = c->push_fp32;
    for (int r = 0; r < TT_REDUCE_COUNT; r++) {
        if (!tt_reduce_about((tt_reduce)r)->tower_order) continue;
        x->n_reduce++;
        for (int u = 0; u < TT_UPDATE_COUNT; u++)
            if ((tt_update_reduces((tt_update)u) & (1u << r)) && !(norm_clip && u != TT_UPDATE_HOST)) {
                x->order[x->n_order] = (tt_reduce)r;
                x->where[x->n_order++] = (tt_update)u;
            }
    }
    /* and the host's design with the push overlapped with the backward (--bucket-kib: its buckets) */
    if (!norm_clip) {
        x->order[x->n_order] = TT_REDUCE_CPU;
        x->where[x->n_order] = TT_UPDATE_HOST;
        x->overlap[x->n_order++] = 1;
    }
    /* every run's data phase as --data-on says, and the host's design once more with the other one */
    const int given_data_on = c->data_on;
    for (int r = 0; r < x->n_order; r++) x->data_on[r] = given_data_on;
    x->order[x->n_order] = TT_REDUCE_CPU;
    x->where[x->n_order] = TT_UPDATE_HOST;
    x->data_on[x->n_order++] = !given_data_on;
    x->n_same = x->n_order;
}

static void compare_help(int n_reduce)
{
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
           "so the difference should be exactly 0.\n"
           "With --precision bf16 or fp16 it runs the designs the 16-bit step runs with (the host's sum and\n"
           "update, each data phase, exactly the same weights), then the same with --push-precision the other\n"
           "way, and the FP32 step: the rows after the first two show what the precision changes (docs/precision.md).\n"
           "\ntrain options:\n",
           tt_reduce_list(names, sizeof names, ", ", ", ", 1), n_reduce < 9 ? count[n_reduce] : "of them");
    tt_cli_train_help(stdout);
}

/* Run r of x on the setup's data: its row (times, max |dw| against the first run's weights w[0], test accuracy, the
 * verdict); its final weights kept in w[r], their count in *P. */
static tt_status compare_run(tt_run_config *c, measure_setup *setup, const compare_runs *x, int r, size_t bucket_kib,
                             float **w, size_t *P, tt_error *err)
{
    tt_run_result *res = setup->res;
    c->reduce = x->order[r];
    c->update = x->where[r];
    c->overlap = x->overlap[r];
    c->bucket_kib = x->overlap[r] ? bucket_kib : 0;
    c->data_on = x->data_on[r];
    c->precision = x->precision[r];
    c->push_fp32 = x->push_fp32[r];
    const tt_loss_scale given = c->loss_scale; /* the 16-bit designs' FP32 row: no loss scale (compat refuses one) */
    if (!c->precision && x->n_same < x->n_order) c->loss_scale = (tt_loss_scale){0, 0, 0};
    tt_status s = tt_run_on(c, &setup->train, &setup->val, &setup->test, NULL, res, err);
    c->loss_scale = given;
    if (s) return s;
    w[r] = res->final_params;
    *P = res->n_params;
    double secs[1024], steps_ms[1024];
    size_t ne = res->n_epochs < 1024 ? res->n_epochs : 1024;
    for (size_t e = 0; e < ne; e++) {
        secs[e] = res->epochs[e].seconds;
        steps_ms[e] = 1e3 * res->epochs[e].step_median;
    }
    double dw = 0;
    for (size_t i = 0; w[0] && i < *P; i++) dw = fmax(dw, fabs((double)w[r][i] - w[0][i]));
    char verdict[128];
    tt_ledger_verdict(&res->epochs[ne - 1].split, verdict, sizeof verdict);
    char prec[16];
    snprintf(prec, sizeof prec, "%s%s", tt_precision_names[x->precision[r]],
             x->precision[r] && x->push_fp32[r] ? "/32" : "");
    printf("%10s %10s %7s %7s %9s %9.3f %9.3f %11.3g %9.4f  %s\n", tt_reduce_name(x->order[r]),
           tt_update_name(x->where[r]), tt_overlap_names[x->overlap[r]], tt_data_on_names[x->data_on[r]], prec,
           tt_median(secs, ne), tt_median(steps_ms, ne), dw, res->test.accuracy, verdict);
    return tt_flush_stdout(stdout, err);
}

/* The last line: the largest difference between any two of the runs that compute the same weights (the first
 * n_order), beside the largest weight and its ulp. */
static void compare_summary(float *const *w, int n_order, size_t P)
{
    double worst = 0, wmax = 0;
    for (int a = 0; a < n_order; a++)
        for (int b2 = a + 1; b2 < n_order; b2++)
            for (size_t i = 0; i < P; i++) worst = fmax(worst, fabs((double)w[a][i] - w[b2][i]));
    for (size_t i = 0; i < P; i++) wmax = fmax(wmax, fabs((double)w[0][i]));
    printf("max |dw| between any two placements: %.3g (largest weight %.3g; one float32 ulp there is %.3g)\n",
           worst, wmax, wmax * 1.1920929e-7);
}

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
    compare_runs x;
    compare_designs(&c, &x);
    const size_t bucket_kib = c.bucket_kib;
    if (help) {
        compare_help(x.n_reduce);
        return 0;
    }
    if (s) return measure_fail(s, &err);
    measure_setup setup;
    s = measure_open(&c, &setup, &err);
    if (s) {
        measure_close(&setup);
        return measure_fail(s, &err);
    }
    float *w[MAX_RUNS] = {NULL};
    printf("towertrain compare | backend %s | %zu towers | batch %zu | %zu epoch%s of %zu samples | seed %llu\n",
           setup.ops->name, c.towers, c.batch, c.epochs, c.epochs == 1 ? "" : "s", setup.train.n,
           (unsigned long long)c.seed);
    char dw_head[32]; /* each placement's weights against the first one's */
    snprintf(dw_head, sizeof dw_head, "max|dw| %s", tt_reduce_name(x.order[0]));
    printf("%10s %10s %7s %7s %9s %9s %9s %11s %9s  %s\n", "reduce", "update", "overlap", "data-on", "precision",
           "s/epoch", "ms/step", dw_head, "test_acc", "verdict");
    size_t P = 0;
    for (int r = 0; !s && r < x.n_order; r++) s = compare_run(&c, &setup, &x, r, bucket_kib, w, &P, &err);
    if (!s) compare_summary(w, x.n_same, P);
    for (int r = 0; r < x.n_order; r++) tt_free(w[r]);
    measure_close(&setup);
    return s ? measure_fail(s, &err) : 0;
}
