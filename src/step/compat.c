/* compat.c — what can run with what. A configuration is first checked value by value (a mode the tables do not
 * hold), then reduced to its facts — one bit each: "towers share a GPU", "--overlap on",
 * "the --sync mode does not sum one gradient a step" (a sync row without SYNC_SUMMED), "the placement needs
 * collectives the backend lacks" (a placement row's PLACE_* needs), ... — and the first rule of the table whose facts
 * all hold refuses it, in its own words. The words name the options through {placeholders} filled from the
 * configuration and the rows ({reduce}: the placement's name, {towers}: the tower count, ...), so a new mode is a
 * row in its table with its capability bits, and a new refusal is a row here. tt_trainer_check is the only entry. */
#include <stdio.h>
#include <string.h>

#include "step.h"

/* The facts of a configuration (bit numbers of a fact set). */
enum {
    F_RANKS,           /* more than one rank (mpirun) */
    F_SHARED_GPU,      /* more towers than GPUs: virtual towers share one */
    F_GRAPHS,          /* --graphs on */
    F_NO_CAPTURE,      /* the backend has no graphs to capture */
    F_SLOW,            /* --slow-tower */
    F_OVERLAP,         /* --overlap on */
    F_OVERLAP_OFF,     /* --overlap off */
    F_BUCKETS,         /* --bucket-kib given */
    F_BN_SYNC,         /* --bn-sync on */
    F_BN_TOWERS,       /* --bn-sync on with two towers or more: the exchange runs */
    F_NOT_CPU_HOST,    /* --reduce other than cpu, or --update other than host */
    F_UPDATE_DEVICE,   /* --update other than host */
    F_UPDATE_NO_SUM,   /* the placement does not leave the sum where --update's row needs it */
    F_NOT_SUMMED,      /* the --sync mode does not sum one gradient a step (its row lacks SYNC_SUMMED) */
    F_ROUND_ROBIN,     /* --sync-schedule round-robin */
    F_NO_SCHEDULES,    /* the --sync mode has one schedule (its row lacks SYNC_SCHEDULES) */
    F_NO_COLLECTIVES,  /* the placement needs the backend's collectives (PLACE_COLLECTIVES), which it lacks */
    F_GPU_BACKEND,     /* the backend is a GPU's (it has peer access) */
    F_CPU_BACKEND,     /* it is not */
    F_GPU_EACH,        /* the placement needs one GPU per tower (PLACE_GPU_EACH) */
    F_SLOW_BEYOND,     /* a --slow-tower beyond the towers */
    F_ONE_TOWER,       /* one tower */
    F_TOWERS,          /* not one tower */
    F_NO_SET,          /* --data-on device without the training set to hold */
    F_SYNC_ZERO,       /* a --sync mode with a number (ssp:S, weights:K) given 0 */
    F_HALF,            /* --precision bf16 or fp16 */
    F_FP32,            /* --precision fp32 */
    F_SCALED,          /* a loss scale (dynamic, or a fixed one above 1) */
    F_PUSH32,          /* --push-precision fp32 */
    F_CLIP_NORM,       /* --clipnorm or --global-clipnorm: the whole summed gradient's norm before the update */
};
#define F(x) (1u << F_##x)

typedef struct compat_rule {
    unsigned when;   /* every fact of this set holds */
    const char *say; /* the refusal, {placeholders} filled in (fill) */
} compat_rule;

