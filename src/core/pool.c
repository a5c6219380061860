/* pool.c — the thread crew and the barrier of tt_pool.h. */
#include <errno.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tt_pool.h"

typedef struct worker_arg {
    tt_pool *p;
    int slot; /* index into threads/go */
} worker_arg;

static void *pool_worker(void *argp)
{
    worker_arg wa = *(worker_arg *)argp;
    tt_free(argp);
    tt_pool *p = wa.p;
    const int i = wa.slot;
    tt_fpu_flush_denormals(); /* every crew thread runs tower or host math */
    for (;;) {
        while (sem_wait(&p->go[wa.slot]) != 0) { /* EINTR: wait again */
        }
        if (p->quit) return NULL;
        p->fn(p->arg, i, p->use);
        if (atomic_fetch_sub(&p->pending, 1) == 1) sem_post(&p->done);
    }
}

int tt_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

tt_status tt_pool_init(tt_pool *p, int n, tt_error *err)
{
    memset(p, 0, sizeof *p);
    if (n < 1) n = 1;
    p->n = n;
    sem_init(&p->done, 0, 0);
    const int threads = n;
    p->threads = (pthread_t *)tt_calloc((size_t)threads, sizeof(pthread_t));
    p->go = (sem_t *)tt_calloc((size_t)threads, sizeof(sem_t));
    if (!p->threads || !p->go) {
        tt_pool_free(p);
        return tt_fail(err, TT_ERR_NOMEM, "thread crew: out of memory");
    }
    for (int t = 0; t < threads; t++) sem_init(&p->go[t], 0, 0); /* all of them, before any thread can fail */
    p->n_sems = threads;
    for (int t = 0; t < threads; t++) {
        worker_arg *wa = (worker_arg *)tt_malloc(sizeof *wa);
        if (!wa) {
            tt_pool_free(p);
            return tt_fail(err, TT_ERR_NOMEM, "thread crew: out of memory");
        }
        wa->p = p;
        wa->slot = t;
        if (pthread_create(&p->threads[t], NULL, pool_worker, wa) != 0) {
            tt_free(wa);
            tt_pool_free(p);
            return tt_fail(err, TT_ERR_NOMEM, "thread crew: cannot start thread %d of %d", t + 1, threads);
        }
        p->n_started = t + 1;
    }
    return TT_OK;
}

void tt_pool_free(tt_pool *p)
{
    if (p->n == 0) return;
    p->quit = 1;
    for (int t = 0; t < p->n_started; t++) sem_post(&p->go[t]);
    for (int t = 0; t < p->n_started; t++) pthread_join(p->threads[t], NULL);
    for (int t = 0; t < p->n_sems; t++) sem_destroy(&p->go[t]); /* only those initialised */
    sem_destroy(&p->done);
    tt_free(p->threads);
    tt_free(p->go);
    memset(p, 0, sizeof *p);
}

void tt_pool_start(tt_pool *p, int use, tt_pool_fn fn, void *arg)
{
    TT_ASSERT(use >= 1 && use <= p->n);
    p->fn = fn;
    p->arg = arg;
    p->use = use;
    atomic_store(&p->pending, use);
    for (int t = 0; t < use; t++) sem_post(&p->go[t]);
}

int tt_pool_wait(tt_pool *p, double timeout_s)
{
    if (timeout_s < 0) {
        while (sem_wait(&p->done) != 0) {
        }
        return 1;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    double end = (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec + timeout_s;
    ts.tv_sec = (time_t)end;
    ts.tv_nsec = (long)((end - (double)ts.tv_sec) * 1e9);
    for (;;) {
        if (sem_timedwait(&p->done, &ts) == 0) return 1;
        if (errno == ETIMEDOUT) return 0;
    }
}

void tt_pool_run(tt_pool *p, int use, tt_pool_fn fn, void *arg)
{
    tt_pool_start(p, use, fn, arg);
    tt_pool_wait(p, -1);
}

/* ---- barrier ----------------------------------------------------------------------------------------------- */

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

void tt_barrier_init(tt_barrier *b, int n, double spin_s)
{
    b->n = n;
    b->spin_s = spin_s;
    atomic_init(&b->count, 0);
    atomic_init(&b->gen, 0);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
}

void tt_barrier_destroy(tt_barrier *b)
{
    pthread_mutex_destroy(&b->mu);
    pthread_cond_destroy(&b->cv);
}

void tt_barrier_wait(tt_barrier *b, void (*serial)(void *ctx), void *ctx)
{
    unsigned g = atomic_load(&b->gen); /* cannot move on before this thread arrives */
    if (atomic_fetch_add(&b->count, 1) == b->n - 1) {
        if (serial) serial(ctx);
        atomic_store(&b->count, 0);
        pthread_mutex_lock(&b->mu);
        atomic_store(&b->gen, g + 1);
        pthread_cond_broadcast(&b->cv);
        pthread_mutex_unlock(&b->mu);
        return;
    }
    if (b->spin_s > 0) {
        double until = tt_now() + b->spin_s;
        for (int k = 0;; k++) {
            if (atomic_load(&b->gen) != g) return;
            cpu_relax();
            if ((k & 63) == 63 && tt_now() > until) break;
        }
    }
    pthread_mutex_lock(&b->mu);
    while (atomic_load(&b->gen) == g) pthread_cond_wait(&b->cv, &b->mu);
    pthread_mutex_unlock(&b->mu);
}
