/* bench_lists.c — bench's lists: the options that sweep (--ranks, --towers, --batch, --reduce, --update, --sync,
 * --precision) and the others of its own (--scaling, --reps, --csv), read for tt_cli_parse_train, and the lists as the
 * user writes them, which every rank of a job compares with rank 0's before the first row.
 * Not for: the sweep itself (bench.c). */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "tt_cli.h"

/* "1,2,4" into v (values lo..hi). */
static tt_status parse_list(const char *opt, const char *value, size_t lo, size_t hi, size_t *v, size_t *n,
                            tt_error *err)
{
    if (!value) return tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
    *n = 0;
    for (const char *p = value; *p;) {
        char num[24];
        size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof num || *n == MAX_LIST)
            return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not a list like 1,2,4 (at most %d entries)", opt, value,
                           MAX_LIST);
        memcpy(num, p, len);
        num[len] = '\0';
        tt_status s = tt_cli_size(opt, num, lo, hi, &v[(*n)++], err);
        if (s) return s;
        p += len;
        if (*p == ',' && !*++p) return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' ends with a comma", opt, value);
    }
    return *n ? TT_OK : tt_fail(err, TT_ERR_ARG, "%s: empty list", opt);
}

/* --reduce LIST: placements, each a name of the placement table. */
static tt_status parse_reduces(const char *value, bench_opts *b, tt_error *err)
{
    if (!value) return tt_fail(err, TT_ERR_ARG, "%s: missing value", "--reduce");
    b->n_reduces = 0;
    for (const char *p = value; *p;) {
        char name[16];
        size_t len = strcspn(p, ",");
        tt_reduce r;
        char names[128];
        if (len == 0 || len >= sizeof name || b->n_reduces == TT_REDUCE_COUNT)
            return tt_fail(err, TT_ERR_ARG, "--reduce: '%.64s' is not a list like %s", value,
                           tt_reduce_list(names, sizeof names, ",", ",", 0));
        memcpy(name, p, len);
        name[len] = '\0';
        if (tt_reduce_parse(name, &r))
            return tt_fail(err, TT_ERR_ARG, "--reduce: '%.64s' is not %s", name,
                           tt_reduce_list(names, sizeof names, ", ", " or ", 0));
        b->reduces[b->n_reduces++] = r;
        p += len;
        if (*p == ',') p++;
    }
    return TT_OK;
}

/* --update LIST: update placements, each a word of tt_update_names. */
static tt_status parse_updates(const char *value, bench_opts *b, tt_error *err)
{
    b->n_updates = 0;
    for (const char *p = value ? value : ""; *p || !b->n_updates;) {
        size_t len = strcspn(p, ","), u = 0;
        while (tt_update_names[u] && (strlen(tt_update_names[u]) != len || strncmp(p, tt_update_names[u], len)))
            u++;
        if (!tt_update_names[u] || b->n_updates == TT_UPDATE_COUNT)
            return tt_fail(err, TT_ERR_ARG, "--update: '%.64s' is not a list of host, device, replicated",
                           value ? value : "");
        b->updates[b->n_updates++] = (tt_update)u;
        p += len;
        if (*p == ',') p++;
    }
    return TT_OK;
}

/* --precision LIST: formats, each a word of tt_precision_names, each once. */
static tt_status parse_precs(const char *value, bench_opts *b, tt_error *err)
{
    b->n_precs = 0;
    for (const char *p = value ? value : ""; *p || !b->n_precs;) {
        const size_t len = strcspn(p, ",");
        int k = 0;
        while (tt_precision_names[k] && (strlen(tt_precision_names[k]) != len || strncmp(p, tt_precision_names[k], len)))
            k++;
        if (!tt_precision_names[k] || b->n_precs == 3)
            return tt_fail(err, TT_ERR_ARG, "--precision: '%.64s' is not a list of fp32, bf16 and fp16", value ? value : "");
        for (size_t j = 0; j < b->n_precs; j++)
            if (b->precs[j] == k) return tt_fail(err, TT_ERR_ARG, "--precision: %s is listed twice", tt_precision_names[k]);
        b->precs[b->n_precs++] = k;
        p += len;
        if (*p == ',' && !*++p) return tt_fail(err, TT_ERR_ARG, "--precision: '%.64s' ends with a comma", value);
    }
    return TT_OK;
}

/* --sync LIST: modes, each as train's --sync takes it. */
static tt_status parse_syncs(const char *value, bench_opts *b, tt_error *err)
{
    b->n_syncs = 0;
    for (const char *p = value ? value : ""; *p || !b->n_syncs;) {
        char one[32];
        const size_t len = strcspn(p, ",");
        if (len == 0 || len >= sizeof one || b->n_syncs == MAX_LIST)
            return tt_fail(err, TT_ERR_ARG, "--sync: '%.64s' is not a list like bsp,ssp:4,async,weights:16 (at most "
                           "%d)", value ? value : "", MAX_LIST);
        memcpy(one, p, len);
        one[len] = '\0';
        tt_sync sy = {TT_SYNC_BSP, 0, 0};
        tt_status s = tt_sync_parse("--sync", one, &sy, err);
        if (s) return s;
        b->syncs[b->n_syncs++] = sy;
        p += len;
        if (*p == ',' && !*++p) return tt_fail(err, TT_ERR_ARG, "--sync: '%.64s' ends with a comma", value);
    }
    return TT_OK;
}

