/* tt_trainer.h — the tower step: master variables and optimizer on the host, one persistent pthread per tower.
 *
 * One synchronous step over a global batch of B samples with N towers:
 *   1. the batch is split into N contiguous shards (sizes differ by at most 1);
 *   2. each tower pulls the master weights into its device memory (one copy), copies its shard's inputs in (with
 *      --data-on device: its rows' indices, the rows and labels gathered from the training set held on the device),
 *      and runs forward and backward with the loss gradient scaled by 1/B;
 *   3. the gradients are summed in fixed tower order, where the reduction placement says:
 *        cpu        each tower pushes its gradient into its own host slot; the host sums the slots;
 *        device     tower 0 gathers the others' gradients into its device memory, sums them there and pushes the
 *                   sum (TF's ReductionToOneDevice, MXNet's kvstore 'device');
 *        allreduce  tower t gathers slice t of every tower's gradient, sums it and pushes that slice
 *                   (reduce-scatter, then gather to the host): the work is spread instead of piled on one place;
 *   4. the host applies the optimizer to the master weights, split across the host's cores.
 * Because every tower scales by the global 1/B, the sum is the gradient of the mean loss over the global batch:
 * N towers give the same weights as 1 tower, up to float rounding; and because every placement adds in the same
 * tower order, all placements give bit-identical weights.
 * Not for: epochs, shuffling or printing (train.c). */
#ifndef TT_TRAINER_H
#define TT_TRAINER_H

#include "tt_data.h"
#include "tt_dev.h"
#include "tt_mem.h"
#include "tt_model.h"
#include "tt_node.h"
#include "tt_optim.h"
#include "tt_pool.h"

#include <stdatomic.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Where the gradients are summed: an index into the placement table (src/step/placement.c), where each placement
 * is a set of phase functions. nccl: every tower's gradient is summed by NCCL into tower 0's device (ncclReduce),
 * which pushes the sum; one GPU per tower. */
typedef enum { TT_REDUCE_CPU, TT_REDUCE_DEVICE, TT_REDUCE_ALLREDUCE, TT_REDUCE_NCCL, TT_REDUCE_COUNT } tt_reduce;

/* A placement as the rest of the program sees it: the public part of its row in the trainer's table. The command
 * line, the probe, the what-if, bench and compare loop over these rows (arrays indexed by tt_reduce) and never name
 * a placement, so adding one is an enum value here and a row in src/step/placement.c. */
typedef struct tt_reduce_info {
    const char *name; /* --reduce's word */
    const char *help; /* what it does, for --help: one phrase */
    int host_sum;     /* the towers push their gradients into host slots and the host slices sum them: no reduce
                       * phase of its own, and no barrier R */
    int tower_order;  /* it adds the towers' gradients in tower order: weights bit-identical to every other such
                       * placement's (compare runs these) */
} tt_reduce_info;

const tt_reduce_info *tt_reduce_about(tt_reduce r); /* NULL for a value that is no placement */
int tt_reduce_parse(const char *name, tt_reduce *r); /* -1 for an unknown name */
const char *tt_reduce_name(tt_reduce r);

/* The placements' names joined for a message or help text: sep between two names, last before the last one ("cpu,
 * device, allreduce or nccl"); tower_order: only those that add in tower order. Returns buf (cut short to len). */
const char *tt_reduce_list(char *buf, size_t len, const char *sep, const char *last, int tower_order);

/* Where the optimizer runs (--update): the master weights and the optimizer's state on the host (the tower design:
 * every step the towers pull the weights and the host updates them), on tower 0's device (the summed gradient stays
 * there, tower 0 updates, the other towers pull from it: TF's ReductionToOneDevice with variables on GPU 0), or on
 * every tower's device (each keeps its own copy and state, the gradient is all-reduced and every tower applies the
 * same update: MirroredStrategy, DDP). Every one gives the same bits (the same sums in the same order, the same
 * tt_update_elem), except where a placement adds in its own order (nccl). */