/* In the order they are checked: the first that holds is the one reported. */
static const compat_rule rules[] = {
    {F(NO_COLLECTIVES) | F(GPU_BACKEND),
     "--reduce {reduce}: the {backend} backend of this build has no NCCL (rebuild with NCCL found) (use --reduce "
     "{others})"},
    {F(NO_COLLECTIVES) | F(CPU_BACKEND), "--reduce {reduce}: the {backend} backend has no NCCL (use --reduce {others})"},
    {F(GPU_EACH) | F(SHARED_GPU),
     "--reduce {reduce}: needs one GPU per tower, and {towers} towers share {gpus} GPU{gpus_s} (use --towers {gpus}, "
     "or --reduce {shared} for virtual towers)"},
    {F(SLOW) | F(GRAPHS),
     "--slow-tower: not with --graphs on (a replayed graph runs without the host, so nothing can delay its compute)"},
    {F(SLOW_BEYOND) | F(ONE_TOWER), "--slow-tower {slow}: there is 1 tower (0)"},
    {F(SLOW_BEYOND) | F(TOWERS), "--slow-tower {slow}: there are {towers} towers (0..{last})"},
    {F(GRAPHS) | F(NO_CAPTURE),
     "--graphs on: the {backend} backend runs every op as it is issued, there is no graph to capture (CUDA graphs: "
     "--device cuda)"},
    /* a capture is safe from what its own thread does (thread-local mode), but not proven safe from another tower
     * thread syncing, allocating or freeing on the same GPU at that moment: one GPU per tower */
    {F(GRAPHS) | F(SHARED_GPU),
     "--graphs on: needs one GPU per tower, and {towers} towers share {gpus} GPU{gpus_s} (use --towers {gpus}, or "
     "--graphs off for virtual towers)"},
    {F(BUCKETS) | F(OVERLAP_OFF),
     "--bucket-kib: the buckets are --overlap on's (give --overlap on, or no --bucket-kib)"},
    {F(OVERLAP) | F(NOT_CPU_HOST),
     "--overlap on: the host sums and updates each bucket as the towers push it, so it needs --reduce cpu and "
     "--update host (not --reduce {reduce} --update {update})"},
    {F(OVERLAP) | F(GRAPHS),
     "--overlap on: a tower waits for each bucket's push in the middle of its step, which one graph launch cannot "
     "(use --graphs off)"},
    {F(OVERLAP) | F(RANKS), "--overlap on: under mpirun the ranks combine whole node sums (give --overlap off)"},
    {F(NO_SET), "--data-on device: the trainer was given no training set to hold"},
    {F(UPDATE_NO_SUM), "--update {update}: needs --reduce {update_reduces} ({update_why}), not {reduce}"},
    {F(UPDATE_DEVICE) | F(RANKS),
     "--update {update}: under mpirun the ranks combine their sums on the host (give --update host)"},
    {F(ROUND_ROBIN) | F(NO_SCHEDULES),
     "--sync-schedule round-robin: only for --sync {schedules} ({sync} has one schedule already)"},
    {F(SYNC_ZERO), "--sync {sync}: the number must be at least 1"},
    {F(NOT_SUMMED) | F(NOT_CPU_HOST),
     "--sync {sync}: {sync_why}, so it needs --reduce cpu and --update host (not --reduce {reduce} --update {update})"},
    {F(NOT_SUMMED) | F(OVERLAP),
     "--sync {sync}: not with --overlap on (its buckets are summed over every tower of a step)"},
    {F(NOT_SUMMED) | F(GRAPHS),
     "--sync {sync}: not with --graphs on (a tower's step waits for the master variables' lock, which one graph "
     "launch cannot)"},
    {F(NOT_SUMMED) | F(RANKS),
     "--sync {sync}: under mpirun the ranks combine one summed gradient every step (bsp); the master variables of "
     "another mode live in one process (give --sync bsp)"},
    /* before the one-tower case: K ranks of one tower each still have K shards' statistics to combine */
    {F(BN_SYNC) | F(RANKS),
     "--bn-sync on: the statistics are exchanged between one process's towers, not across mpirun's ranks (give "
     "--bn-sync off, or run one rank)"},
    {F(BN_TOWERS) | F(NOT_SUMMED),
     "--bn-sync on: not with --sync {sync} (the towers do not meet every step, so there is no global batch to take "
     "statistics over; give --bn-sync off)"},
    {F(BN_TOWERS) | F(GRAPHS),
     "--bn-sync on: the towers exchange batch statistics in the middle of their forward and backward, which one "
     "graph launch cannot (use --graphs off)"},
    {F(SCALED) | F(FP32),
     "--loss-scale: for --precision bf16 or fp16 (FP32 gradients do not underflow as 16-bit ones do)"},
    {F(PUSH32) | F(FP32), "--push-precision fp32: the gradients are FP32 already (give --precision bf16 or fp16)"},
    {F(HALF) | F(NOT_SUMMED),
     "--precision {precision}: the 16-bit pull and push are the synchronous step's (give --sync bsp, or --precision "
     "fp32)"},
    {F(HALF) | F(NOT_CPU_HOST),
     "--precision {precision}: the host sums the towers' 16-bit pushes and keeps the FP32 master weights, so it "
     "needs --reduce cpu and --update host (not --reduce {reduce} --update {update})"},
    {F(HALF) | F(OVERLAP),
     "--precision {precision}: not with --overlap on (its buckets are pushed and pulled in FP32; give --overlap "
     "off)"},
    {F(HALF) | F(RANKS),
     "--precision {precision}: under mpirun the ranks combine FP32 node sums (give --precision fp32, or run one "
     "rank)"},
    {F(CLIP_NORM) | F(UPDATE_DEVICE),
     "--{clip}: the host takes the summed gradient's norm before it updates, so it needs --update host (not "
     "{update}; --clipvalue and --weight-decay work on a device)"},
    {F(CLIP_NORM) | F(NOT_SUMMED),
     "--{clip}: the norm is the summed gradient's, which --sync {sync} does not form (give --sync bsp; --clipvalue "
     "works with every mode)"},
    {F(CLIP_NORM) | F(OVERLAP),
     "--{clip}: --overlap on updates each bucket before the last is pushed, and the norm needs them all (give "
     "--overlap off)"},
    {F(CLIP_NORM) | F(RANKS),
     "--{clip}: under mpirun a rank updates from the combined sum without its norm (run one rank; --clipvalue "
     "and --weight-decay work across ranks)"},
};

