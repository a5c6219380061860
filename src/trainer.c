/* trainer.c — towers and the synchronous step (see tt_trainer.h for the picture).
 *
 * Threads. One crew of T = max(N towers, H host threads) persistent pthreads. Thread t < N is tower t: it binds
 * its device in the INIT job, allocates everything it will ever need there, and releases it in the FREE job.
 * A STEPS job runs a run of steps with no help from the caller:
 *
 *     towers:   pull -> data -> forward/backward [-> push to own slot: cpu]      (threads >= N just arrive)
 *     barrier A (its last thread aggregates the tower phase and starts the optimizer's step)
 *     towers:   device: tower 0 gathers + sums + pushes; allreduce: tower t does slice t     (not for cpu)
 *     barrier R (device, allreduce only)
 *     everyone: one slice of the buffer: [sum the slots in tower order: cpu] + the optimizer
 *     barrier B (its last thread stamps the step's time)
 *
 * The slices are host work on host memory: the tower threads double as the host's cores once their device work
 * is done, as a CPU device's thread pool would in TensorFlow. The barriers spin briefly before sleeping when every
 * thread has a core, so a step costs no thread wake-ups; the caller is woken once per run of steps.
 * No allocation happens after INIT: buffers are sized for the largest shard (ceil(B/N) rows). */
#include <math.h>
#include <string.h>

#include "tt_math.h"
#include "tt_mem.h"
#include "tt_trainer.h"

enum { JOB_INIT, JOB_STEPS, JOB_EVAL, JOB_DIAGNOSE, JOB_FREE };

static const char *const reduce_names[TT_REDUCE_COUNT] = {"cpu", "device", "allreduce", "nccl"};

int tt_reduce_parse(const char *name, tt_reduce *r)
{
    for (int i = 0; i < TT_REDUCE_COUNT; i++)
        if (strcmp(name, reduce_names[i]) == 0) {
            *r = (tt_reduce)i;
            return 0;
        }
    return -1;
}

const char *tt_reduce_name(tt_reduce r) { return (unsigned)r < TT_REDUCE_COUNT ? reduce_names[r] : "?"; }

struct tt_tower {
    int id;
    tt_trainer *tr;
    tt_dev dev;
    /* device memory */
    float *d_params;    /* (P) this tower's copy of the weights */
    float *d_grads;     /* (P) */
    float *d_act[TT_MAX_LAYERS + 1]; /* n_layers + 1 activations, (rows, width) each; d_act[0] is the input */
    float *d_delta[2];  /* (rows, max_width) ping-pong back-propagation buffers */
    float *d_dlogits;   /* (rows, C) */
    int32_t *d_labels;  /* (rows) */
    float *d_stats;     /* (rows, 2): loss, rank */
    uint8_t *d_x8;      /* (rows, D) raw pixels, scaled into d_act[0] on the device */
    float *d_recv;      /* device: tower 0, (P); allreduce: every tower, (S) — a peer's gradient (slice) */
    float *d_acc;       /* device: tower 0, (P) the sum; allreduce: (S) this tower's slice of the sum */
    size_t slice_lo, slice_n; /* allreduce: this tower's slice [slice_lo, slice_lo + slice_n) of the buffer */
    /* host staging (pinned on a GPU backend) */
    uint8_t *h_x;       /* (rows, D) raw pixels */
    int32_t *h_labels;  /* (rows) */
    float *h_stats;     /* (rows, 2) */
    /* this step or evaluation */
    size_t lo, rows;     /* step: shard = idx[lo .. lo+rows); eval: samples [lo, lo+rows) */
    double loss_sum;
    size_t top1, top5;
    tt_tower_ledger led; /* this step */
    int grad_nonfinite;  /* set by the diagnosis after a non-finite step */
    tt_status status;
    tt_error err;
};

/* Shard t of n samples over N towers: the first n % N towers take one extra row. */
static void shard_of(size_t n, size_t N, size_t t, size_t *lo, size_t *rows)
{
    const size_t base = n / N, extra = n % N;
    *rows = base + (t < extra);
    *lo = t * base + (t < extra ? t : extra);
}

/* ---- tower side -------------------------------------------------------------------------------------------- */

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

enum { MAX_TOWER_BUFS = TT_MAX_LAYERS + 24 };

