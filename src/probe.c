/* probe.c — measurements for the step's cost model (see tt_probe.h), through the device seam only, so the same
 * code probes the CUDA backend. One concurrent runner starts a thread per tower (each with its own tt_dev),
 * lines them up at a barrier before every rep and times the rep from the first start to the last end. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tt_mem.h"
#include "tt_probe.h"
#include "tt_signal.h"
#include "tt_rng.h"

#define PROBE_MAX_THREADS 256 /* as --host-threads; the default crew is every CPU */
#define PROBE_MAX_REPS 64
#define PROBE_MAX_BODIES 16
#define PROBE_DATA_ROWS 50000 /* synthetic inputs the data phase gathers from */

typedef struct probe_run probe_run;

/* One thread's device, buffers and clock readings. */
typedef struct probe_thread {
    probe_run *run;
    int id;
    tt_dev dev;
    int dev_up;
    float *d_params, *d_grads, *d_recv, *d_acc, *d_dlogits, *d_stats, *d_act[TT_MAX_LAYERS + 1], *d_delta[2];
    uint8_t *d_x8, *h_x;
    int32_t *d_labels, *h_labels;
    float *h_pinned, *h_pageable;
    float *gemm[TT_MAX_LAYERS][5]; /* X, W, Y, dW, dX of every dense layer */
    double start[PROBE_MAX_BODIES][PROBE_MAX_REPS], end[PROBE_MAX_BODIES][PROBE_MAX_REPS];
    uint64_t calls; /* body_data's shuffles differ from call to call */
    volatile float sink; /* keeps summed blocks alive (one per thread: a shared one would be a data race) */
    tt_status status;
    tt_error err;
} probe_thread;

typedef void (*probe_body)(probe_run *r, probe_thread *t);

struct probe_run {
    const tt_probe_config *c;
    size_t P, rows, slice; /* parameters, shard rows, allreduce slice */
    int n;                 /* threads */
    int with_devices;      /* threads own a tt_dev and device buffers */
    int failed;            /* no body runs any more: a thread's setup failed, or a stop request came (at a barrier) */
    int stopped;           /* ... because of a stop request */
    int gemm_only;         /* allocate only the GEMM operands */
    size_t reps;
    /* the measurements of one run, taken in turn in every rep (so a noisy minute hits them all alike); prep[k]
     * (untimed, may be NULL) puts the caches in the state the step leaves them in before body[k] */
    probe_body body[PROBE_MAX_BODIES], prep[PROBE_MAX_BODIES];
    int n_bodies;
    double straggle[PROBE_MAX_BODIES];
    tt_barrier bar; /* spins when every thread has a core, so all start a rep together */
    probe_thread th[PROBE_MAX_THREADS];
    /* shared host data */
    const uint8_t *pixels; /* (n_rows_data, D) synthetic inputs */
    size_t n_rows_data;
    float **slots;         /* host sum: N slots of P */
    float *copy_dst;       /* host memcpy destination (N x P) */
    tt_optim *opt;         /* host update */
    float *h_params;
    const float *h_grad;
    tt_barrier *barrier;   /* barrier cost */
    tt_barrier *sleeper;   /* wake-up latency: a 2-thread barrier that never spins */
    double wake_release, wake[PROBE_MAX_REPS + 1];
    int n_wake;
};

/* h_pinned takes the gradient (P floats) and the step's statistics (2 per row): the larger of the two. */
static size_t pinned_floats(const probe_run *r) { return r->P > 2 * r->rows ? r->P : 2 * r->rows; }

