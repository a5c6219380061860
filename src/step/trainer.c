/* trainer.c — towers and the synchronous step (see tt_trainer.h for the picture).
 *
 * Threads. One crew of T = max(N towers, H host threads) persistent pthreads. Thread t < N is tower t: it binds
 * its device in the INIT job, allocates everything it will ever need there, and releases it in the FREE job.
 * A STEPS job runs a run of steps with no help from the caller:
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
 * smaller `updates` table beside it (--update: host, device, replicated, and the placements each runs with).
 * The step above is written once; tt_trainer_time_phases runs the same phase functions one at a time for the probe.
 *
 * A tower issues its whole step on its stream and waits once, at the end, where the host must read its statistics:
 * the pull is issued before the host gathers the shard's rows, so on a GPU the two overlap, and the ledger is
 * timed by events recorded between the phases, not by waiting for each.
 *
 * The slices are host work on host memory: the tower threads double as the host's cores once their device work
 * is done, as a CPU device's thread pool would in TensorFlow. The barriers spin briefly before sleeping when every
 * thread has a core, so a step costs no thread wake-ups; the caller is woken once per run of steps.
 * No allocation happens after INIT: buffers are sized for the largest shard (ceil(B/N) rows). */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tt_backend.h"
#include "tt_math.h"
#include "tt_mem.h"
#include "tt_rng.h"
#include "tt_trainer.h"

enum { JOB_INIT, JOB_STEPS, JOB_EVAL, JOB_DIAGNOSE, JOB_PHASES, JOB_FREE };

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
    size_t graph_key[4], seen_key[4];
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

/* Shard t of n samples over N towers: the first n % N towers take one extra row. */
static void shard_of(size_t n, size_t N, size_t t, size_t *lo, size_t *rows)
{
    const size_t base = n / N, extra = n % N;
    *rows = base + (t < extra);
    *lo = t * base + (t < extra ? t : extra);
}

/* More than one rank: the step ends with the cross-node combine (tt_node.h). */
static int multi_node(const tt_trainer_config *cfg) { return cfg->node && cfg->node->size > 1; }

/* Rows a tower must hold: the largest shard of a batch over every tower of the job. */
static size_t shard_rows(const tt_trainer_config *cfg)
{
    const size_t G = cfg->n_towers * (multi_node(cfg) ? (size_t)cfg->node->size : 1);
    return (cfg->batch + G - 1) / G;
}

/* The part of the buffer this rank updates and keeps the optimizer's state of: its slice under ps, else all. */
static void owned_slice(const tt_trainer_config *cfg, size_t P, size_t *lo, size_t *n)
{
    *lo = 0;
    *n = P;
    if (multi_node(cfg) && cfg->node_reduce == TT_NODE_PS) tt_node_slice(P, cfg->node->size, cfg->node->rank, lo, n);
}

/* Tower t's shard of a step (or an evaluation) of n samples: with K ranks, global tower rank*N + t of K*N, so K
 * ranks of N towers take exactly the shards one process of K*N towers would. */
static void tower_shard(const tt_trainer_config *cfg, size_t n, size_t t, size_t *lo, size_t *rows)
{
    const size_t N = cfg->n_towers, K = multi_node(cfg) ? (size_t)cfg->node->size : 1;
    const size_t rank = K > 1 ? (size_t)cfg->node->rank : 0;
    shard_of(n, K * N, rank * N + t, lo, rows);
}

/* ---- --overlap on: the buckets ---------------------------------------------------------------------------- */

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

/* The edges for buckets of about `bytes` (TT_BUCKET_BYTES for 0), at most TT_MAX_BUCKETS of them: a model with more
 * layers than that gets larger buckets. Returns the bucket count. */
static size_t overlap_edges(const tt_model *m, size_t bytes, size_t *edge)
{
    size_t want = (bytes ? bytes : TT_BUCKET_BYTES) / sizeof(float);
    if (want == 0) want = 1;
    for (;; want *= 2) {
        size_t nb = 0, hi = m->n_params;
        int more = 0; /* more buckets than TT_MAX_BUCKETS at this size */
        edge[0] = hi;
        for (size_t i = m->n_logits; i-- > 0 && !more;) {
            const tt_layer *l = &m->layers[i];
            const size_t lo = (l->offset + TT_REDUCE_BLOCK - 1) / TT_REDUCE_BLOCK * TT_REDUCE_BLOCK;
            if (!l->n_params || lo == 0 || lo >= hi || hi - lo < want) continue;
            if (nb + 1 == TT_MAX_BUCKETS) more = 1;
            else edge[++nb] = hi = lo;
        }
        if (!more) { /* and the last bucket, down to 0 */
            edge[++nb] = 0;
            return nb;
        }
    }
}

/* The step's counters back to zero (between steps: no crew thread reads them). */
static void overlap_reset(overlap *o)
{
    for (size_t k = 0; k < o->nb; k++) {
        atomic_store(&o->arrived[k], 0);
        atomic_store(&o->ready[k], 0);
        atomic_store(&o->next[k], 0);
        atomic_store(&o->done[k], 0);
    }
    atomic_store(&o->buckets_done, 0);
}

/* ---- buffers ----------------------------------------------------------------------------------------------- */

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

/* tower_buffers' most: TT_MAX_LAYERS + 1 activations, and at most 32 others (weights and gradients 2, backward 3,
 * scratch 1, saved 1, --epilogues lt's relu bit-masks 1, --bn-sync's exchange 2, staging 8, --data-on device's
 * training set 2, a placement's 2, a device optimizer's 6, tower 0's 4) */
enum { MAX_TOWER_BUFS = TT_MAX_LAYERS + 1 + 32 };

typedef struct buf_list {
    tower_buf b[MAX_TOWER_BUFS];
    int n;
} buf_list;

static void add_buf(buf_list *l, void *slot, size_t bytes, int on_host, const char *part, tt_mem_driver driver)
{
    TT_ASSERT(l->n < MAX_TOWER_BUFS);
    l->b[l->n++] = (tower_buf){(void **)slot, bytes, on_host, part, driver};
}

/* ---- placements: where the gradients are summed ------------------------------------------------------------- */

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
    /* can it run with this configuration? NULL: always */
    tt_status (*check)(const tt_trainer_config *cfg, tt_error *err);
} placement;

static void buffers_cpu(tt_trainer *tr, tt_tower *tw, buf_list *l)
{
    add_buf(l, &tr->h_slots[tw->id], tr->model->n_params * sizeof(float), 1, "gradient slots", TT_MEM_BY_PARAMS);
}

/* device and nccl: the sum lives on tower 0 */
static void buffers_tower0(tt_trainer *tr, tt_tower *tw, buf_list *l)
{
    const size_t P = tr->model->n_params, N = tr->cfg.n_towers;
    const int nccl = tr->cfg.reduce == TT_REDUCE_NCCL; /* NCCL runs even for one tower: its code is then tested */
    if ((tw->id == 0 || tr->cfg.update == TT_UPDATE_REPLICATED) && (N > 1 || nccl)) /* the sum (device: tower 1's
                                                                         * gradient is copied straight into it) */
        add_buf(l, &tw->d_acc, P * sizeof(float), 0, "reduction buffers", TT_MEM_BY_PARAMS);
    if (tr->cfg.reduce == TT_REDUCE_DEVICE && tw->id == 0 && N > 2) /* towers 2.. arrive here before each is added */
        add_buf(l, &tw->d_recv, P * sizeof(float), 0, "reduction buffers", TT_MEM_BY_PARAMS);
}

static void buffers_allreduce(tt_trainer *tr, tt_tower *tw, buf_list *l)
{
    /* slices of 16-float multiples so every slice starts 64-byte aligned */
    const size_t P = tr->model->n_params, N = tr->cfg.n_towers;
    const size_t S = ((P + N - 1) / N + 15) & ~(size_t)15;
    tw->slice_lo = (size_t)tw->id * S < P ? (size_t)tw->id * S : P;
    tw->slice_n = tw->slice_lo + S < P ? S : P - tw->slice_lo;
    add_buf(l, &tw->d_recv, S * sizeof(float), 0, "reduction buffers", TT_MEM_BY_PARAMS);
    /* --update replicated: the whole sum, every tower's slice gathered into it */
    add_buf(l, &tw->d_acc, (tr->cfg.update == TT_UPDATE_REPLICATED ? P : S) * sizeof(float), 0, "reduction buffers",
            TT_MEM_BY_PARAMS);
}

static void reduce_device(tt_tower *tw);
static void reduce_allreduce(tt_tower *tw);
static void reduce_nccl(tt_tower *tw);
static tt_status check_nccl(const tt_trainer_config *cfg, tt_error *err);

static const placement placements[TT_REDUCE_COUNT] = {
    [TT_REDUCE_CPU] = {{"cpu", "host sums the towers' slots", 1, 1}, buffers_cpu, NULL, NULL},
    [TT_REDUCE_DEVICE] = {{"device", "tower 0 gathers and sums, like ReductionToOneDevice", 0, 1}, buffers_tower0,
                          reduce_device, NULL},
    [TT_REDUCE_ALLREDUCE] = {{"allreduce", "each tower sums one slice: reduce-scatter, then gather to the host", 0, 1},
                             buffers_allreduce, reduce_allreduce, NULL},
    [TT_REDUCE_NCCL] = {{"nccl", "NCCL sums into tower 0's GPU; cuda, one GPU per tower", 0, 0}, buffers_tower0,
                        reduce_nccl, check_nccl},
};

const tt_reduce_info *tt_reduce_about(tt_reduce r)
{
    return (unsigned)r < TT_REDUCE_COUNT ? &placements[r].info : NULL;
}

int tt_reduce_parse(const char *name, tt_reduce *r)
{
    for (int i = 0; i < TT_REDUCE_COUNT; i++)
        if (strcmp(name, placements[i].info.name) == 0) {
            *r = (tt_reduce)i;
            return 0;
        }
    return -1;
}

const char *tt_reduce_name(tt_reduce r) { return (unsigned)r < TT_REDUCE_COUNT ? placements[r].info.name : "?"; }

/* The names of the placements keep() takes, joined (tt_reduce_list). */
static const char *list_names(char *buf, size_t len, const char *sep, const char *last, int (*keep)(const placement *))
{
    int take[TT_REDUCE_COUNT], n = 0, k = 0;
    for (int i = 0; i < TT_REDUCE_COUNT; i++) n += take[i] = keep(&placements[i]);
    size_t used = 0;
    if (len) buf[0] = '\0';
    for (int i = 0; i < TT_REDUCE_COUNT && used < len; i++) {
        if (!take[i]) continue;
        const char *before = k == 0 ? "" : k == n - 1 ? last : sep;
        int w = snprintf(buf + used, len - used, "%s%s", before, placements[i].info.name);
        used += w > 0 ? (size_t)w : 0;
        k++;
    }
    return buf;
}

static int keep_all(const placement *p)
{
    (void)p;
    return 1;
}
static int keep_tower_order(const placement *p) { return p->info.tower_order; }
static int keep_unchecked(const placement *p) { return p->check == NULL; }
/* a tower-side reduce that virtual towers (sharing a GPU) can run */
static int keep_shared(const placement *p) { return p->check == NULL && p->reduce != NULL; }

const char *tt_reduce_list(char *buf, size_t len, const char *sep, const char *last, int tower_order)
{
    return list_names(buf, len, sep, last, tower_order ? keep_tower_order : keep_all);
}

/* ---- update placements: where the optimizer runs ----------------------------------------------------------- */

const char *const tt_update_names[TT_UPDATE_COUNT + 1] = {"host", "device", "replicated", NULL};
#define ON(r) (1u << TT_REDUCE_##r)
static const struct {
    const char *help;  /* --help's phrase */
    unsigned reduces;  /* the placements it runs with */
} updates[TT_UPDATE_COUNT] = {
    [TT_UPDATE_HOST] = {"master weights and optimizer on the host, pulled and pushed",
                        ON(CPU) | ON(DEVICE) | ON(ALLREDUCE) | ON(NCCL)},
    [TT_UPDATE_DEVICE] = {"on tower 0's device beside the sum; the others pull from it", ON(DEVICE) | ON(NCCL)},
    [TT_UPDATE_REPLICATED] = {"every tower updates its own copy with the all-reduced sum",
                              ON(ALLREDUCE) | ON(NCCL)},
};
#undef ON

const char *tt_update_name(tt_update u) { return (unsigned)u < TT_UPDATE_COUNT ? tt_update_names[u] : "?"; }
const char *tt_update_help(tt_update u) { return (unsigned)u < TT_UPDATE_COUNT ? updates[u].help : "?"; }
unsigned tt_update_reduces(tt_update u) { return (unsigned)u < TT_UPDATE_COUNT ? updates[u].reduces : 0; }

/* Tower tw keeps a master copy of the weights and the optimizer's state on its device. */
static int holds_master(const tt_trainer *tr, const tt_tower *tw)
{
    return tr->cfg.sync.kind == TT_SYNC_WEIGHTS || tr->cfg.update == TT_UPDATE_REPLICATED || (tr->cfg.update == TT_UPDATE_DEVICE && tw->id == 0);
}

/* --update where the placement leaves the sum (device, replicated: on the towers), and not across ranks. */
static tt_status check_update(const tt_trainer_config *cfg, tt_error *err)
{
    const tt_update u = cfg->update;
    if ((unsigned)u >= TT_UPDATE_COUNT) return tt_fail(err, TT_ERR_ARG, "--update: unknown placement");
    if (!(updates[u].reduces & (1u << cfg->reduce))) {
        char with[128] = "";
        size_t n = 0;
        for (int r = 0; r < TT_REDUCE_COUNT; r++)
            if (updates[u].reduces & (1u << r))
                n += (size_t)snprintf(with + n, sizeof with - n, "%s%s", n ? " or " : "", placements[r].info.name);
        return tt_fail(err, TT_ERR_ARG, "--update %s: needs --reduce %s (%s), not %s", tt_update_names[u], with,
                       u == TT_UPDATE_DEVICE ? "the sum must end on tower 0's device" : "every tower needs the sum",
                       placements[cfg->reduce].info.name);
    }
    if (u != TT_UPDATE_HOST && multi_node(cfg))
        return tt_fail(err, TT_ERR_ARG, "--update %s: under mpirun the ranks combine their sums on the host (give "
                       "--update host)", tt_update_names[u]);
    return TT_OK;
}

/* NCCL needs the backend's collectives and one device per tower. */
static tt_status check_nccl(const tt_trainer_config *cfg, tt_error *err)
{
    char others[128];
    list_names(others, sizeof others, ", ", " or ", keep_unchecked);
    if (!cfg->ops->comm_init)
        return tt_fail(err, TT_ERR_ARG, "--reduce nccl: the %s backend %s (use --reduce %s)", cfg->ops->name,
                       cfg->ops->peer_setup ? "of this build has no NCCL (rebuild with NCCL found)" : "has no NCCL",
                       others);
    if (cfg->n_towers > (size_t)cfg->n_devices)
        return tt_fail(err, TT_ERR_ARG,
                       "--reduce nccl: needs one GPU per tower, and %zu towers share %d GPU%s (use --towers %d, or "
                       "--reduce %s for virtual towers)",
                       cfg->n_towers, cfg->n_devices, cfg->n_devices == 1 ? "" : "s", cfg->n_devices,
                       list_names(others, sizeof others, "/", "/", keep_shared));
    return TT_OK;
}

const char *const tt_graphs_names[] = {"off", "on", NULL};
const char *const tt_epilogues_names[] = {"kernels", "lt", NULL};
const char *const tt_overlap_names[] = {"off", "on", NULL};
const char *const tt_bn_sync_names[] = {"off", "on", NULL};
const char *const tt_data_on_names[] = {"host", "device", NULL};

/* ---- --sync: the modes' table ------------------------------------------------------------------------------- */

static const tt_sync_info syncs[TT_SYNC_COUNT] = {
    [TT_SYNC_BSP] = {"bsp", NULL, "every step waits for every tower; one summed update (the default)"},
    [TT_SYNC_SSP] = {"ssp", "S", "each gradient applied as it arrives; a tower runs at most S shards ahead"},
    [TT_SYNC_ASYNC] = {"async", NULL, "each gradient applied as it arrives, no bound (Downpour)"},
    [TT_SYNC_WEIGHTS] = {"weights", "K", "local SGD: own weights and optimizer per tower, averaged every K steps"},
};
const char *const tt_sync_schedule_names[] = {"free", "round-robin", NULL};

const tt_sync_info *tt_sync_about(tt_sync_kind k) { return (unsigned)k < TT_SYNC_COUNT ? &syncs[k] : NULL; }

const char *tt_sync_format(const tt_sync *sy, char *buf, size_t len)
{
    const tt_sync_info *in = tt_sync_about(sy->kind);
    if (!in) snprintf(buf, len, "?");
    else if (in->arg) snprintf(buf, len, "%s:%zu", in->name, sy->k);
    else snprintf(buf, len, "%s", in->name);
    return buf;
}

tt_status tt_sync_parse(const char *opt, const char *v, tt_sync *out, tt_error *err)
{
    if (!v) return tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
    const size_t len = strcspn(v, ":");
    for (int k = 0; k < TT_SYNC_COUNT; k++) {
        const tt_sync_info *in = &syncs[k];
        if (strlen(in->name) != len || strncmp(v, in->name, len) != 0) continue;
        if (!in->arg) {
            if (v[len]) return tt_fail(err, TT_ERR_ARG, "%s: '%.64s': %s takes no number", opt, v, in->name);
            out->kind = (tt_sync_kind)k;
            out->k = 0;
            return TT_OK;
        }
        const char *num = v[len] == ':' ? v + len + 1 : "";
        char *end = NULL;
        errno = 0;
        unsigned long long n = (*num >= '0' && *num <= '9') ? strtoull(num, &end, 10) : 0;
        if (!end || *end || errno || n < 1 || n > 1000000)
            return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not %s:%s with %s a whole number 1..1000000", opt, v,
                           in->name, in->arg, in->arg);
        out->kind = (tt_sync_kind)k;
        out->k = (size_t)n;
        return TT_OK;
    }
    char names[128];
    size_t n = 0;
    for (int k = 0; k < TT_SYNC_COUNT; k++)
        n += (size_t)snprintf(names + n, sizeof names - n, "%s%s%s%s", k == 0 ? "" : k + 1 == TT_SYNC_COUNT ? " or " : ", ",
                              syncs[k].name, syncs[k].arg ? ":" : "", syncs[k].arg ? syncs[k].arg : "");
    return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not %s", opt, v, names);
}

/* A mode other than bsp runs the host's update its own way: --reduce cpu, --update host, no overlap, no graphs, one
 * process. */