static int tower_buffers(tt_trainer *tr, tt_tower *tw, tower_buf *b)
{
    const tt_model *m = tr->model;
    const size_t R = tr->shard_max, P = m->n_params, N = tr->cfg.n_towers, F = sizeof(float);
    int n = 0;
#define BUF(ptr, size, host, name, drv) (b[n++] = (tower_buf){(void **)(ptr), (size), (host), (name), (drv)})
    BUF(&tw->d_params, P * F, 0, "tower weights and gradients", TT_MEM_BY_PARAMS);
    BUF(&tw->d_grads, P * F, 0, "tower weights and gradients", TT_MEM_BY_PARAMS);
    for (size_t i = 0; i <= m->n_layers; i++)
        BUF(&tw->d_act[i], R * (i == 0 ? m->input_dim : m->layers[i - 1].out) * F, 0, "activations", TT_MEM_BY_WIDTH);
    BUF(&tw->d_delta[0], R * m->max_width * F, 0, "activations", TT_MEM_BY_WIDTH);
    BUF(&tw->d_delta[1], R * m->max_width * F, 0, "activations", TT_MEM_BY_WIDTH);
    BUF(&tw->d_dlogits, R * m->n_classes * F, 0, "activations", TT_MEM_BY_WIDTH);
    BUF(&tw->d_labels, R * sizeof(int32_t), 0, "batch staging", TT_MEM_BY_RUN);
    BUF(&tw->d_stats, 2 * R * F, 0, "batch staging", TT_MEM_BY_RUN);
    BUF(&tw->d_x8, R * m->input_dim, 0, "batch staging", TT_MEM_BY_RUN);
    BUF(&tw->h_x, R * m->input_dim, 1, "batch staging", TT_MEM_BY_RUN);
    BUF(&tw->h_labels, R * sizeof(int32_t), 1, "batch staging", TT_MEM_BY_RUN);
    BUF(&tw->h_stats, 2 * R * F, 1, "batch staging", TT_MEM_BY_RUN);
    switch (tr->cfg.reduce) {
    case TT_REDUCE_CPU: BUF(&tr->h_slots[tw->id], P * F, 1, "gradient slots", TT_MEM_BY_PARAMS); break;
    case TT_REDUCE_COUNT:
    case TT_REDUCE_NCCL:
    case TT_REDUCE_DEVICE:
        if (tw->id == 0 && N > 1) /* the sum; tower 1's gradient is copied straight into it */
            BUF(&tw->d_acc, P * F, 0, "reduction buffers", TT_MEM_BY_PARAMS);
        if (tw->id == 0 && N > 2) /* towers 2.. arrive here before each is added */
            BUF(&tw->d_recv, P * F, 0, "reduction buffers", TT_MEM_BY_PARAMS);
        break;
    case TT_REDUCE_ALLREDUCE: { /* slices of 16-float multiples so every slice starts 64-byte aligned */
        const size_t S = ((P + N - 1) / N + 15) & ~(size_t)15;
        tw->slice_lo = (size_t)tw->id * S < P ? (size_t)tw->id * S : P;
        tw->slice_n = tw->slice_lo + S < P ? S : P - tw->slice_lo;
        BUF(&tw->d_recv, S * F, 0, "reduction buffers", TT_MEM_BY_PARAMS);
        BUF(&tw->d_acc, S * F, 0, "reduction buffers", TT_MEM_BY_PARAMS);
        break;
    }
    }
    if (tw->id == 0) { /* pinned, so every tower's pull is a fast async copy */
        BUF(&tr->h_params, P * F, 1, "master weights", TT_MEM_BY_PARAMS);
        if (tr->cfg.reduce != TT_REDUCE_CPU) BUF(&tr->h_grad, P * F, 1, "reduced gradient", TT_MEM_BY_PARAMS);
    }
#undef BUF
    TT_ASSERT(n <= MAX_TOWER_BUFS);
    return n;
}

