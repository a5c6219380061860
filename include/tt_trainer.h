/* tt_trainer.h — the tower step: master variables and optimizer on the host, one persistent pthread per tower.
 *
 * One synchronous step over a global batch of B samples with N towers:
 *   1. the host splits the batch into N contiguous shards (sizes differ by at most 1) and wakes the towers;
 *   2. each tower pulls the master weights into its device memory (one copy), copies its shard's inputs in,
 *      runs forward and backward with the loss gradient scaled by 1/B, and pushes its gradient (one copy) into
 *      its own host slot;
 *   3. the host sums the slots in fixed tower order (so results do not depend on timing) and applies the
 *      optimizer to the master weights, both split across the host's cores.
 * Because every tower scales by the global 1/B, the sum is the gradient of the mean loss over the global batch:
 * N towers give the same weights as 1 tower, up to float rounding.
 * Not for: epochs, shuffling or printing (train.c). */
#ifndef TT_TRAINER_H
#define TT_TRAINER_H

#include "tt_data.h"
#include "tt_dev.h"
#include "tt_model.h"
#include "tt_optim.h"
#include "tt_pool.h"

#include <stdatomic.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tt_trainer_config {
    const tt_dev_ops *ops; /* backend */
    int n_devices;         /* devices the backend sees; tower t uses device t % n_devices */
    size_t n_towers;       /* N */
    size_t batch;          /* B: global batch (the largest step this trainer will be given) */
    tt_optim_config optim;
    int host_threads;      /* host crew for reduce + update; 0 = number of CPUs */
} tt_trainer_config;

/* Where one tower's step time went (seconds). */
typedef struct tt_tower_times {
    double pull;    /* master weights host -> device */
    double data;    /* gather the shard's rows + copy them host -> device */
    double compute; /* forward + loss + backward */
    double push;    /* gradient (and per-row stats) device -> host slot */
} tt_tower_times;

/* Where one step's time went, seen from the host. Tower phases are means over towers. */
typedef struct tt_step_times {
    tt_tower_times tower; /* mean over towers */
    double launch;        /* mean time from the start of the step to a tower starting work */
    double wait;          /* mean time a finished tower sat at the barrier waiting for the slowest one */
    double towers;        /* wall time from the start of the step to the last push (barrier A) */
    double reduce;        /* summing the slots */
    double update;        /* optimizer */
    double total;
} tt_step_times;

typedef struct tt_step_result {
    size_t n;        /* samples in the step */
    double loss_sum; /* sum of per-sample losses (before the update) */
    size_t top1, top5;
    tt_step_times t;
} tt_step_result;

typedef struct tt_eval_result {
    size_t n;
    double loss; /* mean */
    double accuracy, top5;
} tt_eval_result;

typedef struct tt_tower tt_tower;

typedef struct tt_trainer {
    tt_trainer_config cfg;
    const tt_model *model;
    size_t shard_max; /* ceil(B / N): rows a tower must hold */
    float *h_params;  /* master variables (P) */
    float **h_slots;  /* N gradient slots (P each), slot t written only by tower t */
    tt_optim opt;
    tt_tower *towers;
    tt_pool crew;     /* max(N, host threads) threads; thread t < N is tower t */
    tt_barrier bar_push, bar_update;
    int crew_up, bars_up;
    int job;          /* what the crew does when woken */
    /* the current job */
    const tt_dataset *ds;
    const uint32_t *idx;     /* steps: sample indices, batch after batch */
    size_t n;                /* steps: samples in the run; eval: data set size */
    tt_step_result *results; /* steps: one per step */
    size_t cur_step;
    atomic_size_t steps_done;
    double t_step;           /* clock at the start of the current step */
    double t_reduce, t_update; /* this step's host slice 0 */
    uint64_t steps;          /* steps applied since init */
} tt_trainer;

tt_status tt_trainer_init(tt_trainer *tr, const tt_model *m, const tt_trainer_config *cfg,
                          const float *h_init_params, tt_error *err);
void tt_trainer_free(tt_trainer *tr); /* accepts a half-built trainer */

/* Starts ceil(n / B) synchronous steps over samples idx[0..n) of ds, batch after batch (the last may be
 * partial), and returns at once; results[k] describes step k once tt_trainer_wait has reported it done. */
tt_status tt_trainer_start_steps(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n,
                                 tt_step_result *results, size_t n_results, tt_error *err);

/* Waits up to timeout_s (< 0: until done) for the started steps; returns 1 when all are done. *steps_done (may
 * be NULL) says how many steps have finished so far. */
int tt_trainer_wait(tt_trainer *tr, double timeout_s, size_t *steps_done);

/* One synchronous step on samples idx[0..n) of ds (1 <= n <= cfg.batch). */
tt_status tt_trainer_step(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n, tt_step_result *res,
                          tt_error *err);

/* Loss, accuracy and top-5 of the master weights over all of ds, the samples split across the towers. */
tt_status tt_trainer_evaluate(tt_trainer *tr, const tt_dataset *ds, tt_eval_result *res, tt_error *err);

/* Device allocations made by all towers so far (the step loop must add none after the first step). */
uint64_t tt_trainer_device_allocs(const tt_trainer *tr);

#ifdef __cplusplus
}
#endif
#endif