static tt_status check_sync(const tt_trainer_config *cfg, tt_error *err)
{
    const tt_sync *sy = &cfg->sync;
    char m[32];
    if ((unsigned)sy->kind >= TT_SYNC_COUNT) return tt_fail(err, TT_ERR_ARG, "--sync: unknown mode");
    if (sy->round_robin && sy->kind != TT_SYNC_SSP && sy->kind != TT_SYNC_ASYNC)
        return tt_fail(err, TT_ERR_ARG, "--sync-schedule round-robin: only for --sync ssp:S or async (%s has one "
                       "schedule already)", tt_sync_format(sy, m, sizeof m));
    if (sy->kind == TT_SYNC_BSP) return TT_OK;
    tt_sync_format(sy, m, sizeof m);
    if ((sy->kind == TT_SYNC_SSP || sy->kind == TT_SYNC_WEIGHTS) && sy->k < 1)
        return tt_fail(err, TT_ERR_ARG, "--sync %s: the number must be at least 1", m);
    if (cfg->reduce != TT_REDUCE_CPU || cfg->update != TT_UPDATE_HOST)
        return tt_fail(err, TT_ERR_ARG, "--sync %s: %s, so it needs --reduce cpu and --update host (not --reduce %s "
                       "--update %s)", m,
                       sy->kind == TT_SYNC_WEIGHTS ? "the towers update their own weights and the host averages them"
                                                   : "the host applies each tower's gradient from its slot",
                       placements[cfg->reduce].info.name, tt_update_names[cfg->update]);
    if (cfg->overlap)
        return tt_fail(err, TT_ERR_ARG, "--sync %s: not with --overlap on (its buckets are summed over every tower "
                       "of a step)", m);
    if (cfg->graphs)
        return tt_fail(err, TT_ERR_ARG, "--sync %s: not with --graphs on (a tower's step waits for the master "
                       "variables' lock, which one graph launch cannot)", m);
    if (multi_node(cfg))
        return tt_fail(err, TT_ERR_ARG, "--sync %s: under mpirun the ranks combine one summed gradient every step "
                       "(bsp); the master variables of another mode live in one process (give --sync bsp)", m);
    return TT_OK;
}

/* --bn-sync on with several towers: every tower stops twice in its forward and once in its backward per batchnorm
 * layer until all have reached the same point of the same step. */
static tt_status check_bn_sync(const tt_trainer_config *cfg, tt_error *err)
{
    if (!cfg->bn_sync) return TT_OK;
    /* before the one-tower shortcut: K ranks of one tower each still have K shards' statistics to combine */
    if (multi_node(cfg))
        return tt_fail(err, TT_ERR_ARG, "--bn-sync on: the statistics are exchanged between one process's towers, "
                       "not across mpirun's ranks (give --bn-sync off, or run one rank)");
    if (cfg->n_towers < 2) return TT_OK;
    if (cfg->sync.kind != TT_SYNC_BSP) {
        char m[32];
        return tt_fail(err, TT_ERR_ARG, "--bn-sync on: not with --sync %s (the towers do not meet every step, so "
                       "there is no global batch to take statistics over; give --bn-sync off)",
                       tt_sync_format(&cfg->sync, m, sizeof m));
    }
    if (cfg->graphs)
        return tt_fail(err, TT_ERR_ARG, "--bn-sync on: the towers exchange batch statistics in the middle of their "
                       "forward and backward, which one graph launch cannot (use --graphs off)");
    return TT_OK;
}

tt_status tt_trainer_check(const tt_trainer_config *cfg, tt_error *err)
{
    if ((unsigned)cfg->reduce >= TT_REDUCE_COUNT) return tt_fail(err, TT_ERR_ARG, "--reduce: unknown placement");
    const placement *pl = &placements[cfg->reduce];
    tt_status s = pl->check ? pl->check(cfg, err) : TT_OK;
    if (!s && cfg->n_slow && cfg->graphs)
        return tt_fail(err, TT_ERR_ARG, "--slow-tower: not with --graphs on (a replayed graph runs without the host, "
                       "so nothing can delay its compute)");
    for (size_t k = 0; !s && k < cfg->n_slow; k++)
        if (cfg->slow[k].tower >= cfg->n_towers)
            return cfg->n_towers == 1
                       ? tt_fail(err, TT_ERR_ARG, "--slow-tower %zu: there is 1 tower (0)", cfg->slow[k].tower)
                       : tt_fail(err, TT_ERR_ARG, "--slow-tower %zu: there are %zu towers (0..%zu)",
                                 cfg->slow[k].tower, cfg->n_towers, cfg->n_towers - 1);
    if (!s && cfg->graphs && !cfg->ops->capture_begin)
        return tt_fail(err, TT_ERR_ARG, "--graphs on: the %s backend runs every op as it is issued, there is no graph "
                       "to capture (CUDA graphs: --device cuda)", cfg->ops->name);
    /* a capture is safe from what its own thread does (thread-local mode), but not proven safe from another tower
     * thread syncing, allocating or freeing on the same GPU at that moment: one GPU per tower */
    if (!s && cfg->graphs && cfg->n_towers > (size_t)cfg->n_devices)
        return tt_fail(err, TT_ERR_ARG, "--graphs on: needs one GPU per tower, and %zu towers share %d GPU%s (use "
                       "--towers %d, or --graphs off for virtual towers)", cfg->n_towers, cfg->n_devices,
                       cfg->n_devices == 1 ? "" : "s", cfg->n_devices);
    if (!s && !cfg->overlap && cfg->bucket_bytes)
        return tt_fail(err, TT_ERR_ARG, "--bucket-kib: the buckets are --overlap on's (give --overlap on, or no "
                       "--bucket-kib)");
    if (!s && cfg->overlap) {
        if (cfg->reduce != TT_REDUCE_CPU || cfg->update != TT_UPDATE_HOST)
            return tt_fail(err, TT_ERR_ARG, "--overlap on: the host sums and updates each bucket as the towers push "
                           "it, so it needs --reduce cpu and --update host (not --reduce %s --update %s)",
                           placements[cfg->reduce].info.name, tt_update_names[cfg->update]);
        if (cfg->graphs)
            return tt_fail(err, TT_ERR_ARG, "--overlap on: a tower waits for each bucket's push in the middle of its "
                           "step, which one graph launch cannot (use --graphs off)");
        if (multi_node(cfg))
            return tt_fail(err, TT_ERR_ARG, "--overlap on: under mpirun the ranks combine whole node sums (give "
                           "--overlap off)");
    }
    if (!s && cfg->data_on && !cfg->train_set)
        return tt_fail(err, TT_ERR_ARG, "--data-on device: the trainer was given no training set to hold");
    if (!s) s = check_update(cfg, err);
    if (!s) s = check_sync(cfg, err);
    return s ? s : check_bn_sync(cfg, err);
}

static void tower_buffers(tt_trainer *tr, tt_tower *tw, buf_list *l)
{
    const tt_model *m = tr->model;
    const size_t R = tr->shard_max, P = m->n_params, F = sizeof(float);
    l->n = 0;
    add_buf(l, &tw->d_params, P * F, 0, "tower weights and gradients", TT_MEM_BY_PARAMS);
    add_buf(l, &tw->d_grads, P * F, 0, "tower weights and gradients", TT_MEM_BY_PARAMS);
    for (size_t i = 0; i <= m->n_logits; i++) /* a relu run as an epilogue writes its input: no buffer of its own */
        if (!tt_model_act_shared(m, i))
            add_buf(l, &tw->d_act[i], R * (i == 0 ? m->input_dim : m->layers[i - 1].out) * F, 0, "activations",
                    TT_MEM_BY_WIDTH);
    add_buf(l, &tw->d_delta[0], R * m->max_width * F, 0, "activations", TT_MEM_BY_WIDTH);
    add_buf(l, &tw->d_delta[1], R * m->max_width * F, 0, "activations", TT_MEM_BY_WIDTH);
    add_buf(l, &tw->d_dlogits, R * m->n_classes * F, 0, "activations", TT_MEM_BY_WIDTH);
    const size_t ws = tt_model_workspace(m, R, tr->cfg.ops->chunk_mnk);
    if (ws) add_buf(l, &tw->d_ws, ws * F, 0, "layer scratch (im2col)", TT_MEM_BY_WIDTH);
    if (m->n_saved) add_buf(l, &tw->d_saved, m->n_saved * F, 0, "batchnorm's saved statistics", TT_MEM_BY_RUN);
    /* --epilogues lt on a backend with the one-call GEMMs: the relus' bit-masks (none where it has no such call) */
    const size_t mask_bytes = tr->cfg.epilogues && tr->cfg.ops->gemm_drelu_bgrad ? tt_model_mask_bytes(m, R) : 0;
    if (mask_bytes) add_buf(l, &tw->d_masks, mask_bytes, 0, "relu bit-masks (--epilogues lt)", TT_MEM_BY_WIDTH);
    if (tr->xchg_max) {
        add_buf(l, &tw->h_xchg, 2 * tr->xchg_max * F, 1, "batch statistics' exchange (--bn-sync on)", TT_MEM_BY_RUN);
        add_buf(l, &tw->h_xsum, tr->xchg_max * F, 1, "batch statistics' exchange (--bn-sync on)", TT_MEM_BY_RUN);
    }
    add_buf(l, &tw->d_labels, R * sizeof(int32_t), 0, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->d_ids, R * sizeof(uint32_t), 0, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->d_stats, 2 * R * F, 0, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->d_x8, R * m->input_dim, 0, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->h_x, R * m->input_dim * F, 1, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->h_labels, R * sizeof(int32_t), 1, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->h_ids, R * sizeof(uint32_t), 1, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->h_stats, 2 * R * F, 1, "batch staging", TT_MEM_BY_RUN);
    const tt_dataset *set = tr->cfg.train_set;
    if (tr->cfg.data_on && (size_t)tw->id < (size_t)tr->cfg.n_devices) { /* the first tower on its device */
        add_buf(l, &tw->d_set_x, set->n * tt_dataset_sample_bytes(set), 0, "training set (--data-on device)",
                TT_MEM_BY_DATA);
        add_buf(l, &tw->d_set_y, set->n * sizeof(int32_t), 0, "training set (--data-on device)", TT_MEM_BY_DATA);
    }
    tr->place->buffers(tr, tw, l);
    if (holds_master(tr, tw)) { /* the optimizer on this device: its state, and which blocks were not finite */
        float **state[3] = {&tw->d_m, &tw->d_v, &tw->d_a};
        for (int k = 0; k < 3; k++)
            if (tt_optim_keeps(&tr->cfg.optim, k))
                add_buf(l, state[k], P * F, 0, "optimizer state (--update on the device)", TT_MEM_BY_PARAMS);
        const size_t blocks = (P + TT_UPDATE_BLOCK - 1) / TT_UPDATE_BLOCK;
        add_buf(l, &tw->d_bad, blocks * sizeof(int32_t), 0, "optimizer state (--update on the device)",
                TT_MEM_BY_PARAMS);
        add_buf(l, &tw->h_bad, blocks * sizeof(int32_t), 1, "optimizer state (--update on the device)",
                TT_MEM_BY_PARAMS);
        if (tt_optim_state_floats(&tr->cfg.optim))
            add_buf(l, &tw->h_stage, P * F, 1, "optimizer state (--update on the device)", TT_MEM_BY_PARAMS);
    }
    if (tw->id == 0) { /* pinned, so every tower's pull is a fast async copy */
        add_buf(l, &tr->h_params, P * F, 1, "master weights", TT_MEM_BY_PARAMS);
        if (!tr->place->info.host_sum || multi_node(&tr->cfg))
            add_buf(l, &tr->h_grad, P * F, 1, "reduced gradient", TT_MEM_BY_PARAMS);
        if (multi_node(&tr->cfg)) { /* the reduce-scatter's K received slices, and this rank's slice of the sum */
            size_t lo0, S;
            tt_node_slice(P, tr->cfg.node->size, 0, &lo0, &S);
            add_buf(l, &tr->h_recv, (size_t)tr->cfg.node->size * S * F, 1, "cross-node buffers", TT_MEM_BY_PARAMS);
            if (tr->cfg.node_reduce == TT_NODE_PS) add_buf(l, &tr->h_slice, S * F, 1, "cross-node buffers", TT_MEM_BY_PARAMS);
        }
    }
}

/* bytes from host memory h_src (pageable) into d_dst through the pinned staging buffer h_stage (stage bytes), a
 * chunk at a time: an async copy reads pinned memory only. */
static void upload_staged(tt_dev *dev, void *d_dst, const void *h_src, size_t bytes, void *h_stage, size_t stage)
{
    for (size_t at = 0; at < bytes; at += stage) {
        const size_t n = bytes - at < stage ? bytes - at : stage;
        memcpy(h_stage, (const char *)h_src + at, n);
        tt_dev_h2d(dev, (char *)d_dst + at, h_stage, n);
        tt_dev_sync(dev); /* the staging is written again next */
    }
}

/* --data-on device: the training set's samples and labels onto this tower's device, once, through the batch staging
 * (h_x: room for a shard of float samples), before any step. Towers sharing the device read it after tt_trainer_init
 * returns: the syncs above come first. */
static void tower_upload_set(tt_tower *tw)
{
    const tt_trainer *tr = tw->tr;
    const tt_dataset *set = tr->cfg.train_set;
    const size_t stage = tr->shard_max * tr->model->input_dim * sizeof(float);
    upload_staged(&tw->dev, tw->d_set_x, set->x, set->n * tt_dataset_sample_bytes(set), tw->h_x, stage);
    upload_staged(&tw->dev, tw->d_set_y, set->y, set->n * sizeof(int32_t), tw->h_x, stage);
}

static tt_status tower_alloc(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const int d = tw->id % tr->cfg.n_devices;
    tt_status s = tt_dev_init(&tw->dev, tr->cfg.ops, tr->cfg.devices ? tr->cfg.devices[d] : d, &tw->err);
    if (s) return s;
    tt_dev_bind(&tw->dev);
    buf_list l;
    tower_buffers(tr, tw, &l);
    for (int i = 0; i < l.n; i++) {
        tower_buf *b = &l.b[i];
        *b->slot = b->on_host ? tt_dev_host_alloc(&tw->dev, b->bytes) : tt_dev_alloc(&tw->dev, b->bytes);
        if (!*b->slot)
            return tt_fail(&tw->err, TT_ERR_NOMEM,
                           "out of %s memory for %s (%zu bytes; a %zu-row shard of a %zu-parameter model)",
                           b->on_host ? "pinned host" : "device", b->part, b->bytes, tr->shard_max,
                           tr->model->n_params);
    }
    for (size_t i = 1; i <= tr->model->n_logits; i++)
        if (tt_model_act_shared(tr->model, i)) tw->d_act[i] = tw->d_act[i - 1];
    if (tw->d_set_x) tower_upload_set(tw);
    for (int e = 0; e < EV_COUNT; e++)
        if (!(tw->ev[e] = tt_dev_event_create(&tw->dev)))
            return tt_fail(&tw->err, TT_ERR_DEVICE, "could not create the tower's timing events");
    if (tr->ov) { /* --overlap on: around each bucket's push, and after the statistics' push */
        for (size_t k = 0; k < tr->ov->nb; k++)
            for (int e = 0; e < 2; e++)
                if (!(tw->ev_b[k][e] = tt_dev_event_create(&tw->dev)))
                    return tt_fail(&tw->err, TT_ERR_DEVICE, "could not create the tower's bucket events");
        if (!(tw->ev_loss = tt_dev_event_create(&tw->dev)) || !(tw->ev_ahead = tt_dev_event_create(&tw->dev)))
            return tt_fail(&tw->err, TT_ERR_DEVICE, "could not create the tower's bucket events");
    }
    return TT_OK;
}

static void tower_release(tt_tower *tw)
{
    if (!tw->dev.ops) return;
    tt_dev_graph_free(&tw->dev, tw->graph);
    tw->graph = NULL;
    memset(tw->seen_key, 0, sizeof tw->seen_key);
    for (int e = 0; e < EV_COUNT; e++) {
        tt_dev_event_destroy(&tw->dev, tw->ev[e]);
        tw->ev[e] = NULL;
    }
    for (size_t k = 0; k < TT_MAX_BUCKETS; k++)
        for (int e = 0; e < 2; e++) {
            tt_dev_event_destroy(&tw->dev, tw->ev_b[k][e]);
            tw->ev_b[k][e] = NULL;
        }
    tt_dev_event_destroy(&tw->dev, tw->ev_loss);
    tt_dev_event_destroy(&tw->dev, tw->ev_ahead);
    tw->ev_loss = tw->ev_ahead = NULL;
    buf_list l;
    tower_buffers(tw->tr, tw, &l);
    for (int i = 0; i < l.n; i++) {
        if (l.b[i].on_host)
            tt_dev_host_free(&tw->dev, *l.b[i].slot);
        else
            tt_dev_dfree(&tw->dev, *l.b[i].slot);
        *l.b[i].slot = NULL;
    }
    memset(tw->d_act, 0, sizeof tw->d_act); /* and the shared ones */
    tw->d_set_x = NULL; /* a virtual tower's: its device's first tower's copy, freed there */
    tw->d_set_y = NULL;
    tt_dev_free(&tw->dev);
}

/* ---- tower side: the phases of a step ---------------------------------------------------------------------- */

/* pull: the master weights into this tower's memory (async on a GPU: the host goes on to the data phase) — from
 * the host; --update device: from tower 0's device (tower 0 holds them); replicated: none (every tower holds its
 * own). Returns the bytes it moved. */
static uint64_t pull_bytes(const tt_tower *tw)
{
    return holds_master(tw->tr, tw) || tw->skip_pull ? 0 : tw->tr->model->n_params * sizeof(float);
}

static uint64_t phase_pull(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    size_t bytes = pull_bytes(tw);
    if (!bytes) return 0;
    if (tr->cfg.update == TT_UPDATE_DEVICE) {
        tt_dev_peer_copy(&tw->dev, tw->d_params, &tr->towers[0].dev, tr->towers[0].d_params, bytes);
    } else if (tr->ov) { /* --overlap on: the buckets not pulled ahead during the last step; the stream waits for
                          * the side stream's pulls ahead */
        bytes = 0;
        int ahead = 0;
        for (size_t k = 0; k < tr->ov->nb; k++) {
            const size_t lo = tr->ov->edge[k + 1], n = tr->ov->edge[k] - lo;
            if (!tw->ahead[k]) tt_dev_h2d(&tw->dev, tw->d_params + lo, tr->h_params + lo, n * sizeof(float));
            bytes += tw->ahead[k] ? 0 : n * sizeof(float);
            ahead |= tw->ahead[k];
            tw->ahead[k] = 0;
        }
        if (ahead) tt_dev_stream_wait(&tw->dev, tw->ev_ahead);
    } else {
        tt_dev_h2d(&tw->dev, tw->d_params, tr->h_params, bytes);
    }
    return bytes;
}

/* data: rows (by index, or a contiguous range when idx is NULL) gathered into the staging buffers on the host
 * (data_gather), then copied in (data_issue) — bytes are scaled on the device, float32 samples go straight into the
 * input activation — with their labels and data-set indices. --data-on device, for steps on the training set it holds
 * (data_on_device): the host writes the rows' data-set indices only, copies them in, and the device gathers the rows
 * and labels from its copy of the set by them — the same bytes in the same buffers, so the same bits after. */
static int data_on_device(const tt_tower *tw, const tt_dataset *ds)
{
    return tw->d_set_x != NULL && ds == tw->tr->cfg.train_set;
}