static tt_status thread_setup(probe_run *r, probe_thread *t)
{
    const tt_probe_config *c = r->c;
    const tt_model *m = c->model;
    const size_t P = r->P, R = r->rows;
    tt_status s = tt_dev_init(&t->dev, c->ops, t->id % c->n_devices, &t->err);
    if (s) return s;
    t->dev_up = 1;
    tt_dev_bind(&t->dev);
    tt_dev *d = &t->dev;
    int ok = 1;
    if (r->gemm_only) {
        for (size_t l = 0; l < m->n_layers && ok; l++) {
            if (m->layers[l].kind != &tt_layer_dense) continue;
            size_t I = m->layers[l].in, O = m->layers[l].out;
            size_t sizes[5] = {R * I, I * O, R * O, I * O, R * I};
            for (int k = 0; k < 5 && ok; k++) {
                ok = (t->gemm[l][k] = tt_dev_alloc_f32(d, sizes[k])) != NULL;
                if (ok) tt_dev_fill(d, t->gemm[l][k], sizes[k], 0.01f * (float)(k + 1));
            }
        }
    } else {
        ok = (t->d_params = tt_dev_alloc_f32(d, P)) && (t->d_grads = tt_dev_alloc_f32(d, P)) &&
             (t->d_recv = tt_dev_alloc_f32(d, P)) && (t->d_acc = tt_dev_alloc_f32(d, r->slice)) &&
             (t->d_dlogits = tt_dev_alloc_f32(d, R * m->n_classes)) && (t->d_stats = tt_dev_alloc_f32(d, 2 * R)) &&
             (t->d_x8 = (uint8_t *)tt_dev_alloc(d, R * m->input_dim)) &&
             (t->d_labels = (int32_t *)tt_dev_alloc(d, R * sizeof(int32_t))) &&
             (t->h_x = (uint8_t *)tt_dev_host_alloc(d, R * m->input_dim)) &&
             (t->h_labels = (int32_t *)tt_dev_host_alloc(d, R * sizeof(int32_t))) &&
             (t->h_pinned = (float *)tt_dev_host_alloc(d, pinned_floats(r) * sizeof(float))) &&
             (t->h_pageable = (float *)tt_malloc(P * sizeof(float)));
        for (size_t i = 0; i <= m->n_layers && ok; i++)
            ok = (t->d_act[i] = tt_dev_alloc_f32(d, R * (i ? m->layers[i - 1].out : m->input_dim))) != NULL;
        for (int k = 0; k < 2 && ok; k++) ok = (t->d_delta[k] = tt_dev_alloc_f32(d, R * m->max_width)) != NULL;
        if (ok) {
            for (size_t i = 0; i < P; i++) t->h_pinned[i] = t->h_pageable[i] = 1e-3f * (float)(i % 101);
            tt_model_init_params(m, t->h_pinned, 1);
            tt_dev_h2d(d, t->d_params, t->h_pinned, P * sizeof(float));
            tt_dev_fill(d, t->d_grads, P, 1e-3f);
            for (size_t i = 0; i < R; i++) t->h_labels[i] = (int32_t)(i % m->n_classes);
            tt_dev_h2d(d, t->d_labels, t->h_labels, R * sizeof(int32_t));
            tt_dev_sync(d);
        }
    }
    if (!ok) return tt_fail(&t->err, TT_ERR_NOMEM, "probe: out of memory on device %d", t->dev.ordinal);
    return TT_OK;
}

static void thread_teardown(probe_run *r, probe_thread *t)
{
    if (!t->dev_up) return;
    tt_dev *d = &t->dev;
    for (size_t l = 0; l < TT_MAX_LAYERS; l++)
        for (int k = 0; k < 5; k++) tt_dev_dfree(d, t->gemm[l][k]);
    float *bufs[] = {t->d_params, t->d_grads, t->d_recv, t->d_acc, t->d_dlogits, t->d_stats, t->d_delta[0],
                     t->d_delta[1]};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) tt_dev_dfree(d, bufs[i]);
    for (size_t i = 0; i <= r->c->model->n_layers; i++) tt_dev_dfree(d, t->d_act[i]);
    tt_dev_dfree(d, t->d_x8);
    tt_dev_dfree(d, t->d_labels);
    tt_dev_host_free(d, t->h_x);
    tt_dev_host_free(d, t->h_labels);
    tt_dev_host_free(d, t->h_pinned);
    tt_free(t->h_pageable);
    tt_dev_free(d);
}

/* Serial section after every thread's setup: one failed setup cancels the bodies on every thread, since bodies
 * read their peers' buffers (peer copies, reductions). */
static void check_setups(void *arg)
{
    probe_run *r = (probe_run *)arg;
    for (int i = 0; i < r->n; i++) r->failed |= r->th[i].status != TT_OK;
}

/* Serial section after every measured body: a stop request (a signal) cancels the rest of the run. */
static void check_stop(void *arg)
{
    probe_run *r = (probe_run *)arg;
    if (tt_signal_caught()) r->failed = r->stopped = 1;
}

/* The body of crew thread i (a tt_pool thread, so flush-to-zero is set as on the trainer's crew). */
static void probe_worker(void *arg, int i, int n)
{
    probe_run *r = (probe_run *)arg;
    probe_thread *t = &r->th[i];
    (void)n;
    if (r->with_devices) t->status = thread_setup(r, t);
    tt_barrier_wait(&r->bar, check_setups, r);
    for (size_t rep = 0; rep <= r->reps; rep++) /* rep 0 warms up */
        for (int k = 0; k < r->n_bodies; k++) {
            if (!r->failed && r->prep[k]) {
                r->prep[k](r, t);
                if (r->with_devices) tt_dev_sync(&t->dev);
            }
            tt_barrier_wait(&r->bar, NULL, NULL);
            double t0 = tt_now();
            if (!r->failed) {
                r->body[k](r, t);
                if (r->with_devices) tt_dev_sync(&t->dev);
            }
            if (rep > 0) {
                t->start[k][rep - 1] = t0;
                t->end[k][rep - 1] = tt_now();
            }
            /* a body may read its peers' buffers (the reductions read every tower's gradient): nobody goes on to
             * the next prep, which rewrites them, or to the teardown, which frees them, before every body is done.
             * The serial section also notices SIGINT/SIGTERM: every later body is skipped, so a long probe stops
             * within one measurement */
            tt_barrier_wait(&r->bar, check_stop, r);
        }
    if (r->with_devices) thread_teardown(r, t);
}

