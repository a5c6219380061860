/* step.h — the step's internals, private to src/step/ (the public API: include/tt_trainer.h).
 *
 * Threads. One crew of T = max(N towers, H host threads) persistent pthreads. Thread t < N is tower t: it binds
 * its device in the crew's first job (towers_alloc), allocates everything it will ever need there, and releases it
 * in the last (towers_release). A run of steps (the --sync mode's run, here bsp_run) needs no help from the caller:
 *
 *     towers:   pull -> data -> forward/backward -> push (stats [+ own gradient to own slot: cpu])
 *               (threads >= N just arrive)
 *     barrier A (its last thread aggregates the tower phase and starts the optimizer's step)
 *     towers:   the placement's reduce: device, allreduce, nccl                      (not for cpu)
 *     barrier R (placements with a reduce only)
 *     everyone: one slice of the buffer: [sum the slots in tower order: cpu] + the optimizer
 *               (--update device: tower 0, replicated: every tower updates its own copy on its device instead,
 *               tower_update; the host's crew idles)
 *     barrier B (its last thread stamps the step's time)
 *
 * A placement (where the gradients are summed) is a row of the `placements` table: its name and help (all the rest of
 * the program knows of it, tt_reduce_about), the buffers it adds to a tower, the tower-side reduce phase it runs
 * between barriers A and R, and where the host slices read the summed gradient. Where the optimizer runs is the
 * smaller `update_rows` table beside it (--update: host, device, replicated, and the placements each runs with).
 * The step above is written once; tt_trainer_time_phases runs the same phase functions one at a time for the probe.
 *
 * A tower issues its whole step on its stream and waits once, at the end, where the host must read its statistics:
 * the pull is issued before the host gathers the shard's rows, so on a GPU the two overlap, and the ledger is
 * timed by events recorded between the phases, not by waiting for each.
 *
 * The slices are host work on host memory: the tower threads double as the host's cores once their device work
 * is done, as a CPU device's thread pool would in TensorFlow. The barriers spin briefly before sleeping when every
 * thread has a core, so a step costs no thread wake-ups; the caller is woken once per run of steps.
 * No allocation happens after INIT: buffers are sized for the largest shard (ceil(B/N) rows).
 *
 * The package, a file per part of the design, from the top down (a file calls only into the files below it):
 *   trainer.c       the public API: init, free, runs of steps, params, evaluation, the memory plan
 *   phase_timing.c  the probe's phases, timed one at a time by the step's own code
 *   compat.c        the compatibility table: what cannot run with what, and the refusal's words
 *   sync.c          --sync's table: each mode's row (its run, what it combines with)
 *   sync_bsp.c      bsp: the synchronous step with its barriers A, R and B
 *   sync_ssp.c      ssp:S and async: each gradient applied alone as it arrives
 *   sync_weights.c  weights:K: local SGD, the towers' weights averaged every K steps
 *   node_combine.c  across K ranks: the node sum, the cross-node combine, the update of a rank's part
 *   tower.c         a tower's buffers and the phases of its step: pull, data, compute, push; graphs; evaluation
 *   overlap.c       --overlap on: buckets pushed, summed and updated during the backward
 *   placement.c     --reduce's rows (buffers, the tower-side reduce) and --update's (the update on a device)
 *   host_clip.c     --clipnorm, --global-clipnorm: the summed gradient's norms before the update
 *   host_sum.c      the host's sum of the towers' slots + the optimizer, block by block across the crew
 *   bn_exchange.c   --bn-sync on: the batch statistics' exchange between the towers
 *   shards.c        a step's shards, a rank's slice, the shard schedule of the modes other than bsp
 *   crew.c          the crew of threads (a job: a body each runs once) and the barriers between phases */
#ifndef TT_STEP_H
#define TT_STEP_H

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

#include "tt_math.h"
#include "tt_mem.h"
#include "tt_trainer.h"

typedef struct tt_tower tt_tower;

_Static_assert(TT_REDUCE_BLOCK == TT_UPDATE_BLOCK, "the host's and a device's update check the same blocks");

/* Events a tower records on its stream: the step's phase boundaries, then the reduce phase's. */
enum { EV_START, EV_PULL, EV_DATA, EV_COMPUTE, EV_PUSH, EV_R_START, EV_R_SUM, EV_R_PUSH, EV_U_START, EV_U_END, EV_COUNT };