static void data_gather(tt_tower *tw, const tt_dataset *ds, const uint32_t *idx, size_t first, size_t rows)
{
    const size_t SB = tt_dataset_sample_bytes(ds);
    const int rows_too = !data_on_device(tw, ds);
    for (size_t r = 0; r < rows; r++) {
        size_t s = idx ? idx[first + r] : first + r;
        TT_ASSERT(s < ds->n); /* the device's gather would give zeros, the host's copy read past the set */
        tw->h_ids[r] = (uint32_t)s;
        if (!rows_too) continue;
        memcpy(tw->h_x + r * SB, ds->x + s * SB, SB);
        tw->h_labels[r] = ds->y[s];
    }
}

static void data_issue(tt_tower *tw, const tt_dataset *ds, size_t rows)
{
    const size_t SB = tt_dataset_sample_bytes(ds);
    const int on_device = data_on_device(tw, ds);
    if (on_device) tt_dev_h2d(&tw->dev, tw->d_ids, tw->h_ids, rows * sizeof(uint32_t)); /* what the gathers read */
    if (ds->xtype == TT_X_U8) { /* pixels to [0,1]; for a model that reads token ids, bytes are ids */
        const float scale = tw->tr->model->token_vocab ? 1.0f : ds->scale;
        if (on_device) tt_dev_gather_rows(&tw->dev, tw->d_x8, tw->d_set_x, ds->n, tw->d_ids, rows, SB);
        else tt_dev_h2d(&tw->dev, tw->d_x8, tw->h_x, rows * SB);
        tt_dev_u8_to_f32(&tw->dev, tw->d_act[0], tw->d_x8, rows * ds->dim, scale);
    } else if (on_device) {
        tt_dev_gather_rows(&tw->dev, tw->d_act[0], tw->d_set_x, ds->n, tw->d_ids, rows, SB);
    } else {
        tt_dev_h2d(&tw->dev, tw->d_act[0], tw->h_x, rows * SB);
    }
    if (on_device) {
        tt_dev_gather_rows(&tw->dev, tw->d_labels, tw->d_set_y, ds->n, tw->d_ids, rows, sizeof(int32_t));
        return;
    }
    tt_dev_h2d(&tw->dev, tw->d_labels, tw->h_labels, rows * sizeof(int32_t));
    tt_dev_h2d(&tw->dev, tw->d_ids, tw->h_ids, rows * sizeof(uint32_t));
}

/* The bytes the data phase copies host -> device for `rows` rows of ds: the rows, labels and indices, or (--data-on
 * device) the indices alone. */
static uint64_t data_bytes(const tt_tower *tw, const tt_dataset *ds, size_t rows)
{
    const size_t index = sizeof(uint32_t);
    return rows * (data_on_device(tw, ds) ? index : tt_dataset_sample_bytes(ds) + sizeof(int32_t) + index);
}

static void phase_data(tt_tower *tw, const tt_dataset *ds, const uint32_t *idx, size_t first, size_t rows)
{
    data_gather(tw, ds, idx, first, rows);
    data_issue(tw, ds, rows);
}

/* --bn-sync on: tower tw's part of an exchange (tt_exchange.sum). Its n floats go to its host slot of this exchange's
 * parity; after every tower's (the barrier) each tower adds the N slots in tower order — the same bits on every
 * tower — and copies the sum back. The parity keeps a fast tower's next exchange off the slots a slow one still
 * reads: to write them again it must pass the next barrier, which the slow one reaches only after reading. */
static void tower_exchange(void *arg, tt_dev *dev, float *d_buf, size_t n)
{
    tt_tower *tw = (tt_tower *)arg;
    tt_trainer *tr = tw->tr;
    const size_t N = tr->cfg.n_towers, par = (size_t)(tw->xchg_seq++ & 1) * tr->xchg_max;
    TT_ASSERT(n <= tr->xchg_max);
    if (d_buf) {
        tt_dev_d2h(dev, tw->h_xchg + par, d_buf, n * sizeof(float));
        tt_dev_sync(dev);
    } else {
        memset(tw->h_xchg + par, 0, n * sizeof(float));
    }
    tt_barrier_wait(&tr->bar_xchg, NULL, NULL);
    for (size_t k = 0; k < n; k++) {
        float acc = 0.0f;
        for (size_t t = 0; t < N; t++) acc = tt_add(acc, tr->towers[t].h_xchg[par + k]);
        tw->h_xsum[k] = acc;
    }
    if (d_buf) tt_dev_h2d(dev, d_buf, tw->h_xsum, n * sizeof(float));
}

/* --bn-sync on with several towers: the most floats one exchange carries (a batchnorm layer's 2C, which its saved
 * floats bound), or 0: no exchange. */
static size_t xchg_floats(const tt_model *m, const tt_trainer_config *cfg)
{
    return cfg->bn_sync && cfg->n_towers > 1 ? m->n_saved : 0;
}

/* What the layers see of this tower's pass: training or not, the seed and epoch, the rows' indices, the scratch,
 * the saved floats; a training pass: the gradient buffer (the moving statistics' steps), the tower's share of the
 * step's n rows and, with --bn-sync on, the exchange. */
static tt_pass tower_pass(tt_tower *tw, int training, size_t n)
{
    const tt_trainer *tr = tw->tr;
    tt_pass ps = {.training = training,
                  .seed = tr->cfg.seed,
                  .epoch = tr->epoch,
                  .d_ids = tw->d_ids,
                  .d_ws = tw->d_ws,
                  .chunk_mnk = tr->cfg.ops->chunk_mnk,
                  .d_saved = tw->d_saved,
                  .share = 1.0f,
                  .rows_all = tw->rows,
                  .lt_epilogues = tr->cfg.epilogues};
    if (training) {
        ps.d_grads = tw->d_grads;
        ps.share = n ? (float)((double)tw->rows / (double)n) : 0.0f;
        ps.rows_all = n;
        ps.xchg = tr->xchg_max ? &tw->xchg : NULL;
        ps.d_masks = tw->d_masks;
        ps.lt_masked = tw->lt_masked; /* written by the tower's own forward, read by its backward */
    }
    return ps;
}

/* compute: forward, loss and backward of this tower's rows, the loss gradient scaled by 1/n (n: the step's
 * samples over all towers; --sync weights: the tower's own rows, its shard's mean, since it updates alone). A tower
 * with an empty shard contributes zero. */
static void bucket_ready(void *arg, size_t lo);

static void phase_compute(tt_tower *tw, size_t n)
{
    const tt_model *m = tw->tr->model;
    tt_dev *dev = &tw->dev;
    const int ov = tw->tr->ov != NULL;
    if (tw->tr->cfg.sync.kind == TT_SYNC_WEIGHTS) n = tw->rows;
    const tt_pass ps = tower_pass(tw, 1, n);
    if (tw->rows == 0) {
        if (ov) tt_dev_event_record(dev, tw->ev_loss);
        tt_dev_fill(dev, tw->d_grads, m->n_params, 0.0f);
        tt_model_idle(dev, m, &ps); /* --bn-sync on: zeros into the others' exchanges */
        return;
    }
    tt_model_forward(dev, m, &ps, tw->d_params, tw->d_act, tw->rows);
    tt_dev_softmax_xent(dev, tw->d_dlogits, tw->d_stats, tt_model_logits(m, tw->d_act), tw->d_labels, tw->rows,
                        m->n_classes, 1.0f / (float)n);
    if (ov) { /* --overlap on: the statistics now, so the host knows the loss is finite before any bucket lands */
        tt_dev_d2h(dev, tw->h_stats, tw->d_stats, 2 * tw->rows * sizeof(float));
        tt_dev_event_record(dev, tw->ev_loss);
    }
    tt_model_backward_each(dev, m, &ps, tw->d_params, tw->d_grads, tw->d_act, tw->d_delta, tw->d_dlogits, tw->rows,
                           ov ? bucket_ready : NULL, tw);
}

/* push: the per-row statistics, and (cpu placement) the gradient into this tower's own host slot (--sync weights:
 * none; the tower updates its own weights). */
static int pushes_gradient(const tt_trainer *tr)
{
    return tr->place->info.host_sum && tr->cfg.sync.kind != TT_SYNC_WEIGHTS;
}

static void bucket_push(tt_tower *tw, size_t k);
static void tower_arrive_landed(tt_tower *tw);

static void phase_push(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    if (tr->ov) { /* --overlap on: the buckets not pushed during the backward (the last; all for an empty shard) */
        while (tw->pushed < tr->ov->nb) bucket_push(tw, tw->pushed++);
        tower_arrive_landed(tw);
        return;
    }
    if (pushes_gradient(tr))
        tt_dev_d2h(&tw->dev, tr->h_slots[tw->id], tw->d_grads, tr->model->n_params * sizeof(float));
    tt_dev_d2h(&tw->dev, tw->h_stats, tw->d_stats, 2 * tw->rows * sizeof(float));
}

static void overlap_run(tt_trainer *tr, int i, tt_tower *tw, int pull_ahead);

static void tower_count_stats(tt_tower *tw, size_t rows)
{
    for (size_t r = 0; r < rows; r++) {
        tw->loss_sum += tw->h_stats[2 * r];
        float rank = tw->h_stats[2 * r + 1];
        tw->top1 += rank < 1.0f;
        tw->top5 += rank < 5.0f;
    }
}

double tt_slow_delay(const tt_slow_tower *slow, size_t n_slow, uint64_t seed, size_t t, uint64_t step)
{
    for (size_t k = 0; k < n_slow; k++) {
        if (slow[k].tower != t) continue;
        double u = 0;
        if (slow[k].jitter_ms > 0) { /* uniform in [0, 1) from a hash of (seed, tower, step): no state, any thread */
            tt_rng r;
            tt_rng_seed(&r, seed ^ 0x5105c0ffee ^ (uint64_t)t * 0x9e3779b97f4a7c15ull, step);
            u = tt_rng_uniform(&r);
        }
        return 1e-3 * (slow[k].ms + u * slow[k].jitter_ms);
    }
    return 0;
}

/* --slow-tower: this tower's delay of this step, slept between its data and its compute (on a GPU the stream sits
 * idle meanwhile, so the ledger's compute span holds it as it does on the CPU). */
static void tower_slow(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const double d = tt_slow_delay(tr->cfg.slow, tr->cfg.n_slow, tr->cfg.seed, (size_t)tw->id, tw->n_run);
    const double end = tt_now() + d;
    /* in slices, so a stop (a signal, tt_trainer_request_stop) cuts the delay short: the step's math is the same */
    for (double left = d; left > 0; left = end - tt_now()) {
        if ((tr->cfg.stop && atomic_load_explicit(tr->cfg.stop, memory_order_relaxed)) ||
            atomic_load_explicit(&tr->stop_request, memory_order_relaxed))
            return;
        const double slice = left < 0.05 ? left : 0.05;
        struct timespec ts = {0, (long)(slice * 1e9)};
        if (nanosleep(&ts, NULL) != 0 && errno != EINTR) return;
    }
}

/* Marks what the tower's thread is doing from now on (tt_trainer_live_phase): one relaxed store. */
static inline void live(tt_tower *tw, tt_live_phase ph) { atomic_store_explicit(&tw->live, (int)ph, memory_order_relaxed); }

int tt_trainer_live_phase(const tt_trainer *tr, size_t t)
{
    return t < tr->cfg.n_towers ? atomic_load_explicit(&tr->towers[t].live, memory_order_relaxed) : TT_LIVE_IDLE;
}

/* Seconds from event a to event b of this tower (both complete). */
static double ev_span(tt_tower *tw, int a, int b) { return tt_dev_event_elapsed(&tw->dev, tw->ev[a], tw->ev[b]); }

/* The device side of a tower's step, in stream order, with the ledger's events between the phases: pull, data
 * (the host gathers its rows while the pull is in flight, unless gathered already), compute, push. Everything is
 * issued; nothing waits. */
static void tower_issue(tt_tower *tw, const uint32_t *idx, size_t n, int gathered)
{
    tt_trainer *tr = tw->tr;
    tt_dev *dev = &tw->dev;
    tt_dev_event_record(dev, tw->ev[EV_START]);
    live(tw, TT_LIVE_PULL);
    phase_pull(tw);
    tt_dev_event_record(dev, tw->ev[EV_PULL]);
    live(tw, TT_LIVE_DATA);
    if (!gathered) data_gather(tw, tr->ds, idx, tw->lo, tw->rows);
    data_issue(tw, tr->ds, tw->rows);
    tt_dev_event_record(dev, tw->ev[EV_DATA]);
    live(tw, TT_LIVE_COMPUTE);
    if (tr->cfg.n_slow) tower_slow(tw);
    phase_compute(tw, n);
    tt_dev_event_record(dev, tw->ev[EV_COMPUTE]);
    live(tw, TT_LIVE_PUSH);
    phase_push(tw);
    tt_dev_event_record(dev, tw->ev[EV_PUSH]);
}

/* --graphs on: the step as one graph launch where this shape was captured; captured now (then launched) where the
 * shape came the step before too; else 0, and the caller issues the step as usual. A graph the backend cannot
 * replay (stale, or spoilt in its capture) is dropped and the step issued as usual. The rows are gathered already. */
static int tower_graph(tt_tower *tw, size_t n)
{
    tt_dev *dev = &tw->dev;
    /* with --data-on device the step's gathers read the training set's copy on this device, captured as pointers:
     * whether the step's data set is that one is part of the shape (another set takes the host's path) */
    const size_t key[4] = {tw->rows, n, (size_t)tw->tr->epoch, (size_t)data_on_device(tw, tw->tr->ds)};
    if (tw->graph && memcmp(key, tw->graph_key, sizeof key) == 0) {
        if (tt_dev_graph_launch(dev, tw->graph)) return 1;
        tt_dev_graph_free(dev, tw->graph); /* stale: captured over scratch the backend has moved since */
        tw->graph = NULL;
    }
    if (memcmp(key, tw->seen_key, sizeof key) != 0) { /* first sight: run it as usual (and let the backend warm up) */
        memcpy(tw->seen_key, key, sizeof key);
        return 0;
    }
    tt_dev_capture_begin(dev);
    tower_issue(tw, NULL, n, 1);
    void *g = tt_dev_capture_end(dev);
    if (!g) return 0;
    tt_dev_graph_free(dev, tw->graph); /* one graph a tower: the steady-state shape's */
    tw->graph = g;
    memcpy(tw->graph_key, key, sizeof key);
    return tt_dev_graph_launch(dev, g);
}

/* One tower's part of a step: idx[lo..lo+rows) of a step of n samples. Everything is issued before the one wait. */
static void tower_step(tt_tower *tw, const uint32_t *idx, size_t n, int more)
{
    tt_trainer *tr = tw->tr;
    const tt_model *m = tr->model;
    const size_t B = tw->rows;
    tt_dev *dev = &tw->dev;
    tt_tower_ledger *l = &tw->led;
    memset(l, 0, sizeof *l);
    l->tower = (size_t)tw->id;
    tw->loss_sum = 0;
    tw->top1 = tw->top5 = 0;
    tw->pushed = tw->arrived = tw->ahead_seen = 0;
    tw->loss_in = 0;
    uint64_t pulled = pull_bytes(tw);
    for (size_t k = 0; tr->ov && k < tr->ov->nb; k++) /* pulled ahead at the end of the last step */
        if (tw->ahead[k]) pulled -= (tr->ov->edge[k] - tr->ov->edge[k + 1]) * sizeof(float);

    /* a graph reads the staging buffers when it runs: the rows are gathered before it is launched (the time shows
     * as the tower's launch, before the pull) */
    if (tr->cfg.graphs) data_gather(tw, tr->ds, idx, tw->lo, B);
    const double t0 = tt_now(); /* the stream is idle: EV_START completes at once, so it is this moment */
    if (!tr->cfg.graphs || !tower_graph(tw, n)) tower_issue(tw, idx, n, tr->cfg.graphs);
    /* --overlap on: each bucket handed to the host as it lands, the host's chunks helped with, the next step's
     * weights pulled ahead; the step's buckets are all updated when it returns */
    if (tr->ov) {
        live(tw, TT_LIVE_HOST);
        overlap_run(tr, tw->id, tw, more);
    }
    live(tw, TT_LIVE_DEVICE);
    tt_dev_sync(dev); /* the one wait of the step: the host reads the statistics (and, for cpu, sums the slots) */
    if (!tr->ov) tower_count_stats(tw, B);
    l->pull0 = t0;
    l->pull1 = pulled ? t0 + ev_span(tw, EV_START, EV_PULL) : t0; /* a master holder pulls nothing */
    l->data1 = t0 + ev_span(tw, EV_START, EV_DATA);
    l->compute1 = l->push0 = t0 + ev_span(tw, EV_START, EV_COMPUTE);
    l->push1 = t0 + ev_span(tw, EV_START, EV_PUSH);
    for (size_t k = 0; tr->ov && k < tr->ov->nb; k++) { /* each bucket's copy, from its layers' end (or, on the one
                                                          * push stream, the bucket before's landing) to its own */
        double *b = l->bucket[k];
        b[0] = t0 + tt_dev_event_elapsed(dev, tw->ev[EV_START], tw->ev_b[k][0]);
        b[1] = t0 + tt_dev_event_elapsed(dev, tw->ev[EV_START], tw->ev_b[k][1]);
        if (k && b[0] < l->bucket[k - 1][1]) b[0] = l->bucket[k - 1][1];
        if (b[1] < b[0]) b[1] = b[0];
        if (b[0] < l->compute1) /* its part during the backward */
            l->push_hidden += (b[1] < l->compute1 ? b[1] : l->compute1) - b[0];
        if (b[1] > l->push1) l->push1 = b[1]; /* on a side stream: the push ends where the last bucket lands */
        l->n_buckets = (unsigned)k + 1;
    }
    if (l->bytes_prepull) { /* the pulls ahead, from the first one's issue to the last one's landing */
        const double end = t0 + tt_dev_event_elapsed(dev, tw->ev[EV_START], tw->ev_ahead);
        l->ahead1 = end > l->ahead0 ? end : l->ahead0;
    }
    l->reduce0 = l->reduce1 = l->rpush0 = l->rpush1 = l->push1;
    l->rows = B;
    l->bytes_pull = pulled;
    l->bytes_data = data_bytes(tw, tr->ds, B);
    l->bytes_push = (pushes_gradient(tr) ? m->n_params * sizeof(float) : 0) + 2 * B * sizeof(float);
    tw->n_run++;
}

/* ---- tower side: the reduce phases of the placements (after barrier A: every gradient is complete) ---------- */

/* Opens a reduce phase on the tower's stream (idle since the tower phase's wait): returns the clock at its start. */
static double reduce_begin(tt_tower *tw)
{
    double t0 = tt_now();
    tt_dev_event_record(&tw->dev, tw->ev[EV_R_START]);
    return t0;
}

/* Closes it: d_sum (n floats, the sum or this tower's slice of it) is pushed to h_grad + lo (--update host; on a
 * device the sum stays there), then the one wait; the ledger gets the reduce and the push of the sum from the
 * events. */