typedef enum { TT_UPDATE_HOST, TT_UPDATE_DEVICE, TT_UPDATE_REPLICATED, TT_UPDATE_COUNT } tt_update;
/* --graphs: "off", "on" (the values of tt_trainer_config.graphs), NULL after the last. */
extern const char *const tt_graphs_names[];
/* --epilogues: "kernels", "lt" (the values of tt_trainer_config.epilogues), NULL after the last. */
extern const char *const tt_epilogues_names[];
/* --overlap: "off", "on" (the values of tt_trainer_config.overlap), NULL after the last. */
extern const char *const tt_overlap_names[];
extern const char *const tt_bn_sync_names[]; /* --bn-sync: "off", "on" (tt_trainer_config.bn_sync 0, 1) */
extern const char *const tt_data_on_names[]; /* --data-on: "host", "device" (tt_trainer_config.data_on 0, 1) */
extern const char *const tt_update_names[TT_UPDATE_COUNT + 1]; /* indexed by the value, NULL after the last */
const char *tt_update_name(tt_update u);
/* What it does, for --help: one phrase; and the placements it runs with (bit 1u << tt_reduce). */
const char *tt_update_help(tt_update u);
unsigned tt_update_reduces(tt_update u);

/* --slow-tower T:MS[~J]: tower T's compute delayed MS milliseconds each step, or a delay drawn uniformly from
 * [MS, MS + J) each step from the run's seed (a hash of the seed, the tower and the trainer's step count: the same
 * schedule every run started alike; a resumed run's count starts again). A straggler on purpose: its barrier shows
 * as the others' wait. Sorted by tower. */
typedef struct tt_slow_tower {
    size_t tower;
    double ms, jitter_ms;
} tt_slow_tower;
#define TT_MAX_SLOW 16
/* The delay of tower t at step `step` of a run seeded `seed`, in seconds (0 for a tower not in the list). */
double tt_slow_delay(const tt_slow_tower *slow, size_t n_slow, uint64_t seed, size_t t, uint64_t step);

/* --sync: when a tower's gradient reaches the master variables (docs/sync.md). One table in src/step/sync.c: the
 * command line, bench and the log read it.
 *   bsp        every step waits for every tower; the host sums the towers' gradients and updates once (the seeds'
 *              design: N towers = 1 tower up to rounding);
 *   ssp:S      stale-synchronous (Ho et al. 2013): each tower takes the next shard, pulls the newest weights, and the
 *              host applies its gradient (its share of the global batch) alone as it arrives; a tower may run at most
 *              S shards ahead of the slowest;
 *   async      ssp without the bound (DistBelief's Downpour);
 *   weights:K  local SGD: every tower updates its own weights with its own optimizer state from its own shards (its
 *              shard's mean gradient), and every K steps the host averages the towers' weights. */
typedef enum { TT_SYNC_BSP, TT_SYNC_SSP, TT_SYNC_ASYNC, TT_SYNC_WEIGHTS, TT_SYNC_COUNT } tt_sync_kind;
typedef struct tt_sync {
    tt_sync_kind kind;
    size_t k;        /* ssp: S (>= 1); weights: K (>= 1); 0 otherwise */
    int round_robin; /* --sync-schedule round-robin (ssp, async): the towers take the shards, pull and apply in turn:
                      * a reproducible schedule for tests, every gradient N-1 applies stale */
} tt_sync;
typedef struct tt_sync_info {
    const char *name;  /* --sync's word */
    const char *arg;   /* its number after a colon ("S", "K"), or NULL for none */
    const char *help;  /* what it does, for --help: one phrase */
} tt_sync_info;
const tt_sync_info *tt_sync_about(tt_sync_kind k); /* NULL for a value that is no mode */
/* What a mode's row says of it (its capability bits, src/step/sync.c), for the tools that must not name a mode: one
 * summed gradient a step (bsp's step: a step's times are its own, the probe's phases predict it), and the towers
 * taking the run's shards one at a time (ssp, async: which tower runs which rows depends on the schedule). 0 for a
 * value that is no mode. */