struct tt_tower {
    int id;
    tt_trainer *tr;
    atomic_int live;    /* what its thread is doing now (tt_live_phase), for a live view: relaxed, sampled */
    tt_dev dev;
    /* device memory */
    float *d_params;    /* (P) this tower's copy of the weights */
    float *d_grads;     /* (P) */
    float *d_act[TT_MAX_LAYERS + 1]; /* n_logits + 1 activations, (rows, width) each; d_act[0] is the input */
    float *d_delta[2];  /* (rows, max_width) ping-pong back-propagation buffers */
    float *d_ws;        /* the layers' scratch (im2col columns), tt_model_workspace floats */
    float *d_saved;     /* what layers keep from forward to backward (tt_model.n_saved floats) */
    void *d_masks;      /* --epilogues lt: the relu bit-masks of the training forward (tt_model_mask_bytes), or NULL */
    unsigned char lt_masked[TT_MAX_LAYERS]; /* and which layers' masks the backend wrote (tt_pass.lt_masked) */
    float *h_xchg;      /* --bn-sync on, pinned: this tower's part of an exchange, two of xchg_max (by parity) */
    float *h_xsum;      /* and the sum it reads back (xchg_max) */
    uint64_t xchg_seq;  /* exchanges made: the parity of the next one's buffer */
    tt_exchange xchg;   /* its exchange, handed to the layers */
    uint32_t *d_ids;    /* (rows) the data-set index of every row (dropout's masks) */
    float *d_dlogits;   /* (rows, C) */
    int32_t *d_labels;  /* (rows) */
    float *d_stats;     /* (rows, 2): loss, rank */
    uint8_t *d_x8;      /* (rows, D) raw bytes of a byte data set, scaled into d_act[0] on the device */
    float *d_aug;       /* --augment: (rows, H, W, C) the shard's images as they land, before their shifts and flips
                         * into d_act[0] */
    /* --precision bf16, fp16 (the trainable weights, n_trainable of them, in 16 bits): the pulled weights before
     * they are widened, the pushed gradient (not with --push-precision fp32), the push's counts (TT_NARROW_COUNTS)
     * and, pinned, their totals read back and the slot the 16-bit gradient lands in on the host */
    uint16_t *d_p16, *d_g16;
    uint32_t *d_counts, *h_counts;
    uint16_t *h_push16;
    /* --data-on device: the training set on this tower's device, (n, D) samples as stored and (n) labels. The first
     * tower on each device allocates and uploads it (tower t < n_devices); the towers after it on that device
     * (virtual towers) read the same copy: it is never written after the upload, so one copy per device serves
     * every stream there, and the memory plan counts it once per device */
    uint8_t *d_set_x;
    int32_t *d_set_y;
    float *d_recv;      /* device: tower 0, (P); allreduce: every tower, (S) — a peer's gradient (slice) */
    float *d_acc;       /* device, nccl: tower 0, (P) the sum; allreduce: (S) this tower's slice of the sum
                         * (--update replicated: every tower (P), the whole sum) */
    float *d_m, *d_v, *d_a; /* --update device (tower 0), replicated (every tower): the optimizer's state here */
    int32_t *d_bad, *h_bad; /* and the update's blocks that were not finite (TT_UPDATE_BLOCK each), read back */
    float *h_stage;         /* (P) pinned: the host's optimizer state on its way to and from the device */
    size_t slice_lo, slice_n; /* allreduce: this tower's slice [slice_lo, slice_lo + slice_n) of the buffer */
    void *ev[EV_COUNT]; /* events on this tower's stream */
    /* host staging (pinned on a GPU backend) */
    uint8_t *h_x;       /* (rows, D) samples as stored: bytes or float32 (room for float32) */
    int32_t *h_labels;  /* (rows) */
    uint32_t *h_ids;    /* (rows) */
    float *h_stats;     /* (rows, 2) */
    /* this step or evaluation */
    size_t lo, rows;     /* step: shard = idx[lo .. lo+rows); eval: samples [lo, lo+rows) */
    double loss_sum;
    size_t top1, top5;
    tt_tower_ledger led; /* this step */
    /* --graphs on: the step captured as one graph, for the shape it was captured for (rows, the step's samples, the
     * epoch: the loss gradient's scale and dropout's key are the kernels' arguments), and the last shape seen
     * (a shape is captured the second time in a row it comes: the first step of it warms the backend up) */
    void *graph;
    size_t graph_key[5], seen_key[5];
    /* --overlap on: events around each bucket's push and after the statistics' push; the buckets pushed and those
     * the host has been told of (arrived), whether this step's statistics are counted, and the buckets whose
     * weights for the next step are pulled already (ahead) */
    void *ev_b[TT_MAX_BUCKETS][2], *ev_loss, *ev_ahead; /* ev_ahead: after the last pull ahead (side stream) */
    size_t pushed, arrived;
    int loss_in;
    unsigned char ahead[TT_MAX_BUCKETS];
    size_t ahead_seen; /* buckets seen updated by this tower's pull-ahead loop */
    int grad_nonfinite;  /* set by the diagnosis after a non-finite step */
    uint64_t n_run;      /* steps (ssp, async: shards) this tower has run since init: --slow-tower's draw */
    int skip_pull;       /* ssp, async: the step's pull is made under the master variables' lock beforehand */
    tt_optim opt;        /* --sync weights: this tower's optimizer scalars (step count, bias corrections); its
                          * vectors are on its device */
    tt_status status;
    tt_error err;
};

