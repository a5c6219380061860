/* probe_kernels.c — what `probe --json` measures besides tt_probe_run (tt_probe_kernels_run), each thing alone on
 * tower 0's device through the seam: the launch floor (a chain of tiny fills), a CUDA graph's node, a copy's fixed
 * cost, every GEMM shape of the step, and the compute phase without its GEMMs; and the measured profile filled from
 * them and the probe (tt_profile_fill; its JSON is profile.c's).
 * Not for: the probe's links and phases (probe.c, probe_phases.c) or what the what-if makes of the profile
 * (cost_model.c). */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "probe_parts.h"
#include "tt_cost_model.h"
#include "tt_profile.h"
#include "tt_signal.h"

enum { KERNEL_CHAIN = 1000 }; /* fills in the launch chain: its one wait and clock readings are 1/1000 of a figure */

/* Seconds per call of `calls` calls of issue(), then one wait, median of reps (one warm-up first). */
typedef void (*kernel_issue)(tt_dev *d, void *arg, size_t calls);

static tt_status time_calls(tt_dev *d, kernel_issue issue, void *arg, size_t calls, size_t reps, double *v,
                            double *out, tt_error *err)
{
    issue(d, arg, calls < 2 ? calls : 2);
    tt_dev_sync(d);
    for (size_t r = 0; r < reps; r++) {
        if (tt_signal_caught())
            return tt_fail(err, TT_ERR_STOPPED, "probe: stopped by %s while timing kernels",
                           tt_signal_name(tt_signal_caught()));
        const double t0 = tt_now();
        issue(d, arg, calls);
        tt_dev_sync(d);
        v[r] = (tt_now() - t0) / (double)calls;
    }
    *out = tt_median(v, reps);
    return TT_OK;
}

static void issue_fills(tt_dev *d, void *arg, size_t calls)
{
    for (size_t i = 0; i < calls; i++) tt_dev_fill(d, (float *)arg, 1, 0.0f);
}

static void issue_graph(tt_dev *d, void *arg, size_t calls)
{
    (void)calls; /* one launch replays the whole chain */
    tt_dev_graph_launch(d, arg);
}

static void issue_copy(tt_dev *d, void *arg, size_t calls)
{
    void **bufs = (void **)arg;
    for (size_t i = 0; i < calls; i++) tt_dev_h2d(d, bufs[0], bufs[1], sizeof(float));
}

typedef struct gemm_call {
    const tt_gemm_shape *g;
    float *a, *b, *c;
} gemm_call;

static void issue_gemm(tt_dev *d, void *arg, size_t calls)
{
    const gemm_call *x = (const gemm_call *)arg;
    const tt_gemm_shape *g = x->g;
    for (size_t i = 0; i < calls; i++)
        tt_dev_sgemm(d, g->ta, g->tb, g->M, g->N, g->K, 1.0f, x->a, g->ta ? g->M : g->K, x->b, g->tb ? g->K : g->N,
                     0.0f, x->c, g->N);
}

/* The launch floor, a graph node, a copy's fixed cost and every GEMM shape, on tower 0's device. */
static tt_status kernels_on_device(const tt_probe_config *c, tt_probe_kernels *k, size_t reps, double *v,
                                   tt_error *err)
{
    tt_dev dev;
    memset(&dev, 0, sizeof dev);
    tt_status s = tt_dev_init(&dev, c->ops, c->devices ? c->devices[0] : 0, err);
    if (s) return s;
    tt_dev_bind(&dev);
    size_t sizes[3]; /* operands for the largest: every shape reads and writes these */
    probe_gemm_operands(k->gemms, k->n_gemms, sizes);
    float *d_one = tt_dev_alloc_f32(&dev, 1), *h_one = (float *)tt_dev_host_alloc(&dev, sizeof(float));
    float *op[3] = {NULL, NULL, NULL};
    for (int j = 0; j < 3; j++) op[j] = tt_dev_alloc_f32(&dev, sizes[j]);
    if (!d_one || !h_one || !op[0] || !op[1] || !op[2])
        s = tt_fail(err, TT_ERR_NOMEM, "probe: out of memory on device %d for the GEMMs' operands", dev.ordinal);
    if (!s) {
        *h_one = 1.0f;
        for (int j = 0; j < 3; j++) tt_dev_fill(&dev, op[j], sizes[j], 0.01f * (float)(j + 1));
        k->chain = KERNEL_CHAIN;
        s = time_calls(&dev, issue_fills, d_one, KERNEL_CHAIN, reps, v, &k->launch, err);
    }
    k->graph_node = NAN;
    if (!s && c->ops->capture_begin) { /* the same chain as one graph: a replay's time over its nodes */
        tt_dev_capture_begin(&dev);
        issue_fills(&dev, d_one, KERNEL_CHAIN);
        void *g = tt_dev_capture_end(&dev);
        if (g && (s = time_calls(&dev, issue_graph, g, 1, reps, v, &k->graph_node, err)) == TT_OK)
            k->graph_node /= KERNEL_CHAIN;
        tt_dev_graph_free(&dev, g);
    }
    void *bufs[2] = {d_one, h_one};
    if (!s) s = time_calls(&dev, issue_copy, bufs, 1, reps, v, &k->copy, err);
    for (size_t i = 0; i < k->n_gemms && !s; i++) {
        gemm_call x = {&k->gemms[i], op[0], op[1], op[2]};
        double one = 0;
        s = time_calls(&dev, issue_gemm, &x, 1, 1, v, &one, err); /* a first guess, to size the reps */
        const double n = one > 0 ? ceil(1e-3 / one) : 1000;
        if (!s) s = time_calls(&dev, issue_gemm, &x, n < 1 ? 1 : n > 1000 ? 1000 : (size_t)n, reps, v,
                               &k->gemm_seconds[i], err);
    }
    for (int j = 0; j < 3; j++) tt_dev_dfree(&dev, op[j]);
    tt_dev_dfree(&dev, d_one);
    tt_dev_host_free(&dev, h_one);
    tt_dev_free(&dev);
    return s;
}

