/* tt_pool.h — a small persistent thread crew for the host's own work (summing the towers' gradient slots and
 * applying the optimizer). tt_pool_run(fn) runs fn(arg, i, n) for i = 0..n-1, with i = 0 on the calling thread,
 * and returns when all are done. Not for: towers (each tower has its own thread, bound to its device). */
#ifndef TT_POOL_H
#define TT_POOL_H

#include <pthread.h>

#include "tt_common.h"

typedef void (*tt_pool_fn)(void *arg, int i, int n);

typedef struct tt_pool {
    int n; /* participants, caller included */
    pthread_t *threads;
    int n_started;
    pthread_mutex_t mu;
    pthread_cond_t start, done;
    uint64_t gen;
    int pending;
    int quit;
    tt_pool_fn fn;
    void *arg;
    int use; /* participants of the current job */
} tt_pool;

tt_status tt_pool_init(tt_pool *p, int n, tt_error *err);
void tt_pool_free(tt_pool *p);
/* Runs fn on `use` participants (1 <= use <= p->n). */
void tt_pool_run(tt_pool *p, int use, tt_pool_fn fn, void *arg);

/* Number of online CPUs (at least 1). */
int tt_cpu_count(void);

#endif