int tt_sync_summed(tt_sync_kind k);
int tt_sync_takes_shards(tt_sync_kind k);
/* "bsp", "ssp:4", "async", "weights:16" into *out (round_robin untouched): TT_ERR_ARG with one line naming opt. */
tt_status tt_sync_parse(const char *opt, const char *v, tt_sync *out, tt_error *err);
const char *tt_sync_format(const tt_sync *s, char *buf, size_t len); /* "ssp:4"; returns buf */
/* --sync-schedule: "free", "round-robin" (the values of tt_sync.round_robin), NULL after the last. */
extern const char *const tt_sync_schedule_names[];

/* --loss-scale: the loss gradient (so every gradient) is multiplied by the scale on the towers, and the summed gradient
 * by 1/scale on the host before the optimizer. Dynamic, as PyTorch's GradScaler and Keras's LossScaleOptimizer: a
 * step whose pushed gradient holds an Inf or a NaN in 16 bits is skipped — no update, the optimizer's step count
 * unchanged — and the scale halved (TT_SCALE_BACKOFF); after TT_SCALE_GROWTH_STEPS finite steps in a row it doubles
 * (TT_SCALE_GROWTH). Fixed (dynamic 0): the scale stays, and a step that overflows halts the run as any non-finite
 * gradient does. scale 0: no loss scaling (a scale of 1). */
typedef struct tt_loss_scale {
    int dynamic;
    double scale;          /* the initial (dynamic) or fixed scale; 0: none */
    uint64_t growth_steps; /* dynamic: the finite steps in a row that double it (0: TT_SCALE_GROWTH_STEPS) */
} tt_loss_scale;
#define TT_SCALE_INIT 65536.0       /* dynamic's default initial scale, 2^16 (GradScaler's init_scale) */
#define TT_SCALE_GROWTH_STEPS 2000  /* GradScaler's growth_interval, Keras's dynamic_growth_steps */
#define TT_SCALE_GROWTH 2.0
#define TT_SCALE_BACKOFF 0.5

/* The loss scaler's state: what a checkpoint keeps, so a resumed run scales as the uninterrupted one. */
typedef struct tt_scaler_state {
    double scale;     /* the scale the next step uses (1: none) */
    uint64_t good;    /* finite steps in a row since the scale last changed */
    uint64_t skipped; /* steps skipped since init (or the checkpoint's count, restored) */
} tt_scaler_state;

