/* probe.c — measurements for the step's cost model (see tt_probe.h), through the device seam only, so the same
 * code probes the CUDA backend. One concurrent runner starts a thread per tower (each with its own tt_dev),
 * lines them up at a barrier before every rep and times the rep from the first start to the last end. */
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "tt_cost_model.h"
#include "tt_backend.h"
#include "tt_mem.h"
#include "tt_math.h"
#include "tt_probe.h"
#include "tt_profile.h"
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
    float *d_params, *d_grads, *d_recv;
    float *h_pinned, *h_pageable;
    float *gemm[3]; /* A, B, C of the model's largest GEMM (every GEMM of the step reads and writes these) */
    double start[PROBE_MAX_BODIES][PROBE_MAX_REPS], end[PROBE_MAX_BODIES][PROBE_MAX_REPS];
    tt_status status;
    tt_error err;
} probe_thread;

typedef void (*probe_body)(probe_run *r, probe_thread *t);

struct probe_run {
    const tt_probe_config *c;
    size_t P, rows;        /* parameters, shard rows */
    int n;                 /* threads */
    int with_devices;      /* threads own a tt_dev and device buffers */
    int failed;            /* no body runs any more: a thread's setup failed, or a stop request came (at a barrier) */
    int stopped;           /* ... because of a stop request */
    int gemm_only;         /* allocate only the GEMM operands */
    tt_gemm_shape gemms[TT_MAX_LAYERS * TT_MAX_LAYER_GEMMS]; /* the step's GEMMs for a shard */
    size_t n_gemms;
    size_t reps;
    /* the measurements of one run, taken in turn in every rep (so a noisy minute hits them all alike); prep[k]
     * (untimed, may be NULL) puts the caches in the state the step leaves them in before body[k] */
    probe_body body[PROBE_MAX_BODIES], prep[PROBE_MAX_BODIES];
    int n_bodies;
    double straggle[PROBE_MAX_BODIES];
    tt_barrier bar; /* spins when every thread has a core, so all start a rep together */
    probe_thread th[PROBE_MAX_THREADS];
    /* shared host data */
    float **slots;         /* host memcpy sources: N slots of P */
    float *copy_dst;       /* host memcpy destination (N x P) */
    tt_barrier *barrier;   /* barrier cost */
    tt_barrier *sleeper;   /* wake-up latency: a 2-thread barrier that never spins */
    double wake_release, wake[PROBE_MAX_REPS + 1];
    int n_wake;
};

/* Floats of the A, B and C operands big enough for every GEMM of the step. */
static void gemm_sizes(const probe_run *r, size_t sizes[3])
{
    sizes[0] = sizes[1] = sizes[2] = 1;
    for (size_t i = 0; i < r->n_gemms; i++) {
        const tt_gemm_shape *g = &r->gemms[i];
        const size_t a = g->M * g->K, b = g->K * g->N, c = g->M * g->N;
        sizes[0] = a > sizes[0] ? a : sizes[0];
        sizes[1] = b > sizes[1] ? b : sizes[1];
        sizes[2] = c > sizes[2] ? c : sizes[2];
    }
}