/* The trainer (tt_trainer.h's opaque type). */
struct tt_trainer {
    tt_trainer_config cfg;
    const struct placement *place; /* the row of the placement table for cfg.reduce */
    const struct sync_mode *mode;  /* the row of the --sync table for cfg.sync.kind */
    const tt_model *model;
    size_t shard_max; /* ceil(B / N): rows a tower must hold */
    float *h_params;  /* master variables (P) */
    uint16_t *h_params16; /* --precision bf16, fp16: the trainable ones in 16 bits (n_trainable), what the towers pull:
                           * written where the host updates them (host_blocks) and wherever h_params is set */
    tt_scaler_state scaler; /* --loss-scale: this step's scale, its run of finite steps, the steps skipped */
    int skip_step;          /* this step's gradient overflowed in 16 bits (set at barrier A): nothing is applied */
    atomic_int w16_range;   /* a master weight's 16-bit copy is Inf: fp16 from |w| >= 65520, bf16 from 3.3961e38 */
    float **h_slots;  /* N gradient slots (P each), slot t written only by tower t */
    tt_optim opt;
    tt_tower *towers;
    tt_pool crew;     /* max(N, host threads) threads; thread t < N is tower t */
    tt_barrier bar_push, bar_reduce, bar_update;
    tt_barrier bar_xchg; /* --bn-sync on: the towers' exchanges (N parties) */
    int crew_up, bars_up;
    size_t xchg_max;     /* --bn-sync on: the most floats one exchange carries */
    void (*body)(struct tt_trainer *tr, int i, int T); /* what the crew does when woken (crew_run) */
    /* the current job */
    const tt_dataset *ds;
    const uint32_t *idx;     /* steps: sample indices, batch after batch */
    size_t n;                /* steps: samples in the run; eval: data set size */
    tt_step_result *results; /* steps: one per step */
    size_t cur_step;
    atomic_size_t steps_done;
    tt_tower_ledger *ledger; /* steps: N per step, may be NULL */
    double t_step;           /* clock at the start of the current step */
    double t_reduce0, t_reduce1, t_update0, t_update1; /* this step's host slice 0 */
    double t_towers_done;    /* release of the barrier after the tower phase */
    int loss_nonfinite;      /* this step's loss is not finite (set at barrier A) */
    atomic_int grad_nonfinite; /* a block of this step's summed gradient is not finite (set by any host slice) */
    tt_halt halt;            /* set at the end of a step; the crew leaves the run of steps */
    atomic_int stop_request; /* tt_trainer_request_stop */
    float *h_grad;           /* device / allreduce / nccl: the reduced gradient pushed by the towers (P); cpu with
                              * K ranks or a norm clip: the host's sum */
    struct clip_state *clip; /* --clipnorm, --global-clipnorm: the norms' pieces and this step's factors (host_clip.c) */
    struct overlap *ov;      /* --overlap on: the buckets and their progress this step (overlap.c) */
    struct sync_state *sy;   /* --sync ssp, async, weights: the shards' schedule and the averages (shards.c) */
    float *h_logits;         /* tt_trainer_predict: where the evaluation copies every sample's logits */
    int eval_stops;          /* the evaluation stops between chunks at a raised cfg.stop (predict, final test) */
    /* K ranks: the node sum is reduce-scattered (through h_recv: K slices) into this rank's slice [node_lo, node_lo +
     * node_n) of the global sum — allreduce: in place in h_grad, then the gather fills in the rest; ps: into h_slice,
     * the slice it updates (its optimizer's state covers that slice only), then the weights are gathered. */
    float *h_recv, *h_slice;
    size_t node_lo, node_n;
    double t_combine0, t_combine1;
    tt_status node_status;   /* a failed collective (TT_HALT_NODE) */
    tt_error node_err;
    uint64_t steps;          /* steps applied since init */
    uint64_t epoch;          /* tt_trainer_set_epoch */
    void *comm;              /* nccl: the backend's communicator over the towers */
    /* the peer matrix of the towers' devices (tt_backend_links) */
    int n_links, link_devs[TT_MAX_DEVICES], links[TT_MAX_DEVICES * TT_MAX_DEVICES];
    /* tt_trainer_time_phases: clock readings [thread][rep][phase], the host slice's split [thread][rep] */
    double *ph_start, *ph_end, *ph_sum, *ph_upd;
    size_t ph_reps;
};