typedef struct tt_trainer_config {
    const tt_dev_ops *ops; /* backend */
    int n_devices;         /* devices the towers use; tower t uses devices[t % n_devices] */
    const int *devices;    /* their ordinals (NULL: 0 .. n_devices-1) */
    size_t n_towers;       /* N */
    size_t batch;          /* B: global batch (the largest step this trainer will be given) */
    tt_optim_config optim;
    tt_reduce reduce;      /* where the gradients are summed */
    tt_update update;      /* where the optimizer runs */
    int epilogues;         /* --epilogues lt: the layers' passes ask for one GEMM + bias/relu call where the backend
                            * has one (tt_pass.lt_epilogues, tt_dev_ops.gemm_bias_act); 0 kernels: sgemm + kernels */
    int graphs;            /* --graphs on: a tower's steady-state step is captured once per shape and replayed with
                            * one launch (a backend with graphs: tt_dev_ops.capture_begin) */
    /* --overlap on: the gradient is cut into buckets of whole layers (about bucket_bytes each, 0: TT_BUCKET_BYTES;
     * at most TT_MAX_BUCKETS), each tower pushes a bucket as soon as its backward has produced it, and the host sums
     * and updates a bucket once every tower has pushed it, while the towers compute the layers below; a tower pulls
     * the next step's weights of a bucket as soon as it is updated. Bit-identical to off (the same blocks, the same
     * sums in the same order). --reduce cpu, --update host, one rank, no graphs. */
    int overlap;
    size_t bucket_bytes;
    int host_threads;      /* host crew for reduce + update; 0 = number of CPUs */
    uint64_t seed;         /* the run's seed: dropout masks are a hash of (seed, epoch, layer, sample, element) */
    tt_slow_tower slow[TT_MAX_SLOW]; /* --slow-tower: delayed towers (n_slow of them; not with graphs) */
    size_t n_slow;
    tt_sync sync;          /* --sync: bsp (zero) unless set */
    /* --bn-sync on: a batchnorm layer's statistics over the global batch, the towers exchanging their sums in the
     * middle of the forward and backward (tt_exchange) — N towers then compute what one tower would. bsp, one rank,
     * no graphs. Off: each tower's own rows (TF's towers, multi_gpu_model). */
    int bn_sync;
    /* --data-on device (1): train_set is uploaded once, at init, to every device the towers use (towers sharing a GPU
     * read one copy: it is read only), and a step copies in its rows' data-set indices only (4 bytes a row): the rows
     * and labels are gathered on the device (tt_dev_gather_rows), the indices are also dropout's ids. Steps on
     * train_set take that path, any other data set (validation, test: contiguous ranges) the host's. Host (0, the
     * default): the tower's thread gathers its rows and labels into pinned staging and copies them in. Both give the
     * same bits. */
    int data_on;
    const tt_dataset *train_set;
    /* --augment (tt_augment.h; all zero: none): a training step's images shifted and flipped on the towers' devices,
     * in the data phase after the rows land (tt_dev_augment), each by a draw from (seed, the epoch, its data-set
     * index): the sample's own whichever tower, shard or step takes it. Validation, test and prediction read the
     * images as they are. The model's input must be an image, H x W x C (tt_trainer_init refuses another). */
    tt_augment augment;
    const atomic_int *stop; /* may be NULL; non-zero at the end of a step halts the run there (tt_signal_flag) */
    /* the job's ranks (tt_node.h; NULL or one rank: this process alone). With K ranks the step's samples are split
     * over K x N towers, this rank's towers taking the shards of global towers rank*N .. rank*N+N-1, and the node's
     * sum is combined with the other ranks' (node_reduce) before the update. Every rank must step together. */
    tt_node *node;
    tt_node_reduce node_reduce;
    /* --precision (tt_math.h's TT_FMT_*): TT_FMT_FP32 (zero) is the FP32 step. BF16, FP16: mixed precision. The host
     * keeps the FP32 master weights and the optimizer's state and, once per step, converts the trainable weights to
     * the format as it updates them; the towers pull that copy (half the bytes), widen it, store every activation
     * and its gradient in the format, run their GEMMs on 16-bit operands with FP32 sums (tt_dev_gemm_format), keep
     * the loss, batchnorm's statistics and every column sum in FP32, and push the trainable gradient in the format
     * (push_fp32: in FP32, --push-precision fp32); the host widens the pushes and sums them in FP32 in tower order.
     * The non-trainable tail (moving statistics) travels in FP32. bsp, --reduce cpu, --update host, --overlap off,
     * one rank (compat.c). */
    int precision;
    int push_fp32;
    tt_loss_scale loss_scale; /* --precision bf16, fp16 only */
} tt_trainer_config;

/* Why a run of steps ended before its last step. */
typedef enum {
    TT_HALT_NONE,
    TT_HALT_NONFINITE, /* the step's loss or summed gradient held a NaN or an Inf: a non-finite loss applies no update,
                        * a non-finite gradient block is not applied (the finite blocks of that step are: the check
                        * is fused into the block-by-block sum + update, with no barrier between) — the master
                        * weights stay finite either way */
    TT_HALT_STOP,      /* cfg.stop was raised (on any rank): the step in flight finished and was applied */
    TT_HALT_NODE,      /* a cross-node collective failed (tt_trainer_node_error says which): the step was not applied */
    TT_HALT_SCALE,     /* --loss-scale dynamic: the scale fell below 1 (the step that took it there was skipped) */
    TT_HALT_RANGE      /* --precision bf16, fp16: the step's update took a master weight where the towers' 16-bit copy
                        * is Inf (fp16: |w| >= 65520): the step was applied, the run stops after it */
} tt_halt;

