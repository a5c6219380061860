/* compat.c — what can run with what: the refusals of a configuration whose options cannot combine
 * (tt_trainer_check), each one line naming the options and why. */
#include <stdio.h>

#include "step.h"

/* --update where the placement leaves the sum (device, replicated: on the towers), and not across ranks. */
static tt_status check_update(const tt_trainer_config *cfg, tt_error *err)
{
    const tt_update u = cfg->update;
    if ((unsigned)u >= TT_UPDATE_COUNT) return tt_fail(err, TT_ERR_ARG, "--update: unknown placement");
    if (!(tt_update_reduces(u) & (1u << cfg->reduce))) {
        char with[128] = "";
        size_t n = 0;
        for (int r = 0; r < TT_REDUCE_COUNT; r++)
            if (tt_update_reduces(u) & (1u << r))
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
tt_status check_nccl(const tt_trainer_config *cfg, tt_error *err)
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
