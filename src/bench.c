/* bench.c — `towertrain bench`: seconds per epoch with 1, 2, … towers, next to the epoch's GEMM floor measured in
 * the same run on the same machine.
 *
 * The GEMM floor of a step with N towers is the time N threads take to run, concurrently, exactly the GEMMs of one
 * tower's step (forward, weight gradient, input gradient of every dense layer, at the largest shard's rows),
 * through the same device seam. An epoch's floor is that times the number of steps. Everything a step does beyond
 * its GEMMs (copies, elementwise layers, the sum, the optimizer, waking threads) is the distance to the floor. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tt_backend.h"
#include "tt_blas.h"
#include "tt_cli.h"

typedef struct bench_opts {
    size_t towers[16];
    size_t n_towers;
    size_t reps;
} bench_opts;

static int bench_extra(const char *opt, const char *value, void *ctx, tt_error *err, tt_status *st)
{
    bench_opts *b = (bench_opts *)ctx;
    if (strcmp(opt, "--towers") == 0) {
        if (!value) {
            *st = tt_fail(err, TT_ERR_ARG, "--towers: missing value");
            return 0;
        }
        b->n_towers = 0;
        const char *p = value;
        while (*p) {
            char num[24];
            size_t len = strcspn(p, ",");
            if (len == 0 || len >= sizeof num || b->n_towers == 16) {
                *st = tt_fail(err, TT_ERR_ARG, "--towers: '%s' is not a list like 1,2,4 (at most 16 entries)", value);
                return 0;
            }
            memcpy(num, p, len);
            num[len] = '\0';
            *st = tt_cli_size("--towers", num, 1, 1024, &b->towers[b->n_towers++], err);
            if (*st) return 0;
            p += len;
            if (*p == ',') p++;
        }
        return 1;
    }
    if (strcmp(opt, "--gemm-reps") == 0) {
        *st = value ? tt_cli_size(opt, value, 1, 100000, &b->reps, err) : tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
        return 1;
    }
    return 0;
}

/* ---- GEMM floor -------------------------------------------------------------------------------------------- */

#define FLOOR_MAX_THREADS 64
#define FLOOR_MAX_REPS 1000

typedef struct gemm_floor gemm_floor;

typedef struct gemm_thread {
    gemm_floor *f;
    int id;
    tt_status status;
    tt_error err;
} gemm_thread;

struct gemm_floor {
    const tt_model *m;
    const tt_dev_ops *ops;
    size_t rows, threads, reps;
    pthread_barrier_t barrier;
    double rep_start[FLOOR_MAX_THREADS][FLOOR_MAX_REPS], rep_end[FLOOR_MAX_THREADS][FLOOR_MAX_REPS];
};

/* One thread of the floor: the GEMMs of one tower's step, reps times, each rep started together with the other
 * threads (as the towers start a step together). */
static void *gemm_thread_main(void *arg)
{
    gemm_thread *g = (gemm_thread *)arg;
    gemm_floor *f = g->f;
    const tt_model *m = f->m;
    const size_t R = f->rows;
    tt_dev dev;
    g->status = tt_dev_init(&dev, f->ops, 0, &g->err);
    float *buf[TT_MAX_LAYERS][5];
    memset(buf, 0, sizeof buf);
    size_t maxw = m->max_width;
    float *h = (float *)tt_malloc((maxw * maxw + R * maxw) * sizeof(float));
    if (g->status == TT_OK && !h) g->status = tt_fail(&g->err, TT_ERR_NOMEM, "out of memory");
    if (g->status == TT_OK) {
        tt_dev_bind(&dev);
        for (size_t i = 0; i < maxw * maxw + R * maxw; i++) h[i] = 0.01f * (float)(i % 97) - 0.48f;
        for (size_t l = 0; l < m->n_layers && g->status == TT_OK; l++) {
            if (m->layers[l].kind != &tt_layer_dense) continue;
            size_t I = m->layers[l].in, O = m->layers[l].out;
            size_t sizes[5] = {R * I, I * O, R * O, I * O, R * I}; /* X, W, Y, dW, dX */
            for (int k = 0; k < 5; k++) {
                buf[l][k] = tt_dev_alloc_f32(&dev, sizes[k]);
                if (!buf[l][k]) {
                    g->status = tt_fail(&g->err, TT_ERR_NOMEM, "out of device memory");
                    break;
                }
                tt_dev_h2d(&dev, buf[l][k], h, sizes[k] * sizeof(float));
            }
        }
    }
    for (size_t rep = 0; rep < f->reps + 1; rep++) { /* rep 0 warms up */
        pthread_barrier_wait(&f->barrier);
        double t0 = tt_now();
        if (g->status != TT_OK) continue;
        for (size_t l = 0; l < m->n_layers; l++) {
            if (m->layers[l].kind != &tt_layer_dense) continue;
            size_t I = m->layers[l].in, O = m->layers[l].out;
            float **b = buf[l];
            tt_dev_sgemm(&dev, 0, 0, R, O, I, 1.0f, b[0], I, b[1], O, 0.0f, b[2], O);
        }
        for (size_t l = m->n_layers; l-- > 0;) {
            if (m->layers[l].kind != &tt_layer_dense) continue;
            size_t I = m->layers[l].in, O = m->layers[l].out;
            float **b = buf[l];
            tt_dev_sgemm(&dev, 1, 0, I, O, R, 1.0f, b[0], I, b[2], O, 0.0f, b[3], O);
            if (l > 0) tt_dev_sgemm(&dev, 0, 1, R, I, O, 1.0f, b[2], O, b[1], O, 0.0f, b[4], I);
        }
        tt_dev_sync(&dev);
        if (rep > 0) {
            f->rep_start[g->id][rep - 1] = t0;
            f->rep_end[g->id][rep - 1] = tt_now();
        }
    }
    for (size_t l = 0; l < TT_MAX_LAYERS; l++)
        for (int k = 0; k < 5; k++)
            if (buf[l][k]) tt_dev_dfree(&dev, buf[l][k]);
    tt_free(h);
    tt_dev_free(&dev);
    return NULL;
}

