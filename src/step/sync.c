/* sync.c — --sync: the modes' table (bsp, ssp:S, async, weights:K: the command line, bench and the log read it), and
 * a mode's spelling: parsed (tt_sync_parse) and written ("ssp:S", tt_sync_format). The shards' schedule the modes
 * other than bsp share is shards.c's; each mode's run of steps, its sync_*.c. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "step.h"

/* The rows: {name, its number, help}, what it combines with (SYNC_*), why it needs the host's sum, its run. */
const sync_mode sync_modes[TT_SYNC_COUNT] = {
    [TT_SYNC_BSP] = {{"bsp", NULL, "every step waits for every tower; one summed update (the default)"},
                     SYNC_SUMMED, NULL, bsp_run},
    [TT_SYNC_SSP] = {{"ssp", "S", "each gradient applied as it arrives; a tower runs at most S shards ahead"},
                     SYNC_SCHEDULES | SYNC_SHARDS | SYNC_BOUNDED,
                     "the host applies each tower's gradient from its slot",
                     ssp_run},
    [TT_SYNC_ASYNC] = {{"async", NULL, "each gradient applied as it arrives, no bound (Downpour)"},
                       SYNC_SCHEDULES | SYNC_SHARDS, "the host applies each tower's gradient from its slot", ssp_run},
    [TT_SYNC_WEIGHTS] = {{"weights", "K", "local SGD: own weights and optimizer per tower, averaged every K steps"},
                         SYNC_OWN_WEIGHTS, "the towers update their own weights and the host averages them",
                         weights_run},
};
const char *const tt_sync_schedule_names[] = {"free", "round-robin", NULL};

const tt_sync_info *tt_sync_about(tt_sync_kind k) { return (unsigned)k < TT_SYNC_COUNT ? &sync_modes[k].info : NULL; }

int tt_sync_summed(tt_sync_kind k) { return (unsigned)k < TT_SYNC_COUNT && (sync_modes[k].caps & SYNC_SUMMED); }

int tt_sync_takes_shards(tt_sync_kind k)
{
    return (unsigned)k < TT_SYNC_COUNT && (sync_modes[k].caps & SYNC_SHARDS);
}

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
