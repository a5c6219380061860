/* tt_mem.h — the memory budget of a run, checked before anything large is allocated.
 *
 * A plan lists the run's memory by part (master weights, gradient slots, optimizer state, each tower's weights,
 * gradients and activations, staging, the training set on a device with --data-on device, the run's records) and by place (host RAM, or a device). tt_mem_check
 * compares every place's total with what is available — host: MemAvailable, or the cgroup's limit when that is
 * lower; a device: the backend's mem_info (cudaMemGetInfo); a backend without mem_info (the CPU backend) keeps its
 * "device" memory in host RAM, so those parts count as host — and refuses an over-budget run with one line giving
 * the figure, its largest part and what drives that part.
 * Not for: allocating (the owners allocate; tt_trainer_plan lists exactly what tower_alloc allocates). */
#ifndef TT_MEM_H
#define TT_MEM_H

#include "tt_dev.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TT_MEM_HOST (-1)
#define TT_MEM_MAX_PARTS 32

typedef enum {
    TT_MEM_BY_RUN,    /* grows with the data or the batch */
    TT_MEM_BY_PARAMS, /* grows with the model's parameter count */
    TT_MEM_BY_WIDTH,  /* grows with the model's layer widths times the shard's rows */
    TT_MEM_BY_DATA    /* the training set held on a device (--data-on device): grows with its samples */
} tt_mem_driver;

typedef struct tt_mem_part {
    const char *name; /* "activations" */
    int device;       /* TT_MEM_HOST or a device ordinal */
    double bytes;
    tt_mem_driver driver;
} tt_mem_part;

typedef struct tt_mem_plan {
    tt_mem_part part[TT_MEM_MAX_PARTS];
    int n;
    const char *model;   /* the model file (NULL: built in), named when the model drives the largest part */
    size_t n_params;
    size_t towers, rows; /* for the hint on activations */
    size_t samples, sample_bytes; /* --data-on device: the training set's samples and their bytes, for its hint */
} tt_mem_plan;

/* Adds bytes to the part (name, device), creating it if needed. */
void tt_mem_add(tt_mem_plan *p, const char *name, int device, double bytes, tt_mem_driver driver);

/* Total bytes the plan puts on a place. */
double tt_mem_total(const tt_mem_plan *p, int device);

/* Bytes of host memory this process can still take: min(MemAvailable, cgroup limit - usage, and the environment
 * variable TT_MEM_LIMIT when set — "as if only this many bytes were free", for tests and experiments); *source (may
 * be NULL) names where the figure came from. Returns -1 when nothing can be read (the check is then skipped). */
double tt_mem_host_available(const char **source);

/* "41.2 GB", "3.1 MB": bytes for a message. */
void tt_mem_human(double bytes, char *out, size_t len);

/* TT_OK, or TT_ERR_NOMEM with one line: "the run needs 41.2 GB of host memory but 22.9 GB is available
 * (MemAvailable); largest part: activations 39.1 GB (…)". */
tt_status tt_mem_check(const tt_mem_plan *p, const tt_dev_ops *ops, tt_error *err);

#ifdef __cplusplus
}
#endif
#endif
