/* tower.c — one tower: the buffers it allocates (one list, which the allocation, the release and the memory plan all
 * walk), and the phases of its step on its own stream — pull, data, compute, push — issued in order with the
 * ledger's events between them and waited for once; --graphs on's capture and replay of that step; its part of an
 * evaluation; the diagnosis after a non-finite step. No tower knows where its gradient is summed (placement.c). */
#include <errno.h>
#include <time.h>

#include "tt_rng.h"
#include "step.h"

void tower_buffers(tt_trainer *tr, tt_tower *tw, buf_list *l)
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
    if (tt_augment_on(&tr->cfg.augment))
        add_buf(l, &tw->d_aug, R * m->input_dim * F, 0, "images before --augment", TT_MEM_BY_RUN);
    add_buf(l, &tw->h_x, R * m->input_dim * F, 1, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->h_labels, R * sizeof(int32_t), 1, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->h_ids, R * sizeof(uint32_t), 1, "batch staging", TT_MEM_BY_RUN);
    add_buf(l, &tw->h_stats, 2 * R * F, 1, "batch staging", TT_MEM_BY_RUN);
    if (tr->cfg.precision) { /* the trainable weights and gradient in 16 bits, and the push's counts */
        const size_t P16 = m->n_trainable * sizeof(uint16_t), counts = TT_NARROW_COUNTS * sizeof(uint32_t);
        add_buf(l, &tw->d_p16, P16, 0, "16-bit weights and gradients (--precision)", TT_MEM_BY_PARAMS);
        add_buf(l, &tw->d_counts, counts, 0, "16-bit weights and gradients (--precision)", TT_MEM_BY_RUN);
        add_buf(l, &tw->h_counts, counts, 1, "16-bit weights and gradients (--precision)", TT_MEM_BY_RUN);
        if (!tr->cfg.push_fp32) {
            add_buf(l, &tw->d_g16, P16, 0, "16-bit weights and gradients (--precision)", TT_MEM_BY_PARAMS);
            add_buf(l, &tw->h_push16, P16, 1, "16-bit weights and gradients (--precision)", TT_MEM_BY_PARAMS);
        }
        if (tw->id == 0)
            add_buf(l, &tr->h_params16, P16, 1, "16-bit weights and gradients (--precision)", TT_MEM_BY_PARAMS);
    }
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
        if (!tr->place->info.host_sum || multi_node(&tr->cfg) || clip_by_norm(&tr->cfg))
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
    if (tr->cfg.precision) tt_dev_gemm_format(&tw->dev, tr->cfg.precision); /* for every GEMM it will issue */
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

/* pull: the master weights into this tower's memory (async on a GPU: the host goes on to the data phase) — from
 * the host; --update device: from tower 0's device (tower 0 holds them); replicated: none (every tower holds its
 * own). Returns the bytes it moved. */
static uint64_t pull_bytes(const tt_tower *tw)
{
    if (holds_master(tw->tr, tw) || tw->skip_pull) return 0;
    return tt_model_param_bytes(tw->tr->model, tw->tr->cfg.precision != TT_FMT_FP32);
}

/* --precision bf16, fp16: the host's 16-bit copy of the trainable weights, widened on the device, and the tail. */
static void pull16(tt_tower *tw)
{
    const tt_trainer *tr = tw->tr;
    const size_t T = tr->model->n_trainable, P = tr->model->n_params;
    tt_dev_h2d(&tw->dev, tw->d_p16, tr->h_params16, T * sizeof(uint16_t));
    tt_dev_widen16(&tw->dev, tw->d_params, tw->d_p16, T, tr->cfg.precision);
    tt_dev_h2d(&tw->dev, tw->d_params + T, tr->h_params + T, (P - T) * sizeof(float));
}