/* Runs the bodies on r->n threads, r->reps times in turn; seconds[k] = median wall time of body k, and
 * r->straggle[k] = median over reps of how long the threads finishing before the last one waited for it (mean). */
static tt_status run_concurrent(probe_run *r, double *seconds, tt_error *err)
{
    TT_ASSERT(r->n >= 1 && r->n <= PROBE_MAX_THREADS && r->reps >= 1 && r->reps <= PROBE_MAX_REPS);
    for (int i = 0; i < r->n; i++) {
        probe_thread *t = &r->th[i];
        memset(t, 0, sizeof *t);
        t->run = r;
        t->id = i;
    }
    r->failed = r->stopped = 0;
    tt_pool crew; /* every thread is started before any reaches a barrier: a thread that cannot start is an error */
    tt_status s = tt_pool_init(&crew, r->n, err);
    if (s) return s;
    tt_barrier_init(&r->bar, r->n, r->n <= tt_cpu_count() ? 1e-3 : 0.0);
    tt_pool_run(&crew, r->n, probe_worker, r);
    tt_pool_free(&crew);
    tt_barrier_destroy(&r->bar);
    for (int i = 0; i < r->n; i++)
        if (r->th[i].status && !s) s = tt_fail(err, r->th[i].status, "%s", r->th[i].err.msg);
    if (!s && r->stopped)
        s = tt_fail(err, TT_ERR_STOPPED, "probe: stopped by %s during its measurements",
                    tt_signal_name(tt_signal_caught()));
    if (s) return s;
    for (int k = 0; k < r->n_bodies; k++) {
        double wall[PROBE_MAX_REPS];
        for (size_t j = 0; j < r->reps; j++) {
            double first = r->th[0].start[k][j], last = r->th[0].end[k][j];
            for (int i = 1; i < r->n; i++) {
                if (r->th[i].start[k][j] < first) first = r->th[i].start[k][j];
                if (r->th[i].end[k][j] > last) last = r->th[i].end[k][j];
            }
            wall[j] = last - first;
        }
        seconds[k] = tt_median(wall, r->reps);
        for (size_t j = 0; j < r->reps; j++) {
            double last = 0, mean = 0;
            for (int i = 0; i < r->n; i++) {
                double d = r->th[i].end[k][j] - r->th[i].start[k][j];
                last = d > last ? d : last;
                mean += d / (double)r->n;
            }
            wall[j] = last - mean;
        }
        r->straggle[k] = tt_median(wall, r->reps);
    }
    return s;
}

/* ---- bodies: one each for the phases of a step ------------------------------------------------------------ */

static void body_h2d_pinned(probe_run *r, probe_thread *t)
{
    tt_dev_h2d(&t->dev, t->d_params, t->h_pinned, r->P * sizeof(float));
}

static void body_h2d_pageable(probe_run *r, probe_thread *t)
{
    tt_dev_h2d(&t->dev, t->d_params, t->h_pageable, r->P * sizeof(float));
}

static void body_d2h_pinned(probe_run *r, probe_thread *t)
{
    tt_dev_d2h(&t->dev, t->h_pinned, t->d_grads, r->P * sizeof(float));
}

static void body_d2h_pageable(probe_run *r, probe_thread *t)
{
    tt_dev_d2h(&t->dev, t->h_pageable, t->d_grads, r->P * sizeof(float));
}

static void body_d2h_stats(probe_run *r, probe_thread *t)
{
    tt_dev_d2h(&t->dev, t->h_pinned, t->d_stats, 2 * r->rows * sizeof(float));
}

static void body_peer(probe_run *r, probe_thread *t)
{
    probe_thread *src = &r->th[(t->id + 1) % r->n];
    tt_dev_peer_copy(&t->dev, t->d_recv, &src->dev, src->d_grads, r->P * sizeof(float));
}

/* The data phase: gather the shard's rows at random, copy them in, scale them on the device. */
static void body_data(probe_run *r, probe_thread *t)
{
    const size_t D = r->c->model->input_dim, R = r->rows;
    tt_rng rng;
    tt_rng_seed(&rng, (uint64_t)t->id, t->calls++);
    for (size_t i = 0; i < R; i++) {
        size_t s = (size_t)tt_rng_below(&rng, r->n_rows_data);
        memcpy(t->h_x + i * D, r->pixels + s * D, D);
    }
    tt_dev_h2d(&t->dev, t->d_x8, t->h_x, R * D);
    tt_dev_u8_to_f32(&t->dev, t->d_act[0], t->d_x8, R * D, 1.0f / 255.0f);
    tt_dev_h2d(&t->dev, t->d_labels, t->h_labels, R * sizeof(int32_t));
}

