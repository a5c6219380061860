/* pool.c — the host's thread crew (see tt_pool.h). Workers sleep on a condition variable between jobs. */
#include <string.h>
#include <unistd.h>

#include "tt_pool.h"

typedef struct worker_arg {
    tt_pool *p;
    int i;
} worker_arg;

static void *pool_worker(void *argp)
{
    worker_arg wa = *(worker_arg *)argp;
    tt_free(argp);
    tt_pool *p = wa.p;
    uint64_t seen = 0;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        while (p->gen == seen && !p->quit) pthread_cond_wait(&p->start, &p->mu);
        if (p->quit) {
            pthread_mutex_unlock(&p->mu);
            return NULL;
        }
        seen = p->gen;
        int use = p->use;
        tt_pool_fn fn = p->fn;
        void *arg = p->arg;
        pthread_mutex_unlock(&p->mu);
        if (wa.i < use) {
            fn(arg, wa.i, use);
            pthread_mutex_lock(&p->mu);
            if (--p->pending == 0) pthread_cond_signal(&p->done);
            pthread_mutex_unlock(&p->mu);
        }
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
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->start, NULL);
    pthread_cond_init(&p->done, NULL);
    if (n == 1) return TT_OK;
    p->threads = (pthread_t *)tt_calloc((size_t)n, sizeof(pthread_t));
    if (!p->threads) return tt_fail(err, TT_ERR_NOMEM, "host pool: out of memory");
    for (int i = 1; i < n; i++) {
        worker_arg *wa = (worker_arg *)tt_malloc(sizeof *wa);
        if (!wa) {
            tt_pool_free(p);
            return tt_fail(err, TT_ERR_NOMEM, "host pool: out of memory");
        }
        wa->p = p;
        wa->i = i;
        if (pthread_create(&p->threads[i], NULL, pool_worker, wa) != 0) {
            tt_free(wa);
            tt_pool_free(p);
            return tt_fail(err, TT_ERR_NOMEM, "host pool: cannot start thread %d", i);
        }
        p->n_started = i;
    }
    return TT_OK;
}

void tt_pool_free(tt_pool *p)
{
    if (p->n == 0) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i <= p->n_started; i++) pthread_join(p->threads[i], NULL);
    tt_free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->start);
    pthread_cond_destroy(&p->done);
    memset(p, 0, sizeof *p);
}

void tt_pool_run(tt_pool *p, int use, tt_pool_fn fn, void *arg)
{
    if (use > p->n) use = p->n;
    if (use <= 1) {
        fn(arg, 0, 1);
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->use = use;
    p->pending = use - 1;
    p->gen++;
    pthread_cond_broadcast(&p->start);
    pthread_mutex_unlock(&p->mu);
    fn(arg, 0, use);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