/* bench's own options, for tt_cli_parse_train: the lists of the sweep, --scaling, --reps, --csv. */
int bench_extra(const char *opt, const char *value, void *ctx, tt_error *err, tt_status *st)
{
    bench_opts *b = (bench_opts *)ctx;
    if (strcmp(opt, "--towers") == 0) {
        *st = parse_list(opt, value, 1, 64, b->towers, &b->n_towers, err);
        return 1;
    }
    if (strcmp(opt, "--ranks") == 0) {
        *st = parse_list(opt, value, 1, TT_MAX_RANKS, b->ranks, &b->n_ranks, err);
        for (size_t i = 0; !*st && i < b->n_ranks; i++)
            if (b->ranks[i] > (size_t)tt_node_world()->size)
                *st = tt_fail(err, TT_ERR_ARG, "--ranks: %zu, but the job has %d rank%s (mpirun -np K, K >= the "
                              "largest)", b->ranks[i], tt_node_world()->size, tt_node_world()->size == 1 ? "" : "s");
        return 1;
    }
    if (strcmp(opt, "--batch") == 0) {
        *st = parse_list(opt, value, 1, 1 << 20, b->batches, &b->n_batches, err);
        return 1;
    }
    if (strcmp(opt, "--reduce") == 0) {
        *st = parse_reduces(value, b, err);
        return 1;
    }
    if (strcmp(opt, "--update") == 0) {
        *st = parse_updates(value, b, err);
        return 1;
    }
    if (strcmp(opt, "--sync") == 0) {
        *st = parse_syncs(value, b, err);
        return 1;
    }
    if (strcmp(opt, "--precision") == 0) {
        *st = parse_precs(value, b, err);
        return 1;
    }
    if (strcmp(opt, "--scaling") == 0) {
        if (value && strcmp(value, "strong") == 0)
            b->weak = 0;
        else if (value && strcmp(value, "weak") == 0)
            b->weak = 1;
        else
            *st = tt_fail(err, TT_ERR_ARG, "--scaling: '%.64s' is not strong or weak", value ? value : "");
        return 1;
    }
    if (strcmp(opt, "--reps") == 0) {
        *st = value ? tt_cli_size(opt, value, 1, 64, &b->reps, err)
                    : tt_fail(err, TT_ERR_ARG, "%s: missing value", opt);
        return 1;
    }
    if (strcmp(opt, "--csv") == 0) {
        if (!value || !*value) *st = tt_fail(err, TT_ERR_ARG, "--csv: missing file name");
        b->csv = value;
        return 1;
    }
    return 0;
}

/* A list of the sweep as the user writes it ("1,2,4"; "bsp,ssp:4"): entry i of n by say(ctx, i, buf). */
static const char *list_words(char *out, size_t len, size_t n, const char *(*say)(const void *, size_t, char *, size_t),
                              const void *v)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && at + 1 < len; i++) {
        char one[40];
        int k = snprintf(out + at, len - at, "%s%s", i ? "," : "", say(v, i, one, sizeof one));
        at += k > 0 ? (size_t)k : 0;
    }
    return out;
}

static const char *say_size(const void *v, size_t i, char *b, size_t len)
{
    snprintf(b, len, "%zu", ((const size_t *)v)[i]);
    return b;
}
static const char *say_reduce(const void *v, size_t i, char *b, size_t len)
{
    (void)b, (void)len;
    return tt_reduce_name(((const tt_reduce *)v)[i]);
}
static const char *say_update(const void *v, size_t i, char *b, size_t len)
{
    (void)b, (void)len;
    return tt_update_name(((const tt_update *)v)[i]);
}
static const char *say_sync(const void *v, size_t i, char *b, size_t len)
{
    return tt_sync_format(&((const tt_sync *)v)[i], b, len);
}
static const char *say_prec(const void *v, size_t i, char *b, size_t len)
{
    (void)b, (void)len;
    return tt_precision_names[((const int *)v)[i]];
}

/* The sweep's lists decide which rows — which sub-jobs and which collectives — every rank runs: a rank given another
 * list (--sync bsp,bsp, --ranks 1 on one rank) waited for rows the others never ran, or ran a "2 ranks" row alone.
 * Every rank compares them with rank 0's, as the user writes them, before the first row. */
tt_status bench_same_lists(tt_node *nd, const bench_opts *b, tt_error *err)
{
    enum { LEN = 16 * 24 };
    char ranks[LEN], towers[LEN], batches[LEN], reduces[LEN], updates[LEN], syncs[LEN], precs[LEN], reps[24];
    snprintf(reps, sizeof reps, "%zu", b->reps);
    const tt_node_word w[] = {
        {"--ranks", list_words(ranks, LEN, b->n_ranks, say_size, b->ranks)},
        {"--towers", list_words(towers, LEN, b->n_towers, say_size, b->towers)},
        {"--batch", list_words(batches, LEN, b->n_batches, say_size, b->batches)},
        {"--reduce", list_words(reduces, LEN, b->n_reduces, say_reduce, b->reduces)},
        {"--update", list_words(updates, LEN, b->n_updates, say_update, b->updates)},
        {"--sync", list_words(syncs, LEN, b->n_syncs, say_sync, b->syncs)},
        {"--precision", list_words(precs, LEN, b->n_precs, say_prec, b->precs)},
        {"--scaling", b->weak ? "weak" : "strong"},
        {"--reps", reps},
    };
    return tt_node_same_words(nd, "bench", "every rank must sweep the same lists", w, (int)(sizeof w / sizeof *w),
                              err);
}