/* The trainer's own compute phase without its GEMMs: the backend's table with sgemm a no-op (the rest as issued;
 * the layers then read what the skipped GEMMs would have written: values change nothing a kernel's time depends on). */
static void skip_sgemm(void *ctx, int ta, int tb, size_t M, size_t N, size_t K, float alpha, const float *a,
                       size_t lda, const float *b, size_t ldb, float beta, float *cc, size_t ldc)
{
    (void)ctx, (void)ta, (void)tb, (void)M, (void)N, (void)K, (void)alpha, (void)a, (void)lda, (void)b, (void)ldb;
    (void)beta, (void)cc, (void)ldc;
}

tt_status tt_probe_kernels_run(const tt_probe_config *c, tt_probe_kernels *k, tt_error *err)
{
    memset(k, 0, sizeof *k);
    const size_t reps = probe_reps(c) < PROBE_MAX_REPS ? probe_reps(c) : PROBE_MAX_REPS;
    const size_t rows = (c->batch + c->towers - 1) / c->towers;
    tt_dev_device_name(c->ops, c->devices ? c->devices[0] : 0, k->device, sizeof k->device);
    size_t calls = 0, launches = 0;
    k->n_gemms = tt_assume_gemm_list(c->model, rows, c->ops->chunk_mnk, k->gemms, sizeof k->gemms / sizeof *k->gemms,
                                     &launches);
    for (size_t i = 0; i < k->n_gemms; i++) calls += k->gemms[i].calls;
    k->others = launches > calls ? launches - calls : 0;
    double *v = (double *)tt_calloc(reps, sizeof(double));
    if (!v) return tt_fail(err, TT_ERR_NOMEM, "probe: out of memory");
    tt_status s = kernels_on_device(c, k, reps, v, err);
    tt_free(v);
    if (s) return s;
    tt_dev_ops no_gemm = *c->ops;
    no_gemm.sgemm = skip_sgemm;
    tt_probe_config nc = *c;
    nc.ops = &no_gemm;
    probe_data d;
    tt_phase_times pt;
    tt_probe unused;
    int ran = 0;
    s = probe_data_make(c->model, c->batch, &d, err);
    if (!s) s = probe_placement(&nc, TT_REDUCE_CPU, &d, &pt, &unused, &ran, err);
    probe_data_free(&d);
    k->others_s = ran ? pt.compute : NAN;
    return s;
}

/* ---- probe --json: the profile filled from the measurements (tt_profile.h) ------------------------------------- */

void tt_profile_fill(tt_profile *p, const tt_probe_config *c, const tt_probe *pr, const tt_probe_kernels *k)
{
    snprintf(p->device, sizeof p->device, "%s", k->device);
    snprintf(p->optimizer, sizeof p->optimizer, "%s", tt_optim_kind_name(c->optim.kind));
    p->params = c->model->n_params;
    p->train_flops = tt_model_train_flops(c->model);
    p->towers = c->towers;
    p->batch = c->batch;
    p->rows = pr->rows;
    p->reps = probe_reps(c);
    p->host_threads = (size_t)pr->crew;
    p->h2d_pinned_gbs = pr->h2d_pinned;
    p->h2d_pageable_gbs = pr->h2d_pageable;
    p->d2h_pinned_gbs = pr->d2h_pinned;
    p->d2h_pageable_gbs = pr->d2h_pageable;
    /* the probe's device->device copy reads the next tower's buffer: a peer link only between two devices */
    int devices = 0;
    for (int i = 0; i < pr->n_links; i++)
        for (int j = 0; j < pr->n_links; j++) devices |= i != j && pr->links[i * pr->n_links + j] != TT_LINK_SAME;
    p->d2d_gbs = pr->peer;
    p->peer_gbs = devices ? pr->peer : NAN;
    p->copy_s = k->copy;
    p->memcpy_gbs = pr->host_memcpy;
    p->sum_gbs = pr->host_sum;
    p->barrier_s = pr->barrier;
    p->wake_s = pr->wake;
    p->launch_s = k->launch;
    p->graph_node_s = k->graph_node;
    p->chain = k->chain;
    p->n_gemms = k->n_gemms;
    p->gemm_step_s = 0;
    for (size_t i = 0; i < k->n_gemms; i++) {
        const tt_gemm_shape *g = &k->gemms[i];
        const double s = k->gemm_seconds[i];
        p->gemms[i] = (tt_profile_gemm){(size_t)g->ta, (size_t)g->tb, g->M, g->N, g->K, g->calls, s,
                                        2.0 * (double)g->M * (double)g->N * (double)g->K / s / 1e9};
        p->gemm_step_s += s * (double)g->calls;
    }
    p->kernels = k->others;
    p->kernels_s = k->others_s;
    p->pull_s = pr->pull;
    p->data_s = pr->data;
    p->compute_s = pr->compute;
    p->push_grad_s = pr->push_grad;
    p->push_stats_s = pr->push_stats;
    p->straggle_s = pr->straggle;
    p->update_s = pr->update;
    for (int r = 0; r < TT_REDUCE_COUNT; r++) p->reduce_s[r] = pr->can[r] ? pr->reduce[r] : NAN;
}