static void body_compute(probe_run *r, probe_thread *t)
{
    const tt_model *m = r->c->model;
    const size_t R = r->rows;
    tt_model_forward(&t->dev, m, t->d_params, t->d_act, R);
    tt_dev_softmax_xent(&t->dev, t->d_dlogits, t->d_stats, t->d_act[m->n_layers], t->d_labels, R, m->n_classes,
                        1.0f / (float)r->c->batch);
    tt_model_backward(&t->dev, m, t->d_params, t->d_grads, t->d_act, t->d_delta, t->d_dlogits, R);
}

static void body_gemm(probe_run *r, probe_thread *t)
{
    const tt_model *m = r->c->model;
    const size_t R = r->rows;
    for (size_t l = 0; l < m->n_layers; l++) {
        if (m->layers[l].kind != &tt_layer_dense) continue;
        size_t I = m->layers[l].in, O = m->layers[l].out;
        float **b = t->gemm[l];
        tt_dev_sgemm(&t->dev, 0, 0, R, O, I, 1.0f, b[0], I, b[1], O, 0.0f, b[2], O);
    }
    for (size_t l = m->n_layers; l-- > 0;) {
        if (m->layers[l].kind != &tt_layer_dense) continue;
        size_t I = m->layers[l].in, O = m->layers[l].out;
        float **b = t->gemm[l];
        tt_dev_sgemm(&t->dev, 1, 0, I, O, R, 1.0f, b[0], I, b[2], O, 0.0f, b[3], O);
        if (l > 0) tt_dev_sgemm(&t->dev, 0, 1, R, I, O, 1.0f, b[2], O, b[1], O, 0.0f, b[4], I);
    }
}

/* The probe runs min(N, cores) device threads; tower u's gradient lives with thread u % n. */
static probe_thread *tower_of(probe_run *r, size_t u) { return &r->th[u % (size_t)r->n]; }

/* Same work as the trainer's tower_reduce: tower 0 gathers and adds the N - 1 others, then pushes the sum. */
static void body_reduce_device(probe_run *r, probe_thread *t)
{
    if (t->id != 0) return;
    for (size_t u = 1; u < r->c->towers; u++) {
        probe_thread *src = tower_of(r, u);
        tt_dev_peer_copy(&t->dev, t->d_recv, &src->dev, src->d_grads, r->P * sizeof(float));
        tt_dev_add(&t->dev, t->d_grads, t->d_recv, r->P);
    }
    tt_dev_d2h(&t->dev, t->h_pinned, t->d_grads, r->P * sizeof(float));
}

/* Every slice of the all-reduce: thread i does the slices of towers i, i + n, ... (N slices on n threads). */
static void body_reduce_allreduce(probe_run *r, probe_thread *t)
{
    const size_t N = r->c->towers;
    for (size_t me = (size_t)t->id; me < N; me += (size_t)r->n) {
        size_t lo = me * r->slice < r->P ? me * r->slice : r->P;
        size_t n = lo + r->slice < r->P ? r->slice : r->P - lo;
        tt_dev_peer_copy(&t->dev, t->d_acc, &tower_of(r, 0)->dev, tower_of(r, 0)->d_grads + lo, n * sizeof(float));
        for (size_t u = 1; u < N; u++) {
            probe_thread *src = tower_of(r, u);
            const float *d_src = src->d_grads + lo;
            if (src != t) {
                tt_dev_peer_copy(&t->dev, t->d_recv, &src->dev, d_src, n * sizeof(float));
                d_src = t->d_recv;
            }
            tt_dev_add(&t->dev, t->d_acc, d_src, n);
        }
        tt_dev_d2h(&t->dev, t->h_pinned + lo, t->d_acc, n * sizeof(float));
    }
}

/* Before a reduction: the backward pass has just written every gradient. */
static void prep_grads(probe_run *r, probe_thread *t) { tt_dev_fill(&t->dev, t->d_grads, r->P, 1e-3f); }

/* Host work is sliced over the crew as the trainer slices it. */
static void host_range(probe_run *r, probe_thread *t, size_t total, size_t *lo, size_t *hi)
{
    size_t chunk = ((total + (size_t)r->n - 1) / (size_t)r->n + 15) & ~(size_t)15;
    *lo = (size_t)t->id * chunk < total ? (size_t)t->id * chunk : total;
    *hi = *lo + chunk < total ? *lo + chunk : total;
}

static void body_host_sum(probe_run *r, probe_thread *t)
{
    size_t lo, hi;
    host_range(r, t, r->P, &lo, &hi);
    _Alignas(64) float block[TT_REDUCE_BLOCK];
    float acc = 0;
    for (size_t b = lo; b < hi; b += TT_REDUCE_BLOCK) {
        size_t len = b + TT_REDUCE_BLOCK < hi ? TT_REDUCE_BLOCK : hi - b;
        tt_sum_slots(block, r->slots, r->c->towers, b, len);
        acc += block[len - 1];
    }
    t->sink = acc;
}

static void body_host_memcpy(probe_run *r, probe_thread *t)
{
    const size_t N = r->c->towers;
    size_t lo, hi;
    host_range(r, t, r->P, &lo, &hi);
    for (size_t s = 0; s < N; s++) memcpy(r->copy_dst + s * r->P + lo, r->slots[s] + lo, (hi - lo) * sizeof(float));
}