static void reduce_end(tt_tower *tw, double t0, const float *d_sum, size_t lo, size_t n, uint64_t bytes_reduce)
{
    tt_dev *dev = &tw->dev;
    if (tw->tr->cfg.update != TT_UPDATE_HOST) n = 0;
    tt_dev_event_record(dev, tw->ev[EV_R_SUM]);
    if (n) tt_dev_d2h(dev, tw->tr->h_grad + lo, d_sum, n * sizeof(float));
    tt_dev_event_record(dev, tw->ev[EV_R_PUSH]);
    tt_dev_sync(dev);
    tt_tower_ledger *l = &tw->led;
    l->reduce0 = t0;
    l->reduce1 = l->rpush0 = t0 + ev_span(tw, EV_R_START, EV_R_SUM);
    l->rpush1 = n ? t0 + ev_span(tw, EV_R_START, EV_R_PUSH) : l->rpush0; /* nothing pushed: no span */
    l->bytes_reduce = bytes_reduce;
    l->bytes_push_sum = n * sizeof(float);
}

/* device: tower 0 gathers the others' gradients and sums them into d_acc in tower order — tower 1's copied in
 * first, then its own added (a + b == b + a exactly: only the grouping matters), then towers 2.. — and pushes the
 * sum to the host (TF's ReductionToOneDevice). Every tower's own gradient stays intact. */
static void reduce_device(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const size_t N = tr->cfg.n_towers, P = tr->model->n_params;
    if (tw->id != 0) return;
    double t0 = reduce_begin(tw);
    const float *d_sum = tw->d_grads; /* one tower: its gradient is the sum */
    if (N > 1) {
        tt_dev_peer_copy(&tw->dev, tw->d_acc, &tr->towers[1].dev, tr->towers[1].d_grads, P * sizeof(float));
        tt_dev_add(&tw->dev, tw->d_acc, tw->d_grads, P);
        for (size_t u = 2; u < N; u++) {
            tt_dev_peer_copy(&tw->dev, tw->d_recv, &tr->towers[u].dev, tr->towers[u].d_grads, P * sizeof(float));
            tt_dev_add(&tw->dev, tw->d_acc, tw->d_recv, P);
        }
        d_sum = tw->d_acc;
    }
    reduce_end(tw, t0, d_sum, 0, P, (N - 1) * P * sizeof(float));
}

/* allreduce: tower t takes slice t: it starts from tower 0's slice and adds towers 1..N-1 in order (peer copies
 * for the others' slices, its own read in place), then pushes its slice of the sum (reduce-scatter, then gather to
 * the host; --update replicated: the slice stays in its place in the whole-size d_acc, and tower_update gathers the
 * others' slices there). Same additions in the same order as the host's sum: the results are identical. */
static void reduce_allreduce(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const size_t N = tr->cfg.n_towers, lo = tw->slice_lo, n = tw->slice_n, bytes = n * sizeof(float);
    float *acc = tr->cfg.update == TT_UPDATE_REPLICATED ? tw->d_acc + lo : tw->d_acc; /* the whole sum's place */
    double t0 = reduce_begin(tw);
    tt_dev_peer_copy(&tw->dev, acc, &tr->towers[0].dev, tr->towers[0].d_grads + lo, bytes);
    for (size_t u = 1; u < N; u++) {
        const float *d_src = tr->towers[u].d_grads + lo;
        if (u != (size_t)tw->id) {
            tt_dev_peer_copy(&tw->dev, tw->d_recv, &tr->towers[u].dev, d_src, bytes);
            d_src = tw->d_recv;
        }
        tt_dev_add(&tw->dev, acc, d_src, n);
    }
    /* slices of the N - 1 other towers crossed into this tower's memory */
    reduce_end(tw, t0, acc, lo, n, (N - 1) * bytes);
}

/* nccl: every tower thread issues its part of one ncclReduce of the gradients into tower 0's d_acc on its own
 * stream; tower 0 then pushes the sum (--update device: it keeps it; replicated: one ncclAllReduce into every
 * tower's d_acc, nothing pushed). NCCL chooses the order of the additions (ring or tree). One tower runs it
 * too (a communicator of one rank), so a one-GPU machine exercises the NCCL path. */
static void reduce_nccl(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const size_t N = tr->cfg.n_towers, P = tr->model->n_params;
    double t0 = reduce_begin(tw);
    const int all = tr->cfg.update == TT_UPDATE_REPLICATED; /* ncclAllReduce: every tower gets the sum */
    tr->cfg.ops->comm_reduce(tr->comm, tw->id, tw->dev.ctx, tw->d_grads, tw->id == 0 || all ? tw->d_acc : NULL, P,
                             all ? -1 : 0);
    if (tw->id == 0) {
        reduce_end(tw, t0, tw->d_acc, 0, P, (N - 1) * P * sizeof(float) / N);
    } else {
        tt_dev_event_record(&tw->dev, tw->ev[EV_R_SUM]);
        tt_dev_sync(&tw->dev);
        tw->led.reduce0 = t0;
        tw->led.reduce1 = tw->led.rpush0 = tw->led.rpush1 = t0 + ev_span(tw, EV_R_START, EV_R_SUM);
        tw->led.bytes_reduce = (N - 1) * P * sizeof(float) / N;
    }
}

/* ---- tower side: the update on a device (--update device: tower 0; replicated: every tower) ------------------ */

/* The summed gradient on this tower's device: the placement's sum buffer, or (one tower, --reduce device) its own
 * gradient. */
static const float *device_sum(const tt_tower *tw)
{
    return tw->d_acc ? tw->d_acc : tw->d_grads;
}

/* After barrier R: the optimizer on this tower's master copy (replicated + allreduce: first the other towers' summed
 * slices into its whole sum, the all-gather); tower 0 reads back which blocks were not finite (the halt). */
static int tower_update(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    if (!holds_master(tr, tw)) return 0;
    const size_t P = tr->model->n_params, N = tr->cfg.n_towers, blocks = (P + TT_UPDATE_BLOCK - 1) / TT_UPDATE_BLOCK;
    tt_dev *dev = &tw->dev;
    const double t0 = tt_now(); /* the stream is idle (the reduce phase waited): EV_U_START is this moment */
    tt_dev_event_record(dev, tw->ev[EV_U_START]);
    tw->led.bytes_gather = 0;
    if (tr->cfg.update == TT_UPDATE_REPLICATED && tr->cfg.reduce == TT_REDUCE_ALLREDUCE)
        for (size_t u = 0; u < N; u++) {
            tt_tower *o = &tr->towers[u];
            if (o != tw && o->slice_n) {
                tt_dev_peer_copy(dev, tw->d_acc + o->slice_lo, &o->dev, o->d_acc + o->slice_lo,
                                 o->slice_n * sizeof(float));
                tw->led.bytes_gather += o->slice_n * sizeof(float);
            }
        }
    tt_update_args u;
    /* --sync weights: each tower steps alone, with its own step count and its own loss's verdict */
    const int alone = tr->cfg.sync.kind == TT_SYNC_WEIGHTS;
    tt_optim_update_args(alone ? &tw->opt : &tr->opt, &u);
    tt_dev_update(dev, &u, tw->d_params, device_sum(tw), tw->d_m, tw->d_v, tw->d_a, tw->d_bad, P,
                  alone ? !isfinite(tw->loss_sum) : tr->loss_nonfinite);
    /* every master holds the same weights, so tower 0 speaks for all; --sync weights: each its own */
    const int own = tw->id == 0 || tr->cfg.sync.kind == TT_SYNC_WEIGHTS;
    if (own) tt_dev_d2h(dev, tw->h_bad, tw->d_bad, blocks * sizeof(int32_t));
    tt_dev_event_record(dev, tw->ev[EV_U_END]);
    tt_dev_sync(dev);
    tw->led.update0 = t0;
    tw->led.update1 = t0 + ev_span(tw, EV_U_START, EV_U_END);
    int bad = 0;
    if (own)
        for (size_t b = 0; b < blocks; b++) bad |= tw->h_bad[b] != 0;
    if (bad) atomic_store_explicit(&tr->grad_nonfinite, 1, memory_order_relaxed);
    return bad; /* some block of this tower's update was not finite (and not applied) */
}

/* --update device, replicated: a run of steps starts from the host's master weights and optimizer state (set,
 * resumed or left by the last run), copied to every tower that holds a master, and ends with tower 0's copied back
 * (checkpoints, evaluation and tt_trainer_params read the host's between runs of steps). */
static void tower_master(tt_tower *tw, int to_device)
{
    tt_trainer *tr = tw->tr;
    if (!holds_master(tr, tw) || (!to_device && tw->id != 0)) return;
    const size_t bytes = tr->model->n_params * sizeof(float);
    if (to_device) tt_dev_h2d(&tw->dev, tw->d_params, tr->h_params, bytes); /* h_params is pinned */
    else tt_dev_d2h(&tw->dev, tr->h_params, tw->d_params, bytes);
    float *host[3] = {tr->opt.m, tr->opt.v, tr->opt.a}, *dev[3] = {tw->d_m, tw->d_v, tw->d_a};
    for (int k = 0; k < 3; k++) { /* the optimizer's vectors are not pinned: one at a time through h_stage */
        if (!host[k] || !dev[k]) continue;
        if (to_device) memcpy(tw->h_stage, host[k], bytes);
        if (to_device) tt_dev_h2d(&tw->dev, dev[k], tw->h_stage, bytes);
        else tt_dev_d2h(&tw->dev, tw->h_stage, dev[k], bytes);
        tt_dev_sync(&tw->dev);
        if (!to_device) memcpy(host[k], tw->h_stage, bytes);
    }
    tt_dev_sync(&tw->dev);
}

static void tower_eval(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const tt_model *m = tr->model;
    tt_dev *dev = &tw->dev;
    const size_t lo = tw->lo, total = tw->rows;
    tw->loss_sum = 0;
    tw->top1 = tw->top5 = 0;
    const tt_pass ps = tower_pass(tw, 0, 0);
    /* the host's master weights, whatever --update says: evaluation reads the host's (a master tower's own copy is
     * the host's after every run of steps, but tt_trainer_set_params changes only the host's); --sync weights
     * between two averages: the tower's own weights stay where they are, the host's (their average) go into the
     * gradient's buffer, free until the next step */
    float *w = tr->sy && tr->sy->towers_hold ? tw->d_grads : tw->d_params;
    tt_dev_h2d(dev, w, tr->h_params, m->n_params * sizeof(float));
    for (size_t done = 0; done < total;) {
        /* eval, predict and train's final test evaluation stop at a signal between chunks (their result is then
         * discarded); train's validation runs to its end, and the run stops after it, with a checkpoint */
        if (tr->eval_stops && tr->cfg.stop && atomic_load(tr->cfg.stop)) break;
        size_t rows = total - done < tr->shard_max ? total - done : tr->shard_max;
        phase_data(tw, tr->ds, NULL, lo + done, rows);
        tt_model_forward(dev, m, &ps, w, tw->d_act, rows);
        tt_dev_softmax_xent(dev, NULL, tw->d_stats, tt_model_logits(m, tw->d_act), tw->d_labels, rows, m->n_classes,
                            0.0f);
        tt_dev_d2h(dev, tw->h_stats, tw->d_stats, 2 * rows * sizeof(float));
        if (tr->h_logits) /* tt_trainer_predict: this tower's rows, in data-set order */
            tt_dev_d2h(dev, tr->h_logits + (lo + done) * m->n_classes, tt_model_logits(m, tw->d_act),
                       rows * m->n_classes * sizeof(float));
        tt_dev_sync(dev);
        tower_count_stats(tw, rows);
        done += rows;
    }
}
/* After a step whose sum was not finite: does this tower's own gradient hold a NaN or an Inf? Reads the whole
 * gradient back — the failure path only; a healthy step pays nothing for it. */
static void tower_diagnose(tt_tower *tw)
{
    const size_t P = tw->tr->model->n_params;
    float *h = (float *)tt_dev_host_alloc(&tw->dev, P * sizeof(float)); /* pinned: an async copy's destination */
    if (!h) {
        tw->grad_nonfinite = -1; /* unknown */
        return;
    }
    tt_dev_d2h(&tw->dev, h, tw->d_grads, P * sizeof(float));
    tt_dev_sync(&tw->dev);
    tw->grad_nonfinite = !tt_all_finite(h, P);
    tt_dev_host_free(&tw->dev, h);
}

/* ---- host side: the run of steps ---------------------------------------------------------------------------- */

/* What a host pass does over its range of the buffer, block by block, split across the crew. */
typedef struct host_pass {
    size_t lo, hi;      /* the range [lo, hi) of the buffer */
    int sum;            /* sum the towers' slots in tower order (cpu placement) ... */
    float *sum_out;     /* ... into this buffer (the node sum of a rank), or (NULL) straight into the optimizer */
    const float *grad;  /* not summing: the gradient of position lo (grad[k - lo] is position k's) */
    int update;         /* apply the optimizer */
    size_t state_lo;    /* the optimizer's state starts at this position (ps: the rank's slice) */
} host_pass;

/* The single-node step's fused pass: the whole buffer, summed (cpu) or read from the pushed sum, and updated. */
static host_pass fused_pass(const tt_trainer *tr)
{
    host_pass p = {0, tr->model->n_params, tr->place->info.host_sum, NULL, tr->h_grad, 1, 0};
    return p;
}

/* Slice i of T of a host pass, block by block. The fused pass (cpu placement, one rank): sum the towers' slots in
 * tower order into a block buffer on this thread's stack, then apply the optimizer to the block — the summed
 * gradient never exists as a whole buffer, so it costs no memory traffic. Other placements: the towers already
 * pushed the sum into h_grad. K ranks: a node-sum pass (into h_grad), then after the combine an update pass.
 * A fixed order makes the result independent of which tower finished first and of T.
 * Every block of the summed gradient is checked for NaN/Inf on its way to the optimizer — by the sum itself, or
 * by a read that brings the block into L1 for the optimizer — so the check costs no pass over memory. A block that
 * is not finite is not applied (the master weights stay finite) and the step halts the run; so is every block when
 * the loss was not finite (barrier A saw it). t_sum and t_update (may be NULL) get this thread's seconds of each. */
/* Blocks [lo, hi) of a host pass (lo a multiple of TT_REDUCE_BLOCK, or p->lo): *t_sum and *t_update get its seconds
 * of each. */
static void host_blocks(tt_trainer *tr, const host_pass *p, size_t lo, size_t hi, double *t_sum, double *t_update)
{
    const size_t N = tr->cfg.n_towers;
    _Alignas(64) float block[TT_REDUCE_BLOCK];
    double t_reduce = 0, t_upd = 0, t = tt_now();
    for (size_t b = lo; b < hi; b += TT_REDUCE_BLOCK) {
        size_t e = b + TT_REDUCE_BLOCK < hi ? b + TT_REDUCE_BLOCK : hi, len = e - b;
        const float *grad = p->sum ? tr->h_slots[0] + b : p->grad + (b - p->lo); /* one tower: its slot is the sum */
        int finite = 1;
        if (p->sum && N > 1) {
            float *out = p->sum_out ? p->sum_out + b : block;
            finite = tt_sum_slots(out, tr->h_slots, N, b, len);
            grad = out;
        } else if (p->update) {
            finite = tt_all_finite(grad, len);
        }
        double t1 = tt_now();
        if (p->update) {
            if (!finite) atomic_store_explicit(&tr->grad_nonfinite, 1, memory_order_relaxed);
            else if (!tr->loss_nonfinite)
                tt_optim_apply(&tr->opt, tr->h_params + b, grad, b - p->state_lo, e - p->state_lo);
        }
        double t2 = tt_now();
        t_reduce += t1 - t;
        t_upd += t2 - t1;
        t = t2;
    }
    if (!p->sum) { /* the check of a pushed sum is part of the update's read */
        t_upd += t_reduce;
        t_reduce = 0;
    }
    *t_sum = t_reduce;
    *t_update = t_upd;
}

/* Slice i of T of the range [from, to) in whole blocks of TT_REDUCE_BLOCK floats: [*lo, *hi). A block's NaN/Inf
 * check covers the same floats as a device's update (--update device, replicated), so a halted step applies the same
 * finite blocks wherever the optimizer runs. */
static void block_slice(size_t from, size_t to, int i, int T, size_t *lo, size_t *hi)
{
    size_t chunk = (to - from + (size_t)T - 1) / (size_t)T;
    chunk = (chunk + TT_REDUCE_BLOCK - 1) / TT_REDUCE_BLOCK * TT_REDUCE_BLOCK;
    *lo = from + (size_t)i * chunk;
    *hi = *lo + chunk;
    if (*lo > to) *lo = to;
    if (*hi > to) *hi = to;
}

static void host_slice(tt_trainer *tr, const host_pass *p, int i, int T, double *t_sum, double *t_update)
{
    size_t lo, hi;
    block_slice(p->lo, p->hi, i, T, &lo, &hi);
    double t_reduce, t_upd, t_begin = tt_now();
    host_blocks(tr, p, lo, hi, &t_reduce, &t_upd);
    if (t_sum) *t_sum = t_reduce;
    if (t_update) *t_update = t_upd;
    if (i == 0) { /* thread 0's slice stands for the host in the trace: the reduction, then the update */
        if (p->sum) {
            tr->t_reduce0 = t_begin;
            tr->t_reduce1 = t_begin + t_reduce;
        }
        if (p->update) {
            tr->t_update0 = p->sum ? tr->t_reduce1 : t_begin;
            tr->t_update1 = tr->t_update0 + t_upd;
        }
    }
}
/* The exponent field of x: all ones exactly for Inf and NaN. Integer work, so the loops below vectorise and no
 * float comparison is needed that -ffinite-math-only could fold away. */
static inline uint32_t exponent_bits(float x)
{
    uint32_t b;
    memcpy(&b, &x, sizeof b);
    return b & 0x7f800000u;
}

int tt_all_finite(const float *x, size_t n)
{
    uint32_t emax = 0;
    for (size_t k = 0; k < n; k++) {
        uint32_t e = exponent_bits(x[k]);
        emax = e > emax ? e : emax;
    }
    return emax != 0x7f800000u;
}

int tt_sum_slots(float *restrict out, float *const *slots, size_t n_slots, size_t offset, size_t len)
{
    const float *restrict s0 = slots[0] + offset;
    if (n_slots == 1) {
        for (size_t k = 0; k < len; k++) out[k] = s0[k];
        return tt_all_finite(out, len);
    }
    /* the last addition also checks the sum: a NaN or Inf in any slot reaches it (or the sum overflowed) */
    uint32_t emax = 0;
    const float *restrict s1 = slots[1] + offset;
    if (n_slots == 2) {
        for (size_t k = 0; k < len; k++) {
            out[k] = tt_add(s0[k], s1[k]);
            uint32_t e = exponent_bits(out[k]);
            emax = e > emax ? e : emax;
        }
        return emax != 0x7f800000u;
    }
    for (size_t k = 0; k < len; k++) out[k] = tt_add(s0[k], s1[k]);
    for (size_t w = 2; w + 1 < n_slots; w++) {
        const float *restrict sw = slots[w] + offset;
        for (size_t k = 0; k < len; k++) out[k] = tt_add(out[k], sw[k]);
    }
    const float *restrict sl = slots[n_slots - 1] + offset;
    for (size_t k = 0; k < len; k++) {
        out[k] = tt_add(out[k], sl[k]);
        uint32_t e = exponent_bits(out[k]);
        emax = e > emax ? e : emax;
    }
    return emax != 0x7f800000u;
}