uint64_t phase_pull(tt_tower *tw)
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
    } else if (tr->cfg.precision) {
        pull16(tw);
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

/* --augment, a training step: the images land in d_aug, and tt_dev_augment writes them shifted and flipped into the
 * input activation; the indices it draws by are on the device first. */
static void data_issue(tt_tower *tw, const tt_dataset *ds, size_t rows, int training)
{
    const tt_trainer *tr = tw->tr;
    const size_t SB = tt_dataset_sample_bytes(ds);
    const int on_device = data_on_device(tw, ds), aug = training && tw->d_aug;
    float *d_in = aug ? tw->d_aug : tw->d_act[0];
    if (on_device || aug) /* what the gathers and the draws read */
        tt_dev_h2d(&tw->dev, tw->d_ids, tw->h_ids, rows * sizeof(uint32_t));
    if (ds->xtype == TT_X_U8) { /* pixels to [0,1]; for a model that reads token ids, bytes are ids */
        const float scale = tr->model->token_vocab ? 1.0f : ds->scale;
        if (on_device) tt_dev_gather_rows(&tw->dev, tw->d_x8, tw->d_set_x, ds->n, tw->d_ids, rows, SB);
        else tt_dev_h2d(&tw->dev, tw->d_x8, tw->h_x, rows * SB);
        tt_dev_u8_to_f32(&tw->dev, d_in, tw->d_x8, rows * ds->dim, scale);
    } else if (on_device) {
        tt_dev_gather_rows(&tw->dev, d_in, tw->d_set_x, ds->n, tw->d_ids, rows, SB);
    } else {
        tt_dev_h2d(&tw->dev, d_in, tw->h_x, rows * SB);
    }
    if (aug) {
        const tt_shape *in = &tr->model->input_shape;
        tt_dev_augment(&tw->dev, tw->d_act[0], d_in, tw->d_ids, rows, in->d[0], in->d[1], in->d[2], &tr->cfg.augment,
                       tt_augment_key(tr->cfg.seed, tr->epoch));
    }
    if (on_device) {
        tt_dev_gather_rows(&tw->dev, tw->d_labels, tw->d_set_y, ds->n, tw->d_ids, rows, sizeof(int32_t));
        return;
    }
    tt_dev_h2d(&tw->dev, tw->d_labels, tw->h_labels, rows * sizeof(int32_t));
    if (!aug) tt_dev_h2d(&tw->dev, tw->d_ids, tw->h_ids, rows * sizeof(uint32_t));
}

/* The bytes the data phase copies host -> device for `rows` rows of ds: the rows, labels and indices, or (--data-on
 * device) the indices alone. */
static uint64_t data_bytes(const tt_tower *tw, const tt_dataset *ds, size_t rows)
{
    const size_t index = sizeof(uint32_t);
    return rows * (data_on_device(tw, ds) ? index : tt_dataset_sample_bytes(ds) + sizeof(int32_t) + index);
}

void phase_data(tt_tower *tw, const tt_dataset *ds, const uint32_t *idx, size_t first, size_t rows, int training)
{
    data_gather(tw, ds, idx, first, rows);
    data_issue(tw, ds, rows, training);
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
                  .lt_epilogues = tr->cfg.epilogues,
                  .fmt = tr->cfg.precision};
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

void phase_compute(tt_tower *tw, size_t n)
{
    const tt_model *m = tw->tr->model;
    tt_dev *dev = &tw->dev;
    const int ov = tw->tr->ov != NULL;
    if (own_weights(tw->tr)) n = tw->rows;
    const tt_pass ps = tower_pass(tw, 1, n);
    if (tw->rows == 0) {
        if (ov) tt_dev_event_record(dev, tw->ev_loss);
        tt_dev_fill(dev, tw->d_grads, m->n_params, 0.0f);
        tt_model_idle(dev, m, &ps); /* --bn-sync on: zeros into the others' exchanges */
        return;
    }
    tt_model_forward(dev, m, &ps, tw->d_params, tw->d_act, tw->rows);
    /* --loss-scale: the loss gradient (and so every gradient) times the scale; the host divides the sum by it */
    const double scale = tw->tr->scaler.scale;
    tt_dev_softmax_xent(dev, tw->d_dlogits, tw->d_stats, tt_model_logits(m, tw->d_act), tw->d_labels, tw->rows,
                        m->n_classes, scale == 1.0 ? 1.0f / (float)n : (float)scale / (float)n);
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
    return tr->place->info.host_sum && !own_weights(tr);
}

/* --precision bf16, fp16: the trainable gradient narrowed to 16 bits on the device (its counts of underflows and
 * overflows with it; --push-precision fp32: counted only, and pushed in FP32) and copied into the tower's 16-bit
 * slot, the tail into its FP32 slot. */
static void push16(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    const size_t T = tr->model->n_trainable, P = tr->model->n_params;
    tt_dev_narrow16(&tw->dev, tw->d_g16, tw->d_grads, T, tr->cfg.precision, tw->d_counts);
    tt_dev_d2h(&tw->dev, tw->h_counts, tw->d_counts, 2 * sizeof(uint32_t));
    if (!tw->d_g16) {
        tt_dev_d2h(&tw->dev, tr->h_slots[tw->id], tw->d_grads, P * sizeof(float));
        return;
    }
    tt_dev_d2h(&tw->dev, tw->h_push16, tw->d_g16, T * sizeof(uint16_t));
    tt_dev_d2h(&tw->dev, tr->h_slots[tw->id] + T, tw->d_grads + T, (P - T) * sizeof(float));
}

void phase_push(tt_tower *tw)
{
    tt_trainer *tr = tw->tr;
    if (tr->ov) { /* --overlap on: the buckets not pushed during the backward (the last; all for an empty shard) */
        while (tw->pushed < tr->ov->nb) bucket_push(tw, tw->pushed++);
        tower_arrive_landed(tw);
        return;
    }
    if (pushes_gradient(tr) && tr->cfg.precision) push16(tw);
    else if (pushes_gradient(tr))
        tt_dev_d2h(&tw->dev, tr->h_slots[tw->id], tw->d_grads, tr->model->n_params * sizeof(float));
    tt_dev_d2h(&tw->dev, tw->h_stats, tw->d_stats, 2 * tw->rows * sizeof(float));
}

/* The bytes a tower's push of its gradient moves: the trainable part in 16 bits with --precision bf16, fp16 (but
 * --push-precision fp32), the rest in FP32; 0 where the tower pushes none. */
static uint64_t push_bytes(const tt_trainer *tr)
{
    if (!pushes_gradient(tr)) return 0;
    return tt_model_param_bytes(tr->model, tr->cfg.precision && !tr->cfg.push_fp32);
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

int tt_trainer_live_phase(const tt_trainer *tr, size_t t)
{
    return tr && t < tr->cfg.n_towers ? atomic_load_explicit(&tr->towers[t].live, memory_order_relaxed) : TT_LIVE_IDLE;
}

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
    data_issue(tw, tr->ds, tw->rows, 1);
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
    /* and so is the loss scale (--loss-scale dynamic), the loss gradient's factor as the kernel is given it; the
     * epoch is dropout's and --augment's key, an argument the captured kernels hold */
    double scale = tw->tr->scaler.scale;
    size_t scale_bits;
    memcpy(&scale_bits, &scale, sizeof scale_bits);
    const size_t key[5] = {tw->rows, n, (size_t)tw->tr->epoch, (size_t)data_on_device(tw, tw->tr->ds), scale_bits};
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
void tower_step(tt_tower *tw, const uint32_t *idx, size_t n, int more)
{
    tt_trainer *tr = tw->tr;
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
    l->bytes_push = push_bytes(tr) + 2 * B * sizeof(float);
    tw->n_run++;
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
    if (tr->cfg.precision) tt_dev_round16(dev, w, m->n_trainable, tr->cfg.precision); /* as a step's pull has them */
    for (size_t done = 0; done < total;) {
        /* eval, predict and train's final test evaluation stop at a signal between chunks (their result is then
         * discarded); train's validation runs to its end, and the run stops after it, with a checkpoint */
        if (tr->eval_stops && tr->cfg.stop && atomic_load(tr->cfg.stop)) break;
        size_t rows = total - done < tr->shard_max ? total - done : tr->shard_max;
        phase_data(tw, tr->ds, NULL, lo + done, rows, 0);
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

/* The crew's bodies of the towers' jobs (crew_run): tower i's part; the host's threads beyond the towers idle. */
void towers_alloc(tt_trainer *tr, int i, int T)
{
    (void)T;
    if ((size_t)i < tr->cfg.n_towers) tr->towers[i].status = tower_alloc(&tr->towers[i]);
}

void towers_release(tt_trainer *tr, int i, int T)
{
    (void)T;
    if ((size_t)i < tr->cfg.n_towers) tower_release(&tr->towers[i]);
}

void towers_eval(tt_trainer *tr, int i, int T)
{
    (void)T;
    if ((size_t)i < tr->cfg.n_towers) tower_eval(&tr->towers[i]);
}

void towers_diagnose(tt_trainer *tr, int i, int T)
{
    (void)T;
    if ((size_t)i < tr->cfg.n_towers) tower_diagnose(&tr->towers[i]);
}