static void body_update(probe_run *r, probe_thread *t)
{
    size_t lo, hi;
    host_range(r, t, r->P, &lo, &hi);
    tt_optim_apply(r->opt, r->h_params + lo, r->h_grad + lo, lo, hi);
}

/* Before a host-phase measurement: as in a step, each tower has just written its gradient slot and read the whole
 * master copy (its pull), so the slices the host threads touch sit dirty or shared in other cores' caches. */
static void prep_host(probe_run *r, probe_thread *t)
{
    float acc = 0;
    for (size_t u = (size_t)t->id; u < r->c->towers; u += (size_t)r->n) {
        float *slot = r->slots[u];
        for (size_t k = 0; k < r->P; k++) slot[k] = 1e-4f * (float)(k % 113);
        for (size_t k = 0; k < r->P; k += 16) acc += r->h_params[k];
    }
    if (t->id == 0) /* tower 0's push of the reduced gradient (device placement) */
        for (size_t k = 0; k < r->P; k++) ((float *)r->h_grad)[k] = 1e-3f * (float)(k % 7);
    t->sink = acc;
}

/* Before compute: the pull and the data phase, as in a step. */
static void prep_compute(probe_run *r, probe_thread *t)
{
    body_h2d_pinned(r, t);
    body_data(r, t);
}

/* Wake-up latency of a sleeping crew thread (what a barrier costs when threads outnumber cores): thread 0 works
 * ~0.2 ms while thread 1 sleeps at a non-spinning barrier; thread 1 records how long after the release it ran. */
static void wake_release(void *arg)
{
    probe_run *r = (probe_run *)arg;
    r->wake_release = tt_now();
}

static void body_wake(probe_run *r, probe_thread *t)
{
    if (t->id == 0) {
        double until = tt_now() + 2e-4;
        while (tt_now() < until) {
        }
    }
    if (t->id < 2) tt_barrier_wait(r->sleeper, wake_release, r);
    if (t->id == 1 && r->n_wake < PROBE_MAX_REPS + 1) r->wake[r->n_wake++] = tt_now() - r->wake_release;
}

static void body_barrier(probe_run *r, probe_thread *t)
{
    (void)t;
    for (int k = 0; k < 20; k++) tt_barrier_wait(r->barrier, NULL, NULL);
}

/* ---- the probe ------------------------------------------------------------------------------------------------ */

static int crew_size(const tt_probe_config *c)
{
    int host = c->host_threads > 0 ? c->host_threads : tt_cpu_count();
    return (int)c->towers > host ? (int)c->towers : host;
}

static void run_init(probe_run *r, const tt_probe_config *c)
{
    memset(r, 0, sizeof *r);
    r->c = c;
    r->P = c->model->n_params;
    r->rows = (c->batch + c->towers - 1) / c->towers;
    r->slice = ((r->P + c->towers - 1) / c->towers + 15) & ~(size_t)15;
    r->reps = c->reps ? c->reps : 30;
    if (r->reps > PROBE_MAX_REPS) r->reps = PROBE_MAX_REPS;
}

/* What a probe allocates, before it allocates it: per measuring thread (n_dev of them, or the GEMM operands alone
 * for a floor), and the host's shared buffers. Mirrors thread_setup and tt_probe_run. */
static tt_status probe_check_memory(const tt_probe_config *c, const probe_run *r, int n_dev, int gemm_only,
                                    tt_error *err)
{
    const tt_model *m = c->model;
    const double F = sizeof(float), P = (double)r->P, R = (double)r->rows, D = (double)m->input_dim;
    double gemm = 0, act = R * D, dev;
    for (size_t l = 0; l < m->n_layers; l++) {
        const double I = (double)m->layers[l].in, O = (double)m->layers[l].out;
        act += R * O;
        if (m->layers[l].kind == &tt_layer_dense) gemm += 2 * R * I + 2 * I * O + R * O;
    }
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.model = tt_model_file(m);
    plan.n_params = r->P;
    plan.towers = (size_t)n_dev;
    plan.rows = r->rows;
    for (int t = 0; t < n_dev; t++) {
        const int d = t % c->n_devices;
        if (gemm_only) {
            tt_mem_add(&plan, "GEMM operands", d, gemm * F, TT_MEM_BY_WIDTH);
            continue;
        }
        /* weights, gradient, a peer's gradient, a slice: the model's size; activations: its widths x the rows */
        tt_mem_add(&plan, "tower weights and gradients", d, (3 * P + (double)r->slice) * F, TT_MEM_BY_PARAMS);
        dev = act + 2 * R * (double)m->max_width + R * (double)m->n_classes + 2 * R;
        tt_mem_add(&plan, "activations", d, dev * F + R * D + R * sizeof(int32_t), TT_MEM_BY_WIDTH);
        tt_mem_add(&plan, "staging", TT_MEM_HOST, R * D + R * sizeof(int32_t) + ((double)pinned_floats(r) + P) * F,
                   TT_MEM_BY_PARAMS);
    }
    if (!gemm_only) {
        const double N = (double)c->towers;
        tt_mem_add(&plan, "synthetic inputs", TT_MEM_HOST, (double)PROBE_DATA_ROWS * D, TT_MEM_BY_RUN);
        tt_mem_add(&plan, "gradient slots and copies", TT_MEM_HOST, 2 * N * P * F, TT_MEM_BY_PARAMS);
        tt_mem_add(&plan, "weights, gradient, optimizer state", TT_MEM_HOST,
                   (2 + (double)tt_optim_state_floats(c->optim.kind)) * P * F, TT_MEM_BY_PARAMS);
    }
    return tt_mem_check(&plan, c->ops, err);
}