/* ---- --overlap on: a bucket pushed, summed and updated while the layers below compute ------------------------ */

/* The host's side of the buckets: no crew thread owns a slice. A tower tells the host it has pushed a bucket once
 * the push has landed (bucket_arrive); the last tower to do so makes it ready; any crew thread that is free takes
 * its chunks (overlap_work) — host-only crew threads from the start, towers once their own pushes have landed. An
 * idle thread sleeps until a bucket is ready or done (overlap_idle). */

static void overlap_wake(overlap *o)
{
    pthread_mutex_lock(&o->mu);
    pthread_cond_broadcast(&o->cv);
    pthread_mutex_unlock(&o->mu);
}

/* Bucket k of tower tw has landed in its host slot. The last tower to say so makes it ready — for bucket 0, first
 * the step's loss check and the optimizer's scalars, which every bucket's update reads (after_towers' work). */
static void bucket_arrive(tt_tower *tw, size_t k)
{
    tt_trainer *tr = tw->tr;
    overlap *o = tr->ov;
    const size_t N = tr->cfg.n_towers;
    if (atomic_fetch_add_explicit(&o->arrived[k], 1, memory_order_acq_rel) + 1 == N) {
        if (k == 0) { /* every tower counted its statistics before it arrived here */
            double loss = 0;
            for (size_t t = 0; t < N; t++) loss += tr->towers[t].loss_sum;
            tr->loss_nonfinite = !isfinite(loss);
            tt_optim_begin_step(&tr->opt);
        }
        atomic_store_explicit(&o->ready[k], 1, memory_order_release);
        overlap_wake(o);
    }
    if (k + 1 == o->nb && atomic_fetch_sub_explicit(&o->towers_busy, 1, memory_order_acq_rel) == 1)
        o->t_pushed = tt_now(); /* the last gradient of the step is on the host */
}

/* Pushes bucket k of this tower's gradient into its host slot, between two events. */
static void bucket_push(tt_tower *tw, size_t k)
{
    const overlap *o = tw->tr->ov;
    const size_t lo = o->edge[k + 1], n = o->edge[k] - lo;
    tt_dev_event_record(&tw->dev, tw->ev_b[k][0]); /* its layers are done: the side stream copies after this */
    tt_dev_side_copy(&tw->dev, tw->tr->h_slots[tw->id] + lo, tw->d_grads + lo, n * sizeof(float), 0, tw->ev_b[k][0],
                     tw->ev_b[k][1]);
}

/* Tells the host of every pushed bucket that has landed, in order, without waiting (the statistics first). */
static void tower_arrive_landed(tt_tower *tw)
{
    while (tw->arrived < tw->pushed) {
        if (!tw->loss_in) {
            if (!tt_dev_event_done(&tw->dev, tw->ev_loss)) return;
            tower_count_stats(tw, tw->rows);
            tw->loss_in = 1;
        }
        if (!tt_dev_event_done(&tw->dev, tw->ev_b[tw->arrived][1])) return;
        bucket_arrive(tw, tw->arrived++);
    }
}

/* The backward has issued every layer from lo up: push the buckets that are complete — all but the last, which
 * phase_push sends after the compute's event (so the ledger's compute ends where the layers do). */
static void bucket_ready(void *arg, size_t lo)
{
    tt_tower *tw = (tt_tower *)arg;
    const overlap *o = tw->tr->ov;
    while (tw->pushed + 1 < o->nb && lo <= o->edge[tw->pushed + 1]) bucket_push(tw, tw->pushed++);
    tower_arrive_landed(tw); /* CPU: at once, so a free crew thread can start on it while this tower computes */
}

/* One chunk of a ready bucket, if one is free: the towers' slots summed in tower order and the optimizer applied,
 * block by block — host_blocks, the fused pass's own work. Returns 0 if no chunk was free. */
static int overlap_work(tt_trainer *tr, int i)
{
    overlap *o = tr->ov;
    for (size_t k = 0; k < o->nb; k++) {
        if (!atomic_load_explicit(&o->ready[k], memory_order_acquire)) return 0; /* ready in bucket order */
        if (atomic_load_explicit(&o->next[k], memory_order_relaxed) >= o->chunks[k]) continue;
        const size_t c = atomic_fetch_add_explicit(&o->next[k], 1, memory_order_relaxed);
        if (c >= o->chunks[k]) continue;
        const size_t lo = o->edge[k + 1] + c * OV_CHUNK * TT_REDUCE_BLOCK;
        const size_t hi = lo + OV_CHUNK * TT_REDUCE_BLOCK < o->edge[k] ? lo + OV_CHUNK * TT_REDUCE_BLOCK : o->edge[k];
        const host_pass p = fused_pass(tr);
        double t_sum, t_upd, t0 = tt_now();
        if (c == 0) o->span[k][0] = t0;
        host_blocks(tr, &p, lo, hi, &t_sum, &t_upd);
        const int hidden = atomic_load_explicit(&o->towers_busy, memory_order_relaxed) > 0;
        o->work[i][hidden ? 0 : 2] += t_sum;
        o->work[i][hidden ? 1 : 3] += t_upd;
        if (atomic_fetch_add_explicit(&o->done[k], 1, memory_order_acq_rel) + 1 == o->chunks[k]) {
            o->span[k][1] = tt_now();
            atomic_fetch_add_explicit(&o->buckets_done, 1, memory_order_acq_rel);
            overlap_wake(o);
        }
        return 1;
    }
    return 0;
}

static int overlap_has_work(overlap *o)
{
    for (size_t k = 0; k < o->nb; k++) {
        if (!atomic_load_explicit(&o->ready[k], memory_order_acquire)) return 0;
        if (atomic_load_explicit(&o->next[k], memory_order_relaxed) < o->chunks[k]) return 1;
    }
    return 0;
}

/* Sleeps until a chunk is free or another bucket is done (seen: the buckets done when the caller last looked). */
static void overlap_idle(overlap *o, size_t seen, tt_tower *tw)
{
    const double t0 = tt_now();
    pthread_mutex_lock(&o->mu);
    while (!overlap_has_work(o) && atomic_load_explicit(&o->buckets_done, memory_order_acquire) == seen)
        pthread_cond_wait(&o->cv, &o->mu);
    pthread_mutex_unlock(&o->mu);
    if (tw) tw->led.wait += tt_now() - t0;
}

/* The buckets the host has finished since the tower last looked (done: the count it saw), copied from the master
 * weights into this tower's memory for the next step on its host-to-device side stream — beside its own backward on
 * a GPU, which no longer reads those layers' weights (their gradients have been pushed) — and the next step's
 * tower stream waits for the last of them (phase_pull). */
static void tower_pull_ahead(tt_tower *tw, size_t done)
{
    tt_trainer *tr = tw->tr;
    const overlap *o = tr->ov;
    for (size_t k = 0; k < o->nb; k++)
        if (!tw->ahead[k] && atomic_load_explicit(&o->done[k], memory_order_acquire) == o->chunks[k]) {
            const size_t lo = o->edge[k + 1], n = o->edge[k] - lo;
            if (!tw->led.bytes_prepull) tw->led.ahead0 = tt_now(); /* before the copy: the CPU's runs as issued */
            tt_dev_side_copy(&tw->dev, tw->d_params + lo, tr->h_params + lo, n * sizeof(float), 1, NULL,
                             tw->ev_ahead);
            tw->ahead[k] = 1;
            tw->led.bytes_prepull += n * sizeof(float);
        }
    tw->ahead_seen = done;
}

/* Every crew thread until the step's buckets are all updated, taking free chunks. A tower (tw) also tells the host
 * of each of its buckets as it lands, waiting for its device only when no chunk is free, and (pull_ahead: another
 * step follows in this run) pulls each finished bucket ahead for the next step: the next step's pull of the first
 * buckets the host finished runs while it updates the last. */
static void overlap_run(tt_trainer *tr, int i, tt_tower *tw, int pull_ahead)
{
    overlap *o = tr->ov;
    for (;;) {
        if (tw) tower_arrive_landed(tw);
        const size_t done = atomic_load_explicit(&o->buckets_done, memory_order_acquire);
        if (tw && pull_ahead && done > tw->ahead_seen) tower_pull_ahead(tw, done);
        if (done == o->nb) return; /* a bucket is done only once every tower has arrived at it */
        if (overlap_work(tr, i)) continue;
        if (tw && tw->arrived < o->nb)
            tt_dev_event_sync(&tw->dev, tw->loss_in ? tw->ev_b[tw->arrived][1] : tw->ev_loss);
        else
            overlap_idle(o, done, tw);
    }
}

/* Tower tw's statistics, and its launch, pull and data phases, added to the step's (means over the towers). */
static void add_tower_start(const tt_trainer *tr, const tt_tower *tw, tt_step_result *res)
{
    const tt_tower_ledger *l = &tw->led;
    const double N = (double)tr->cfg.n_towers;
    res->n += tw->rows;
    res->loss_sum += tw->loss_sum;
    res->top1 += tw->top1;
    res->top5 += tw->top5;
    res->t.launch += (l->pull0 - tr->t_step) / N;
    res->t.pull += (l->pull1 - l->pull0) / N;
    res->t.data += (l->data1 - l->pull1) / N;
}

/* Serial section of barrier A: every tower has finished its tower phase. Aggregate the step's statistics and
 * start the optimizer's step (its per-step scalars) before any slice applies it. */
static void after_towers(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    const size_t N = tr->cfg.n_towers;
    tt_step_result *res = &tr->results[tr->cur_step];
    double now = tt_now();
    memset(res, 0, sizeof *res);
    for (size_t t = 0; t < N; t++) {
        const tt_tower_ledger *l = &tr->towers[t].led;
        add_tower_start(tr, &tr->towers[t], res);
        res->t.compute += (l->compute1 - l->data1) / (double)N;
        res->t.push += (l->push1 - l->compute1) / (double)N;
        res->t.wait += (now - l->push1) / (double)N;
    }
    res->t.step0 = tr->t_step;
    res->t.towers = now - tr->t_step;
    tr->t_towers_done = now;
    /* a loss that is not finite: no slice applies this step (they still check the gradient, to report it) */
    tr->loss_nonfinite = !isfinite(res->loss_sum);
    if (!multi_node(&tr->cfg)) tt_optim_begin_step(&tr->opt); /* K ranks: after the combine */
}

/* The rank's node sum: h_slots[0] (cpu, one tower: its slot), or h_grad (the node-sum pass or a placement's push). */
static const float *node_sum(const tt_trainer *tr)
{
    return tr->place->info.host_sum && tr->cfg.n_towers == 1 ? tr->h_slots[0] : tr->h_grad;
}

/* Serial section after the node sum (K ranks): the cross-node combine. Every rank's statistics (the step's loss and
 * counts are the job's, added in rank order), the reduce-scatter of the node sums (this rank's slice of the global
 * sum, added in rank order), and for allreduce the gather of the whole sum into h_grad. Then the optimizer's step
 * starts. A failed collective halts the run (TT_HALT_NODE) with nothing applied. */
static void after_node_sum(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    tt_node *nd = tr->cfg.node;
    tt_step_result *res = &tr->results[tr->cur_step];
    const size_t P = tr->model->n_params;
    tr->t_combine0 = tt_now();
    double job[4] = {(double)res->n, res->loss_sum, (double)res->top1, (double)res->top5};
    tt_status s = tt_node_sum(nd, job, 4, &tr->node_err); /* the job's statistics, in rank order */
    const int ps = tr->cfg.node_reduce == TT_NODE_PS;
    if (!s) {
        res->n = (size_t)job[0];
        res->loss_sum = job[1];
        res->top1 = (size_t)job[2];
        res->top5 = (size_t)job[3];
        tr->loss_nonfinite = !isfinite(job[1]);
        /* allreduce: this rank's slice of the global sum lands in place in h_grad (the node sum there has been sent
         * by then), and the gather fills in the rest; ps: the slice is all this rank updates */
        float *out = ps ? tr->h_slice : tr->h_grad + tr->node_lo;
        s = tt_node_reduce_scatter(nd, node_sum(tr), tr->h_recv, out, P, &tr->node_err);
    }
    if (!s && !ps) s = tt_node_allgather_slices(nd, tr->h_grad, P, &tr->node_err);
    if (s) {
        tr->node_status = s;
        tr->loss_nonfinite = 1; /* nothing is applied: the update pass only reads */
    }
    tt_optim_begin_step(&tr->opt);
    tr->t_combine1 = tt_now();
}

/* Serial section of barrier R (device, allreduce): the reduced gradient is on the host. */
static void after_reduce(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    tt_step_result *res = &tr->results[tr->cur_step];
    double now = tt_now();
    res->t.reduce = now - tr->t_towers_done; /* the towers' reduce spans are in their ledgers */
}

/* Serial section of barrier B: the master weights are updated; the step is over. */
static void after_update(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    const size_t N = tr->cfg.n_towers;
    tt_step_result *res = &tr->results[tr->cur_step];
    double now = tt_now();
    if (tr->place->info.host_sum) {
        res->t.reduce = tr->t_reduce1 - tr->t_reduce0;
        res->t.reduce0 = tr->t_reduce0;
        res->t.reduce1 = tr->t_reduce1;
    }
    /* the end of a step is where a run may halt: a non-finite loss or gradient, or a stop request (a signal) */
    uint32_t flags[2] = {tr->loss_nonfinite || atomic_load_explicit(&tr->grad_nonfinite, memory_order_relaxed),
                         (tr->cfg.stop && atomic_load(tr->cfg.stop)) || atomic_load(&tr->stop_request)};
    if (multi_node(&tr->cfg)) { /* ps: every rank's updated slice of the weights; then every rank's halt flags */
        double g0 = tt_now();
        tt_status s = tr->node_status;
        if (!s && tr->cfg.node_reduce == TT_NODE_PS)
            s = tt_node_allgather_slices(tr->cfg.node, tr->h_params, tr->model->n_params, &tr->node_err);
        if (!s) s = tt_node_or(tr->cfg.node, flags, 2, &tr->node_err);
        tr->node_status = s;
        now = tt_now();
        res->t.combine = tr->t_combine1 - tr->t_combine0 + (now - g0);
        res->t.combine0 = tr->t_combine0;
        res->t.combine1 = tr->t_combine1;
    }
    res->t.update0 = tr->t_update0;
    res->t.update1 = tr->t_update1;
    /* the rest of the step: the host's update */
    res->t.update = now - tr->t_step - res->t.towers - res->t.reduce - res->t.combine;
    res->t.total = now - tr->t_step;
    res->t.step1 = now;
    if (tr->ledger)
        for (size_t t = 0; t < N; t++) tr->ledger[tr->cur_step * N + t] = tr->towers[t].led;
    tr->t_step = now;
    tr->cur_step++;
    tr->steps++;
    if (tr->node_status) tr->halt = TT_HALT_NODE;
    else if (flags[0]) tr->halt = TT_HALT_NONFINITE;
    else if (flags[1]) tr->halt = TT_HALT_STOP;
    atomic_store(&tr->steps_done, tr->cur_step);
}

/* --overlap on, the serial section of the step's one barrier: every bucket is updated. The towers' phases as
 * after_towers adds them, except that the tower phase ends when the last gradient reached the host (t_pushed) and
 * push includes the buckets pushed during the backward; the host's reduce and update are the wall after that, in
 * the proportions of the exposed work; what ran before it is the hidden work. Then the counters for the next step,
 * and the step's end (after_update). */
static void after_overlap(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    overlap *o = tr->ov;
    const size_t N = tr->cfg.n_towers;
    tt_step_result *res = &tr->results[tr->cur_step];
    const double now = tt_now();
    double t_pushed = o->t_pushed, host_end = 0; /* the last gradient on the host; the host's last update done */
    for (size_t t = 0; t < N; t++) /* by the towers' event clocks too (a tower stamps its last push's end after) */
        t_pushed = tr->towers[t].led.push1 > t_pushed ? tr->towers[t].led.push1 : t_pushed;
    for (size_t k = 0; k < o->nb; k++) host_end = o->span[k][1] > host_end ? o->span[k][1] : host_end;
    const double upd_end = host_end > t_pushed ? host_end : t_pushed;
    memset(res, 0, sizeof *res);
    for (size_t t = 0; t < N; t++) {
        const tt_tower_ledger *l = &tr->towers[t].led;
        add_tower_start(tr, &tr->towers[t], res);
        /* a backend that runs ops as issued (CPU) made the backward's bucket copies on the tower's own time, inside
         * the compute's span: push time, none of it hidden; a GPU's side stream made them beside the kernels */
        const int inline_ops = tr->cfg.ops->inline_ops;
        const double inline_push = inline_ops ? l->push_hidden : 0;
        res->t.compute += (l->compute1 - l->data1 - inline_push) / (double)N;
        res->t.push += (l->push1 - l->compute1 + inline_push) / (double)N;
        res->t.push_hidden += (inline_ops ? 0 : l->push_hidden) / (double)N;
        res->t.wait += (t_pushed - l->push1) / (double)N;
    }
    /* after the host's last update: the towers' last pulls ahead landing, and the barrier — the next step's pull */
    res->t.pull += now - upd_end;
    res->t.step0 = tr->t_step;
    res->t.towers = t_pushed - tr->t_step + (now - upd_end);
    tr->t_towers_done = t_pushed;
    double w[4] = {0, 0, 0, 0};
    for (int i = 0; i < tr->crew.n; i++)
        for (int j = 0; j < 4; j++) {
            w[j] += o->work[i][j];
            o->work[i][j] = 0;
        }
    res->t.host_hidden = w[0] + w[1];
    res->t.host_exposed = w[2] + w[3];
    const double exposed = upd_end - t_pushed; /* the host's work after the last push, split as its work was */
    tr->t_reduce0 = t_pushed;
    tr->t_reduce1 = t_pushed + (w[2] + w[3] > 0 ? exposed * w[2] / (w[2] + w[3]) : 0);
    tr->t_update0 = tr->t_reduce1;
    tr->t_update1 = upd_end;
    res->n_buckets = (unsigned)o->nb;
    memcpy(res->bucket, o->span, sizeof o->span);
    overlap_reset(o);
    atomic_store(&o->towers_busy, N);
    after_update(tr);
}

/* Waits at a barrier, charging the time to the tower's ledger (crew threads beyond the towers are not charged). */
static void tower_barrier(tt_trainer *tr, tt_barrier *b, int i, void (*serial)(void *), void *arg)
{
    double t0 = tt_now();
    if ((size_t)i < tr->cfg.n_towers) live(&tr->towers[i], TT_LIVE_WAIT);
    tt_barrier_wait(b, serial, arg);
    if ((size_t)i < tr->cfg.n_towers) tr->towers[i].led.wait += tt_now() - t0;
}