/* The first --slow-tower entry beyond the towers, or n_slow. */
static size_t slow_beyond(const tt_trainer_config *cfg)
{
    size_t k = 0;
    while (k < cfg->n_slow && cfg->slow[k].tower < cfg->n_towers) k++;
    return k;
}

/* The facts of cfg (its values already checked). */
static unsigned facts(const tt_trainer_config *cfg)
{
    const placement *pl = &placements[cfg->reduce];
    const sync_mode *sm = &sync_modes[cfg->sync.kind];
    const int gpu = cfg->ops->peer_setup != NULL;
    const struct { int holds; unsigned bit; } f[] = {
        {multi_node(cfg), F(RANKS)},
        {cfg->n_towers > (size_t)cfg->n_devices, F(SHARED_GPU)},
        {cfg->graphs != 0, F(GRAPHS)},
        {!cfg->ops->capture_begin, F(NO_CAPTURE)},
        {cfg->n_slow > 0, F(SLOW)},
        {cfg->overlap != 0, F(OVERLAP)},
        {!cfg->overlap, F(OVERLAP_OFF)},
        {cfg->bucket_bytes != 0, F(BUCKETS)},
        {cfg->bn_sync != 0, F(BN_SYNC)},
        {cfg->bn_sync && cfg->n_towers > 1, F(BN_TOWERS)},
        {cfg->reduce != TT_REDUCE_CPU || cfg->update != TT_UPDATE_HOST, F(NOT_CPU_HOST)},
        {cfg->update != TT_UPDATE_HOST, F(UPDATE_DEVICE)},
        {!(update_rows[cfg->update].reduces & (1u << cfg->reduce)), F(UPDATE_NO_SUM)},
        {!(sm->caps & SYNC_SUMMED), F(NOT_SUMMED)},
        {cfg->sync.round_robin != 0, F(ROUND_ROBIN)},
        {!(sm->caps & SYNC_SCHEDULES), F(NO_SCHEDULES)},
        {(pl->needs & PLACE_COLLECTIVES) && !cfg->ops->comm_init, F(NO_COLLECTIVES)},
        {gpu, F(GPU_BACKEND)},
        {!gpu, F(CPU_BACKEND)},
        {(pl->needs & PLACE_GPU_EACH) != 0, F(GPU_EACH)},
        {slow_beyond(cfg) < cfg->n_slow, F(SLOW_BEYOND)},
        {cfg->n_towers == 1, F(ONE_TOWER)},
        {cfg->n_towers != 1, F(TOWERS)},
        {cfg->data_on && !cfg->train_set, F(NO_SET)},
        {sm->info.arg && cfg->sync.k < 1, F(SYNC_ZERO)},
        {cfg->precision != TT_FMT_FP32, F(HALF)},
        {cfg->precision == TT_FMT_FP32, F(FP32)},
        {cfg->loss_scale.dynamic || cfg->loss_scale.scale > 1.0, F(SCALED)},
        {cfg->push_fp32 != 0, F(PUSH32)},
        {cfg->optim.clipnorm > 0 || cfg->optim.global_clipnorm > 0, F(CLIP_NORM)},
    };
    unsigned set = 0;
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        if (f[k].holds) set |= f[k].bit;
    return set;
}

/* The placements that need nothing of the backend (with_reduce: and have a tower-side reduce), joined. */
static const char *plain_placements(char *buf, size_t len, const char *sep, const char *last, int with_reduce)
{
    const char *names[TT_REDUCE_COUNT];
    size_t n = 0;
    for (int r = 0; r < TT_REDUCE_COUNT; r++)
        if (!placements[r].needs && (!with_reduce || placements[r].reduce)) names[n++] = placements[r].info.name;
    return tt_join_words(buf, len, names, n, sep, last);
}

/* The modes with a choice of schedule, as --sync writes them ("ssp:S or async"). */
static const char *schedule_modes(char *buf, size_t len)
{
    char spelt[TT_SYNC_COUNT][32];
    const char *names[TT_SYNC_COUNT];
    size_t n = 0;
    for (int k = 0; k < TT_SYNC_COUNT; k++) {
        const tt_sync_info *in = &sync_modes[k].info;
        if (!(sync_modes[k].caps & SYNC_SCHEDULES)) continue;
        names[n] = sync_spelt(in, spelt[n], sizeof spelt[n]);
        n++;
    }
    return tt_join_words(buf, len, names, n, ", ", " or ");
}

