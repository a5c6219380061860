/* overlap.c — --overlap on: the gradient cut into buckets of whole layers; each tower pushes a bucket as its
 * backward produces it, the host sums and updates a bucket once every tower has pushed it (while the towers compute
 * the layers below), and a tower pulls the next step's weights of a bucket as soon as it is updated. */
#include <math.h>

#include "step.h"

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
void overlap_reset(overlap *o)
{
    for (size_t k = 0; k < o->nb; k++) {
        atomic_store(&o->arrived[k], 0);
        atomic_store(&o->ready[k], 0);
        atomic_store(&o->next[k], 0);
        atomic_store(&o->done[k], 0);
    }
    atomic_store(&o->buckets_done, 0);
}

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
void bucket_push(tt_tower *tw, size_t k)
{
    const overlap *o = tw->tr->ov;
    const size_t lo = o->edge[k + 1], n = o->edge[k] - lo;
    tt_dev_event_record(&tw->dev, tw->ev_b[k][0]); /* its layers are done: the side stream copies after this */
    tt_dev_side_copy(&tw->dev, tw->tr->h_slots[tw->id] + lo, tw->d_grads + lo, n * sizeof(float), 0, tw->ev_b[k][0],
                     tw->ev_b[k][1]);
}

/* Tells the host of every pushed bucket that has landed, in order, without waiting (the statistics first). */
void tower_arrive_landed(tt_tower *tw)
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
void bucket_ready(void *arg, size_t lo)
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
void overlap_run(tt_trainer *tr, int i, tt_tower *tw, int pull_ahead)
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

/* --overlap on: the buckets of this model, their chunks, and the crew's work accounts. */
tt_status overlap_init(tt_trainer *tr, int T, tt_error *err)
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

void overlap_free(tt_trainer *tr)
{
    if (!tr->ov) return;
    pthread_mutex_destroy(&tr->ov->mu);
    pthread_cond_destroy(&tr->ov->cv);
    tt_free(tr->ov->work);
    tt_free(tr->ov);
    tr->ov = NULL;
}

size_t tt_trainer_bucket_edges(const tt_model *m, size_t bytes, size_t *edge) { return overlap_edges(m, bytes, edge); }

size_t tt_trainer_buckets(const tt_trainer *tr, size_t *edge)
{
    if (!tr->ov) return 0;
    memcpy(edge, tr->ov->edge, (tr->ov->nb + 1) * sizeof *edge);
    return tr->ov->nb;
}