static tt_status tower_alloc(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const int d = tw->id % tr->cfg.n_devices;
    tt_status s = tt_dev_init(&tw->dev, tr->cfg.ops, tr->cfg.devices ? tr->cfg.devices[d] : d, &tw->err);
    if (s) return s;
    tt_dev_bind(&tw->dev);
    tower_buf b[MAX_TOWER_BUFS];
    int n = tower_buffers(tr, tw, b);
    for (int i = 0; i < n; i++) {
        *b[i].slot = b[i].on_host ? tt_dev_host_alloc(&tw->dev, b[i].bytes) : tt_dev_alloc(&tw->dev, b[i].bytes);
        if (!*b[i].slot)
            return tt_fail(&tw->err, TT_ERR_NOMEM,
                           "out of %s memory for %s (%zu bytes; a %zu-row shard of a %zu-parameter model)", b[i].on_host ? "pinned host" : "device", b[i].part, b[i].bytes, tr->shard_max,
                           tr->model->n_params);
    }
    return TT_OK;
}

static void tower_release(tt_tower *tw)
{
    if (!tw->dev.ops) return;
    tower_buf b[MAX_TOWER_BUFS];
    int n = tower_buffers(tw->tr, tw, b);
    for (int i = 0; i < n; i++) {
        if (b[i].on_host)
            tt_dev_host_free(&tw->dev, *b[i].slot);
        else
            tt_dev_dfree(&tw->dev, *b[i].slot);
        *b[i].slot = NULL;
    }
    tt_dev_free(&tw->dev);
}

/* Copies rows (by index, or a contiguous range when idx is NULL) into the staging buffers and on to the device. */
static void tower_load_rows(tt_tower *tw, const tt_dataset *ds, const uint32_t *idx, size_t first, size_t rows)
{
    const size_t D = ds->dim;
    for (size_t r = 0; r < rows; r++) {
        size_t s = idx ? idx[first + r] : first + r;
        memcpy(tw->h_x + r * D, ds->x + s * D, D);
        tw->h_labels[r] = ds->y[s];
    }
    tt_dev_h2d(&tw->dev, tw->d_x8, tw->h_x, rows * D);
    tt_dev_u8_to_f32(&tw->dev, tw->d_act[0], tw->d_x8, rows * D, ds->scale);
    tt_dev_h2d(&tw->dev, tw->d_labels, tw->h_labels, rows * sizeof(int32_t));
}

static void tower_count_stats(tt_tower *tw, size_t rows)
{
    for (size_t r = 0; r < rows; r++) {
        tw->loss_sum += tw->h_stats[2 * r];
        float rank = tw->h_stats[2 * r + 1];
        tw->top1 += rank < 1.0f;
        tw->top5 += rank < 5.0f;
    }
}

/* One tower's part of a step: idx[lo..lo+rows) of a step of n samples. */
static void tower_step(tt_tower *tw, const uint32_t *idx, size_t n)
{
    tt_trainer *tr = tw->tr;
    const tt_model *m = tr->model;
    const size_t P = m->n_params, B = tw->rows;
    tt_dev *dev = &tw->dev;
    tw->loss_sum = 0;
    tw->top1 = tw->top5 = 0;

    double t0 = tt_now();
    tt_dev_h2d(dev, tw->d_params, tr->h_params, P * sizeof(float));
    tt_dev_sync(dev);
    double t1 = tt_now();
    tower_load_rows(tw, tr->ds, idx, tw->lo, B);
    tt_dev_sync(dev);
    double t2 = tt_now();
    if (B == 0) {
        tt_dev_fill(dev, tw->d_grads, P, 0.0f); /* a tower with an empty shard contributes zero */
    } else {
        tt_model_forward(dev, m, tw->d_params, tw->d_act, B);
        tt_dev_softmax_xent(dev, tw->d_dlogits, tw->d_stats, tw->d_act[m->n_layers], tw->d_labels, B, m->n_classes,
                            1.0f / (float)n);
        tt_model_backward(dev, m, tw->d_params, tw->d_grads, tw->d_act, tw->d_delta, tw->d_dlogits, B);
    }
    tt_dev_sync(dev);
    double t3 = tt_now();
    const int push_grad = tr->cfg.reduce == TT_REDUCE_CPU;
    if (push_grad) tt_dev_d2h(dev, tr->h_slots[tw->id], tw->d_grads, P * sizeof(float));
    tt_dev_d2h(dev, tw->h_stats, tw->d_stats, 2 * B * sizeof(float));
    tt_dev_sync(dev);
    double t4 = tt_now();
    tower_count_stats(tw, B);
    tt_tower_ledger *l = &tw->led;
    memset(l, 0, sizeof *l);
    l->pull0 = t0;
    l->pull1 = t1;
    l->data1 = t2;
    l->compute1 = t3;
    l->push0 = t3;
    l->push1 = t4;
    l->reduce0 = l->reduce1 = t4;
    l->rows = B;
    l->bytes_pull = P * sizeof(float);
    l->bytes_data = B * (m->input_dim + sizeof(int32_t));
    l->bytes_push = (push_grad ? P * sizeof(float) : 0) + 2 * B * sizeof(float);
}