#define TT_MAX_BUCKETS 16             /* --overlap on: the most buckets a gradient is cut into */
#define TT_BUCKET_BYTES (4u << 20)    /* their default size: 4 MiB */

/* One tower's step in absolute clock times (tt_now seconds) and bytes: the ledger and the trace read these.
 * A phase that did not happen has equal start and end. The times come from events recorded on the tower's stream
 * between its phases (tt_dev_event_*), anchored to the clock at the first event: a GPU tower is timed without
 * waiting for its device at every phase. */
typedef struct tt_tower_ledger {
    double pull0, pull1;     /* master weights host -> device */
    double data1;            /* shard's rows gathered and copied in (from pull1); --data-on device: its indices
                              * copied in, the rows and labels gathered on the device */
    double compute1;         /* forward + loss + backward (from data1) */
    double push0, push1;     /* gradient (or its reduced slice) device -> host */
    double reduce0, reduce1; /* device-side reduction: peer copies + adds, or NCCL (device, allreduce, nccl) */
    double rpush0, rpush1;   /* the reduced gradient (or this tower's slice of it) device -> host, after reduce1 */
    double update0, update1; /* --update device, replicated: the optimizer on this tower's device (replicated +
                              * allreduce: the all-gather of the summed slices first); ssp, async: this shard's
                              * apply on the host; weights: the tower's own optimizer */
    double wait;             /* seconds spent at barriers waiting for other towers (ssp, async: for the bound, and
                              * for the master variables' lock or turn) */
    size_t tower;            /* the tower that ran it: bsp, weights: the entry's own index; ssp, async: the entry is
                              * shard t of the step, run by whichever tower took it */
    uint32_t staleness;      /* ssp, async: applies by other towers between this shard's pull and its own apply */
    /* --overlap on: each bucket's copy [bucket[k][0], bucket[k][1]] (from its layers' end, or the bucket before's
     * landing, to its own landing; the last one's ends the push), and the seconds of them inside [data1, compute1]:
     * on the CPU made by the tower's thread inside the compute's span, on a GPU beside it */
    double bucket[TT_MAX_BUCKETS][2];
    unsigned n_buckets;
    double push_hidden;
    size_t rows;
    uint64_t bytes_pull, bytes_data, bytes_push, bytes_push_sum, bytes_reduce, bytes_gather;
    uint64_t bytes_prepull;  /* --overlap on: the next step's weights pulled as their buckets were updated, */
    double ahead0, ahead1;   /* from the first one's issue to the last one's landing (a side stream beside the rest) */
} tt_tower_ledger;

/* Where one step's time went: a partition of the step's wall time. Tower phases are means over towers. */
typedef struct tt_step_times {
    double launch;  /* step start -> tower starts work */
    double pull, data, compute, push; /* --overlap on: push includes the buckets pushed during the backward */
    double wait;    /* a finished tower waiting for the slowest at the barrier after the tower phase */
    double towers;  /* wall: step start -> every tower done (launch+pull+data+compute+push+wait) */
    double reduce;  /* wall: the reduction (host sum for cpu; device gather+sum+push otherwise) */
    double combine; /* wall: the cross-node combine (K ranks: exchange + rank-order sum + gather; 0 for one rank) */
    double update;  /* wall: the optimizer on the host */
    double total;
    /* --overlap on: the pushes' seconds beside the backward (towers' mean; a GPU's copy engines: not in push, nor
     * in the partition; 0 on the CPU, whose copies are the tower's own time, in push), and the host's sum + update
     * in thread-seconds, split into what ran while a tower was still computing (hidden) and after (exposed: the
     * wall of which is reduce + update above) */
    double push_hidden, host_hidden, host_exposed;
    /* host-side timestamps of the reduction, the combine and the update (crew thread 0), for the trace */
    double reduce0, reduce1, combine0, combine1, update0, update1, step0, step1;
} tt_step_times;

