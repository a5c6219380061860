/* sync.c — --sync: the modes' table (bsp, ssp:S, async, weights:K: the command line, bench and the log read it),
 * and what every mode but bsp shares: the shards' schedule of a run of steps and its counters. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "step.h"

/* The rows: {name, its number, help}, what it combines with (SYNC_*), why it needs the host's sum, its run. */
const sync_mode sync_modes[TT_SYNC_COUNT] = {
    [TT_SYNC_BSP] = {{"bsp", NULL, "every step waits for every tower; one summed update (the default)"},
                     SYNC_SUMMED, NULL, bsp_run},
    [TT_SYNC_SSP] = {{"ssp", "S", "each gradient applied as it arrives; a tower runs at most S shards ahead"},
                     SYNC_SCHEDULES | SYNC_SHARDS | SYNC_BOUNDED, "the host applies each tower's gradient from its slot",
                     ssp_run},
    [TT_SYNC_ASYNC] = {{"async", NULL, "each gradient applied as it arrives, no bound (Downpour)"},
                       SYNC_SCHEDULES | SYNC_SHARDS, "the host applies each tower's gradient from its slot", ssp_run},
    [TT_SYNC_WEIGHTS] = {{"weights", "K", "local SGD: own weights and optimizer per tower, averaged every K steps"},
                         SYNC_OWN_WEIGHTS, "the towers update their own weights and the host averages them",
                         weights_run},
};
const char *const tt_sync_schedule_names[] = {"free", "round-robin", NULL};

const tt_sync_info *tt_sync_about(tt_sync_kind k) { return (unsigned)k < TT_SYNC_COUNT ? &sync_modes[k].info : NULL; }

const char *sync_spelt(const tt_sync_info *in, char *buf, size_t len)
{
    snprintf(buf, len, "%s%s%s", in->name, in->arg ? ":" : "", in->arg ? in->arg : "");
    return buf;
}

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
        const tt_sync_info *in = &sync_modes[k].info;
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
    char spelt[TT_SYNC_COUNT][32], names[128];
    const char *words[TT_SYNC_COUNT];
    for (int k = 0; k < TT_SYNC_COUNT; k++) words[k] = sync_spelt(&sync_modes[k].info, spelt[k], sizeof spelt[k]);
    tt_join_words(names, sizeof names, words, TT_SYNC_COUNT, ", ", " or ");
    return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not %s", opt, v, names);
}

/* The samples of step st of the run and its shard count. */
size_t sync_step_n(const tt_trainer *tr, size_t st)
{
    const size_t B = tr->cfg.batch;
    return tr->n - st * B < B ? tr->n - st * B : B;
}
size_t sync_step_shards(const tt_trainer *tr, size_t st)
{
    const size_t n = sync_step_n(tr, st), N = tr->cfg.n_towers;
    return n < N ? n : N;
}

/* A stop asked for (by a signal or tt_trainer_request_stop). */
int stop_asked(const tt_trainer *tr)
{
    return (tr->cfg.stop && atomic_load(tr->cfg.stop)) || atomic_load(&tr->stop_request);
}

/* A run of steps under ssp or async: room for its steps' counters, every counter at the start. */
tt_status sync_begin(tt_trainer *tr, size_t steps, tt_error *err)
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

/* --sync other than bsp: the shards' schedule (ssp, async) and the averages' accounts (weights). */
tt_status sync_init(tt_trainer *tr, int T, tt_error *err)
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

void sync_free(tt_trainer *tr)
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
