/* tt_probe.h — measuring what the step's cost model needs on this machine and backend, and predicting the step
 * time of each reduction placement before any training.
 *
 * The step's phases are timed by the trainer itself (tt_trainer_time_phases), one placement at a time, on synthetic
 * samples: the same code as a training step, each phase alone. Besides, the links that explain them are measured
 * through the seam (copy bandwidths, host memcpy, the GEMM floor, barriers) with as many threads as the step uses,
 * started together; a rep's time is its wall time, first start to last end, and a figure is the median over reps.
 * The prediction is the sum of the step's phases:
 *   launch ~ 0 | pull | data | compute | push | straggle + barrier | reduce (placement) [+ barrier] | update.
 * Not for: training (tt_trainer.h). */
#ifndef TT_PROBE_H
#define TT_PROBE_H

#include <stdio.h>

#include "tt_model.h"
#include "tt_optim.h"
#include "tt_trainer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tt_probe_config {
    const tt_model *model;
    const tt_dev_ops *ops;
    int n_devices;     /* devices the towers use; tower t uses devices[t % n_devices] */
    const int *devices; /* their ordinals (NULL: 0 .. n_devices-1) */
    size_t towers;     /* N */
    size_t batch;      /* B: global */
    tt_optim_config optim;
    int host_threads;  /* 0 = CPUs (as the trainer) */
    size_t reps;       /* reps per measurement (median) */
    size_t bucket_bytes; /* tt_probe_steps' --overlap on: its buckets (0: TT_BUCKET_BYTES) */
    tt_slow_tower slow[TT_MAX_SLOW]; /* --slow-tower: added to the prediction, and slept in the measured steps */
    size_t n_slow;
    int data_on;       /* --data-on device: the synthetic samples held on the devices, the data phase gathering there */
    int precision;     /* --precision (TT_FMT_*): the towers' formats; a placement the 16-bit step does not run with is
                        * not measured (can[r] 0, and its refusal says why) */
    int push_fp32;     /* --push-precision fp32 */
} tt_probe_config;

typedef struct tt_probe {
    int crew;           /* T: host threads of the step */
    int waves;          /* ceil(N / min(N, CPUs)): towers run in waves when they outnumber the cores */
    size_t rows;        /* largest shard: ceil(B / N) */
    /* bandwidths in GB/s: bytes copied (or, for the sum, bytes of slots summed) per second, N copies at once —
     * the convention of CUDA's bandwidthTest and of memcpy benchmarks */
    double h2d_pinned, h2d_pageable, d2h_pinned, d2h_pageable, peer;
    double host_memcpy; /* T threads copying N slots of P floats */
    double host_sum;    /* the step's host sum of N slots of P floats (from reduce[TT_REDUCE_CPU]) */
    double gemm_gflops; /* the step's GEMMs, N threads at once */
    double gemm_step;   /* seconds: the step's GEMMs alone (the GEMM floor of a step) */
    /* the phases of a step, seconds, timed by the trainer's own code with all N towers at once (the mean tower's
     * time), so towers outnumbering cores are in them */
    double pull, data, compute, push_grad, push_stats, barrier;
    double straggle;    /* the slowest tower's pull..push beyond the mean tower's */
    /* --slow-tower: the expected longest delay of a step over the towers (E[max_t delay_t]: for constant delays the
     * largest, for drawn ones more than the largest mean), and the mean over all towers, seconds */
    double slow_max, slow_mean;
    double wake;        /* a sleeping thread's wake-up latency */
    /* each placement's reduce phase: for a host-sum placement (tt_reduce_info) the host crew's sum of the slots,
     * for the others their tower-side reduce */
    double reduce[TT_REDUCE_COUNT];
    double update;
    double apply1;      /* the optimizer over the whole buffer on one thread (--sync ssp, async: a tower's apply) */
    double dev_update;  /* and on one tower's device (--sync weights: each tower's own update) */
    int can[TT_REDUCE_COUNT]; /* the placement ran here (nccl needs CUDA + NCCL, one GPU per tower) */
    /* the peer matrix of the towers' devices (tt_backend_links) */
    int n_links, link_devs[TT_MAX_DEVICES], links[TT_MAX_DEVICES * TT_MAX_DEVICES];
} tt_probe;

tt_status tt_probe_run(const tt_probe_config *c, tt_probe *p, tt_error *err);

/* A design of the step: where the gradients are summed, where the optimizer runs, graphs, overlap. */
typedef struct tt_probe_design {
    tt_reduce reduce;
    tt_update update;
    int graphs, overlap;
} tt_probe_design;

/* Whole steps of design d, run by the trainer on the probe's synthetic samples: what the phase timing cannot take
 * apart (the optimizer on the devices, a step replayed as a graph, the push overlapped with the backward) measured
 * as it trains. Two warm-up steps (a graph is captured at the second), then c->reps steps; *t gets the median of
 * each part of the split over them. *ran = 0 and nothing measured where the design cannot run here. */
tt_status tt_probe_steps(const tt_probe_config *c, const tt_probe_design *d, tt_step_times *t, int *ran,
                         tt_error *err);