static tt_status thread_setup(probe_run *r, probe_thread *t)
{
    const tt_probe_config *c = r->c;
    const size_t P = r->P;
    const int dn = t->id % c->n_devices;
    tt_status s = tt_dev_init(&t->dev, c->ops, c->devices ? c->devices[dn] : dn, &t->err);
    if (s) return s;
    t->dev_up = 1;
    tt_dev_bind(&t->dev);
    tt_dev *d = &t->dev;
    int ok = 1;
    if (r->gemm_only) {
        size_t sizes[3];
        gemm_sizes(r, sizes);
        for (int k = 0; k < 3 && ok; k++) {
            ok = (t->gemm[k] = tt_dev_alloc_f32(d, sizes[k])) != NULL;
            if (ok) tt_dev_fill(d, t->gemm[k], sizes[k], 0.01f * (float)(k + 1));
        }
    } else { /* the link measurements: a weight-sized buffer each way, pinned and pageable */
        ok = (t->d_params = tt_dev_alloc_f32(d, P)) && (t->d_grads = tt_dev_alloc_f32(d, P)) &&
             (t->d_recv = tt_dev_alloc_f32(d, P)) &&
             (t->h_pinned = (float *)tt_dev_host_alloc(d, P * sizeof(float))) &&
             (t->h_pageable = (float *)tt_malloc(P * sizeof(float)));
        if (ok) {
            for (size_t i = 0; i < P; i++) t->h_pinned[i] = t->h_pageable[i] = 1e-3f * (float)(i % 101);
            tt_dev_fill(d, t->d_grads, P, 1e-3f);
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
    for (int k = 0; k < 3; k++) tt_dev_dfree(d, t->gemm[k]);
    tt_dev_dfree(d, t->d_params);
    tt_dev_dfree(d, t->d_grads);
    tt_dev_dfree(d, t->d_recv);
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

static void body_peer(probe_run *r, probe_thread *t)
{
    probe_thread *src = &r->th[(t->id + 1) % r->n];
    tt_dev_peer_copy(&t->dev, t->d_recv, &src->dev, src->d_grads, r->P * sizeof(float));
}

/* The step's GEMMs (tt_model_gemms: every layer's, at the shard's rows and the backend's chunking), each as often
 * as a step runs it, on operands sized for the largest. */
static void body_gemm(probe_run *r, probe_thread *t)
{
    for (size_t i = 0; i < r->n_gemms; i++) {
        const tt_gemm_shape *g = &r->gemms[i];
        const size_t lda = g->ta ? g->M : g->K, ldb = g->tb ? g->K : g->N;
        for (size_t c = 0; c < g->calls && !tt_signal_caught(); c++) /* a stop is not kept waiting for a big shard */
            tt_dev_sgemm(&t->dev, g->ta, g->tb, g->M, g->N, g->K, 1.0f, t->gemm[0], lda, t->gemm[1], ldb, 0.0f,
                         t->gemm[2], g->N);
    }
}

/* Host work is sliced over the crew as the trainer slices it. */
static void host_range(probe_run *r, probe_thread *t, size_t total, size_t *lo, size_t *hi)
{
    size_t chunk = ((total + (size_t)r->n - 1) / (size_t)r->n + 15) & ~(size_t)15;
    *lo = (size_t)t->id * chunk < total ? (size_t)t->id * chunk : total;
    *hi = *lo + chunk < total ? *lo + chunk : total;
}

static void body_host_memcpy(probe_run *r, probe_thread *t)
{
    const size_t N = r->c->towers;
    size_t lo, hi;
    host_range(r, t, r->P, &lo, &hi);
    for (size_t s = 0; s < N; s++) memcpy(r->copy_dst + s * r->P + lo, r->slots[s] + lo, (hi - lo) * sizeof(float));
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
    r->reps = c->reps ? c->reps : 30;
    if (r->reps > PROBE_MAX_REPS) r->reps = PROBE_MAX_REPS;
    r->n_gemms =
        tt_model_gemms(c->model, r->rows, c->ops->chunk_mnk, r->gemms, sizeof r->gemms / sizeof r->gemms[0]);
}

/* What the link measurements allocate, before they allocate it: per measuring thread (n_dev of them: three
 * weight-sized device buffers and two host ones, or the GEMM operands alone for a floor), and the host's memcpy
 * buffers. Mirrors thread_setup and tt_probe_run. */
static tt_status probe_check_memory(const tt_probe_config *c, const probe_run *r, int n_dev, int gemm_only,
                                    tt_error *err)
{
    const tt_model *m = c->model;
    const double F = sizeof(float), P = (double)r->P;
    size_t sizes[3];
    gemm_sizes(r, sizes);
    const double gemm = (double)sizes[0] + (double)sizes[1] + (double)sizes[2];
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.model = tt_model_file(m);
    plan.n_params = r->P;
    plan.towers = (size_t)n_dev;
    plan.rows = r->rows;
    for (int t = 0; t < n_dev; t++) {
        const int dn = t % c->n_devices, d = c->devices ? c->devices[dn] : dn;
        if (gemm_only) {
            tt_mem_add(&plan, "GEMM operands", d, gemm * F, TT_MEM_BY_WIDTH);
            continue;
        }
        tt_mem_add(&plan, "copy buffers", d, 3 * P * F, TT_MEM_BY_PARAMS);
        tt_mem_add(&plan, "copy buffers", TT_MEM_HOST, 2 * P * F, TT_MEM_BY_PARAMS);
    }
    if (!gemm_only)
        tt_mem_add(&plan, "memcpy sources and targets", TT_MEM_HOST, 2 * (double)c->towers * P * F, TT_MEM_BY_PARAMS);
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

/* Synthetic samples for the step's phases: PROBE_DATA_ROWS rows of pseudo-random pixels and labels, and a batch
 * of indices drawn at random over them, so the data phase gathers from memory as it does from a shuffled set. */
typedef struct probe_data {
    tt_dataset ds;
    uint32_t *idx;
} probe_data;

/* The synthetic set's shape, without its samples: what a memory plan reads (--data-on device holds it on the devices). */
static void probe_data_shape(const tt_model *m, tt_dataset *ds)
{
    memset(ds, 0, sizeof *ds);
    ds->n = PROBE_DATA_ROWS;
    ds->dim = m->input_dim;
    ds->shape = m->input_shape;
    ds->n_classes = m->n_classes;
    const int tokens = m->token_vocab != 0; /* then token ids below the vocabulary */
    ds->xtype = tokens ? TT_X_F32 : TT_X_U8;
    ds->scale = tokens ? 1.0f : 1.0f / 255.0f;
}

static tt_status probe_data_make(const tt_model *m, size_t batch, probe_data *d, tt_error *err)
{
    memset(d, 0, sizeof *d);
    probe_data_shape(m, &d->ds);
    const size_t n = d->ds.n, D = d->ds.dim;
    const int tokens = d->ds.xtype == TT_X_F32;
    d->ds.x = (uint8_t *)tt_malloc(n * tt_dataset_sample_bytes(&d->ds));
    d->ds.y = (int32_t *)tt_malloc(n * sizeof(int32_t));
    d->idx = (uint32_t *)tt_malloc(batch * sizeof(uint32_t));
    if (!d->ds.x || !d->ds.y || !d->idx) return tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    for (size_t i = 0; i < n * D; i++) {
        const uint32_t h = (uint32_t)(i * 2654435761u);
        if (tokens)
            ((float *)(void *)d->ds.x)[i] = (float)(h % (uint32_t)m->token_vocab);
        else
            d->ds.x[i] = (uint8_t)(h >> 24);
    }
    for (size_t i = 0; i < n; i++) d->ds.y[i] = (int32_t)(i % m->n_classes);
    tt_rng rng;
    tt_rng_seed(&rng, 1, 0);
    for (size_t i = 0; i < batch; i++) d->idx[i] = (uint32_t)tt_rng_below(&rng, n);
    return TT_OK;
}

static void probe_data_free(probe_data *d)
{
    tt_free(d->ds.x);
    tt_free(d->ds.y);
    tt_free(d->idx);
}

/* The trainer config of placement r's probe; set: the synthetic samples its steps read (--data-on device holds them on
 * the devices; for a memory plan, their shape alone). */
static tt_trainer_config placement_config(const tt_probe_config *c, tt_reduce r, const tt_dataset *set)
{
    tt_trainer_config tc;
    memset(&tc, 0, sizeof tc);
    tc.ops = c->ops;
    tc.n_devices = c->n_devices;
    tc.devices = c->devices;
    tc.n_towers = c->towers;
    tc.batch = c->batch;
    tc.optim = c->optim;
    tc.reduce = r;
    tc.host_threads = c->host_threads;
    tc.seed = 1;
    memcpy(tc.slow, c->slow, sizeof tc.slow);
    tc.n_slow = c->n_slow;
    tc.data_on = c->data_on;
    tc.train_set = set;
    tc.stop = tt_signal_flag();
    return tc;
}

/* Whether placement r's trainer and the synthetic inputs fit: tt_probe_run asks for every placement before it
 * measures anything (a batch too large for the machine is refused at once, not after minutes of GEMMs at its
 * shapes), and probe_placement again before it allocates. *ran = 0 for a placement that cannot run here. */
static tt_status placement_check_memory(const tt_probe_config *c, tt_reduce r, int *ran, tt_error *err)
{
    tt_dataset shape;
    probe_data_shape(c->model, &shape);
    const tt_trainer_config tc = placement_config(c, r, &shape);
    tt_error ignored;
    *ran = 0;
    if (tt_trainer_check(&tc, &ignored)) return TT_OK;
    *ran = 1;
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    tt_status s = tt_trainer_plan(c->model, &tc, &plan, err);
    if (s) return s;
    tt_mem_add(&plan, "synthetic inputs", TT_MEM_HOST,
               (double)PROBE_DATA_ROWS * ((double)c->model->input_dim * sizeof(float) + sizeof(int32_t)),
               TT_MEM_BY_RUN);
    return tt_mem_check(&plan, c->ops, err);
}

/* The step's phases under placement r, timed by the trainer (a trainer of its own). A placement that cannot run
 * here (nccl on the CPU backend) is skipped: *ran = 0. */
static tt_status probe_placement(const tt_probe_config *c, tt_reduce r, const probe_data *d, tt_phase_times *pt,
                                 tt_probe *p, int *ran, tt_error *err)
{
    const tt_trainer_config tc = placement_config(c, r, &d->ds);
    int can;
    *ran = 0;
    tt_status s = placement_check_memory(c, r, &can, err);
    if (s || !can) return s;
    float *w = (float *)tt_malloc(c->model->n_params * sizeof(float));
    tt_trainer *tr = (tt_trainer *)tt_calloc(1, sizeof *tr);
    if (!w || !tr) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    if (!s) {
        tt_model_init_params(c->model, w, 1);
        s = tt_trainer_init(tr, c->model, &tc, w, err);
    }
    if (!s) s = tt_trainer_time_phases(tr, &d->ds, d->idx, c->batch, c->reps ? c->reps : 30, pt, err);
    if (s == TT_ERR_STOPPED)
        tt_fail(err, s, "probe: stopped by %s while timing the %s placement's phases", tt_signal_name(tt_signal_caught()),
                tt_reduce_name(r));
    if (!s && r == TT_REDUCE_CPU) { /* the peer matrix, once */
        const int *ords, *link;
        p->n_links = tt_trainer_links(tr, &ords, &link);
        memcpy(p->link_devs, ords, (size_t)p->n_links * sizeof(int));
        memcpy(p->links, link, (size_t)p->n_links * (size_t)p->n_links * sizeof(int));
    }
    if (tr) tt_trainer_free(tr);
    tt_free(tr);
    tt_free(w);
    *ran = !s;
    return s;
}

/* The sum of k draws of U[0, 1): exact for small k, the normal approximation (mean k/2, variance k/12, Box-Muller)
 * beyond, so that weights:1000000 costs what weights:16 does. */
static double uniform_sum(tt_rng *r, size_t k)
{
    if (k <= 32) {
        double s = 0;
        for (size_t i = 0; i < k; i++) s += (double)tt_rng_uniform(r);
        return s;
    }
    const double u1 = ((double)tt_rng_uniform(r) + 0x1p-25), u2 = (double)tt_rng_uniform(r);
    const double z = sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
    const double s = 0.5 * (double)k + z * sqrt((double)k / 12.0);
    return s < 0 ? 0 : s > (double)k ? (double)k : s;
}

/* The expected longest, over the towers, of `k` steps' sums of (base + tower t's delay), seconds: the delays drawn as
 * the trainer draws them (MS + U [0, J)), E[max] estimated from 4096 draws of a fixed seed (exact for constant
 * delays). */
static double expected_max(const tt_probe_config *c, double base, size_t k)
{
    enum { DRAWS = 4096 };
    double jitter = 0;
    for (size_t s = 0; s < c->n_slow; s++) jitter += c->slow[s].jitter_ms;
    const size_t draws = jitter > 0 ? DRAWS : 1;
    tt_rng r;
    tt_rng_seed(&r, 0x5eed, 1);
    double sum = 0;
    for (size_t d = 0; d < draws; d++) {
        double worst = 0;
        for (size_t t = 0; t < c->towers; t++) {
            double tot = (double)k * base;
            for (size_t s = 0; s < c->n_slow; s++)
                if (c->slow[s].tower == t)
                    tot += 1e-3 * ((double)k * c->slow[s].ms +
                                   (jitter > 0 ? uniform_sum(&r, k) : 0.5 * (double)k) * c->slow[s].jitter_ms);
            worst = tot > worst ? tot : worst;
        }
        sum += worst;
    }
    return sum / (double)draws;
}

/* p->apply1: tt_optim_apply over all P parameters on this thread, median of reps (warm: one first), each from cold
 * caches, as in a step: a tower's apply follows its forward and backward, which have moved other data through them
 * (warm, the MLP's Adam apply measured 2-3x faster than the steps' own). */
static tt_status probe_apply1(const tt_probe_config *c, tt_probe *p, tt_error *err)
{
    const size_t P = c->model->n_params, reps = c->reps ? c->reps : 30;
    tt_optim o;
    tt_status s = tt_optim_init(&o, &c->optim, P, err);
    if (s) return s;
    float *w = (float *)tt_calloc(P, sizeof(float)), *g = (float *)tt_calloc(P, sizeof(float));
    double *v = (double *)tt_calloc(reps, sizeof(double));
    enum { FLUSH = 64 << 20 }; /* larger than any last-level cache of these machines */
    unsigned char *flush = (unsigned char *)tt_malloc(FLUSH);
    if (!w || !g || !v || !flush) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    for (size_t k = 0; g && k < P; k++) g[k] = 1e-3f * (float)((k % 7) + 1);
    for (size_t r = 0; !s && r <= reps; r++) {
        memset(flush, (int)r, FLUSH);
        const double t0 = tt_now();
        tt_optim_begin_step(&o);
        tt_optim_apply(&o, w, g, 0, P);
        if (r) v[r - 1] = tt_now() - t0;
    }
    if (!s) p->apply1 = tt_median(v, reps);
    /* the same update on a tower's device, through the backend (the CPU backend's is the host loop above) */
    tt_dev dev;
    memset(&dev, 0, sizeof dev);
    if (!s) s = tt_dev_init(&dev, c->ops, c->devices ? c->devices[0] : 0, err);
    float *d[5] = {NULL, NULL, NULL, NULL, NULL};
    int32_t *bad = NULL;
    if (!s) {
        tt_dev_bind(&dev);
        for (int k = 0; k < 5; k++) d[k] = tt_dev_alloc_f32(&dev, P);
        bad = (int32_t *)tt_dev_alloc(&dev, ((P + TT_UPDATE_BLOCK - 1) / TT_UPDATE_BLOCK) * sizeof(int32_t));
        if (!d[0] || !d[1] || !d[2] || !d[3] || !d[4] || !bad) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of device memory");
    }
    if (!s) {
        for (int k = 0; k < 5; k++) tt_dev_fill(&dev, d[k], P, k == 1 ? 1e-3f : 0.0f);
        tt_dev_sync(&dev);
        tt_update_args u;
        for (size_t r = 0; r <= reps; r++) {
            memset(flush, (int)r, FLUSH);
            tt_optim_begin_step(&o);
            tt_optim_update_args(&o, &u);
            const double t0 = tt_now();
            tt_dev_update(&dev, &u, d[0], d[1], o.m ? d[2] : NULL, o.v ? d[3] : NULL, o.a ? d[4] : NULL, bad, P, 0);
            tt_dev_sync(&dev);
            if (r) v[r - 1] = tt_now() - t0;
        }
        p->dev_update = tt_median(v, reps);
    }
    for (int k = 0; k < 5; k++)
        if (d[k]) tt_dev_dfree(&dev, d[k]);
    if (bad) tt_dev_dfree(&dev, bad);
    tt_dev_free(&dev);
    tt_free(flush);
    tt_free(w);
    tt_free(g);
    tt_free(v);
    tt_optim_free(&o);
    return s;
}

tt_status tt_probe_run(const tt_probe_config *c, tt_probe *p, tt_error *err)
{
    memset(p, 0, sizeof *p);
    const int N = (int)c->towers, T = crew_size(c), cpus = tt_cpu_count();
    /* the link measurements: one thread per core at most */
    const int n_dev = N < cpus ? N : cpus, n_host = T < cpus ? T : cpus;
    if (N > PROBE_MAX_THREADS || T > PROBE_MAX_THREADS)
        return tt_fail(err, TT_ERR_ARG, "probe: at most %d towers and host threads", PROBE_MAX_THREADS);
    if (c->batch < c->towers)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       c->towers, c->batch);
    p->crew = T;
    p->waves = (N + n_dev - 1) / n_dev;
    p->rows = (c->batch + c->towers - 1) / c->towers;
    const size_t P = c->model->n_params;
    const double bytes = (double)P * sizeof(float);

    /* the links and rates that explain the phases */
    probe_run *r = (probe_run *)tt_calloc(1, sizeof *r);
    if (!r) return tt_fail(err, TT_ERR_NOMEM, "probe: out of memory");
    run_init(r, c);
    tt_status s = probe_check_memory(c, r, n_dev, 0, err);
    if (!s) s = probe_check_memory(c, r, n_dev, 1, err);
    for (int pl = 0; pl < TT_REDUCE_COUNT && !s; pl++) { /* the trainers it will build, before measuring anything */
        int can;
        s = placement_check_memory(c, (tt_reduce)pl, &can, err);
    }
    float **slots = NULL, *copy_dst = NULL;
    tt_barrier barrier;
    if (!s) {
        slots = (float **)tt_calloc((size_t)N, sizeof(float *));
        copy_dst = (float *)tt_malloc((size_t)N * P * sizeof(float));
        int ok = slots && copy_dst;
        for (int i = 0; i < N && ok; i++) ok = (slots[i] = (float *)tt_malloc(P * sizeof(float))) != NULL;
        if (!ok) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    }
    if (!s) {
        for (int i = 0; i < N; i++)
            for (size_t k = 0; k < P; k++) slots[i][k] = 1e-4f * (float)((k + (size_t)i) % 113);
        r->slots = slots;
        r->copy_dst = copy_dst;
        tt_barrier_init(&barrier, T, T <= tt_cpu_count() ? 200e-6 : 0.0);
        r->barrier = &barrier;
    }
    enum { PULL, PULL_PAGE, PUSH, PUSH_PAGE, PEER, N_DEV };
    const probe_body dev_bodies[N_DEV] = {body_h2d_pinned, body_h2d_pageable, body_d2h_pinned, body_d2h_pageable,
                                          body_peer};
    double dev_t[N_DEV] = {0};
    if (!s) s = measure(r, n_dev, 1, N_DEV, dev_bodies, NULL, dev_t, err);
    enum { COPY, BARRIER, N_HOST };
    const probe_body host_bodies[1] = {body_host_memcpy};
    double host_t[N_HOST] = {0};
    if (!s) s = measure(r, n_host, 0, 1, host_bodies, NULL, host_t, err);
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
    if (!s) {
        r->gemm_only = 1;
        const probe_body gemm[1] = {body_gemm};
        s = measure(r, n_dev, 1, 1, gemm, NULL, &p->gemm_step, err);
        p->gemm_step *= p->waves;
        r->gemm_only = 0;
    }
    if (!s) {
        p->h2d_pinned = (double)n_dev * bytes / dev_t[PULL] / 1e9;
        p->h2d_pageable = (double)n_dev * bytes / dev_t[PULL_PAGE] / 1e9;
        p->d2h_pinned = (double)n_dev * bytes / dev_t[PUSH] / 1e9;
        p->d2h_pageable = (double)n_dev * bytes / dev_t[PUSH_PAGE] / 1e9;
        p->peer = (double)n_dev * bytes / dev_t[PEER] / 1e9;
        p->host_memcpy = (double)N * bytes / host_t[COPY] / 1e9;
        p->gemm_gflops = tt_model_train_flops(c->model) * (double)r->rows * (double)N / p->gemm_step / 1e9;
        p->barrier = host_t[BARRIER] / 20.0;
        /* threads outnumber cores: every barrier sleeps, and leaving it costs a wake-up */
        if (T > cpus && p->wake > p->barrier) p->barrier = p->wake;
    }
    if (r->barrier) tt_barrier_destroy(&barrier);
    for (int i = 0; slots && i < N; i++) tt_free(slots[i]);
    tt_free(slots);
    tt_free(copy_dst);
    tt_free(r);
    if (s) return s;

    /* then the step's phases, by the trainer's own code, under every placement that can run here */
    probe_data d;
    s = probe_data_make(c->model, c->batch, &d, err);
    tt_phase_times pt[TT_REDUCE_COUNT];
    memset(pt, 0, sizeof pt);
    for (int pl = 0; pl < TT_REDUCE_COUNT && !s; pl++)
        s = probe_placement(c, (tt_reduce)pl, &d, &pt[pl], p, &p->can[pl], err);
    probe_data_free(&d);
    if (s) return s;
    const tt_phase_times *cpu = &pt[TT_REDUCE_CPU];
    p->pull = cpu->pull;
    p->data = cpu->data;
    p->compute = cpu->compute;
    p->straggle = cpu->straggle;
    for (size_t k = 0; k < c->n_slow; k++) /* --slow-tower: what the delays add, on average (MS + J/2) */
        p->slow_mean += 1e-3 * (c->slow[k].ms + 0.5 * c->slow[k].jitter_ms) / (double)c->towers;
    p->slow_max = expected_max(c, 0, 1); /* and the barrier waits for the longest of the step's draws */
    p->push_stats = 0; /* the push without the gradient: that of the first placement that reduces on the towers */
    for (int pl = 0; pl < TT_REDUCE_COUNT; pl++)
        if (!tt_reduce_about((tt_reduce)pl)->host_sum) {
            if (p->can[pl]) p->push_stats = pt[pl].push;
            break;
        }
    p->push_grad = cpu->push - p->push_stats > 0 ? cpu->push - p->push_stats : 0;
    p->update = cpu->host_update;
    if (!s) s = probe_apply1(c, p, err);
    for (int pl = 0; pl < TT_REDUCE_COUNT; pl++)
        p->reduce[pl] = tt_reduce_about((tt_reduce)pl)->host_sum ? pt[pl].host_sum : pt[pl].reduce;
    p->host_sum = p->reduce[TT_REDUCE_CPU] > 0 ? (double)N * bytes / p->reduce[TT_REDUCE_CPU] / 1e9 : 0;
    return s;
}

/* ---- probe --json: each kernel and GEMM alone ------------------------------------------------------------------ */

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
    size_t sizes[3] = {1, 1, 1};
    for (size_t i = 0; i < k->n_gemms; i++) { /* operands for the largest: every shape reads and writes these */
        const tt_gemm_shape *g = &k->gemms[i];
        const size_t need[3] = {g->M * g->K, g->K * g->N, g->M * g->N};
        for (int j = 0; j < 3; j++) sizes[j] = need[j] > sizes[j] ? need[j] : sizes[j];
    }
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
    const size_t reps = c->reps ? (c->reps < PROBE_MAX_REPS ? c->reps : PROBE_MAX_REPS) : 30;
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
    p->reps = c->reps ? c->reps : 30;
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

/* Tower t's expected delay a step, seconds. */
static double tower_delay(const tt_probe_config *c, size_t t)
{
    for (size_t s = 0; s < c->n_slow; s++)
        if (c->slow[s].tower == t) return 1e-3 * (c->slow[s].ms + 0.5 * c->slow[s].jitter_ms);
    return 0;
}

void tt_probe_predict_sync(const tt_probe *p, const tt_probe_config *c, const tt_sync *sy, tt_step_times *o)
{
    tt_probe_predict(p, TT_REDUCE_CPU, o);
    if (sy->kind == TT_SYNC_BSP) return;
    const double N = (double)c->towers;
    const double apply1 = p->apply1; /* one thread's apply of the whole buffer */
    memset(o, 0, sizeof *o);
    o->data = p->data;
    o->compute = p->compute + p->slow_mean;
    if (sy->kind == TT_SYNC_WEIGHTS) { /* no pull or gradient push a step; the tower's own update; an average */
        const double step = p->data + p->compute + p->push_stats + p->dev_update;
        const double K = (double)sy->k;
        const double average = p->push_grad + p->reduce[TT_REDUCE_CPU] + p->pull + p->barrier;
        o->push = p->push_stats;
        o->update = p->dev_update;
        o->reduce = average / K;
        o->total = expected_max(c, step, sy->k) / K + o->reduce;
        o->wait = o->total - (o->data + o->compute + o->push + o->update + o->reduce);
        if (o->wait < 0) o->wait = 0;
        return;
    }
    /* ssp, async: a shard's work on its tower, then its apply; each tower at its own rate */
    const double busy = p->pull + p->data + p->compute + p->push_stats + p->push_grad + apply1;
    double rate = 0, slowest = 0;
    for (size_t t = 0; t < c->towers; t++) {
        const double s = busy + tower_delay(c, t);
        rate += 1.0 / s;
        slowest = s > slowest ? s : slowest;
    }
    double step = N / rate;
    const double serial = N * (p->pull + apply1); /* the pulls and applies go one at a time, under the lock */
    step = serial > step ? serial : step;
    if (sy->kind == TT_SYNC_SSP) { /* at the slowest tower's pace, and a share of bsp's wait for the longest draw */
        const double excess = expected_max(c, busy, 1) - slowest; /* E[max] beyond the largest mean */
        const double ssp = slowest + (excess > 0 ? excess : 0) / (double)(sy->k + 1);
        step = ssp > step ? ssp : step;
    }
    o->pull = p->pull;
    o->push = p->push_stats + p->push_grad;
    o->update = apply1;
    o->total = step;
    o->wait = o->total - (o->pull + o->data + o->compute + o->push + o->update);
    if (o->wait < 0) o->wait = 0;
}

tt_status tt_probe_steps(const tt_probe_config *c, const tt_probe_design *d, tt_step_times *t, int *ran,
                         tt_error *err)
{
    enum { WARM = 2 };
    memset(t, 0, sizeof *t);
    *ran = 0;
    tt_dataset shape;
    probe_data_shape(c->model, &shape);
    tt_trainer_config tc = placement_config(c, d->reduce, &shape);
    tc.update = d->update;
    tc.graphs = d->graphs;
    tc.overlap = d->overlap;
    tc.bucket_bytes = d->overlap ? c->bucket_bytes : 0;
    tt_error why;
    if (tt_trainer_check(&tc, &why)) return TT_OK; /* not here: the caller says why */
    const size_t reps = c->reps ? c->reps : 30, steps = WARM + reps, B = c->batch;
    tt_mem_plan plan;
    memset(&plan, 0, sizeof plan);
    tt_status s = tt_trainer_plan(c->model, &tc, &plan, err);
    if (!s) {
        tt_mem_add(&plan, "synthetic inputs", TT_MEM_HOST,
                   (double)PROBE_DATA_ROWS * ((double)c->model->input_dim * sizeof(float) + sizeof(int32_t)) +
                       (double)steps * (double)B * sizeof(uint32_t),
                   TT_MEM_BY_RUN);
        s = tt_mem_check(&plan, c->ops, err);
    }
    if (s) return s;
    probe_data pd;
    s = probe_data_make(c->model, B, &pd, err);
    float *w = (float *)tt_malloc(c->model->n_params * sizeof(float));
    uint32_t *idx = (uint32_t *)tt_malloc(steps * B * sizeof(uint32_t));
    tt_step_result *res = (tt_step_result *)tt_calloc(steps, sizeof *res);
    double *v = (double *)tt_calloc(reps, sizeof(double));
    tt_trainer *tr = (tt_trainer *)tt_calloc(1, sizeof *tr);
    if (!s && (!w || !idx || !res || !v || !tr)) s = tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    if (!s) {
        for (size_t k = 0; k < steps; k++) memcpy(idx + k * B, pd.idx, B * sizeof(uint32_t)); /* one shape */
        tt_model_init_params(c->model, w, 1);
        tc.train_set = &pd.ds; /* the samples themselves now (the plan read their shape) */
        s = tt_trainer_init(tr, c->model, &tc, w, err);
    }
    if (!s) s = tt_trainer_start_steps(tr, &pd.ds, idx, steps * B, res, steps, NULL, err);
    if (!s) {
        tt_trainer_wait(tr, -1, NULL);
        const tt_halt h = tt_trainer_halted(tr);
        if (h == TT_HALT_STOP)
            s = tt_fail(err, TT_ERR_STOPPED, "probe: stopped by %s while timing whole steps",
                        tt_signal_name(tt_signal_caught()));
        else if (h != TT_HALT_NONE) /* random weights on random pixels: a diverged step is a broken trainer */
            s = tt_fail(err, TT_ERR_NUMERIC, "probe: a whole step of --reduce %s --update %s halted",
                        tt_reduce_name(d->reduce), tt_update_name(d->update));
    }
    if (!s) {
        double *part[] = {&t->launch, &t->pull, &t->data, &t->compute, &t->push, &t->wait, &t->towers, &t->reduce,
                          &t->update, &t->total, &t->push_hidden, &t->host_hidden, &t->host_exposed};
        for (size_t f = 0; f < sizeof part / sizeof part[0]; f++) { /* the same field of every kept step */
            const size_t off = (size_t)((const char *)part[f] - (const char *)t);
            for (size_t k = 0; k < reps; k++) v[k] = *(const double *)((const char *)&res[WARM + k].t + off);
            *part[f] = tt_median(v, reps);
        }
        *ran = 1;
    }
    if (tr) tt_trainer_free(tr);
    tt_free(tr);
    tt_free(v);
    tt_free(res);
    tt_free(idx);
    tt_free(w);
    probe_data_free(&pd);
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
    const size_t fields[] = {offsetof(tt_probe, pull),       offsetof(tt_probe, data),     offsetof(tt_probe, compute),
                             offsetof(tt_probe, push_grad),  offsetof(tt_probe, push_stats),
                             offsetof(tt_probe, barrier),    offsetof(tt_probe, straggle), offsetof(tt_probe, update),
                             offsetof(tt_probe, apply1),     offsetof(tt_probe, dev_update),
                             offsetof(tt_probe, gemm_step)};
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        *(double *)((char *)out + fields[i]) = median_of(ps, n, fields[i]);
    for (int r = 0; r < TT_REDUCE_COUNT; r++)
        out->reduce[r] = median_of(ps, n, offsetof(tt_probe, reduce) + (size_t)r * sizeof(double));
}

void tt_probe_predict(const tt_probe *p, tt_reduce r, tt_step_times *o)
{
    TT_ASSERT((unsigned)r < TT_REDUCE_COUNT);
    memset(o, 0, sizeof *o);
    o->pull = p->pull;
    o->data = p->data;
    o->compute = p->compute;
    const int host_sum = tt_reduce_about(r)->host_sum;
    o->push = p->push_stats + (host_sum ? p->push_grad : 0);
    /* the phases were timed with all N towers at once: towers outnumbering cores are in them already */
    /* --slow-tower: the delayed towers' compute grows by their delay (the ledger's compute is the towers' mean), and
     * every other tower waits at the barrier for the most delayed one */
    o->compute += p->slow_mean;
    const double work = o->pull + o->data + o->compute + o->push;
    o->wait = p->straggle + p->barrier + p->slow_max - p->slow_mean;
    o->towers = work + o->wait;
    o->reduce = p->reduce[r] + (host_sum ? 0 : p->barrier); /* a tower-side reduce ends at barrier R */
    o->update = p->update + p->barrier;
    o->total = o->towers + o->reduce + o->update;
}

void tt_probe_print(FILE *f, const tt_probe *p, const tt_probe_config *c)
{
    const double mb = (double)c->model->n_params * 4.0 / 1e6;
    fprintf(f, "probe: backend %s | %zu tower%s, batch %zu (shards of up to %zu rows) | host crew %d threads | %s\n",
            c->ops->name, c->towers, c->towers == 1 ? "" : "s", c->batch, p->rows, p->crew,
            tt_optim_kind_name(c->optim.kind));
    tt_backend_print_links(f, "  ", c->ops, p->link_devs, p->n_links, p->links);
    const size_t at_once = c->towers < (size_t)tt_cpu_count() ? c->towers : (size_t)tt_cpu_count();
    fprintf(f, "  copies of the %.2f MB gradient, %zu at once (GB/s):\n", mb, at_once);
    fprintf(f, "    host->device  pinned %7.2f   pageable %7.2f\n", p->h2d_pinned, p->h2d_pageable);
    fprintf(f, "    device->host  pinned %7.2f   pageable %7.2f\n", p->d2h_pinned, p->d2h_pageable);
    fprintf(f, "    device->device (peer) %6.2f\n", p->peer);
    fprintf(f, "  host, %d threads: memcpy %.2f GB/s | the step's sum of %zu slots %.2f GB/s = %.0f%% of memcpy (bytes "
               "copied or summed per second)\n",
            p->crew, p->host_memcpy, c->towers, p->host_sum, 100.0 * p->host_sum / p->host_memcpy);
    fprintf(f, "  sgemm at the model's shapes, %zu at once: %.1f GFLOP/s (step GEMMs %.3f ms)\n", at_once,
            p->gemm_gflops, 1e3 * p->gemm_step);
    fprintf(f, "  the step's phases, timed by the trainer (ms, all %zu towers at once%s):\n", c->towers,
            p->waves > 1 ? ", more towers than CPUs" : "");
    fprintf(f, "    pull %.3f | data %.3f%s | compute %.3f | push grad %.3f + stats %.3f | barrier %.3f\n",
            1e3 * p->pull, 1e3 * p->data, c->data_on ? " (--data-on device: indices in, rows gathered there)" : "",
            1e3 * p->compute, 1e3 * p->push_grad, 1e3 * p->push_stats, 1e3 * p->barrier);
    fprintf(f, "    thread wake-up %.3f (a barrier's cost when towers outnumber cores)\n", 1e3 * p->wake);
    fprintf(f, "    stragglers: the slowest tower takes %.3f longer than the mean one\n", 1e3 * p->straggle);
    if (c->n_slow)
        fprintf(f, "    --slow-tower: the most delayed tower sleeps %.3f a step (expected), the towers' mean %.3f: "
                   "predicted as compute +%.3f, wait +%.3f\n",
                1e3 * p->slow_max, 1e3 * p->slow_mean, 1e3 * p->slow_mean, 1e3 * (p->slow_max - p->slow_mean));
    for (int r = 0; r < TT_REDUCE_COUNT; r++) {
        fprintf(f, r == 0 ? "    reduce %s " : " | %s ", tt_reduce_name((tt_reduce)r));
        if (p->can[r])
            fprintf(f, "%.3f", 1e3 * p->reduce[r]);
        else
            fprintf(f, "-");
    }
    fprintf(f, " | update %.3f (one thread, cold caches: %.3f; on a tower's device: %.3f)\n", 1e3 * p->update,
            1e3 * p->apply1, 1e3 * p->dev_update);
}

/* ---- the cross-node combine --------------------------------------------------------------------------------------- */

/* GB/s of out += x over n floats (one read of x per element), median of reps. */
static double sum_rate_of(float *out, const float *x, size_t n, size_t reps)
{
    double v[64];
    reps = reps > 64 ? 64 : reps;
    for (size_t r = 0; r < reps; r++) {
        double t0 = tt_now();
        for (size_t k = 0; k < n; k++) out[k] = tt_add(out[k], x[k]);
        v[r] = tt_now() - t0;
    }
    double t = tt_median(v, reps);
    return t > 0 ? (double)n * sizeof(float) / t / 1e9 : 0;
}

tt_status tt_probe_net(tt_node *nd, size_t P, size_t reps, tt_net *net, tt_error *err)
{
    memset(net, 0, sizeof *net);
    const int K = nd->size > 1 ? nd->size : 1;
    net->ranks = K;
    size_t lo, S;
    tt_node_slice(P, K, 0, &lo, &S);
    /* one rank measures only the sum rate, on at most 4 MB: a model too large to train gets its memory line from
     * the trainer's budget, not from here */
    const size_t n_sum = K > 1 ? P : (S < ((size_t)1 << 20) ? S : ((size_t)1 << 20));
    float *sum = (float *)tt_calloc(n_sum ? n_sum : 1, sizeof(float));
    float *recv = (float *)tt_calloc(K > 1 ? (size_t)K * S + 1 : n_sum + 1, sizeof(float));
    float *slice = (float *)tt_calloc(K > 1 ? S + 1 : 1, sizeof(float));
    double *v = (double *)tt_calloc(reps + 1, sizeof(double)), *w = (double *)tt_calloc(reps + 1, sizeof(double));
    tt_status s = sum && recv && slice && v && w ? TT_OK : tt_fail(err, TT_ERR_NOMEM, "probe: out of memory");
    if (!s) net->sum_rate = sum_rate_of(recv, sum, K > 1 ? S : n_sum, reps);
    if (!s && K > 1) {
        double one;
        s = tt_node_pingpong(nd, 1, 8, (int)reps, &one, err);
        net->latency = one;
        if (!s) s = tt_node_pingpong(nd, 1, S * sizeof(float), (int)reps, &one, err);
        if (!s && one > net->latency) net->bandwidth = (double)(S * sizeof(float)) / (one - net->latency) / 1e9;
        /* rank 0's figures for everyone */
        double fig[2] = {net->latency, net->bandwidth};
        if (!s) s = tt_node_bcast(nd, fig, sizeof fig, err);
        net->latency = fig[0];
        net->bandwidth = fig[1];
        /* the combine as the step runs it, rep by rep, lined up by a barrier-like small collective */
        for (size_t r = 0; !s && r <= reps; r++) {
            double st[4] = {1, 2, 3, 4}, all[4 * TT_MAX_RANKS];
            uint32_t flags[2] = {0, 0};
            s = tt_node_or(nd, flags, 2, err);
            double t0 = tt_now();
            if (!s) s = tt_node_allgather(nd, st, all, sizeof st, err);
            if (!s) s = tt_node_or(nd, flags, 2, err);
            double t1 = tt_now();
            if (!s) s = tt_node_reduce_scatter(nd, sum, recv, slice, P, err);
            if (!s) s = tt_node_allgather_slices(nd, sum, P, err);
            double t2 = tt_now();
            if (r > 0) { /* rep 0 warms up */
                v[r - 1] = t2 - t0;
                w[r - 1] = t1 - t0;
            }
        }
        if (!s) {
            net->combine = tt_median(v, reps);
            net->small = tt_median(w, reps);
        }
    }
    tt_free(sum);
    tt_free(recv);
    tt_free(slice);
    tt_free(v);
    tt_free(w);
    return s;
}

double tt_net_combine(const tt_net *net, int K, size_t P)
{
    if (K <= 1) return 0;
    size_t lo, S;
    tt_node_slice(P, K, 0, &lo, &S);
    const double bytes = (double)S * sizeof(float), k1 = (double)(K - 1);
    const double send = net->bandwidth > 0 ? bytes / (net->bandwidth * 1e9) : 0;
    const double add = net->sum_rate > 0 ? bytes / (net->sum_rate * 1e9) : 0;
    int log2k = 0;
    while ((1 << log2k) < K) log2k++;
    return 2 * k1 * (net->latency + send) + k1 * add + 2.0 * log2k * net->latency;
}

void tt_probe_predict_node(const tt_probe *p, const tt_net *net, int K, size_t P, tt_node_reduce m, tt_reduce r,
                           tt_step_times *o)
{
    tt_probe_predict(p, r, o);
    if (K <= 1) return;
    /* the node sum is the reduce phase as on one rank (the cpu placement's share of the fused pass: ~0 for one
     * tower, whose slot is the sum) */
    o->combine = K == net->ranks && net->combine > 0 ? net->combine : tt_net_combine(net, K, P);
    o->update = (m == TT_NODE_PS ? p->update / K : p->update) + p->barrier;
    o->total = o->towers + o->reduce + o->combine + o->update;
}