/* One concurrent run of several measurements on n threads. */
static tt_status measure(probe_run *r, int n, int devices, int count, const probe_body *bodies, const probe_body *preps,
                         double *out, tt_error *err)
{
    TT_ASSERT(count <= PROBE_MAX_BODIES);
    r->n = n;
    r->with_devices = devices;
    r->n_bodies = count;
    for (int k = 0; k < count; k++) {
        r->body[k] = bodies[k];
        r->prep[k] = preps ? preps[k] : NULL;
    }
    return run_concurrent(r, out, err);
}

tt_status tt_probe_gemm_floor(const tt_probe_config *c, double *step_seconds, tt_error *err)
{
    if (c->towers > PROBE_MAX_THREADS)
        return tt_fail(err, TT_ERR_ARG, "probe: at most %d towers", PROBE_MAX_THREADS);
    probe_run *r = (probe_run *)tt_calloc(1, sizeof *r);
    if (!r) return tt_fail(err, TT_ERR_NOMEM, "probe: out of memory");
    run_init(r, c);
    r->gemm_only = 1;
    const probe_body body[1] = {body_gemm};
    const int cpus = tt_cpu_count(), n = (int)c->towers < cpus ? (int)c->towers : cpus;
    tt_status s = probe_check_memory(c, r, n, 1, err);
    if (!s) s = measure(r, n, 1, 1, body, NULL, step_seconds, err);
    *step_seconds *= (double)(((int)c->towers + n - 1) / n); /* towers beyond the cores run in waves */
    tt_free(r);
    return s;
}