/* The host's part of a step across K ranks, as a composition of phases: the node sum (the cpu placement's slots
 * summed into h_grad; a placement's reduce or a single tower's slot already is it), the cross-node combine (a serial
 * section: one crew thread talks MPI), then the update — of the whole buffer from the global sum (allreduce) or of
 * this rank's slice (ps; the weights are gathered at barrier B). */
static void host_node_step(tt_trainer *tr, int i, int T)
{
    const size_t P = tr->model->n_params;
    if (tr->place->info.host_sum && tr->cfg.n_towers > 1) {
        const host_pass sum = {0, P, 1, tr->h_grad, NULL, 0, 0};
        host_slice(tr, &sum, i, T, NULL, NULL);
    }
    tt_barrier_wait(&tr->bar_reduce, after_node_sum, tr);
    size_t lo, n; /* ps: this rank's slice, from its slice of the sum; allreduce: everything, from the whole sum */
    owned_slice(&tr->cfg, P, &lo, &n);
    const host_pass upd = {lo, lo + n, 0, NULL, tr->cfg.node_reduce == TT_NODE_PS ? tr->h_slice : tr->h_grad, 1, lo};
    host_slice(tr, &upd, i, T, NULL, NULL);
}

static void crew_steps(tt_trainer *tr, int i, int T)
{
    const size_t N = tr->cfg.n_towers, B = tr->cfg.batch;
    const size_t steps = (tr->n + B - 1) / B;
    tt_tower *tw = (size_t)i < N ? &tr->towers[i] : NULL;
    const host_pass fused = fused_pass(tr);
    const int on_device = tr->cfg.update != TT_UPDATE_HOST;
    if (on_device) { /* the masters from the host, before any tower pulls from tower 0 */
        if (tw) tower_master(tw, 1);
        tt_barrier_wait(&tr->bar_update, NULL, NULL);
    }
    if (tw) memset(tw->ahead, 0, sizeof tw->ahead); /* a run's first step pulls everything (the weights may be new) */
    for (size_t st = 0; st < steps; st++) {
        size_t first = st * B, n = tr->n - first < B ? tr->n - first : B;
        if (tw) {
            tower_shard(&tr->cfg, n, (size_t)i, &tw->lo, &tw->rows);
            tower_step(tw, tr->idx + first, n, st + 1 < steps);
        }
        if (tr->ov) { /* --overlap on: the buckets were summed and updated as they came; one barrier ends the step */
            if (!tw) overlap_run(tr, i, NULL, 0); /* a host-only thread: chunks (the towers did theirs in tower_step) */
            tt_barrier_wait(&tr->bar_update, after_overlap, tr);
            if (tr->halt) break;
            continue;
        }
        tower_barrier(tr, &tr->bar_push, i, after_towers, tr);
        if (tr->place->reduce) {
            if (tw) {
                live(tw, TT_LIVE_REDUCE);
                tr->place->reduce(tw);
            }
            tower_barrier(tr, &tr->bar_reduce, i, after_reduce, tr);
        }
        if (tw) live(tw, TT_LIVE_HOST);
        if (on_device) {
            if (tw) tower_update(tw);
        } else if (multi_node(&tr->cfg)) {
            host_node_step(tr, i, T);
        } else {
            host_slice(tr, &fused, i, T, NULL, NULL); /* one rank: the fused block-wise sum + update */
        }
        if (tw) live(tw, TT_LIVE_WAIT);
        tt_barrier_wait(&tr->bar_update, after_update, tr);
        if (tr->halt) break; /* set in the serial section above: every thread sees the same value */
    }
    if (on_device && tw) tower_master(tw, 0); /* tower 0's master back to the host */
}

/* ---- --sync ssp and async: each tower's gradient applied alone, as it arrives ------------------------------- */


static int sync_applies_alone(const tt_trainer_config *cfg)
{
    return cfg->sync.kind == TT_SYNC_SSP || cfg->sync.kind == TT_SYNC_ASYNC;
}

/* The samples of step st of the run and its shard count. */
static size_t sync_step_n(const tt_trainer *tr, size_t st)
{
    const size_t B = tr->cfg.batch;
    return tr->n - st * B < B ? tr->n - st * B : B;
}
static size_t sync_step_shards(const tt_trainer *tr, size_t st)
{
    const size_t n = sync_step_n(tr, st), N = tr->cfg.n_towers;
    return n < N ? n : N;
}

static size_t clock_min(const sync_state *sy, size_t N)
{
    size_t m = SIZE_MAX;
    for (size_t t = 0; t < N; t++) m = sy->clock[t] < m ? sy->clock[t] : m;
    return m;
}

/* The step holding shard j, and the first shard after that step. */
static size_t sync_step_of(const sync_state *sy, size_t j, size_t N) { return j / N < sy->steps ? j / N : sy->steps - 1; }
static size_t sync_step_end(const sync_state *sy, size_t st, size_t N)
{
    return st + 1 < sy->steps ? (st + 1) * N : sy->shards;
}

/* A stop (a signal, tt_trainer_request_stop) or a halt (under mu). A stop: the towers take the rest of the step in
 * flight — the step of the last shard taken — and no shard after it, so every gradient applied belongs to a finished
 * step (the log's, a checkpoint's). A non-finite gradient (shard j_bad): the run ends with that shard's step, as bsp's
 * ends with its step; shards of later steps in flight are dropped, not applied. The earliest such step wins, and a
 * non-finite gradient's halt outranks a stop. */
static void sync_close(tt_trainer *tr, tt_halt why, size_t j_bad)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers;
    if (tr->halt == TT_HALT_NONE || why == TT_HALT_NONFINITE) tr->halt = why;
    size_t end;
    if (why == TT_HALT_NONFINITE) {
        end = sync_step_end(sy, sync_step_of(sy, j_bad, N), N);
    } else {
        if (sy->stop) return;
        const size_t taken = tr->cfg.sync.round_robin ? sy->pulled : sy->next;
        end = taken ? sync_step_end(sy, sync_step_of(sy, taken - 1, N), N) : 0;
    }
    sy->stop = 1;
    sy->limit = end < sy->limit ? end : sy->limit;
}

/* A stop asked for (by a signal or tt_trainer_request_stop). */
static int stop_asked(const tt_trainer *tr)
{
    return (tr->cfg.stop && atomic_load(tr->cfg.stop)) || atomic_load(&tr->stop_request);
}

/* Shard j's step's results get this shard (under mu); a step whose shards are all applied is done, and the run's
 * finished steps are its prefix of done steps. */
static void sync_account(tt_trainer *tr, tt_tower *tw, size_t st, size_t s, double t_begin, int applied)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers, shards = sync_step_shards(tr, st);
    tt_step_result *res = &tr->results[st];
    const tt_tower_ledger *l = &tw->led;
    if (sy->left[st] == shards) {
        memset(res, 0, sizeof *res);
        res->t.step0 = t_begin;
    }
    res->n += tw->rows;
    res->loss_sum += tw->loss_sum;
    res->top1 += tw->top1;
    res->top5 += tw->top5;
    res->t.pull += l->pull1 - l->pull0;
    res->t.data += l->data1 - l->pull1;
    res->t.compute += l->compute1 - l->data1;
    res->t.push += l->push1 - l->compute1;
    res->t.wait += l->wait;
    res->t.update += l->update1 - l->update0;
    res->t.step0 = t_begin < res->t.step0 ? t_begin : res->t.step0;
    res->t.step1 = l->update1 > res->t.step1 ? l->update1 : res->t.step1;
    res->t.update0 = l->update0;
    res->t.update1 = l->update1;
    sy->span[st] += l->update1 - t_begin;
    res->applied += applied != 0; /* a non-finite gradient came back but was not applied */
    res->staleness_sum += l->staleness;
    res->staleness_max = l->staleness > res->staleness_max ? l->staleness : res->staleness_max;
    if (tr->ledger) tr->ledger[st * N + s] = *l;
    if (--sy->left[st]) return;
    for (size_t e = shards; tr->ledger && e < N; e++) { /* a short last step's empty shards: nobody ran them */
        memset(&tr->ledger[st * N + e], 0, sizeof *tr->ledger);
        tr->ledger[st * N + e].tower = e;
    }
    /* the means over the step's shards; total is a shard's mean span, the rest of it the gaps between phases */
    const double k = (double)shards;
    tt_step_times *t = &res->t;
    t->pull /= k, t->data /= k, t->compute /= k, t->push /= k, t->wait /= k, t->update /= k;
    t->total = sy->span[st] / k;
    t->towers = t->total - t->update;
    t->launch = t->towers - (t->pull + t->data + t->compute + t->push + t->wait);
    if (t->launch < 0) t->launch = 0;
    while (tr->cur_step < sy->steps && sy->left[tr->cur_step] == 0) {
        tr->cur_step++;
        tr->steps++;
    }
    atomic_store(&tr->steps_done, tr->cur_step);
}

/* Tower i's loop: take a shard (the next one; round robin: every N-th), wait for the bound, pull the newest master
 * weights under the lock, compute and push the gradient (the step's own phase functions), then apply it alone under
 * the lock, one optimizer step per gradient. Round robin makes the order fixed: shard j pulls after shard j - N + 1
 * - 1 is applied and before the next apply, and the applies go in shard order. */
static void crew_async(tt_trainer *tr, int i)
{
    const size_t N = tr->cfg.n_towers, B = tr->cfg.batch, P = tr->model->n_params;
    if ((size_t)i >= N) return; /* the host's own threads: each tower applies its gradient itself */
    tt_tower *tw = &tr->towers[i];
    sync_state *sy = tr->sy;
    const int rr = tr->cfg.sync.round_robin;
    const size_t S = tr->cfg.sync.kind == TT_SYNC_SSP ? tr->cfg.sync.k : SIZE_MAX;
    pthread_mutex_lock(&sy->mu);
    for (;;) {
        const double t_begin = tt_now();
        live(tw, TT_LIVE_WAIT);
        if (stop_asked(tr)) sync_close(tr, TT_HALT_STOP, 0);
        /* the bound: the slowest tower still working always may go on, so this wait ends */
        while (S != SIZE_MAX && sy->clock[i] > clock_min(sy, N) + S) pthread_cond_wait(&sy->cv, &sy->mu);
        const size_t j = rr ? (size_t)i + sy->clock[i] * N : sy->next;
        if (j >= sy->limit) break;
        if (rr) { /* pulls in shard order, shard j after shard j - N is applied; a stop may end the run before j */
            while (j < sy->limit && !(sy->pulled == j && j + 1 <= sy->applied + N)) pthread_cond_wait(&sy->cv, &sy->mu);
            if (j >= sy->limit) break;
        } else {
            sy->next++;
        }
        const size_t st = sync_step_of(sy, j, N), s = j - st * N;
        const size_t n = sync_step_n(tr, st);
        const double t_pull = tt_now();
        const double waited = t_pull - t_begin;
        live(tw, TT_LIVE_PULL);
        tt_dev_h2d(&tw->dev, tw->d_params, tr->h_params, P * sizeof(float)); /* the newest weights */
        tt_dev_sync(&tw->dev);
        const uint64_t v_pull = sy->version;
        if (rr) sy->pulled++;
        pthread_cond_broadcast(&sy->cv);
        pthread_mutex_unlock(&sy->mu);

        shard_of(n, N, s, &tw->lo, &tw->rows);
        tw->skip_pull = 1;
        tower_step(tw, tr->idx + st * B, n, 0);
        tw->skip_pull = 0;
        tt_tower_ledger *l = &tw->led;
        l->pull0 = t_pull;
        l->bytes_pull = P * sizeof(float);
        l->tower = (size_t)i;

        live(tw, TT_LIVE_WAIT);
        const double t_lock = tt_now();
        pthread_mutex_lock(&sy->mu);
        if (rr) /* applies in shard order, each after the pulls that must see the weights before it */
            while (j < sy->limit && !(sy->applied == j && sy->pulled >= (j + N < sy->limit ? j + N : sy->limit)))
                pthread_cond_wait(&sy->cv, &sy->mu);
        if (j >= sy->limit) { /* a later step's shard, after a non-finite gradient: dropped */
            sy->clock[i]++;
            pthread_cond_broadcast(&sy->cv);
            continue;
        }
        live(tw, TT_LIVE_HOST);
        l->update0 = tt_now();
        l->wait = waited + (l->update0 - t_lock);
        l->staleness = (uint32_t)(sy->version - v_pull);
        /* the whole gradient or none of it: a loss or a gradient that is not finite is not applied, and halts the
         * run at the end of its step */
        const int finite = isfinite(tw->loss_sum) && tt_all_finite(tr->h_slots[i], P);
        if (finite) {
            tt_optim_begin_step(&tr->opt);
            tt_optim_apply(&tr->opt, tr->h_params, tr->h_slots[i], 0, P);
            sy->version++;
        } else {
            tr->loss_nonfinite |= !isfinite(tw->loss_sum);
            atomic_store(&tr->grad_nonfinite, 1);
            sync_close(tr, TT_HALT_NONFINITE, j);
        }
        l->update1 = tt_now();
        if (rr) sy->applied++;
        sy->clock[i]++;
        sync_account(tr, tw, st, s, t_begin, finite);
        pthread_cond_broadcast(&sy->cv);
    }
    sy->clock[i] = SIZE_MAX; /* the bound no longer waits for this tower */
    pthread_cond_broadcast(&sy->cv);
    pthread_mutex_unlock(&sy->mu);
    live(tw, TT_LIVE_IDLE);
}

/* A run of steps under ssp or async: room for its steps' counters, every counter at the start. */
static tt_status sync_begin(tt_trainer *tr, size_t steps, tt_error *err)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers;
    if (steps > sy->cap) {
        uint32_t *left = (uint32_t *)tt_calloc(steps, sizeof *left);
        double *span = (double *)tt_calloc(steps, sizeof *span);
        struct wstat *ws = (struct wstat *)tt_calloc(steps * N, sizeof *ws);
        if (!left || !span || !ws) {
            tt_free(left);
            tt_free(span);
            tt_free(ws);
            return tt_fail(err, TT_ERR_NOMEM, "out of host memory for %zu steps' counters", steps);
        }
        tt_free(sy->left);
        tt_free(sy->span);
        tt_free(sy->ws);
        sy->left = left;
        sy->span = span;
        sy->ws = ws;
        sy->cap = steps;
    }
    sy->steps = steps;
    sy->shards = 0;
    for (size_t st = 0; st < steps; st++) {
        sy->left[st] = (uint32_t)sync_step_shards(tr, st);
        sy->span[st] = 0;
        sy->shards += sy->left[st];
    }
    sy->next = sy->pulled = sy->applied = 0;
    sy->limit = sy->shards;
    sy->bad_step = SIZE_MAX;
    sy->version = 0;
    sy->stop = 0;
    for (size_t t = 0; t < N; t++) sy->clock[t] = 0;
    return TT_OK;
}

/* ---- --sync weights: the towers' weights averaged on the host ----------------------------------------------- */

/* Every tower's weights (or optimizer vector `vec`: 0 m, 1 v, 2 a) pushed into its slot; the host's crew averages
 * them in tower order into dst (whole blocks per thread); with dist, each thread's squared distances of every tower
 * from the average. Tower threads push, then every crew thread averages: two barriers. */
static float *optim_vec(tt_optim *o, int vec) { return vec == 0 ? o->m : vec == 1 ? o->v : o->a; }
static float *tower_vec(tt_tower *tw, int vec)
{
    return vec < 0 ? tw->d_params : vec == 0 ? tw->d_m : vec == 1 ? tw->d_v : tw->d_a;
}

static void weights_average(tt_trainer *tr, int i, int T, int vec, float *dst, double *dist)
{
    const size_t N = tr->cfg.n_towers, P = tr->model->n_params;
    tt_tower *tw = (size_t)i < N ? &tr->towers[i] : NULL;
    if (tw) {
        live(tw, TT_LIVE_PUSH);
        tt_dev_d2h(&tw->dev, tr->h_slots[i], tower_vec(tw, vec), P * sizeof(float));
        tt_dev_sync(&tw->dev);
        live(tw, TT_LIVE_HOST);
    }
    tt_barrier_wait(&tr->bar_reduce, NULL, NULL);
    size_t lo, hi;
    block_slice(0, P, i, T, &lo, &hi);
    double *d = dist ? dist + (size_t)i * N : NULL;
    if (d)
        for (size_t t = 0; t < N; t++) d[t] = 0;
    const float inv = (float)N;
    for (size_t b = lo; b < hi; b += TT_REDUCE_BLOCK) {
        const size_t len = hi - b < TT_REDUCE_BLOCK ? hi - b : TT_REDUCE_BLOCK;
        float *out = dst + b;
        tt_sum_slots(out, tr->h_slots, N, b, len);
        for (size_t k = 0; k < len; k++) out[k] = out[k] / inv;
        for (size_t t = 0; d && t < N; t++) {
            const float *w = tr->h_slots[t] + b;
            double acc = 0;
            for (size_t k = 0; k < len; k++) {
                const double e = (double)w[k] - (double)out[k];
                acc += e * e;
            }
            d[t] += acc;
        }
    }
    tt_barrier_wait(&tr->bar_reduce, NULL, NULL);
}

/* The window's end (a serial section, every crew thread there): the steps every tower finished are the run's
 * finished steps — their results the sums of the towers' statistics, their times the means of the towers' phases —
 * and a stop, a tower's halt or the run's last step ends the run after this average. */
static void weights_window_end(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers;
    size_t done = sy->win_end;
    for (size_t t = 0; t < N; t++) done = sy->tw_done[t] < done ? sy->tw_done[t] : done;
    const double now = tt_now();
    for (size_t st = sy->win0; st < done; st++) {
        tt_step_result *res = &tr->results[st];
        memset(res, 0, sizeof *res);
        for (size_t t = 0; t < N; t++) {
            const struct wstat *w = &sy->ws[st * N + t];
            res->n += w->rows;
            res->loss_sum += w->loss_sum;
            res->top1 += w->top1;
            res->top5 += w->top5;
            res->t.total += w->span / (double)N;
            res->t.data += w->data / (double)N;
            res->t.compute += w->compute / (double)N;
            res->t.push += w->push / (double)N;
            res->t.update += w->update / (double)N;
        }
        res->t.step0 = now - res->t.total; /* the towers' steps ran side by side: a nominal start */
        res->t.step1 = now;
    }
    if (done > sy->win0) { /* the window's last step carries the meeting: the towers' waits for it */
        tt_step_result *res = &tr->results[done - 1];
        double wait = 0;
        for (size_t t = 0; t < N; t++) wait += (now - sy->ws[(done - 1) * N + t].t1) / (double)N;
        res->t.wait += wait > 0 ? wait : 0;
        res->t.total += wait > 0 ? wait : 0;
    }
    if (atomic_load(&tr->grad_nonfinite)) tr->halt = TT_HALT_NONFINITE;
    else if (stop_asked(tr) || done < sy->win_end) tr->halt = TT_HALT_STOP; /* after the run's last step too, as bsp's */
    tr->steps += done - sy->win0;
    tr->cur_step = done;
    sy->boundary = done == sy->win_end && tr->steps % tr->cfg.sync.k == 0;
    sy->t_avg0 = now;
}

