/* placement.c — where the gradients are summed (--reduce: cpu, device, allreduce, nccl) and where the optimizer runs
 * (--update: host, device, replicated): one table row per placement with the buffers it adds to a tower and the
 * tower-side reduce phase it runs between barriers A and R; the update on a device that holds a master copy. */
#include <math.h>
#include <stdio.h>

#include "step.h"

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

/* The rows: {name, help, host_sum, tower_order}, the buffers, the tower-side reduce, what it needs. */
const placement placements[TT_REDUCE_COUNT] = {
    [TT_REDUCE_CPU] = {{"cpu", "host sums the towers' slots", 1, 1}, buffers_cpu, NULL, 0},
    [TT_REDUCE_DEVICE] = {{"device", "tower 0 gathers and sums, like ReductionToOneDevice", 0, 1}, buffers_tower0,
                          reduce_device, 0},
    [TT_REDUCE_ALLREDUCE] = {{"allreduce", "each tower sums one slice: reduce-scatter, then gather to the host", 0, 1},
                             buffers_allreduce, reduce_allreduce, 0},
    [TT_REDUCE_NCCL] = {{"nccl", "NCCL sums into tower 0's GPU; cuda, one GPU per tower", 0, 0}, buffers_tower0,
                        reduce_nccl, PLACE_COLLECTIVES | PLACE_GPU_EACH},
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

const char *tt_reduce_list(char *buf, size_t len, const char *sep, const char *last, int tower_order)
{
    const char *names[TT_REDUCE_COUNT];
    size_t n = 0;
    for (int r = 0; r < TT_REDUCE_COUNT; r++)
        if (!tower_order || placements[r].info.tower_order) names[n++] = placements[r].info.name;
    return tt_join_words(buf, len, names, n, sep, last);
}

const char *const tt_update_names[TT_UPDATE_COUNT + 1] = {"host", "device", "replicated", NULL};
#define ON(r) (1u << TT_REDUCE_##r)
/* The rows: {help, the placements it runs with, why only those, on a device, on every tower}. */
const tt_update_row update_rows[TT_UPDATE_COUNT] = {
    [TT_UPDATE_HOST] = {"master weights and optimizer on the host, pulled and pushed",
                        ON(CPU) | ON(DEVICE) | ON(ALLREDUCE) | ON(NCCL), NULL, 0, 0},
    [TT_UPDATE_DEVICE] = {"on tower 0's device beside the sum; the others pull from it", ON(DEVICE) | ON(NCCL),
                          "the sum must end on tower 0's device", 1, 0},
    [TT_UPDATE_REPLICATED] = {"every tower updates its own copy with the all-reduced sum", ON(ALLREDUCE) | ON(NCCL),
                              "every tower needs the sum", 1, 1},
};
#undef ON

const char *tt_update_name(tt_update u) { return (unsigned)u < TT_UPDATE_COUNT ? tt_update_names[u] : "?"; }
const char *tt_update_help(tt_update u) { return (unsigned)u < TT_UPDATE_COUNT ? update_rows[u].help : "?"; }
unsigned tt_update_reduces(tt_update u) { return (unsigned)u < TT_UPDATE_COUNT ? update_rows[u].reduces : 0; }

/* Tower tw keeps a master copy of the weights and the optimizer's state on its device: --update device (tower 0),
 * replicated (every tower), or a sync mode whose towers train their own weights. */
int holds_master(const tt_trainer *tr, const tt_tower *tw)
{
    const tt_update_row *u = &update_rows[tr->cfg.update];
    return own_weights(tr) || (u->on_device && (u->every_tower || tw->id == 0));
}

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
int tower_update(tt_tower *tw)
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
    const int alone = own_weights(tr);
    tt_optim_update_args(alone ? &tw->opt : &tr->opt, &u);
    tt_dev_update(dev, &u, tw->d_params, device_sum(tw), tw->d_m, tw->d_v, tw->d_a, tw->d_bad, P,
                  alone ? !isfinite(tw->loss_sum) : tr->loss_nonfinite);
    /* every master holds the same weights, so tower 0 speaks for all; --sync weights: each its own */
    const int own = tw->id == 0 || own_weights(tr);
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
void tower_master(tt_tower *tw, int to_device)
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