/* The value of placeholder {name} (len characters) for cfg, into buf; NULL for a name that is none. */
static const char *fill(const char *name, size_t len, const tt_trainer_config *cfg, char *buf, size_t size)
{
    const tt_update_row *up = &update_rows[cfg->update];
#define IS(s) (len == sizeof(s) - 1 && memcmp(name, s, len) == 0)
    if (IS("reduce")) return placements[cfg->reduce].info.name;
    if (IS("update")) return tt_update_names[cfg->update];
    if (IS("sync")) return tt_sync_format(&cfg->sync, buf, size);
    if (IS("sync_why")) return sync_modes[cfg->sync.kind].host_why;
    if (IS("schedules")) return schedule_modes(buf, size);
    if (IS("backend")) return cfg->ops->name;
    if (IS("others")) return plain_placements(buf, size, ", ", " or ", 0);
    if (IS("shared")) return plain_placements(buf, size, "/", "/", 1);
    if (IS("update_why")) return up->why;
    if (IS("gpus_s")) return cfg->n_devices == 1 ? "" : "s";
    if (IS("precision")) return cfg->precision == TT_FMT_BF16 ? "bf16" : "fp16";
    if (IS("clip")) return cfg->optim.clipnorm > 0 ? "clipnorm" : "global-clipnorm";
    if (IS("towers") || IS("gpus") || IS("last") || IS("slow")) {
        const size_t v = IS("towers") ? cfg->n_towers
                         : IS("gpus") ? (size_t)cfg->n_devices
                         : IS("last") ? cfg->n_towers - 1
                                      : cfg->slow[slow_beyond(cfg)].tower;
        snprintf(buf, size, "%zu", v);
        return buf;
    }
    if (IS("update_reduces")) {
        const char *names[TT_REDUCE_COUNT];
        size_t n = 0;
        for (int r = 0; r < TT_REDUCE_COUNT; r++)
            if (up->reduces & (1u << r)) names[n++] = placements[r].info.name;
        return tt_join_words(buf, size, names, n, " or ", " or ");
    }
#undef IS
    return NULL;
}

/* Rule r's words for cfg: its text with every {placeholder} filled. */
static tt_status refuse(const compat_rule *r, const tt_trainer_config *cfg, tt_error *err)
{
    char msg[sizeof err->msg], word[256];
    size_t n = 0;
    for (const char *p = r->say; *p && n + 1 < sizeof msg;) {
        const char *end = *p == '{' ? strchr(p, '}') : NULL;
        const char *v = end ? fill(p + 1, (size_t)(end - p - 1), cfg, word, sizeof word) : NULL;
        TT_ASSERT(!end || v); /* a rule names a placeholder fill() does not know */
        if (!v) {
            msg[n++] = *p++;
            continue;
        }
        n += (size_t)snprintf(msg + n, sizeof msg - n, "%s", v);
        if (n >= sizeof msg) n = sizeof msg - 1;
        p = end + 1;
    }
    msg[n] = '\0';
    return tt_fail(err, TT_ERR_ARG, "%s", msg);
}

/* The values the tables must hold: checked before any fact is read (a fact reads the rows they index). The numbers'
 * ranges (a --slow-tower beyond the towers, ssp:0) are facts, in the table's order: d0cbea4's checks put them
 * between the combinations' refusals, and where two break, the same one must win. */
static tt_status check_values(const tt_trainer_config *cfg, tt_error *err)
{
    if ((unsigned)cfg->reduce >= TT_REDUCE_COUNT) return tt_fail(err, TT_ERR_ARG, "--reduce: unknown placement");
    if ((unsigned)cfg->update >= TT_UPDATE_COUNT) return tt_fail(err, TT_ERR_ARG, "--update: unknown placement");
    if ((unsigned)cfg->sync.kind >= TT_SYNC_COUNT) return tt_fail(err, TT_ERR_ARG, "--sync: unknown mode");
    if (cfg->precision != TT_FMT_FP32 && cfg->precision != TT_FMT_BF16 && cfg->precision != TT_FMT_FP16)
        return tt_fail(err, TT_ERR_ARG, "--precision: unknown format");
    const double sc = cfg->loss_scale.scale;
    if (!(sc == 0 || (sc >= 1.0 && sc <= TT_SCALE_MAX)) || (cfg->loss_scale.dynamic && sc == 0))
        return tt_fail(err, TT_ERR_ARG, "--loss-scale: a scale from 1 to 2^64");
    return TT_OK;
}

tt_status tt_trainer_check(const tt_trainer_config *cfg, tt_error *err)
{
    tt_status s = check_values(cfg, err);
    if (s) return s;
    const unsigned set = facts(cfg);
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++)
        if ((rules[k].when & set) == rules[k].when) return refuse(&rules[k], cfg, err);
    return TT_OK;
}