typedef struct tt_step_result {
    size_t n;        /* samples in the step */
    double loss_sum; /* sum of per-sample losses (before the update) */
    size_t top1, top5;
    tt_step_times t;
    /* --overlap on: bucket k summed and updated by the host from bucket[k][0] (its first block begun) to
     * bucket[k][1] (its last block done), for the trace */
    double bucket[TT_MAX_BUCKETS][2];
    unsigned n_buckets;
    /* ssp, async: the step's shards' applies (one each) and their staleness: sum and largest. With them the step's
     * times are the means over its shards (which ran beside other steps' shards), and total is a shard's mean span
     * from its pull to its apply: the epoch's wall clock is the throughput */
    size_t applied;
    double staleness_sum;
    uint32_t staleness_max;
    /* weights: the host averaged the towers' weights after this step (averaged = 1), and the towers' mean distance
     * from that average before it, ||w_t - w_mean|| (L2 over every parameter) */
    int averaged;
    double divergence;
    /* --precision bf16, fp16: the loss scale the step used (1: none), whether it was skipped (its gradient overflowed
     * in 16 bits: --loss-scale dynamic), and of its pushed trainable gradient elements (grad_elems, over the towers)
     * those that were zero in 16 bits but not in FP32 (grad_under) */
    double loss_scale;
    int skipped;
    uint64_t grad_under, grad_elems;
    float lr; /* the rate of the step's update (the schedule's; ssp, async: its last gradient's; skipped: the last) */
} tt_step_result;

typedef struct tt_eval_result {
    size_t n;
    double loss; /* mean */
    double accuracy, top5;
} tt_eval_result;

/* The phases of a step, as tt_trainer_time_phases times them. */
enum { TT_PHASE_PULL, TT_PHASE_DATA, TT_PHASE_COMPUTE, TT_PHASE_PUSH, TT_PHASE_REDUCE, TT_PHASE_HOST, TT_PHASE_COUNT };

/* Each phase of a step timed alone (seconds, medians over reps), by the step's own code. */
typedef struct tt_phase_times {
    double pull, data, compute, push; /* tower phases: the mean tower's time, all towers at once */
    double straggle;                  /* the slowest tower's pull..push beyond the mean tower's */
    double reduce;                    /* the placement's reduce phase (wall; 0 for cpu) */
    double host;                      /* the host slice on the whole crew (wall): sum + update */
    double host_sum, host_update;     /* its split, in crew thread 0's proportions */
    size_t reps;
} tt_phase_times;

/* The trainer: opaque (its fields are src/step/'s, step.h). */
typedef struct tt_trainer tt_trainer;

/* A trainer for model m (which must outlive it) under cfg, its master weights h_init_params (P floats, copied), its
 * towers' buffers allocated and their threads started: *out on success; on failure *out is NULL, nothing is left
 * allocated, and err has one line. */
tt_status tt_trainer_init(tt_trainer **out, const tt_model *m, const tt_trainer_config *cfg,
                          const float *h_init_params, tt_error *err);

/* What tower t's thread is doing at this moment, for a live view (--progress towers): the phase it last entered,
 * one relaxed store each, read without a lock. On a GPU a tower's thread issues its phases and then waits for its
 * device (DEVICE); HOST is the tower's thread helping the host crew (the sum and the optimizer, or --overlap's
 * buckets), REDUCE a device-side reduction, WAIT a barrier. */
typedef enum {
    TT_LIVE_IDLE, TT_LIVE_PULL, TT_LIVE_DATA, TT_LIVE_COMPUTE, TT_LIVE_PUSH, TT_LIVE_DEVICE, TT_LIVE_WAIT,
    TT_LIVE_REDUCE, TT_LIVE_HOST, TT_LIVE_PHASES
} tt_live_phase;
int tt_trainer_live_phase(const tt_trainer *tr, size_t t);
void tt_trainer_free(tt_trainer *tr); /* and every buffer and thread it holds; NULL: nothing */

/* --overlap on: the gradient's buckets in the order they are pushed, bucket k = [edge[k+1], edge[k]) (edge: room for
 * TT_MAX_BUCKETS + 1); their count (0: --overlap off). */