/* What `probe --json` measures besides tt_probe_run (docs/whatif.md, "The probe's JSON"), each thing alone on tower
 * 0's device through the seam: the cost model's per-kernel and per-GEMM figures. */
typedef struct tt_probe_kernels {
    char device[128];   /* the device's name (tt_dev_device_name) */
    size_t chain;       /* the launch chain's length */
    double launch;      /* seconds per 1-float fill, `chain` of them back to back on the stream, then one wait */
    double graph_node;  /* the same chain captured as one graph and replayed: seconds per node (NaN: no graphs) */
    double copy;        /* a 4-byte host->device copy from pinned memory and its wait: a copy's fixed cost */
    size_t n_gemms;     /* the step's distinct GEMM shapes for a shard, as this backend cuts them (calls: per step) */
    tt_gemm_shape gemms[TT_MAX_LAYERS * TT_MAX_LAYER_GEMMS];
    double gemm_seconds[TT_MAX_LAYERS * TT_MAX_LAYER_GEMMS]; /* each alone, back to back: seconds per call */
    size_t others;      /* the compute phase's other launches (all but its GEMMs, tt_assume_kernels) */
    double others_s;    /* the compute phase timed by the trainer with its GEMMs skipped (the rest as issued) */
} tt_probe_kernels;

/* Measures *k for c's model at c's shard (median of c->reps each; a GEMM's rep is as many calls as fill about a
 * millisecond, one at least). TT_ERR_STOPPED on a signal, TT_ERR_NOMEM where the operands do not fit. */
tt_status tt_probe_kernels_run(const tt_probe_config *c, tt_probe_kernels *k, tt_error *err);

/* Only the GEMM floor (what bench re-measures before every epoch): seconds per step. */
tt_status tt_probe_gemm_floor(const tt_probe_config *c, double *step_seconds, tt_error *err);

/* Phase by phase, the median of n probes (1 <= n <= 8) taken at different times: one noisy moment on a shared
 * machine then moves no phase. Bandwidths and rates are taken from the first probe. */
void tt_probe_median(const tt_probe *probes, int n, tt_probe *out);

/* The predicted split of one step under placement r (total = sum of the parts). */
void tt_probe_predict(const tt_probe *p, tt_reduce r, tt_step_times *out);

/* The predicted time of one global batch under --sync mode sy (--reduce cpu, --update host), from the probe's phases
 * and c's --slow-tower list (docs/sync.md, "Predicted"): bsp as tt_probe_predict; ssp and async from each tower's
 * rate of shards (its phases, its own apply on one thread, its expected delay), async capped by the master variables'
 * lock, ssp between async's pace and bsp's barrier by 1 / (S + 1) of the barrier's expected excess; weights:K from
 * the expected longest of the towers' K-step sums, plus one average. out: the total, and the parts where the model
 * has them (the others 0). */
void tt_probe_predict_sync(const tt_probe *p, const tt_probe_config *c, const tt_sync *sy, tt_step_times *out);

void tt_probe_print(FILE *f, const tt_probe *p, const tt_probe_config *c);

/* ---- the cross-node combine (docs/scaleout.md) ------------------------------------------------------------------ */

/* The link between the ranks as the cost model sees it: alpha (latency) and beta (bandwidth), and the host's rate
 * of the rank-order sum. Measured by tt_probe_net over a real job, or assumed (--link) for a cluster. */
typedef struct tt_net {
    int ranks;        /* K of the job it was measured on (1: assumed or not measured) */
    double latency;   /* alpha: seconds one way for a small message (rank 0 <-> rank 1) */
    double bandwidth; /* beta: GB/s of one message of a gradient slice's size, one way */
    double sum_rate;  /* GB/s of the host's addition of two float vectors (bytes of one read per second) */
    double combine;   /* measured: the step's combine collectives at the gradient's size, seconds (0: none) */
    double small;     /* measured: the step's two small collectives (statistics, halt flags), seconds */
} tt_net;

/* Measures it on the job nd (collective: every rank calls it) for a P-float gradient: ping-pong of rank 0 and 1,
 * and the combine's own collectives (tt_node_reduce_scatter + tt_node_allgather_slices + the small ones), reps
 * times, medians. On one rank only the sum rate is measured. */
tt_status tt_probe_net(tt_node *nd, size_t P, size_t reps, tt_net *net, tt_error *err);

/* The model of the combine for K ranks and P floats (seconds): the reduce-scatter and the gather each send K - 1
 * slices of ceil(P/K) floats (alpha + bytes/beta each), the rank-order sum adds K - 1 slices, and the statistics and
 * halt flags cost 2 ceil(log2 K) alpha. allreduce and ps move the same bytes: they differ in the update. */
double tt_net_combine(const tt_net *net, int K, size_t P);

/* The predicted step of K ranks x N towers (p: one rank's probe, its share of the batch), node-reduce mode m:
 * tower phases and the node sum from p, the combine (measured when K is the job's own, else the model), and the
 * update of all P floats (allreduce) or of 1/K of them (ps). */
void tt_probe_predict_node(const tt_probe *p, const tt_net *net, int K, size_t P, tt_node_reduce m, tt_reduce r,
                           tt_step_times *out);

#ifdef __cplusplus
}
#endif
#endif