/* The run's shards and their progress, under mu. A step of n_b samples has min(N, n_b) shards (shard_of's, the
 * empty ones left out); shard j of the run is shard j % N of step j / N, except in a short last step. */
typedef struct sync_state {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    size_t steps, shards;   /* in this run of steps */
    size_t next;            /* free schedule: the next shard to take */
    size_t pulled, applied; /* round robin: the shards pulled and applied so far (each in shard order) */
    size_t limit;           /* no shard from here on is taken: shards, or the end of the step in flight at a stop */
    size_t *clock;          /* N: shards each tower has applied in this run; SIZE_MAX once it takes no more */
    uint32_t *left;         /* per step: its shards not yet applied (room for cap steps) */
    double *span;           /* per step: its shards' spans, summed */
    size_t cap;
    uint64_t version;       /* gradients applied in this run */
    int stop;               /* a stop or a halt has set limit */
    /* --sync weights: the crew threads' squared distances from the average (T x N); each tower's statistics of
     * each step (steps x N, room for cap steps) and the steps it finished in this window (N); the window's first
     * step and its agreed end */
    double *dist;
    struct wstat { double loss_sum, span, data, compute, push, update, t1; size_t top1, top5, rows; } *ws;
    size_t *tw_done;
    size_t win0, win_end;
    size_t catch_to;           /* a halting window: the step every tower runs to */
    /* the first step whose loss or gradient was not finite on some tower, and which towers (loss, gradient): the
     * catch-up runs towers past it, so the diagnosis is recorded when it happens (under mu) */
    size_t bad_step;
    int *bad_loss, *bad_grad;
    double t_avg0, divergence; /* the average's start; the towers' mean distance from it */
    int boundary;              /* this window ends at a multiple of K: the towers take the average */
    int towers_hold;           /* the towers hold their own weights and optimizer state from the last run of steps
                                * (the host's are a snapshot of their average): the next run goes on from them */
} sync_state;

/* More than one rank: the step ends with the cross-node combine (tt_node.h). */
static inline int multi_node(const tt_trainer_config *cfg) { return cfg->node && cfg->node->size > 1; }

/* The gradient cut into buckets in the order backward produces it: bucket k is [edge[k+1], edge[k]), edge[0] = P,
 * edge[nb] = 0, each a run of whole layers from the last layer down. Every edge but P is a multiple of
 * TT_REDUCE_BLOCK (a layer boundary rounded up: the floats below it wait for the next bucket), so the host's
 * blocks are exactly the fused pass's and the bits cannot differ from --overlap off. A bucket's host work is cut
 * into chunks of OV_CHUNK blocks, taken by whichever crew thread is free. The counters are reset at every step's
 * end (the serial section of its barrier). */
enum { OV_CHUNK = 8 };