size_t tt_trainer_buckets(const tt_trainer *tr, size_t *edge);
/* The buckets --overlap on cuts m's gradient into for buckets of about `bytes` (0: TT_BUCKET_BYTES), without a
 * trainer (the what-if's). */
size_t tt_trainer_bucket_edges(const tt_model *m, size_t bytes, size_t *edge);

/* The master weights, P floats in the layout table's order: a copy out, or replaced — between runs of steps, never
 * while steps are in flight. The towers pull the new weights at the next step. */
void tt_trainer_get_params(const tt_trainer *tr, float *h_out);
void tt_trainer_set_params(tt_trainer *tr, const float *h_params);
const float *tt_trainer_params(const tt_trainer *tr); /* the master weights themselves, read only (a checkpoint) */
const tt_model *tt_trainer_model(const tt_trainer *tr); /* the model it was made for */
/* The optimizer and its state (tt_optim_slots, t, u_product): read it, or overwrite it to resume — between runs of
 * steps. */
tt_optim *tt_trainer_optim(tt_trainer *tr);

/* Starts ceil(n / B) synchronous steps over samples idx[0..n) of ds, batch after batch (the last may be
 * partial), and returns at once; results[k] describes step k once tt_trainer_wait has reported it done, and
 * ledger[k * N + t] (if ledger is not NULL) tower t's part of it. */
tt_status tt_trainer_start_steps(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n,
                                 tt_step_result *results, size_t n_results, tt_tower_ledger *ledger, tt_error *err);

/* Waits up to timeout_s (< 0: until done) for the started steps; returns 1 when the run of steps is over — all
 * done, or halted (tt_trainer_halted). *steps_done (may be NULL) says how many steps have finished so far; a
 * halted run's last finished step is the one that halted it. */
int tt_trainer_wait(tt_trainer *tr, double timeout_s, size_t *steps_done);

/* The epoch the next steps belong to (dropout's masks change every epoch); 0 until set. */
void tt_trainer_set_epoch(tt_trainer *tr, uint64_t epoch);
/* The training's steps before the next run of steps (a resumed run: where its checkpoint left off; counted from 0
 * at init otherwise): --sync weights:K averages after every K-th step of this count, so a resumed run averages
 * where the uninterrupted one did. */
void tt_trainer_set_steps(tt_trainer *tr, uint64_t steps);

/* Asks the run of steps in flight to halt at the end of its current step (TT_HALT_STOP), from any thread. */
void tt_trainer_request_stop(tt_trainer *tr);

/* After tt_trainer_wait returned 1: TT_HALT_NONE if every step ran, else why the run stopped early (NONE for a NULL
 * trainer: none was made). */
tt_halt tt_trainer_halted(const tt_trainer *tr);

/* The loss scaler's state (--loss-scale; scale 1, nothing skipped without one), and a checkpoint's put back. */
tt_scaler_state tt_trainer_scaler(const tt_trainer *tr);
void tt_trainer_set_scaler(tt_trainer *tr, const tt_scaler_state *st);

/* After TT_HALT_NODE: the failed collective's status and one line (err). */
tt_status tt_trainer_node_error(const tt_trainer *tr, tt_error *err);

/* ps across K ranks: the optimizer's vectors cover this rank's slice only; its first parameter's position in the
 * buffer (0 otherwise: they cover it all). */
size_t tt_trainer_optim_offset(const tt_trainer *tr);

/* After TT_HALT_NONFINITE: for each tower t, loss_bad[t] = its loss in the failing step was not finite, grad_bad[t]
 * = its own gradient held a NaN or an Inf (-1: could not be read back). Reads every tower's gradient: for the
 * failure path only. */
void tt_trainer_nonfinite_towers(tt_trainer *tr, int *loss_bad, int *grad_bad);

/* Adds what tt_trainer_init would allocate for this model and configuration to plan, part by part (the towers'
 * buffers exactly as allocated, the optimizer's state), before anything is allocated. tt_trainer_init does not
 * check the budget itself: its caller adds its own parts and calls tt_mem_check once (tt_run does). */