/* Median over reps of the rep's wall time (first start to last end, so that threads sharing a core count fully):
 * the GEMM-only step time with `threads` towers. */
static tt_status gemm_floor_measure(gemm_floor *f, double *step_secs, tt_error *err)
{
    gemm_thread g[FLOOR_MAX_THREADS];
    pthread_t th[FLOOR_MAX_THREADS];
    pthread_barrier_init(&f->barrier, NULL, (unsigned)f->threads);
    size_t started = 0;
    tt_status s = TT_OK;
    for (size_t t = 0; t < f->threads; t++) {
        memset(&g[t], 0, sizeof g[t]);
        g[t].f = f;
        g[t].id = (int)t;
        if (pthread_create(&th[t], NULL, gemm_thread_main, &g[t]) != 0) {
            fprintf(stderr, "towertrain bench: cannot start a thread\n");
            abort(); /* the others would wait at the barrier forever */
        }
        started++;
    }
    for (size_t t = 0; t < started; t++) {
        pthread_join(th[t], NULL);
        if (g[t].status && !s) s = tt_fail(err, g[t].status, "gemm floor: %s", g[t].err.msg);
    }
    pthread_barrier_destroy(&f->barrier);
    double wall[FLOOR_MAX_REPS];
    for (size_t r = 0; r < f->reps; r++) {
        double first = f->rep_start[0][r], last = f->rep_end[0][r];
        for (size_t t = 1; t < f->threads; t++) {
            if (f->rep_start[t][r] < first) first = f->rep_start[t][r];
            if (f->rep_end[t][r] > last) last = f->rep_end[t][r];
        }
        wall[r] = last - first;
    }
    *step_secs = tt_median(wall, f->reps);
    return s;
}

/* Bench state: the floor is measured before every epoch, so floor and training see the same machine. */
typedef struct bench_run {
    gemm_floor *floor;
    double floor_step[1024]; /* per epoch */
} bench_run;

static tt_status bench_before_epoch(void *ctx, size_t epoch, tt_error *err)
{
    bench_run *br = (bench_run *)ctx;
    return epoch <= 1024 ? gemm_floor_measure(br->floor, &br->floor_step[epoch - 1], err) : TT_OK;
}