typedef struct overlap {
    size_t nb;
    size_t edge[TT_MAX_BUCKETS + 1];
    size_t chunks[TT_MAX_BUCKETS];
    atomic_size_t arrived[TT_MAX_BUCKETS]; /* towers that have pushed bucket k (and told the host) */
    atomic_int ready[TT_MAX_BUCKETS];      /* every tower has: its chunks may be taken (set in bucket order) */
    atomic_size_t next[TT_MAX_BUCKETS];    /* its next chunk to take */
    atomic_size_t done[TT_MAX_BUCKETS];    /* its chunks done */
    atomic_size_t buckets_done;            /* buckets whose every chunk is done */
    atomic_size_t towers_busy;             /* towers that have not pushed their last bucket */
    double t_pushed;                       /* when the last tower pushed its last bucket */
    double span[TT_MAX_BUCKETS][2];        /* bucket k's host work: first chunk begun, last chunk done */
    double (*work)[4];                     /* per crew thread: hidden sum, hidden update, exposed sum, update */
    pthread_mutex_t mu;                    /* an idle crew thread sleeps on cv until a bucket is ready or done */
    pthread_cond_t cv;
} overlap;

/* Every buffer a tower allocates: where its pointer goes, its size, whether it is device or (pinned) host memory,
 * and the part of the memory budget it belongs to. tower_alloc allocates exactly these, tower_release frees them,
 * and tt_trainer_plan adds them up, so the budget cannot drift from what is allocated. Tower 0 also holds the
 * host buffers every tower shares (the master weights, the reduced gradient), so they are pinned by its device. */
typedef struct tower_buf {
    void **slot;
    size_t bytes;
    int on_host;
    const char *part;
    tt_mem_driver driver;
} tower_buf;

/* tower_buffers' most: TT_MAX_LAYERS + 1 activations, and at most 38 others (weights and gradients 2, backward 3,
 * scratch 1, saved 1, --epilogues lt's relu bit-masks 1, --bn-sync's exchange 2, staging 8, --data-on device's
 * training set 2, a placement's 2, a device optimizer's 6, tower 0's 4, --precision's 6) */
enum { MAX_TOWER_BUFS = TT_MAX_LAYERS + 1 + 38 };

typedef struct buf_list {
    tower_buf b[MAX_TOWER_BUFS];
    int n;
} buf_list;

static inline void add_buf(buf_list *l, void *slot, size_t bytes, int on_host, const char *part, tt_mem_driver driver)
{
    TT_ASSERT(l->n < MAX_TOWER_BUFS);
    l->b[l->n++] = (tower_buf){(void **)slot, bytes, on_host, part, driver};
}

/* A placement is the phases it adds to the step. */
typedef struct placement {
    /* its name, help and the two facts the tools outside the trainer read (tt_reduce_about); info.host_sum: the
     * tower phase pushes every tower's gradient to its own host slot, and the host slices sum the slots */
    tt_reduce_info info;
    /* the reduction buffers tower tw needs, added to its list */
    void (*buffers)(tt_trainer *tr, tt_tower *tw, buf_list *l);
    /* the tower-side reduce phase between barriers A and R, ending with the sum (or a slice) pushed into
     * tr->h_grad; NULL: none (and no barrier R) */
    void (*reduce)(tt_tower *tw);
    unsigned needs;     /* what it needs of the backend and the devices: PLACE_* (compat.c refuses without) */
} placement;
enum {
    PLACE_COLLECTIVES = 1u << 0, /* the backend's collectives (tt_dev_ops.comm_init: NCCL) */
    PLACE_GPU_EACH = 1u << 1,    /* one GPU per tower: no virtual towers */
};

/* Where the optimizer runs: one row per --update value. */
typedef struct tt_update_row {
    const char *help;   /* --help's phrase */
    unsigned reduces;   /* the placements it runs with (bit 1u << tt_reduce) */
    const char *why;    /* and why only those, for the refusal of another */
    int on_device;      /* the towers hold master copies: tower 0 (device) or every tower (replicated) */
    int every_tower;    /* every tower holds one (replicated); else tower 0 alone */
} tt_update_row;

