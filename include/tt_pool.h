/* tt_pool.h — a crew of persistent threads that run one job together, and the barrier they meet at inside it.
 *
 * The trainer's crew is one: thread t < N is tower t, the others are extra host cores. tt_pool_run(fn) runs
 * fn(arg, i, n) on threads i = 0..n-1 and returns when all have returned; the caller only dispatches and waits.
 * Each worker sleeps on its own semaphore between jobs and the last one to finish posts the caller's: two futex
 * operations per thread per job, no shared lock to queue on. Not for: work queues or nested jobs. */
#ifndef TT_POOL_H
#define TT_POOL_H

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>

#include "tt_common.h"

typedef void (*tt_pool_fn)(void *arg, int i, int n);

typedef struct tt_pool {
    int n;           /* threads */
    int n_started;   /* threads running */
    int n_sems;      /* go[0..n_sems) initialised */
    pthread_t *threads;
    sem_t *go;       /* one per thread */
    sem_t done;
    atomic_int pending;
    int quit;
    tt_pool_fn fn;
    void *arg;
    int use;         /* threads of the current job */
} tt_pool;

tt_status tt_pool_init(tt_pool *p, int n, tt_error *err);
void tt_pool_free(tt_pool *p); /* accepts a zeroed or half-built pool; safe to call twice */
/* Every crew thread runs with flush-to-zero and denormals-are-zero set (tt_fpu_flush_denormals).
 * Runs fn(arg, i, use) for i = 0..use-1 (1 <= use <= n) and returns when all have returned. */
void tt_pool_run(tt_pool *p, int use, tt_pool_fn fn, void *arg);

/* The same in two halves: start returns at once; wait returns 1 when the job is done, 0 if timeout_s passed first
 * (timeout_s < 0: wait for good). */
void tt_pool_start(tt_pool *p, int use, tt_pool_fn fn, void *arg);
int tt_pool_wait(tt_pool *p, double timeout_s);

/* A barrier for the threads of one job. The last thread to arrive runs serial(ctx) before anyone leaves, so the
 * serial section sees everything the others did before arriving and they see everything it did. Waiters spin for
 * up to spin_s seconds (worth it only when every thread has a core of its own) and then sleep. */
typedef struct tt_barrier {
    int n;
    double spin_s;
    atomic_int count;
    atomic_uint gen;
    pthread_mutex_t mu;
    pthread_cond_t cv;
} tt_barrier;

void tt_barrier_init(tt_barrier *b, int n, double spin_s);
void tt_barrier_destroy(tt_barrier *b);
void tt_barrier_wait(tt_barrier *b, void (*serial)(void *ctx), void *ctx);

/* Number of online CPUs (at least 1). */
int tt_cpu_count(void);

#endif