tt_status tt_trainer_plan(const tt_model *m, const tt_trainer_config *cfg, tt_mem_plan *plan, tt_error *err);

/* One synchronous step on samples idx[0..n) of ds (1 <= n <= cfg.batch). TT_ERR_NUMERIC if its loss or gradient
 * was not finite (then no non-finite value reached the weights; see TT_HALT_NONFINITE). */
tt_status tt_trainer_step(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n, tt_step_result *res,
                          tt_error *err);

/* Loss, accuracy and top-5 of the master weights over all of ds, the samples split across the towers. */
tt_status tt_trainer_evaluate(tt_trainer *tr, const tt_dataset *ds, tt_eval_result *res, tt_error *err);
/* The same, and every sample's logits into h_logits (ds->n, classes), in data-set order (eval, predict); a raised
 * cfg.stop ends it between chunks with TT_ERR_STOPPED. */
tt_status tt_trainer_predict(tt_trainer *tr, const tt_dataset *ds, float *h_logits, tt_eval_result *res,
                             tt_error *err);
/* tt_trainer_evaluate that a raised cfg.stop ends between chunks with TT_ERR_STOPPED (this rank's flag: a job's
 * ranks then decide together, and the partial figures are discarded): train's final test evaluation. Validation
 * after an epoch runs to its end instead (the run stops after it, with that epoch's checkpoint). */
tt_status tt_trainer_evaluate_stoppable(tt_trainer *tr, const tt_dataset *ds, tt_eval_result *res, tt_error *err);

/* The host reduces and updates in blocks of this many floats (8 KiB): a block stays in L1 between the sum and the
 * optimizer, so the summed gradient never travels through memory. */
#define TT_REDUCE_BLOCK 2048

/* out[k] = slot_0[offset+k] + slot_1[offset+k] + ... in slot order (tt_add), k < len: the host's reduction.
 * Returns 1 if every sum is finite, 0 if any is NaN or Inf (checked in the last addition's own loop). */
int tt_sum_slots(float *out, float *const *slots, size_t n_slots, size_t offset, size_t len);

/* 1 if x[0..n) holds no NaN and no Inf. */
int tt_all_finite(const float *x, size_t n);

/* Whether placement cfg->reduce can run with this configuration (nccl: a backend with NCCL, one GPU per tower):
 * TT_ERR_ARG with one line saying why not. tt_trainer_init and tt_trainer_plan check it too. */
tt_status tt_trainer_check(const tt_trainer_config *cfg, tt_error *err);

/* The towers' distinct devices: the first min(N, n_devices) of cfg's list, into ords (TT_MAX_DEVICES); their count. */
int tt_trainer_link_devices(const tt_trainer_config *cfg, int *ords);

/* The peer matrix of the towers' distinct devices: returns their count n, *ords their ordinals, *link n x n
 * TT_LINK_* entries (tt_backend_links). */
int tt_trainer_links(const tt_trainer *tr, const int **ords, const int **link);

/* The probe's view of the step: runs reps + 1 steps (the first a warm-up) of samples idx[0..n) of ds (N <= n <=
 * cfg.batch), each phase started together on every thread that takes part and waited for before the next, and
 * times each phase alone. The weights are updated as in training: use a trainer of its own. */
tt_status tt_trainer_time_phases(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n, size_t reps,
                                 tt_phase_times *out, tt_error *err);

/* Device allocations made by all towers so far (the step loop must add none after the first step); 0 for NULL. */
uint64_t tt_trainer_device_allocs(const tt_trainer *tr);

/* The optimizer's base rate in force (tt_optim_config.lr: the rate before a schedule): --reduce-lr-on-plateau sets it
 * between runs of steps, for the host's optimizer and every tower's own (--sync weights:K, --update replicated); the
 * updates read it from tt_optim_update_args at every step. */
void tt_trainer_set_lr(tt_trainer *tr, float lr);
float tt_trainer_lr(const tt_trainer *tr);

#ifdef __cplusplus
}
#endif
#endif