/* A --sync mode: its public part (name, number, help), what it can combine with, and its run of steps. */
typedef struct sync_mode {
    tt_sync_info info;
    unsigned caps;         /* SYNC_* */
    /* why it needs --reduce cpu --update host (a mode without SYNC_SUMMED), for the refusal */
    const char *host_why;
    /* crew thread i's part of a run of steps (T threads; the towers are threads 0..N-1) */
    void (*run)(tt_trainer *tr, int i, int T);
} sync_mode;
enum {
    SYNC_SUMMED = 1u << 0,      /* one summed gradient a step: any placement and update, overlap, graphs, ranks,
                                 * the batch statistics' exchange */
    SYNC_SCHEDULES = 1u << 1,   /* a choice of schedule: --sync-schedule round-robin */
    SYNC_SHARDS = 1u << 2,      /* the towers take the run's shards one by one (sync_state's schedule) */
    SYNC_BOUNDED = 1u << 3,     /* a tower runs at most k shards ahead of the slowest */
    SYNC_OWN_WEIGHTS = 1u << 4, /* every tower trains its own weights with its own optimizer, on its own rows */
};

/* Crew thread i of T's part of a job (crew_run): a sync mode's run of steps, a tower's allocation, ... */
typedef void crew_body(tt_trainer *tr, int i, int T);

/* The loss and top-1/top-5 counts of a tower's pushed rows, added to its own. */
static inline void tower_count_stats(tt_tower *tw, size_t rows)
{
    for (size_t r = 0; r < rows; r++) {
        tw->loss_sum += tw->h_stats[2 * r];
        float rank = tw->h_stats[2 * r + 1];
        tw->top1 += rank < 1.0f;
        tw->top5 += rank < 5.0f;
    }
}

/* The towers train their own weights with their own optimizers (--sync weights:K). */
static inline int own_weights(const tt_trainer *tr) { return (tr->mode->caps & SYNC_OWN_WEIGHTS) != 0; }

/* Marks what the tower's thread is doing from now on (tt_trainer_live_phase): one relaxed store. */
static inline void live(tt_tower *tw, tt_live_phase ph) { atomic_store_explicit(&tw->live, (int)ph, memory_order_relaxed); }

/* Seconds from event a to event b of this tower (both complete). */
static inline double ev_span(tt_tower *tw, int a, int b) { return tt_dev_event_elapsed(&tw->dev, tw->ev[a], tw->ev[b]); }

/* What a host pass does over its range of the buffer, block by block, split across the crew. */
typedef struct host_pass {
    size_t lo, hi;      /* the range [lo, hi) of the buffer */
    int sum;            /* sum the towers' slots in tower order (cpu placement) ... */
    float *sum_out;     /* ... into this buffer (the node sum of a rank), or (NULL) straight into the optimizer */
    const float *grad;  /* not summing: the gradient of position lo (grad[k - lo] is position k's) */
    int update;         /* apply the optimizer */
    size_t state_lo;    /* the optimizer's state starts at this position (ps: the rank's slice) */
} host_pass;

/* What each file gives the others, from the top of the package down (a file calls only into the files below it;
 * trainer.c, the public API, and phase_timing.c, the probe's, are the top). */

/* compat.c: tt_trainer_check (public) */

/* sync.c: the --sync table (its rows' runs are the sync_*.c files below) */
extern const sync_mode sync_modes[TT_SYNC_COUNT]; /* indexed by tt_sync_kind */
const char *sync_spelt(const tt_sync_info *in, char *buf, size_t len); /* "ssp:S", "async" */

/* phase_timing.c */
crew_body crew_phases; /* the probe's phases, one at a time */

/* sync_bsp.c, sync_ssp.c, sync_weights.c: a mode's run of steps (its row's run) */
crew_body bsp_run, ssp_run, weights_run;

/* node_combine.c */
void host_node_step(tt_trainer *tr, int i, int T); /* the host's part of a step across K ranks */

/* tower.c */
void tower_buffers(tt_trainer *tr, tt_tower *tw, buf_list *l); /* every buffer tower tw allocates */
uint64_t phase_pull(tt_tower *tw);
void phase_data(tt_tower *tw, const tt_dataset *ds, const uint32_t *idx, size_t first, size_t rows, int training);
void phase_compute(tt_tower *tw, size_t n);
void phase_push(tt_tower *tw);
void tower_step(tt_tower *tw, const uint32_t *idx, size_t n, int more); /* the four, issued and waited for once */
crew_body towers_alloc, towers_release, towers_eval, towers_diagnose; /* tower i's part of those jobs */