/* The towers' mean distance from the average, into the window's last finished step (a serial section). */
static void weights_averaged(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers;
    double mean = 0;
    for (size_t t = 0; t < N; t++) {
        double sq = 0;
        for (int i = 0; i < tr->crew.n; i++) sq += sy->dist[(size_t)i * N + t];
        mean += sqrt(sq) / (double)N;
    }
    sy->divergence = mean;
}

/* The host's average into the master weights (every crew thread); at a multiple of K every tower then pulls it,
 * elsewhere (the end of a run of steps between two multiples: an epoch's end, a checkpoint, a stop) it is a
 * snapshot for the evaluation and the checkpoint, and the towers go on from their own weights. */
static void weights_step_average(tt_trainer *tr, int i, int T)
{
    tt_tower *tw = (size_t)i < tr->cfg.n_towers ? &tr->towers[i] : NULL;
    weights_average(tr, i, T, -1, tr->h_params, tr->sy->dist);
    tt_barrier_wait(&tr->bar_reduce, weights_averaged, tr);
    if (tw && tr->sy->boundary) {
        live(tw, TT_LIVE_PULL);
        tt_dev_h2d(&tw->dev, tw->d_params, tr->h_params, tr->model->n_params * sizeof(float));
        tt_dev_sync(&tw->dev);
    }
}

/* After the pulls: the average's wall and the divergence go to the window's last finished step; the finished steps
 * are reported. */
static void weights_pulled(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    sync_state *sy = tr->sy;
    const double now = tt_now();
    if (tr->cur_step > sy->win0) {
        tt_step_result *res = &tr->results[tr->cur_step - 1];
        res->averaged = sy->boundary;
        res->divergence = sy->boundary ? sy->divergence : 0;
        res->t.reduce0 = sy->t_avg0;
        res->t.reduce1 = now;
        res->t.reduce = now - sy->t_avg0;
        res->t.total += res->t.reduce;
        res->t.step1 = now;
    }
    for (size_t st = sy->win0; st < tr->cur_step; st++) { /* launch: what the phases leave of the total */
        tt_step_times *t = &tr->results[st].t;
        t->towers = t->total - t->reduce;
        t->launch = t->towers - (t->data + t->compute + t->push + t->update + t->wait);
        if (t->launch < 0) t->launch = 0;
    }
    atomic_store(&tr->steps_done, tr->cur_step);
}

/* One step of tower tw on its own weights: its shard's forward and backward, its own optimizer step (none for an
 * empty shard: nothing to learn from), its statistics and ledger. */
static void weights_tower_step(tt_trainer *tr, tt_tower *tw, size_t st)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers, i = (size_t)tw->id, n = sync_step_n(tr, st);
    const double t0 = tt_now();
    tower_shard(&tr->cfg, n, i, &tw->lo, &tw->rows);
    tower_step(tw, tr->idx + st * tr->cfg.batch, n, 0);
    live(tw, TT_LIVE_HOST);
    int grad_bad = 0;
    if (tw->rows) {
        tt_optim_begin_step(&tw->opt);
        grad_bad = tower_update(tw);
    }
    const int loss_bad = !isfinite(tw->loss_sum);
    if (loss_bad || grad_bad) {
        atomic_store(&tr->grad_nonfinite, 1);
        pthread_mutex_lock(&sy->mu);
        if (st < sy->bad_step) { /* an earlier step than any seen: its towers replace the record */
            sy->bad_step = st;
            memset(sy->bad_loss, 0, N * sizeof(int));
            memset(sy->bad_grad, 0, N * sizeof(int));
        }
        if (st == sy->bad_step) {
            sy->bad_loss[i] = loss_bad;
            sy->bad_grad[i] = grad_bad;
        }
        pthread_mutex_unlock(&sy->mu);
    }
    struct wstat *w = &sy->ws[st * N + i];
    w->loss_sum = tw->loss_sum;
    w->top1 = tw->top1;
    w->top5 = tw->top5;
    w->rows = tw->rows;
    w->t1 = tt_now();
    w->span = w->t1 - t0;
    const tt_tower_ledger *l = &tw->led;
    w->data = l->data1 - l->pull1;
    w->compute = l->compute1 - l->data1;
    w->push = l->push1 - l->push0;
    w->update = l->update1 - l->update0;
    if (tr->ledger) tr->ledger[st * N + i] = tw->led;
}

/* Serial: where a halting window ends — the furthest step a tower reached (0: no catching up). */
static void weights_agree_end(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    sync_state *sy = tr->sy;
    size_t lo = SIZE_MAX, hi = 0;
    for (size_t t = 0; t < tr->cfg.n_towers; t++) {
        lo = sy->tw_done[t] < lo ? sy->tw_done[t] : lo;
        hi = sy->tw_done[t] > hi ? sy->tw_done[t] : hi;
    }
    sy->catch_to = lo < hi ? hi : 0;
}

/* --sync weights:K, crew thread i: tower i runs its steps on its own weights with its own optimizer, with no
 * barrier, until the window's end — the next multiple of K of the training's steps, or the run's last step — then
 * every crew thread meets, the host averages the towers' weights and every tower pulls the average. A stop (or a
 * tower's non-finite loss or gradient) ends each tower's window at its current step; the average is still taken.
 * At the run's end the optimizer's vectors are averaged too, and the host's step count is the towers'. */
static void crew_weights(tt_trainer *tr, int i, int T)
{
    sync_state *sy = tr->sy;
    const size_t N = tr->cfg.n_towers, K = tr->cfg.sync.k;
    const size_t steps = tr->sy->steps; /* sync_begin's count */
    tt_tower *tw = (size_t)i < N ? &tr->towers[i] : NULL;
    if (tw && !sy->towers_hold) {
        tower_master(tw, 1); /* the host's weights and optimizer vectors onto the tower */
        tw->opt = tr->opt;   /* and its scalars */
    }
    tt_barrier_wait(&tr->bar_update, NULL, NULL);
    while (!tr->halt && tr->cur_step < steps) {
        if (i == 0) { /* read by every thread only after the barrier below */
            sy->win0 = tr->cur_step;
            const uint64_t g = tr->steps;
            sy->win_end = sy->win0 + (size_t)(K - g % K);
            if (sy->win_end > steps) sy->win_end = steps;
        }
        tt_barrier_wait(&tr->bar_push, NULL, NULL);
        if (tw) { /* the window's steps; a stop or a halt ends them after the step in flight (at least one) */
            size_t st = sy->win0;
            while (st < sy->win_end) {
                weights_tower_step(tr, tw, st++);
                if (stop_asked(tr) || atomic_load(&tr->grad_nonfinite)) break;
            }
            sy->tw_done[i] = st;
            live(tw, TT_LIVE_WAIT);
        }
        /* a stop or a halt: the towers that stopped early catch up with the furthest one (no tower can undo a
         * step), so every tower holds the same steps — the run's finished steps, its checkpoint's */
        tt_barrier_wait(&tr->bar_push, weights_agree_end, tr);
        if (tw) {
            for (size_t st = sy->tw_done[i]; st < sy->catch_to; st++) weights_tower_step(tr, tw, st);
            if (sy->catch_to > sy->tw_done[i]) sy->tw_done[i] = sy->catch_to;
            live(tw, TT_LIVE_WAIT);
        }
        tt_barrier_wait(&tr->bar_push, weights_window_end, tr);
        weights_step_average(tr, i, T);
        tt_barrier_wait(&tr->bar_update, weights_pulled, tr);
    }
    /* the optimizer's vectors averaged into the host's, and its step count (every tower's is the same: each ran
     * every finished step) */
    for (int vec = 0; vec < 3; vec++) {
        float *dst = optim_vec(&tr->opt, vec);
        if (dst) weights_average(tr, i, T, vec, dst, NULL);
    }
    if (i == 0 && tw) {
        tr->opt.t = tw->opt.t;
        tr->opt.u_product = tw->opt.u_product;
    }
    tt_barrier_wait(&tr->bar_update, NULL, NULL); /* every thread has read towers_hold */
    if (i == 0) sy->towers_hold = 1;
    if (tw) live(tw, TT_LIVE_IDLE);
}

/* ---- the phases one at a time, for the probe ----------------------------------------------------------------- */

/* Serial section between phases: a stop request (a signal) ends the measurement at the end of a rep. */
static void phases_check_stop(void *arg)
{
    tt_trainer *tr = (tt_trainer *)arg;
    if ((tr->cfg.stop && atomic_load(tr->cfg.stop)) || atomic_load(&tr->stop_request)) tr->halt = TT_HALT_STOP;
}

static void phases_begin_update(void *arg) { tt_optim_begin_step(&((tt_trainer *)arg)->opt); }

/* Thread i's clock readings of phase ph in rep r. */
static double *phase_slot(tt_trainer *tr, double *base, int i, size_t r, int ph)
{
    return base + ((size_t)i * tr->ph_reps + r) * TT_PHASE_COUNT + (size_t)ph;
}

/* The step's phases, each started together on every thread that takes part and waited for before the next, so
 * each is timed alone: tower phases on the N towers, the placement's reduce on the N towers, the host slice on all
 * T threads. The code is the step's own (tower_step's phase functions, the placement's reduce, host_slice). */
static void crew_phases(tt_trainer *tr, int i, int T)
{
    const size_t N = tr->cfg.n_towers, n = tr->n;
    tt_tower *tw = (size_t)i < N ? &tr->towers[i] : NULL;
    if (tw) shard_of(n, N, (size_t)i, &tw->lo, &tw->rows);
    for (size_t r = 0; r <= tr->ph_reps && !tr->halt; r++) { /* rep 0 warms up and is not kept */
        const size_t k = r ? r - 1 : 0;
        for (int ph = 0; ph < TT_PHASE_COUNT; ph++) {
            const int tower_phase = ph != TT_PHASE_HOST;
            if (ph == TT_PHASE_REDUCE && !tr->place->reduce) continue;
            tt_barrier_wait(&tr->bar_push, ph == TT_PHASE_HOST ? phases_begin_update : NULL, tr);
            double t0 = tt_now(), sum = 0, upd = 0;
            if (tw && tower_phase) {
                switch (ph) {
                case TT_PHASE_PULL: phase_pull(tw); break;
                case TT_PHASE_DATA: phase_data(tw, tr->ds, tr->idx, tw->lo, tw->rows); break;
                case TT_PHASE_COMPUTE: phase_compute(tw, n); break;
                case TT_PHASE_PUSH: phase_push(tw); break;
                case TT_PHASE_REDUCE: tr->place->reduce(tw); break;
                }
                tt_dev_sync(&tw->dev);
            } else if (!tower_phase) {
                const host_pass fused = fused_pass(tr);
                host_slice(tr, &fused, i, T, &sum, &upd);
            }
            double t1 = tt_now();
            if (tw && tower_phase && ph == TT_PHASE_PUSH) tower_count_stats(tw, tw->rows);
            if ((tw || !tower_phase) && r > 0) {
                *phase_slot(tr, tr->ph_start, i, k, ph) = t0;
                *phase_slot(tr, tr->ph_end, i, k, ph) = t1;
                if (!tower_phase) {
                    tr->ph_sum[(size_t)i * tr->ph_reps + k] = sum;
                    tr->ph_upd[(size_t)i * tr->ph_reps + k] = upd;
                }
            }
        }
        tt_barrier_wait(&tr->bar_push, phases_check_stop, tr);
    }
}

/* ---- jobs ---------------------------------------------------------------------------------------------------- */

/* The body of crew thread i: one job, then back to sleep. */
static void crew_job(void *arg, int i, int T)
{
    tt_trainer *tr = (tt_trainer *)arg;
    tt_tower *tw = (size_t)i < tr->cfg.n_towers ? &tr->towers[i] : NULL;
    switch (tr->job) {
    case JOB_INIT:
        if (tw) tw->status = tower_alloc(tw);
        break;
    case JOB_STEPS:
        if (sync_applies_alone(&tr->cfg)) crew_async(tr, i);
        else if (tr->cfg.sync.kind == TT_SYNC_WEIGHTS) crew_weights(tr, i, T);
        else crew_steps(tr, i, T);
        break;
    case JOB_EVAL:
        if (tw) tower_eval(tw);
        break;
    case JOB_DIAGNOSE:
        if (tw) tower_diagnose(tw);
        break;
    case JOB_PHASES:
        crew_phases(tr, i, T);
        break;
    case JOB_FREE:
        if (tw) tower_release(tw);
        break;
    }
}

static void run_job(tt_trainer *tr, int job)
{
    tr->job = job;
    tt_pool_run(&tr->crew, tr->crew.n, crew_job, tr);
}

/* The samples of a run of steps (or of a phase timing), and a clean slate for its halt decisions. */
static void job_begin(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n)
{
    tr->ds = ds;
    tr->idx = idx;
    tr->n = n;
    tr->halt = TT_HALT_NONE;
    atomic_store(&tr->stop_request, 0); /* a request is for the job in flight: one left from an earlier job is void */
    tr->loss_nonfinite = 0;
    atomic_store(&tr->grad_nonfinite, 0);
    tr->node_status = TT_OK;
}

static tt_status towers_status(tt_trainer *tr, tt_error *err)
{
    for (size_t t = 0; t < tr->cfg.n_towers; t++)
        if (tr->towers[t].status != TT_OK)
            return tt_fail(err, tr->towers[t].status, "tower %zu (%s device %d): %s", t, tr->cfg.ops->name,
                           tr->towers[t].dev.ordinal, tr->towers[t].err.msg);
    return TT_OK;
}

int tt_trainer_link_devices(const tt_trainer_config *cfg, int *ords)
{
    int n = (size_t)cfg->n_devices < cfg->n_towers ? cfg->n_devices : (int)cfg->n_towers;
    if (n > TT_MAX_DEVICES) n = TT_MAX_DEVICES;
    for (int d = 0; d < n; d++) ords[d] = cfg->devices ? cfg->devices[d] : d;
    return n;
}

/* --sync other than bsp: the shards' schedule (ssp, async) and the averages' accounts (weights). */
static tt_status sync_init(tt_trainer *tr, int T, tt_error *err)
{
    const size_t N = tr->cfg.n_towers;
    sync_state *sy = (sync_state *)tt_calloc(1, sizeof *sy);
    if (sy) {
        sy->clock = (size_t *)tt_calloc(N, sizeof *sy->clock);
        sy->dist = (double *)tt_calloc((size_t)T * N, sizeof *sy->dist);
        sy->tw_done = (size_t *)tt_calloc(N, sizeof *sy->tw_done);
        sy->bad_loss = (int *)tt_calloc(2 * N, sizeof(int));
        sy->bad_grad = sy->bad_loss ? sy->bad_loss + N : NULL;
    }
    if (!sy || !sy->clock || !sy->dist || !sy->tw_done || !sy->bad_loss) {
        if (sy) tt_free(sy->clock), tt_free(sy->dist), tt_free(sy->tw_done), tt_free(sy->bad_loss), tt_free(sy);
        return tt_fail(err, TT_ERR_NOMEM, "out of host memory for --sync's counters");
    }
    pthread_mutex_init(&sy->mu, NULL);
    pthread_cond_init(&sy->cv, NULL);
    tr->sy = sy;
    return TT_OK;
}

static void sync_free(tt_trainer *tr)
{
    sync_state *sy = tr->sy;
    if (!sy) return;
    pthread_mutex_destroy(&sy->mu);
    pthread_cond_destroy(&sy->cv);
    tt_free(sy->clock);
    tt_free(sy->dist);
    tt_free(sy->left);
    tt_free(sy->span);
    tt_free(sy->ws);
    tt_free(sy->tw_done);
    tt_free(sy->bad_loss);
    tt_free(sy);
    tr->sy = NULL;
}

/* --overlap on: the buckets of this model, their chunks, and the crew's work accounts. */
static tt_status overlap_init(tt_trainer *tr, int T, tt_error *err)
{
    overlap *o = (overlap *)tt_calloc(1, sizeof *o);
    if (o) o->work = (double(*)[4])tt_calloc((size_t)T, sizeof *o->work);
    if (!o || !o->work) {
        if (o) tt_free(o);
        return tt_fail(err, TT_ERR_NOMEM, "out of host memory for --overlap's buckets");
    }
    o->nb = overlap_edges(tr->model, tr->cfg.bucket_bytes, o->edge);
    const size_t per = (size_t)OV_CHUNK * TT_REDUCE_BLOCK;
    for (size_t k = 0; k < o->nb; k++) o->chunks[k] = (o->edge[k] - o->edge[k + 1] + per - 1) / per;
    pthread_mutex_init(&o->mu, NULL);
    pthread_cond_init(&o->cv, NULL);
    overlap_reset(o);
    atomic_store(&o->towers_busy, tr->cfg.n_towers);
    tr->ov = o;
    return TT_OK;
}

static void overlap_free(tt_trainer *tr)
{
    if (!tr->ov) return;
    pthread_mutex_destroy(&tr->ov->mu);
    pthread_cond_destroy(&tr->ov->cv);
    tt_free(tr->ov->work);
    tt_free(tr->ov);
    tr->ov = NULL;
}