int tt_cmd_bench(int argc, char **argv)
{
    tt_run_config c;
    tt_run_config_defaults(&c);
    c.epochs = 5;
    c.progress = TT_PROGRESS_QUIET;
    bench_opts b = {{1, 2}, 2, 60};
    tt_error err = {{0}};
    int help;
    tt_status s = tt_cli_parse_train(argc, argv, 2, &c, "bench", bench_extra, &b, &help, &err);
    if (help) {
        printf("usage: towertrain bench [--towers 1,2] [--gemm-reps N] [train options]\n\n"
               "Trains --epochs epochs (default 5) for each tower count and prints the median seconds per epoch next\n"
               "to the epoch's GEMM floor: the time the step's GEMMs alone take on as many threads, measured now.\n\n"
               "train options:\n");
        tt_cli_train_help(stdout);
        return 0;
    }
    for (size_t i = 0; !s && i < b.n_towers; i++)
        if (b.towers[i] > c.batch)
            s = tt_fail(&err, TT_ERR_ARG, "--towers %zu is more than --batch %zu", b.towers[i], c.batch);
    if (s) {
        fprintf(stderr, "towertrain: %s\n", err.msg);
        return tt_status_exit_code(s);
    }

    const tt_dev_ops *ops;
    int n_devices;
    tt_dataset train, val, test;
    tt_model *model = (tt_model *)tt_calloc(1, sizeof *model);
    tt_run_result *res = (tt_run_result *)tt_calloc(1, sizeof *res);
    memset(&val, 0, sizeof val);
    if (!model || !res) s = tt_fail(&err, TT_ERR_NOMEM, "out of memory");
    if (!s) s = tt_backend_find(c.device, &ops, &n_devices, &err);
    if (!s) s = tt_dataset_load_dir(c.data, &train, &test, &err);
    if (!s) s = tt_dataset_split_tail(&train, c.val_samples, &val, &err);
    if (!s && c.train_samples) tt_dataset_truncate(&train, c.train_samples);
    if (!s && c.test_samples) tt_dataset_truncate(&test, c.test_samples);
    if (!s)
        s = strcmp(c.model, "mlp") == 0 ? tt_model_mlp(model, train.dim, train.n_classes, &err)
                                        : tt_model_load(model, c.model, train.dim, train.n_classes, &err);
    if (s) {
        fprintf(stderr, "towertrain: %s\n", err.msg);
        return tt_status_exit_code(s);
    }

    const size_t steps = (train.n + c.batch - 1) / c.batch;
    const double flops = tt_model_train_flops(model);
    printf("towertrain bench | backend %s | %d CPUs | BLAS: %s\n", ops->name, tt_cpu_count(), tt_blas_describe());
    printf("model %s (%zu params) | %zu training samples, batch %zu -> %zu steps/epoch | %zu epochs per row\n",
           model->source, model->n_params, train.n, c.batch, steps, c.epochs);
    printf("GEMM work per epoch: %.2f GFLOP. floor = the step's GEMMs alone on as many threads as towers, measured\n"
           "before every epoch; ratio = median over epochs of (median step / floor step).\n\n",
           flops * (double)train.n / 1e9);
    printf("%6s %6s %9s %9s %10s %11s %10s %7s %10s %8s\n", "towers", "batch", "s/epoch", "ms/step", "floor ms",
           "floor s/ep", "GEMM GF/s", "ratio", "wall ratio", "val_acc");
    gemm_floor *floor = (gemm_floor *)tt_calloc(1, sizeof *floor);
    bench_run *br = (bench_run *)tt_calloc(1, sizeof *br);
    if (!floor || !br) s = tt_fail(&err, TT_ERR_NOMEM, "out of memory");
    for (size_t i = 0; !s && i < b.n_towers; i++) {
        size_t N = b.towers[i];
        if (N > FLOOR_MAX_THREADS) {
            s = tt_fail(&err, TT_ERR_ARG, "--towers %zu: bench measures at most %d towers", N, FLOOR_MAX_THREADS);
            break;
        }
        floor->m = model;
        floor->ops = ops;
        floor->rows = (c.batch + N - 1) / N;
        floor->threads = N;
        floor->reps = b.reps < FLOOR_MAX_REPS ? b.reps : FLOOR_MAX_REPS;
        br->floor = floor;
        c.towers = N;
        c.before_epoch = bench_before_epoch;
        c.before_epoch_ctx = br;
        s = tt_run_on(&c, &train, &val, &test, NULL, res, &err);
        if (s) break;
        tt_free(res->final_params);
        size_t ne = res->n_epochs < 1024 ? res->n_epochs : 1024;
        double secs[1024], step_ms[1024], floor_ms[1024], ratio[1024], wall[1024];
        for (size_t e = 0; e < ne; e++) {
            secs[e] = res->epochs[e].seconds;
            step_ms[e] = 1e3 * res->epochs[e].step_median;
            floor_ms[e] = 1e3 * br->floor_step[e];
            ratio[e] = res->epochs[e].step_median / br->floor_step[e];
            wall[e] = res->epochs[e].seconds / (br->floor_step[e] * (double)steps);
        }
        double acc = res->epochs[ne - 1].val.accuracy;
        const tt_step_times *sp = &res->epochs[ne - 1].split;
        double fl = tt_median(floor_ms, ne);
        printf("%6zu %6zu %9.3f %9.3f %10.3f %11.3f %10.1f %7.2f %10.2f %8.4f\n", N, c.batch, tt_median(secs, ne),
               tt_median(step_ms, ne), fl, fl * 1e-3 * (double)steps, flops * (double)(floor->rows * N) / (fl * 1e6),
               tt_median(ratio, ne), tt_median(wall, ne), acc);
        double k = 1e3 / (double)steps;
        printf("       last epoch, ms per step: launch %.3f pull %.3f data %.3f compute %.3f push %.3f wait %.3f "
               "reduce %.3f update %.3f total %.3f\n",
               k * sp->launch, k * sp->pull, k * sp->data, k * sp->compute, k * sp->push,
               k * sp->wait, k * sp->reduce, k * sp->update, k * sp->total);
        fflush(stdout);
    }
    tt_free(floor);
    tt_free(br);
    tt_dataset_free(&train);
    tt_dataset_free(&val);
    tt_dataset_free(&test);
    tt_free(model);
    tt_free(res);
    if (s) {
        fprintf(stderr, "towertrain: %s\n", err.msg);
        return tt_status_exit_code(s);
    }
    return 0;
}