tt_status tt_probe_run(const tt_probe_config *c, tt_probe *p, tt_error *err)
{
    memset(p, 0, sizeof *p);
    const int N = (int)c->towers, T = crew_size(c), cpus = tt_cpu_count();
    /* one thread per core at most: with more towers than cores, towers run in waves (the prediction multiplies) */
    const int n_dev = N < cpus ? N : cpus, n_host = T < cpus ? T : cpus;
    if (N > PROBE_MAX_THREADS || T > PROBE_MAX_THREADS)
        return tt_fail(err, TT_ERR_ARG, "probe: at most %d towers and host threads", PROBE_MAX_THREADS);
    probe_run *r = (probe_run *)tt_calloc(1, sizeof *r);
    if (!r) return tt_fail(err, TT_ERR_NOMEM, "probe: out of memory");
    run_init(r, c);
    p->crew = T;
    p->waves = (N + n_dev - 1) / n_dev;
    p->rows = r->rows;
    const size_t P = r->P, D = c->model->input_dim;
    const double bytes = (double)P * sizeof(float);
    /* the GEMM operands are measured after the other buffers are freed: each set must fit on its own */
    tt_status s = probe_check_memory(c, r, n_dev, 0, err);
    if (!s) s = probe_check_memory(c, r, n_dev, 1, err);
    if (s) {
        tt_free(r);
        return s;
    }

    /* shared host data: synthetic pixels, N slots, a copy target, optimizer state */
    r->n_rows_data = PROBE_DATA_ROWS;
    uint8_t *pixels = (uint8_t *)tt_malloc(r->n_rows_data * D);
    float **slots = (float **)tt_calloc((size_t)N, sizeof(float *));
    float *copy_dst = (float *)tt_malloc((size_t)N * P * sizeof(float));
    float *h_params = (float *)tt_malloc(P * sizeof(float)), *h_grad = (float *)tt_malloc(P * sizeof(float));
    tt_optim opt;
    memset(&opt, 0, sizeof opt);
    tt_barrier barrier;
    int ok = pixels && slots && copy_dst && h_params && h_grad;
    for (int i = 0; i < N && ok; i++) ok = (slots[i] = (float *)tt_malloc(P * sizeof(float))) != NULL;
    if (!ok) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    if (!s) s = tt_optim_init(&opt, &c->optim, P, err);
    if (!s) {
        for (size_t i = 0; i < r->n_rows_data * D; i++) pixels[i] = (uint8_t)(i * 2654435761u >> 24);
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < P; k++) slots[i][k] = 1e-4f * (float)((k + (size_t)i) % 113);
        for (size_t k = 0; k < P; k++) h_params[k] = 0.01f, h_grad[k] = 1e-3f * (float)(k % 7);
        tt_optim_begin_step(&opt);
        r->pixels = pixels;
        r->slots = slots;
        r->copy_dst = copy_dst;
        r->opt = &opt;
        r->h_params = h_params;
        r->h_grad = h_grad;
        tt_barrier_init(&barrier, T, T <= tt_cpu_count() ? 200e-6 : 0.0);
        r->barrier = &barrier;
    }
    /* the tower-side phases: N threads with a device each, measured in turn every rep */
    enum { PULL, PULL_PAGE, PUSH, PUSH_PAGE, PEER, STATS, DATA, COMPUTE, RED_DEV, RED_ALL, N_DEV };
    const probe_body dev_bodies[N_DEV] = {body_h2d_pinned, body_h2d_pageable, body_d2h_pinned, body_d2h_pageable,
                                          body_peer,       body_d2h_stats,    body_data,       body_compute,
                                          body_reduce_device, body_reduce_allreduce};
    const probe_body dev_preps[N_DEV] = {NULL, NULL, NULL, NULL, NULL, NULL, body_h2d_pinned, prep_compute,
                                         prep_grads, prep_grads};
    double dev_t[N_DEV] = {0};
    if (!s) s = measure(r, n_dev, 1, N_DEV, dev_bodies, dev_preps, dev_t, err);
    /* the host phase: T threads, after the towers' pushes and pulls as in a step */
    enum { SUM, COPY, UPDATE, BARRIER, N_HOST };
    const probe_body host_bodies[N_HOST - 1] = {body_host_sum, body_host_memcpy, body_update};
    const probe_body host_preps[N_HOST - 1] = {prep_host, prep_host, prep_host};
    double host_t[N_HOST] = {0};
    if (!s) s = measure(r, n_host, 0, N_HOST - 1, host_bodies, host_preps, host_t, err);
    /* the barrier with the trainer's whole crew (it sleeps instead of spinning when threads outnumber cores) */
    const probe_body bar_body[1] = {body_barrier};
    if (!s) s = measure(r, T, 0, 1, bar_body, NULL, &host_t[BARRIER], err);
    tt_barrier sleeper;
    tt_barrier_init(&sleeper, 2, 0.0);
    r->sleeper = &sleeper;
    const probe_body wake_body[1] = {body_wake};
    double unused;
    if (!s && cpus >= 2) s = measure(r, 2, 0, 1, wake_body, NULL, &unused, err);
    tt_barrier_destroy(&sleeper);
    /* the first sample is the warm-up rep */
    p->wake = r->n_wake > 1 ? tt_median(r->wake + 1, (size_t)r->n_wake - 1) : 0;
    const double h2d_pin = dev_t[PULL], h2d_page = dev_t[PULL_PAGE], d2h_pin = dev_t[PUSH], d2h_page = dev_t[PUSH_PAGE],
                 peer = dev_t[PEER], sum = host_t[SUM], copy = host_t[COPY], barrier20 = host_t[BARRIER];
    p->push_stats = dev_t[STATS];
    p->data = dev_t[DATA];
    p->compute = dev_t[COMPUTE];
    p->straggle = r->straggle[COMPUTE];
    p->reduce_device = dev_t[RED_DEV];
    p->reduce_allreduce = dev_t[RED_ALL];
    p->update = host_t[UPDATE];
    if (!s) {
        r->gemm_only = 1;
        const probe_body gemm[1] = {body_gemm};
        s = measure(r, n_dev, 1, 1, gemm, NULL, &p->gemm_step, err);
        p->gemm_step *= p->waves;
        r->gemm_only = 0;
    }
    if (!s) {
        p->h2d_pinned = (double)n_dev * bytes / h2d_pin / 1e9;
        p->h2d_pageable = (double)n_dev * bytes / h2d_page / 1e9;
        p->d2h_pinned = (double)n_dev * bytes / d2h_pin / 1e9;
        p->d2h_pageable = (double)n_dev * bytes / d2h_page / 1e9;
        p->peer = (double)n_dev * bytes / peer / 1e9;
        p->host_sum = (double)N * bytes / sum / 1e9;
        p->host_memcpy = (double)N * bytes / copy / 1e9;
        p->gemm_gflops = tt_model_train_flops(c->model) * (double)r->rows * (double)N / p->gemm_step / 1e9;
        p->pull = h2d_pin;
        p->push_grad = d2h_pin;
        p->reduce_cpu = sum;
        p->barrier = barrier20 / 20.0;
        /* threads outnumber cores: every barrier sleeps, and leaving it costs a wake-up */
        if (T > cpus && p->wake > p->barrier) p->barrier = p->wake;
    }
    if (r->barrier) tt_barrier_destroy(&barrier);
    tt_optim_free(&opt);
    for (int i = 0; slots && i < N; i++) tt_free(slots[i]);
    tt_free(slots);
    tt_free(copy_dst);
    tt_free(pixels);
    tt_free(h_params);
    tt_free(h_grad);
    tt_free(r);
    return s;
}