/* Device-side reduction after every tower has finished its backward pass (barrier A).
 * device:    tower 0 gathers the others' gradients and sums them into d_acc in tower order — tower 1's copied in
 *            first, then its own added (a + b == b + a exactly: only the grouping matters), then towers 2.. — and
 *            pushes the sum to the host (TF's ReductionToOneDevice). Every tower's own gradient stays intact.
 * allreduce: tower t takes slice t: it starts from tower 0's slice and adds towers 1..N-1 in order (peer copies
 *            for the others' slices, its own read in place), then pushes its slice of the sum (reduce-scatter, then
 *            gather to the host). Same additions in the same order as the host's sum: the results are identical. */
static void tower_reduce(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const size_t N = tr->cfg.n_towers, P = tr->model->n_params;
    tt_tower_ledger *l = &tw->led;
    double t0 = tt_now();
    if (tr->cfg.reduce == TT_REDUCE_DEVICE) {
        if (tw->id != 0) return;
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
        tt_dev_sync(&tw->dev);
        double t1 = tt_now();
        tt_dev_d2h(&tw->dev, tr->h_grad, d_sum, P * sizeof(float));
        tt_dev_sync(&tw->dev);
        l->bytes_reduce = (N - 1) * P * sizeof(float);
        l->bytes_push += P * sizeof(float);
        l->reduce0 = t0;
        l->reduce1 = l->push0 = t1;
        l->push1 = tt_now();
        return;
    }
    const size_t lo = tw->slice_lo, n = tw->slice_n, bytes = n * sizeof(float);
    tt_dev_peer_copy(&tw->dev, tw->d_acc, &tr->towers[0].dev, tr->towers[0].d_grads + lo, bytes);
    for (size_t u = 1; u < N; u++) {
        const float *d_src = tr->towers[u].d_grads + lo;
        if (u != (size_t)tw->id) {
            tt_dev_peer_copy(&tw->dev, tw->d_recv, &tr->towers[u].dev, d_src, bytes);
            d_src = tw->d_recv;
        }
        tt_dev_add(&tw->dev, tw->d_acc, d_src, n);
    }
    tt_dev_sync(&tw->dev);
    double t1 = tt_now();
    tt_dev_d2h(&tw->dev, tr->h_grad + lo, tw->d_acc, bytes);
    tt_dev_sync(&tw->dev);
    l->bytes_reduce = (N - 1) * bytes; /* slices of the N - 1 other towers crossed into this tower's memory */
    l->bytes_push += bytes;
    l->reduce0 = t0;
    l->reduce1 = l->push0 = t1;
    l->push1 = tt_now();
}