/* overlap.c */
void bucket_push(tt_tower *tw, size_t k);
void tower_arrive_landed(tt_tower *tw);
void bucket_ready(void *arg, size_t lo); /* tt_model_backward_each's callback */
void overlap_run(tt_trainer *tr, int i, tt_tower *tw, int pull_ahead);
void overlap_reset(overlap *o);
tt_status overlap_init(tt_trainer *tr, int T, tt_error *err);
void overlap_free(tt_trainer *tr);

/* placement.c */
extern const placement placements[TT_REDUCE_COUNT];       /* indexed by tt_reduce */
extern const tt_update_row update_rows[TT_UPDATE_COUNT]; /* indexed by tt_update */
int holds_master(const tt_trainer *tr, const tt_tower *tw);
int tower_update(tt_tower *tw);                  /* the optimizer on this tower's master copy */
void tower_master(tt_tower *tw, int to_device); /* the host's master and optimizer state to or from the device */

/* host_sum.c */
host_pass fused_pass(const tt_trainer *tr);
void host_blocks(tt_trainer *tr, const host_pass *p, size_t lo, size_t hi, double *t_sum, double *t_update);
void block_slice(size_t from, size_t to, int i, int T, size_t *lo, size_t *hi);
void host_slice(tt_trainer *tr, const host_pass *p, int i, int T, double *t_sum, double *t_update);
/* --precision bf16, fp16: h_params16[lo, hi) = h_params[lo, hi) in the format (hi <= n_trainable); the weights whose
 * 16-bit copy is Inf or NaN (fp16: |w| >= 65520; bf16: >= 3.3961e38) raise tr->w16_range. */
void host_narrow_params(tt_trainer *tr, size_t lo, size_t hi);

/* host_clip.c: --clipnorm, --global-clipnorm (bsp, --update host, one rank: compat.c) */
typedef struct clip_state clip_state;
int clip_by_norm(const tt_trainer_config *cfg);
tt_status clip_init(tt_trainer *tr, tt_error *err); /* tr->clip (freed by clip_free, also on failure) */
void clip_free(clip_state *c);
/* Block [b, b + len) of the summed gradient g, clipped by this step's factors, into out (may be g). */
void clip_block(const tt_trainer *tr, const float *g, float *out, size_t b, size_t len);
void host_clip_step(tt_trainer *tr, int i, int T); /* the bsp step's host part with a norm clip */

/* bn_exchange.c */
void tower_exchange(void *arg, tt_dev *dev, float *d_buf, size_t n); /* tt_exchange.sum */
size_t xchg_floats(const tt_model *m, const tt_trainer_config *cfg);

/* shards.c */
void shard_of(size_t n, size_t N, size_t t, size_t *lo, size_t *rows);
size_t shard_rows(const tt_trainer_config *cfg);
void owned_slice(const tt_trainer_config *cfg, size_t P, size_t *lo, size_t *n);
void tower_shard(const tt_trainer_config *cfg, size_t n, size_t t, size_t *lo, size_t *rows);
size_t sync_step_n(const tt_trainer *tr, size_t st);
size_t sync_step_shards(const tt_trainer *tr, size_t st);
int stop_asked(const tt_trainer *tr);
tt_status sync_begin(tt_trainer *tr, size_t steps, tt_error *err);
tt_status sync_init(tt_trainer *tr, int T, tt_error *err);
void sync_free(tt_trainer *tr);

/* crew.c */
int crew_threads(const tt_trainer_config *cfg);            /* T: max(N towers, host threads) */
tt_status crew_open(tt_trainer *tr, int T, tt_error *err); /* the barriers and the pool */
void crew_close(tt_trainer *tr);
void crew_run(tt_trainer *tr, crew_body *body);   /* every thread runs body once; returns when all have */
void crew_start(tt_trainer *tr, crew_body *body); /* the same without waiting (tt_pool_wait) */
void job_begin(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n);
void tower_barrier(tt_trainer *tr, tt_barrier *b, int i, void (*serial)(void *), void *arg);

#endif