static double median_of(const tt_probe *ps, int n, size_t offset)
{
    double v[8];
    for (int i = 0; i < n; i++) v[i] = *(const double *)((const char *)&ps[i] + offset);
    return tt_median(v, (size_t)n);
}

void tt_probe_median(const tt_probe *ps, int n, tt_probe *out)
{
    TT_ASSERT(n >= 1 && n <= 8);
    *out = ps[0];
    const size_t fields[] = {offsetof(tt_probe, pull),          offsetof(tt_probe, data),
                             offsetof(tt_probe, compute),       offsetof(tt_probe, push_grad),
                             offsetof(tt_probe, push_stats),    offsetof(tt_probe, barrier),
                             offsetof(tt_probe, straggle),      offsetof(tt_probe, reduce_cpu),
                             offsetof(tt_probe, reduce_device), offsetof(tt_probe, reduce_allreduce),
                             offsetof(tt_probe, update),        offsetof(tt_probe, gemm_step)};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        *(double *)((char *)out + fields[i]) = median_of(ps, n, fields[i]);
}

void tt_probe_predict(const tt_probe *p, tt_reduce r, tt_step_times *o)
{
    memset(o, 0, sizeof *o);
    o->pull = p->pull;
    o->data = p->data;
    o->compute = p->compute;
    o->push = p->push_stats + (r == TT_REDUCE_CPU ? p->push_grad : 0);
    /* with more towers than cores the towers run in waves: a tower waits for the other waves */
    const double work = o->pull + o->data + o->compute + o->push;
    o->wait = (double)(p->waves - 1) * work + p->straggle + p->barrier;
    o->towers = work + o->wait;
    switch (r) {
    case TT_REDUCE_CPU: o->reduce = p->reduce_cpu; break;
    case TT_REDUCE_DEVICE: o->reduce = p->reduce_device + p->barrier; break;
    case TT_REDUCE_ALLREDUCE: o->reduce = p->reduce_allreduce + p->barrier; break;
    case TT_REDUCE_NCCL: o->reduce = p->reduce_nccl + p->barrier; break;
    case TT_REDUCE_COUNT: break;
    }
    o->update = p->update + p->barrier;
    o->total = o->towers + o->reduce + o->update;
}

void tt_probe_print(FILE *f, const tt_probe *p, const tt_probe_config *c)
{
    const double mb = (double)c->model->n_params * 4.0 / 1e6;
    fprintf(f, "probe: backend %s | %zu tower%s, batch %zu (shards of up to %zu rows) | host crew %d threads | %s\n",
            c->ops->name, c->towers, c->towers == 1 ? "" : "s", c->batch, p->rows, p->crew,
            tt_optim_kind_name(c->optim.kind));
    const size_t at_once = c->towers < (size_t)tt_cpu_count() ? c->towers : (size_t)tt_cpu_count();
    fprintf(f, "  copies of the %.2f MB gradient, %zu at once (GB/s):\n", mb, at_once);
    fprintf(f, "    host->device  pinned %7.2f   pageable %7.2f\n", p->h2d_pinned, p->h2d_pageable);
    fprintf(f, "    device->host  pinned %7.2f   pageable %7.2f\n", p->d2h_pinned, p->d2h_pageable);
    fprintf(f, "    device->device (peer) %6.2f\n", p->peer);
    if (p->waves > 1)
        fprintf(f, "  %zu towers on %d CPUs: towers run in %d waves; phases below are one tower's, measured %zu at once\n",
                c->towers, tt_cpu_count(), p->waves, at_once);
    fprintf(f, "  host, %d threads: memcpy %.2f GB/s | summing %zu slots %.2f GB/s = %.0f%% of memcpy (bytes copied or "
               "summed per second)\n",
            p->crew, p->host_memcpy, c->towers, p->host_sum, 100.0 * p->host_sum / p->host_memcpy);
    fprintf(f, "  sgemm at the model's shapes, %zu thread%s: %.1f GFLOP/s (step GEMMs %.3f ms)\n", c->towers,
            c->towers == 1 ? "" : "s", p->gemm_gflops, 1e3 * p->gemm_step);
    fprintf(f, "  step phases (ms): pull %.3f | data %.3f | compute %.3f | push grad %.3f + stats %.3f | barrier %.3f\n",
            1e3 * p->pull, 1e3 * p->data, 1e3 * p->compute, 1e3 * p->push_grad, 1e3 * p->push_stats,
            1e3 * p->barrier);
    fprintf(f, "                    thread wake-up %.3f (a barrier's cost when towers outnumber cores)\n",
            1e3 * p->wake);
    fprintf(f, "                    stragglers: the other towers wait %.3f for the slowest one's compute\n",
            1e3 * p->straggle);
    fprintf(f, "                    reduce cpu %.3f | device %.3f | allreduce %.3f | update %.3f\n",
            1e3 * p->reduce_cpu, 1e3 * p->reduce_device, 1e3 * p->reduce_allreduce, 1e3 * p->update);
}