tt_status tt_trainer_init(tt_trainer *tr, const tt_model *m, const tt_trainer_config *cfg,
                          const float *h_init_params, tt_error *err)
{
    memset(tr, 0, sizeof *tr);
    tr->cfg = *cfg;
    tr->model = m;
    const size_t N = cfg->n_towers, P = m->n_params;
    if (N < 1) return tt_fail(err, TT_ERR_ARG, "--towers must be at least 1");
    if (cfg->batch < N)
        return tt_fail(err, TT_ERR_ARG, "--towers %zu is more than --batch %zu: every tower needs at least one sample",
                       N, cfg->batch);
    if (cfg->n_devices < 1) return tt_fail(err, TT_ERR_ARG, "the backend has no device");

    tt_status s = tt_trainer_check(cfg, err);
    if (s) return s;
    if (cfg->data_on && cfg->train_set->dim != m->input_dim)
        return tt_fail(err, TT_ERR_ARG, "--data-on device: the training set has %zu features, the model expects %zu",
                       cfg->train_set->dim, m->input_dim);
    tr->place = &placements[cfg->reduce];
    if (multi_node(cfg)) {
        if ((unsigned)cfg->node_reduce >= TT_NODE_REDUCE_COUNT)
            return tt_fail(err, TT_ERR_ARG, "--node-reduce: unknown mode");
        if (cfg->batch < N * (size_t)cfg->node->size)
            return tt_fail(err, TT_ERR_ARG,
                           "--batch %zu is less than %d ranks x %zu towers: every tower needs at least one sample",
                           cfg->batch, cfg->node->size, N);
        tt_node_slice(P, cfg->node->size, cfg->node->rank, &tr->node_lo, &tr->node_n);
    }
    tr->shard_max = shard_rows(cfg);
    tr->xchg_max = xchg_floats(m, cfg);
    tr->h_slots = (float **)tt_calloc(N, sizeof(float *));
    tr->towers = (tt_tower *)tt_calloc(N, sizeof(tt_tower));
    if (!tr->h_slots || !tr->towers)
        return tt_fail(err, TT_ERR_NOMEM, "out of host memory for %zu parameters", P);
    /* peer access between the towers' devices, enabled before any tower copies (once per pair, idempotent) */
    tr->n_links = tt_trainer_link_devices(cfg, tr->link_devs);
    s = tt_backend_links(cfg->ops, tr->link_devs, tr->n_links, tr->links, err);
    if (s) return s;
    /* ps: this rank is the parameter server of its slice, and holds the optimizer's state of that slice only */
    size_t own_lo, own_n;
    owned_slice(cfg, P, &own_lo, &own_n);
    s = tt_optim_init(&tr->opt, &cfg->optim, own_n, err);
    if (s) return s;
    /* the non-trainable tail (moving statistics) is added, not optimized: where it starts in this state's slice */
    tr->opt.n_train = m->n_trainable < own_lo ? 0 : m->n_trainable - own_lo < own_n ? m->n_trainable - own_lo : own_n;
    for (size_t t = 0; t < N; t++) {
        tr->towers[t].id = (int)t;
        tr->towers[t].tr = tr;
        tr->towers[t].xchg = (tt_exchange){tower_exchange, &tr->towers[t]};
    }
    int cpus = tt_cpu_count();
    int host = cfg->host_threads > 0 ? cfg->host_threads : cpus;
    int T = (int)N > host ? (int)N : host;
    /* spin at the barriers only when every crew thread has a core; otherwise spinning steals from the workers */
    double spin = T <= cpus ? 200e-6 : 0.0;
    tt_barrier_init(&tr->bar_push, T, spin);
    tt_barrier_init(&tr->bar_reduce, T, spin);
    tt_barrier_init(&tr->bar_update, T, spin);
    tt_barrier_init(&tr->bar_xchg, (int)N, spin);
    tr->bars_up = 1;
    if (cfg->overlap) {
        s = overlap_init(tr, T, err);
        if (s) return s;
    }
    if (cfg->sync.kind != TT_SYNC_BSP) {
        s = sync_init(tr, T, err);
        if (s) return s;
    }
    s = tt_pool_init(&tr->crew, T, err);
    if (s) return s;
    tr->crew_up = 1;
    run_job(tr, JOB_INIT);
    s = towers_status(tr, err);
    if (s) return s;
    for (size_t t = (size_t)cfg->n_devices; t < N; t++) { /* virtual towers read their device's one copy */
        tr->towers[t].d_set_x = tr->towers[t % (size_t)cfg->n_devices].d_set_x;
        tr->towers[t].d_set_y = tr->towers[t % (size_t)cfg->n_devices].d_set_y;
    }
    if (cfg->reduce == TT_REDUCE_NCCL) { /* one communicator over the towers' devices, from this thread */
        void *ctxs[TT_MAX_DEVICES];
        for (size_t t = 0; t < N; t++) ctxs[t] = tr->towers[t].dev.ctx;
        s = cfg->ops->comm_init(&tr->comm, ctxs, (int)N, err);
        if (s) return s;
    }
    tt_trainer_set_params(tr, h_init_params);
    return TT_OK;
}

size_t tt_trainer_bucket_edges(const tt_model *m, size_t bytes, size_t *edge) { return overlap_edges(m, bytes, edge); }

size_t tt_trainer_buckets(const tt_trainer *tr, size_t *edge)
{
    if (!tr->ov) return 0;
    memcpy(edge, tr->ov->edge, (tr->ov->nb + 1) * sizeof *edge);
    return tr->ov->nb;
}

void tt_trainer_get_params(const tt_trainer *tr, float *h_out)
{
    memcpy(h_out, tr->h_params, tr->model->n_params * sizeof(float));
}

void tt_trainer_set_params(tt_trainer *tr, const float *h_params)
{
    memcpy(tr->h_params, h_params, tr->model->n_params * sizeof(float));
    if (tr->sy) tr->sy->towers_hold = 0; /* weights:K: the next run starts every tower from these */
}

tt_optim *tt_trainer_optim(tt_trainer *tr) { return &tr->opt; }

const float *tt_trainer_params(const tt_trainer *tr) { return tr->h_params; }

void tt_trainer_free(tt_trainer *tr)
{
    if (tr->comm) tr->cfg.ops->comm_free(tr->comm);
    if (tr->crew_up) run_job(tr, JOB_FREE); /* device memory is released on each tower's own thread */
    tt_pool_free(&tr->crew);
    if (tr->bars_up) {
        tt_barrier_destroy(&tr->bar_push);
        tt_barrier_destroy(&tr->bar_reduce);
        tt_barrier_destroy(&tr->bar_update);
        tt_barrier_destroy(&tr->bar_xchg);
    }
    if (tr->model) tt_optim_free(&tr->opt);
    overlap_free(tr);
    sync_free(tr);
    tt_free(tr->h_slots);
    tt_free(tr->towers);
    memset(tr, 0, sizeof *tr);
}
tt_status tt_trainer_start_steps(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n,
                                 tt_step_result *results, size_t n_results, tt_tower_ledger *ledger, tt_error *err)
{
    const size_t B = tr->cfg.batch;
    if (n == 0) return tt_fail(err, TT_ERR_ARG, "a run of steps needs at least one sample");
    if ((n + B - 1) / B > n_results)
        return tt_fail(err, TT_ERR_ARG, "%zu samples make %zu steps but there is room for %zu results", n,
                       (n + B - 1) / B, n_results);
    if (ds->dim != tr->model->input_dim)
        return tt_fail(err, TT_ERR_ARG, "data has %zu features, the model expects %zu", ds->dim, tr->model->input_dim);
    job_begin(tr, ds, idx, n);
    if (tr->sy) {
        tt_status s = sync_begin(tr, (n + B - 1) / B, err);
        if (s) return s;
    }
    tr->results = results;
    tr->ledger = ledger;
    tr->cur_step = 0;
    atomic_store(&tr->steps_done, 0);
    tr->job = JOB_STEPS;
    tr->t_step = tt_now();
    tt_pool_start(&tr->crew, tr->crew.n, crew_job, tr);
    return TT_OK;
}

int tt_trainer_wait(tt_trainer *tr, double timeout_s, size_t *steps_done)
{
    int done = tt_pool_wait(&tr->crew, timeout_s);
    if (steps_done) *steps_done = (size_t)atomic_load(&tr->steps_done);
    return done;
}

tt_status tt_trainer_step(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n, tt_step_result *res,
                          tt_error *err)
{
    if (n == 0 || n > tr->cfg.batch)
        return tt_fail(err, TT_ERR_ARG, "step of %zu samples: must be 1..%zu", n, tr->cfg.batch);
    tt_status s = tt_trainer_start_steps(tr, ds, idx, n, res, 1, NULL, err);
    if (s) return s;
    tt_trainer_wait(tr, -1, NULL);
    if (tr->halt == TT_HALT_NONFINITE)
        return tt_fail(err, TT_ERR_NUMERIC,
                       "the step's loss or gradient is not finite (no non-finite value was applied)");
    return TT_OK;
}

tt_halt tt_trainer_halted(const tt_trainer *tr) { return tr->halt; }

tt_status tt_trainer_node_error(const tt_trainer *tr, tt_error *err)
{
    if (tr->node_status && err) *err = tr->node_err;
    return tr->node_status;
}

size_t tt_trainer_optim_offset(const tt_trainer *tr)
{
    size_t lo, n;
    owned_slice(&tr->cfg, tr->model->n_params, &lo, &n);
    return lo;
}

void tt_trainer_set_epoch(tt_trainer *tr, uint64_t epoch) { tr->epoch = epoch; }

void tt_trainer_set_steps(tt_trainer *tr, uint64_t steps) { tr->steps = steps; }

void tt_trainer_request_stop(tt_trainer *tr) { atomic_store(&tr->stop_request, 1); }

void tt_trainer_nonfinite_towers(tt_trainer *tr, int *loss_bad, int *grad_bad)
{
    if (tr->sy && tr->cfg.sync.kind == TT_SYNC_WEIGHTS && tr->sy->bad_step != SIZE_MAX) { /* recorded as it came */
        memcpy(loss_bad, tr->sy->bad_loss, tr->cfg.n_towers * sizeof(int));
        memcpy(grad_bad, tr->sy->bad_grad, tr->cfg.n_towers * sizeof(int));
        return;
    }
    run_job(tr, JOB_DIAGNOSE);
    for (size_t t = 0; t < tr->cfg.n_towers; t++) {
        loss_bad[t] = !isfinite(tr->towers[t].loss_sum);
        grad_bad[t] = tr->towers[t].grad_nonfinite;
    }
}

tt_status tt_trainer_plan(const tt_model *m, const tt_trainer_config *cfg, tt_mem_plan *plan, tt_error *err)
{
    tt_status s = tt_trainer_check(cfg, err);
    if (s) return s;
    /* a trainer and towers that are never allocated: tower_buffers only reads the sizes */
    tt_trainer tr;
    memset(&tr, 0, sizeof tr);
    tr.cfg = *cfg;
    tr.model = m;
    tr.place = &placements[cfg->reduce];
    tr.shard_max = shard_rows(cfg);
    tr.xchg_max = xchg_floats(m, cfg);
    tr.h_slots = (float **)tt_calloc(cfg->n_towers, sizeof(float *));
    if (!tr.h_slots) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    tt_tower tw;
    buf_list l;
    for (size_t t = 0; t < cfg->n_towers; t++) {
        memset(&tw, 0, sizeof tw);
        tw.id = (int)t;
        tower_buffers(&tr, &tw, &l);
        const int d = (int)(t % (size_t)cfg->n_devices), ord = cfg->devices ? cfg->devices[d] : d;
        for (int i = 0; i < l.n; i++)
            tt_mem_add(plan, l.b[i].part, l.b[i].on_host ? TT_MEM_HOST : ord, (double)l.b[i].bytes, l.b[i].driver);
        if (cfg->ops->lt_bytes) /* what the backend's context holds from init for gemm_bias_act */
            tt_mem_add(plan, "cuBLASLt workspace", ord, (double)cfg->ops->lt_bytes, TT_MEM_BY_RUN);
        if (cfg->graphs) /* what the backend allocates at the tower's first capture */
            tt_mem_add(plan, "graph workspace (--graphs on)", ord, (double)cfg->ops->capture_bytes, TT_MEM_BY_RUN);
    }
    tt_free(tr.h_slots);
    size_t lo, owned; /* ps: the optimizer's state of this rank's slice only */
    owned_slice(cfg, m->n_params, &lo, &owned);
    tt_mem_add(plan, "optimizer state", TT_MEM_HOST,
               (double)tt_optim_state_floats(&cfg->optim) * (double)owned * sizeof(float), TT_MEM_BY_PARAMS);
    plan->model = tt_model_file(m);
    plan->n_params = m->n_params;
    plan->towers = cfg->n_towers;
    plan->rows = tr.shard_max;
    if (cfg->data_on) {
        plan->samples = cfg->train_set->n;
        plan->sample_bytes = tt_dataset_sample_bytes(cfg->train_set);
    }
    return TT_OK;
}

tt_status tt_trainer_evaluate(tt_trainer *tr, const tt_dataset *ds, tt_eval_result *res, tt_error *err)
{
    memset(res, 0, sizeof *res);
    if (ds->n == 0) return TT_OK;
    if (ds->dim != tr->model->input_dim)
        return tt_fail(err, TT_ERR_ARG, "data has %zu features, the model expects %zu", ds->dim, tr->model->input_dim);
    tr->ds = ds;
    tr->idx = NULL;
    tr->n = ds->n;
    if (multi_node(&tr->cfg) && tr->h_logits)
        return tt_fail(err, TT_ERR_ARG, "predicting runs in one process (not under mpirun with more than one rank)");
    for (size_t t = 0; t < tr->cfg.n_towers; t++)
        tower_shard(&tr->cfg, ds->n, t, &tr->towers[t].lo, &tr->towers[t].rows);
    run_job(tr, JOB_EVAL);
    double loss = 0;
    size_t top1 = 0, top5 = 0;
    for (size_t t = 0; t < tr->cfg.n_towers; t++) {
        loss += tr->towers[t].loss_sum;
        top1 += tr->towers[t].top1;
        top5 += tr->towers[t].top5;
    }
    if (multi_node(&tr->cfg)) { /* every rank evaluated its part: the sums over all ranks, in rank order */
        double job[3] = {loss, (double)top1, (double)top5};
        tt_status s = tt_node_sum(tr->cfg.node, job, 3, err);
        if (s) return s;
        loss = job[0];
        top1 = (size_t)job[1];
        top5 = (size_t)job[2];
    }
    res->n = ds->n;
    res->loss = loss / (double)ds->n;
    res->accuracy = (double)top1 / (double)ds->n;
    res->top5 = (double)top5 / (double)ds->n;
    return TT_OK;
}

tt_status tt_trainer_predict(tt_trainer *tr, const tt_dataset *ds, float *h_logits, tt_eval_result *res,
                             tt_error *err)
{
    tr->h_logits = h_logits;
    tt_status s = tt_trainer_evaluate_stoppable(tr, ds, res, err);
    tr->h_logits = NULL;
    return s;
}

tt_status tt_trainer_evaluate_stoppable(tt_trainer *tr, const tt_dataset *ds, tt_eval_result *res, tt_error *err)
{
    tr->eval_stops = 1;
    tt_status s = tt_trainer_evaluate(tr, ds, res, err);
    tr->eval_stops = 0;
    if (!s && tr->cfg.stop && atomic_load(tr->cfg.stop)) /* the caller names the signal */
        s = tt_fail(err, TT_ERR_STOPPED, "stopped");
    return s;
}

uint64_t tt_trainer_device_allocs(const tt_trainer *tr)
{
    uint64_t n = 0;
    for (size_t t = 0; tr->towers && t < tr->cfg.n_towers; t++) n += tr->towers[t].dev.n_alloc;
    return n;
}

int tt_trainer_links(const tt_trainer *tr, const int **ords, const int **link)
{
    *ords = tr->link_devs;
    *link = tr->links;
    return tr->n_links;
}

/* Median over reps of f(rep). */
static double median_reps(double *v, size_t reps) { return tt_median(v, reps); }

tt_status tt_trainer_time_phases(tt_trainer *tr, const tt_dataset *ds, const uint32_t *idx, size_t n, size_t reps,
                                 tt_phase_times *out, tt_error *err)
{
    memset(out, 0, sizeof *out);
    const size_t N = tr->cfg.n_towers;
    const int T = tr->crew.n;
    if (multi_node(&tr->cfg)) return tt_fail(err, TT_ERR_ARG, "phase timing: one rank's trainer only");
    if (tr->ov)
        return tt_fail(err, TT_ERR_ARG, "phase timing: --overlap on runs the phases together (bench times it)");
    if (tr->cfg.update != TT_UPDATE_HOST)
        return tt_fail(err, TT_ERR_ARG, "phase timing: the host's update only (--update %s is timed by bench)",
                       tt_update_name(tr->cfg.update));
    if (n < N || n > tr->cfg.batch || reps < 1)
        return tt_fail(err, TT_ERR_ARG, "phase timing: %zu samples for %zu towers (batch %zu), %zu reps", n, N,
                       tr->cfg.batch, reps);
    if (ds->dim != tr->model->input_dim)
        return tt_fail(err, TT_ERR_ARG, "data has %zu features, the model expects %zu", ds->dim, tr->model->input_dim);
    const size_t cells = (size_t)T * reps * TT_PHASE_COUNT;
    tr->ph_start = (double *)tt_calloc(cells, sizeof(double));
    tr->ph_end = (double *)tt_calloc(cells, sizeof(double));
    tr->ph_sum = (double *)tt_calloc((size_t)T * reps, sizeof(double));
    tr->ph_upd = (double *)tt_calloc((size_t)T * reps, sizeof(double));
    double *v = (double *)tt_calloc(reps, sizeof(double)), *w = (double *)tt_calloc(reps, sizeof(double));
    tt_status s = TT_OK;
    if (!tr->ph_start || !tr->ph_end || !tr->ph_sum || !tr->ph_upd || !v || !w)
        s = tt_fail(err, TT_ERR_NOMEM, "phase timing: out of memory");
    if (!s) {
        job_begin(tr, ds, idx, n);
        tr->ph_reps = reps;
        run_job(tr, JOB_PHASES);
        if (tr->halt == TT_HALT_STOP) s = tt_fail(err, TT_ERR_STOPPED, "phase timing: stopped");
    }
    if (!s) {
        double *phase_mean[TT_PHASE_COUNT] = {&out->pull, &out->data, &out->compute, &out->push, &out->reduce,
                                              &out->host};
        for (int ph = 0; ph < TT_PHASE_COUNT; ph++) {
            const size_t who = ph == TT_PHASE_HOST ? (size_t)T : N;
            if (ph == TT_PHASE_REDUCE && !tr->place->reduce) continue;
            for (size_t k = 0; k < reps; k++) {
                double first = 0, last = 0, mean = 0;
                for (size_t i = 0; i < who; i++) {
                    double a = *phase_slot(tr, tr->ph_start, (int)i, k, ph);
                    double b = *phase_slot(tr, tr->ph_end, (int)i, k, ph);
                    first = i == 0 || a < first ? a : first;
                    last = i == 0 || b > last ? b : last;
                    mean += (b - a) / (double)who;
                }
                /* tower phases: the mean tower's time (as the step's split); reduce and host: the wall */
                v[k] = ph < TT_PHASE_REDUCE ? mean : last - first;
            }
            *phase_mean[ph] = median_reps(v, reps);
        }
        for (size_t k = 0; k < reps; k++) { /* the slowest tower's pull..push beyond the mean tower's */
            double worst = 0, mean = 0;
            for (size_t i = 0; i < N; i++) {
                double d = 0;
                for (int ph = TT_PHASE_PULL; ph <= TT_PHASE_PUSH; ph++)
                    d += *phase_slot(tr, tr->ph_end, (int)i, k, ph) - *phase_slot(tr, tr->ph_start, (int)i, k, ph);
                worst = d > worst ? d : worst;
                mean += d / (double)N;
            }
            v[k] = worst - mean;
            /* the host slice's split into summing and updating, in thread 0's proportions */
            double su = tr->ph_sum[k] + tr->ph_upd[k];
            w[k] = su > 0 ? tr->ph_sum[k] / su : 0;
        }
        out->straggle = median_reps(v, reps);
        out->host_sum = out->host * median_reps(w, reps);
        out->host_update = out->host - out->host_sum;
        out->reps = reps;
    }
    tt_free(tr->ph_start);
    tt_free(tr->ph_end);
    tt_free(tr->ph_sum);
    tt_free(tr->ph_upd);
    tr->ph_start = tr->ph_end = tr->ph_sum = tr->ph_upd = NULL;
    tt_free(v);
    tt_free(w);
    tr->halt = TT_HALT_NONE;
    return s;
}