static void tower_eval(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const tt_model *m = tr->model;
    tt_dev *dev = &tw->dev;
    tw->loss_sum = 0;
    tw->top1 = tw->top5 = 0;
    tt_dev_h2d(dev, tw->d_params, tr->h_params, m->n_params * sizeof(float));
    for (size_t done = 0; done < tw->rows;) {
        size_t rows = tw->rows - done < tr->shard_max ? tw->rows - done : tr->shard_max;
        tower_load_rows(tw, tr->ds, NULL, tw->lo + done, rows);
        tt_model_forward(dev, m, tw->d_params, tw->d_act, rows);
        tt_dev_softmax_xent(dev, NULL, tw->d_stats, tw->d_act[m->n_layers], tw->d_labels, rows, m->n_classes, 0.0f);
        tt_dev_d2h(dev, tw->h_stats, tw->d_stats, 2 * rows * sizeof(float));
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
    float *h = (float *)tt_malloc(P * sizeof(float));
    if (!h) {
        tw->grad_nonfinite = -1; /* unknown */
        return;
    }
    tt_dev_d2h(&tw->dev, h, tw->d_grads, P * sizeof(float));
    tt_dev_sync(&tw->dev);
    tw->grad_nonfinite = !tt_all_finite(h, P);
    tt_free(h);
}

/* ---- host side: the run of steps ---------------------------------------------------------------------------- */

#define REDUCE_BLOCK TT_REDUCE_BLOCK

/* Slice i of T of the buffer, block by block. cpu placement: sum the towers' slots in tower order into a block
 * buffer on this thread's stack, then apply the optimizer to the block — the summed gradient never exists as a
 * whole buffer, so it costs no memory traffic. Other placements: the towers already pushed the sum into h_grad.
 * A fixed order makes the result independent of which tower finished first and of T.
 * Every block of the summed gradient is checked for NaN/Inf on its way to the optimizer — by the sum itself, or
 * by a read that brings the block into L1 for the optimizer — so the check costs no pass over memory. A block that
 * is not finite is not applied (the master weights stay finite) and the step halts the run; so is every block when
 * the loss was not finite (barrier A saw it). */
static void host_slice(tt_trainer *tr, int i, int T)
{
    const size_t P = tr->model->n_params, N = tr->cfg.n_towers;
    size_t chunk = ((P + (size_t)T - 1) / (size_t)T + 15) & ~(size_t)15; /* 64-byte aligned slices */
    size_t lo = (size_t)i * chunk, hi = lo + chunk;
    if (lo > P) lo = P;
    if (hi > P) hi = P;
    _Alignas(64) float block[REDUCE_BLOCK];
    const int host_sum = tr->cfg.reduce == TT_REDUCE_CPU;
    double t_reduce = 0, t_update = 0, t_begin = tt_now(), t = t_begin;
    for (size_t b = lo; b < hi; b += REDUCE_BLOCK) {
        size_t e = b + REDUCE_BLOCK < hi ? b + REDUCE_BLOCK : hi, len = e - b;
        const float *grad = host_sum ? tr->h_slots[0] + b : tr->h_grad + b; /* one tower: its slot is the sum */
        int finite;
        if (host_sum && N > 1) {
            finite = tt_sum_slots(block, tr->h_slots, N, b, len);
            grad = block;
        } else {
            finite = tt_all_finite(grad, len);
        }
        double t1 = tt_now();
        if (!finite) atomic_store_explicit(&tr->grad_nonfinite, 1, memory_order_relaxed);
        else if (!tr->loss_nonfinite) tt_optim_apply(&tr->opt, tr->h_params + b, grad, b, e);
        double t2 = tt_now();
        t_reduce += t1 - t;
        t_update += t2 - t1;
        t = t2;
    }
    if (i == 0) { /* thread 0's slice stands for the host in the trace: the reduction, then the update */
        tr->t_reduce0 = t_begin;
        tr->t_reduce1 = t_begin + (host_sum ? t_reduce : 0);
        tr->t_update0 = tr->t_reduce1;
        tr->t_update1 = tr->t_update0 + t_update + (host_sum ? 0 : t_reduce);
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
        const tt_tower *tw = &tr->towers[t];
        const tt_tower_ledger *l = &tw->led;
        res->n += tw->rows;
        res->loss_sum += tw->loss_sum;
        res->top1 += tw->top1;
        res->top5 += tw->top5;
        res->t.launch += (l->pull0 - tr->t_step) / (double)N;
        res->t.pull += (l->pull1 - l->pull0) / (double)N;
        res->t.data += (l->data1 - l->pull1) / (double)N;
        res->t.compute += (l->compute1 - l->data1) / (double)N;
        res->t.push += (l->push1 - l->compute1) / (double)N;
        res->t.wait += (now - l->push1) / (double)N;
    }
    res->t.step0 = tr->t_step;
    res->t.towers = now - tr->t_step;
    tr->t_towers_done = now;
    /* a loss that is not finite: no slice applies this step (they still check the gradient, to report it) */
    tr->loss_nonfinite = !isfinite(res->loss_sum);
    tt_optim_begin_step(&tr->opt);
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
    if (tr->cfg.reduce == TT_REDUCE_CPU) {
        res->t.reduce = tr->t_reduce1 - tr->t_reduce0;
        res->t.reduce0 = tr->t_reduce0;
        res->t.reduce1 = tr->t_reduce1;
    }
    res->t.update0 = tr->t_update0;
    res->t.update1 = tr->t_update1;
    res->t.update = now - tr->t_step - res->t.towers - res->t.reduce; /* the rest of the step: the host's update */
    res->t.total = now - tr->t_step;
    res->t.step1 = now;
    if (tr->ledger)
        for (size_t t = 0; t < N; t++) tr->ledger[tr->cur_step * N + t] = tr->towers[t].led;
    tr->t_step = now;
    tr->cur_step++;
    tr->steps++;
    /* the end of a step is where a run may halt: a non-finite loss or gradient, or a stop request (a signal) */
    if (tr->loss_nonfinite || atomic_load_explicit(&tr->grad_nonfinite, memory_order_relaxed))
        tr->halt = TT_HALT_NONFINITE;
    else if ((tr->cfg.stop && atomic_load(tr->cfg.stop)) || atomic_load(&tr->stop_request))
        tr->halt = TT_HALT_STOP;
    atomic_store(&tr->steps_done, tr->cur_step);
}

/* Waits at a barrier, charging the time to the tower's ledger (crew threads beyond the towers are not charged). */
static void tower_barrier(tt_trainer *tr, tt_barrier *b, int i, void (*serial)(void *), void *arg)
{
    double t0 = tt_now();
    tt_barrier_wait(b, serial, arg);
    if ((size_t)i < tr->cfg.n_towers) tr->towers[i].led.wait += tt_now() - t0;
}

static void crew_steps(tt_trainer *tr, int i, int T)
{
    const size_t N = tr->cfg.n_towers, B = tr->cfg.batch;
    const size_t steps = (tr->n + B - 1) / B;
    tt_tower *tw = (size_t)i < N ? &tr->towers[i] : NULL;
    for (size_t st = 0; st < steps; st++) {
        size_t first = st * B, n = tr->n - first < B ? tr->n - first : B;
        if (tw) {
            shard_of(n, N, (size_t)i, &tw->lo, &tw->rows);
            tower_step(tw, tr->idx + first, n);
        }
        tower_barrier(tr, &tr->bar_push, i, after_towers, tr);
        if (tr->cfg.reduce != TT_REDUCE_CPU) {
            if (tw) tower_reduce(tw);
            tower_barrier(tr, &tr->bar_reduce, i, after_reduce, tr);
        }
        host_slice(tr, i, T);
        tt_barrier_wait(&tr->bar_update, after_update, tr);
        if (tr->halt) break; /* set in the serial section above: every thread sees the same value */
    }
}

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
        crew_steps(tr, i, T);
        break;
    case JOB_EVAL:
        if (tw) tower_eval(tw);
        break;
    case JOB_DIAGNOSE:
        if (tw) tower_diagnose(tw);
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

static tt_status towers_status(tt_trainer *tr, tt_error *err)
{
    for (size_t t = 0; t < tr->cfg.n_towers; t++)
        if (tr->towers[t].status != TT_OK)
            return tt_fail(err, tr->towers[t].status, "tower %zu (%s device %d): %s", t, tr->cfg.ops->name,
                           tr->towers[t].dev.ordinal, tr->towers[t].err.msg);
    return TT_OK;
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
    tr->shard_max = (cfg->batch + N - 1) / N;
    tr->h_slots = (float **)tt_calloc(N, sizeof(float *));
    tr->towers = (tt_tower *)tt_calloc(N, sizeof(tt_tower));
    if (!tr->h_slots || !tr->towers)
        return tt_fail(err, TT_ERR_NOMEM, "out of host memory for %zu parameters", P);
    tt_status s = tt_optim_init(&tr->opt, &cfg->optim, P, err);
    if (s) return s;
    for (size_t t = 0; t < N; t++) {
        tr->towers[t].id = (int)t;
        tr->towers[t].tr = tr;
    }
    int cpus = tt_cpu_count();
    int host = cfg->host_threads > 0 ? cfg->host_threads : cpus;
    int T = (int)N > host ? (int)N : host;
    /* spin at the barriers only when every crew thread has a core; otherwise spinning steals from the workers */
    double spin = T <= cpus ? 200e-6 : 0.0;
    tt_barrier_init(&tr->bar_push, T, spin);
    tt_barrier_init(&tr->bar_reduce, T, spin);
    tt_barrier_init(&tr->bar_update, T, spin);
    tr->bars_up = 1;
    s = tt_pool_init(&tr->crew, T, err);
    if (s) return s;
    tr->crew_up = 1;
    run_job(tr, JOB_INIT);
    s = towers_status(tr, err);
    if (s) return s;
    memcpy(tr->h_params, h_init_params, P * sizeof(float));
    return TT_OK;
}

void tt_trainer_free(tt_trainer *tr)
{
    if (tr->crew_up) run_job(tr, JOB_FREE); /* device memory is released on each tower's own thread */
    tt_pool_free(&tr->crew);
    if (tr->bars_up) {
        tt_barrier_destroy(&tr->bar_push);
        tt_barrier_destroy(&tr->bar_reduce);
        tt_barrier_destroy(&tr->bar_update);
    }
    if (tr->model) tt_optim_free(&tr->opt);
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
    tr->ds = ds;
    tr->idx = idx;
    tr->n = n;
    tr->results = results;
    tr->ledger = ledger;
    tr->cur_step = 0;
    tr->halt = TT_HALT_NONE;
    atomic_store(&tr->stop_request, 0);
    tr->loss_nonfinite = 0;
    atomic_store(&tr->grad_nonfinite, 0);
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

void tt_trainer_request_stop(tt_trainer *tr) { atomic_store(&tr->stop_request, 1); }

void tt_trainer_nonfinite_towers(tt_trainer *tr, int *loss_bad, int *grad_bad)
{
    run_job(tr, JOB_DIAGNOSE);
    for (size_t t = 0; t < tr->cfg.n_towers; t++) {
        loss_bad[t] = !isfinite(tr->towers[t].loss_sum);
        grad_bad[t] = tr->towers[t].grad_nonfinite;
    }
}

tt_status tt_trainer_plan(const tt_model *m, const tt_trainer_config *cfg, tt_mem_plan *plan, tt_error *err)
{
    /* a trainer and towers that are never allocated: tower_buffers only reads the sizes */
    tt_trainer tr;
    memset(&tr, 0, sizeof tr);
    tr.cfg = *cfg;
    tr.model = m;
    tr.shard_max = (cfg->batch + cfg->n_towers - 1) / cfg->n_towers;
    tr.h_slots = (float **)tt_calloc(cfg->n_towers, sizeof(float *));
    if (!tr.h_slots) return tt_fail(err, TT_ERR_NOMEM, "out of memory");
    tt_tower tw;
    tower_buf b[MAX_TOWER_BUFS];
    for (size_t t = 0; t < cfg->n_towers; t++) {
        memset(&tw, 0, sizeof tw);
        tw.id = (int)t;
        int n = tower_buffers(&tr, &tw, b);
        for (int i = 0; i < n; i++)
            tt_mem_add(plan, b[i].part, b[i].on_host ? TT_MEM_HOST : (int)(t % (size_t)cfg->n_devices),
                       (double)b[i].bytes, b[i].driver);
    }
    tt_free(tr.h_slots);
    tt_mem_add(plan, "optimizer state", TT_MEM_HOST,
               (double)tt_optim_state_floats(cfg->optim.kind) * (double)m->n_params * sizeof(float), TT_MEM_BY_PARAMS);
    plan->model = tt_model_file(m);
    plan->n_params = m->n_params;
    plan->towers = cfg->n_towers;
    plan->rows = tr.shard_max;
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
    for (size_t t = 0; t < tr->cfg.n_towers; t++)
        shard_of(ds->n, tr->cfg.n_towers, t, &tr->towers[t].lo, &tr->towers[t].rows);
    run_job(tr, JOB_EVAL);
    double loss = 0;
    size_t top1 = 0, top5 = 0;
    for (size_t t = 0; t < tr->cfg.n_towers; t++) {
        loss += tr->towers[t].loss_sum;
        top1 += tr->towers[t].top1;
        top5 += tr->towers[t].top5;
    }
    res->n = ds->n;
    res->loss = loss / (double)ds->n;
    res->accuracy = (double)top1 / (double)ds->n;
    res->top5 = (double)top5 / (double)ds->n;
    return TT_OK;
}

uint64_t tt_trainer_device_allocs(const tt_trainer *tr)
{
    uint64_t n = 0;
    for (size_t t = 0; tr->towers && t < tr->cfg.n_towers; t++) n += tr->towers[t].dev.n_alloc;
    return n;
}
