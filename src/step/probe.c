/* probe.c — the probe (tt_probe.h): tt_probe_run's flow, and its measurements of the links and rates that explain a
 * step's phases, through the device seam only, so the same code probes the CUDA backend. One concurrent runner
 * starts a thread per tower (each with its own tt_dev), lines them up at a barrier before every rep and times the rep
 * from the first start to the last end; its bodies are the copies, the GEMMs, host memcpy, barriers and a wake-up.
 * Then the step's phases by the trainer (probe_phases.c). Also the GEMM floor alone (bench) and the probe's print.
 * Not for: the phases and whole steps (probe_phases.c), `probe --json`'s kernels (probe_kernels.c), predictions
 * (probe_predict.c) or the cross-node combine (probe_net.c). */
#include <stddef.h>
#include <string.h>

#include "probe_parts.h"
#include "tt_backend.h"
#include "tt_mem.h"
#include "tt_signal.h"

#define PROBE_MAX_THREADS 256 /* as --host-threads; the default crew is every CPU */
#define PROBE_MAX_BODIES 16

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
void probe_gemm_operands(const tt_gemm_shape *g, size_t n, size_t sizes[3])
{
    sizes[0] = sizes[1] = sizes[2] = 1;
    for (size_t i = 0; i < n; i++) {
        const size_t a = g[i].M * g[i].K, b = g[i].K * g[i].N, c = g[i].M * g[i].N;
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
        probe_gemm_operands(r->gemms, r->n_gemms, sizes);
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
    r->reps = probe_reps(c);
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
    probe_gemm_operands(r->gemms, r->n_gemms, sizes);
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

/* The links and rates that explain the phases (probe_check_memory has checked they fit): the device copies each way
 * and between devices on n_dev threads, host memcpy on n_host, the barrier with the trainer's whole crew of T, a
 * sleeping thread's wake-up, and the step's GEMMs alone (the GEMM floor). */
static tt_status links_measure(probe_run *r, tt_probe *p, int n_dev, int n_host, int T, tt_error *err)
{
    const tt_probe_config *c = r->c;
    const int N = (int)c->towers, cpus = tt_cpu_count();
    const size_t P = c->model->n_params;
    const double bytes = (double)P * sizeof(float);
    float **slots = (float **)tt_calloc((size_t)N, sizeof(float *));
    float *copy_dst = (float *)tt_malloc((size_t)N * P * sizeof(float));
    int ok = slots && copy_dst;
    for (int i = 0; i < N && ok; i++) ok = (slots[i] = (float *)tt_malloc(P * sizeof(float))) != NULL;
    tt_status s = ok ? TT_OK : tt_fail(err, TT_ERR_NOMEM, "probe: out of host memory");
    tt_barrier barrier;
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

    /* the links and rates that explain the phases */
    probe_run *r = (probe_run *)tt_calloc(1, sizeof *r);
    if (!r) return tt_fail(err, TT_ERR_NOMEM, "probe: out of memory");
    run_init(r, c);
    tt_status s = probe_check_memory(c, r, n_dev, 0, err);
    if (!s) s = probe_check_memory(c, r, n_dev, 1, err);
    if (!s) s = probe_placements_fit(c, err); /* the trainers it will build, before measuring anything */
    if (!s) s = links_measure(r, p, n_dev, n_host, T, err);
    tt_free(r);
    if (s) return s;
    /* then the step's phases, by the trainer's own code, under every placement that can run here */
    return probe_phases(c, p, err);
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
