/* ckpt_metadata.c — a checkpoint's "__metadata__": the keys (g_md_keys and the optimizer's parameters), written as a
 * run writes them — integers "%llu", floats "%.9g", doubles "%.17g", flags "true"/"false", all strings as the format
 * requires — and read back as hostile input: every key known and a string, the format and its version first, then the
 * whole file's checksum (nothing else is read before the file is known whole), then each value parsed all of its
 * string, in its range and spelt as a run spells it ("02", "1e-3" are no run's), and the run's position consistent
 * (epoch, step, global_step, optim_steps), and the callbacks' state with it.
 *
 * Not for: the "model" and "options" texts (ckpt_options.c), the tensors (checkpoint.c) or where the checksum lies in
 * the header (safetensors.c). */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"

#define CK_FORMAT "towertrain-checkpoint"
#define CK_FORMAT_VERSION "2"
#define CK_SUM_ZERO "crc32:00000000" /* the checksum's value while the file's CRC-32 is taken */

enum { CK_TOWERS_MAX = 1024 }; /* --towers' largest: the most gradients a step applies alone (optim_steps) */

/* The metadata keys, all required but those marked optional, and the optimizer's (tt_optim_params, written after
 * "optimizer"); any other key is refused. */
static const struct {
    const char *key;
    int optional;
} g_md_keys[] = {
    {"format", 0}, {"format_version", 0}, {"epoch", 0}, {"step", 0}, {"steps_per_epoch", 0}, {"global_step", 0},
    {"seed", 0}, {"batch", 0}, {"optimizer", 0}, {"u_product", 0}, {"best", 0}, {"towers", 0},
    {"backend", 0}, {"model", 1}, {"options", 1}, {"n_params", 0}, {"checksum", 0}, {"optim_steps", 1},
    {"loss_scale", 1}, {"loss_scale_good", 1}, {"loss_scale_skipped", 1},
    {"lr_schedule", 1}, {"lr_scale", 1}, {"lr_warmup_steps", 1},
    /* the callbacks' state (tt_ckpt_callbacks), each callback's keys together */
    {"es_wait", 1}, {"es_best", 1}, {"es_best_epoch", 1}, {"es_stopped_epoch", 1}, {"es_best_weights", 1},
    {"plateau_wait", 1}, {"plateau_best", 1}, {"plateau_cooldown", 1}, {"plateau_lr", 1},
};
enum { CK_N_MD_KEYS = (int)(sizeof g_md_keys / sizeof g_md_keys[0]) };

/* ---- writing ---------------------------------------------------------------------------------------------------- */

static int md_str(json_object *md, const char *key, const char *v) { return ck_put(md, key, json_object_new_string(v)); }

static int md_u64(json_object *md, const char *key, uint64_t v)
{
    char b[32];
    snprintf(b, sizeof b, "%llu", (unsigned long long)v);
    return md_str(md, key, b);
}

/* A float as "%.9g": nine significant digits bring back the same float. */
static int md_f32(json_object *md, const char *key, float v)
{
    char b[48];
    snprintf(b, sizeof b, "%.9g", (double)v);
    return md_str(md, key, b);
}

/* A double as "%.17g" (the same double back), NaN as "nan" (glibc may print "-nan"). */
static int md_f64(json_object *md, const char *key, double v)
{
    char b[48];
    if (isnan(v)) snprintf(b, sizeof b, "nan");
    else snprintf(b, sizeof b, "%.17g", v);
    return md_str(md, key, b);
}

/* The metadata, with the checksum's placeholder CK_SUM_ZERO (the writer puts the file's CRC-32 there last). */
json_object *ck_metadata(const tt_checkpoint *ck)
{
    json_object *md = json_object_new_object();
    if (!md) return NULL;
    tt_optim_config c = ck->optim;
    int bad = md_str(md, "format", CK_FORMAT) | md_str(md, "format_version", CK_FORMAT_VERSION) |
              md_u64(md, "epoch", ck->epoch) | md_u64(md, "step", ck->step) |
              md_u64(md, "steps_per_epoch", ck->steps_per_epoch) | md_u64(md, "global_step", ck->global_step) |
              md_u64(md, "optim_steps", ck->optim_steps) |
              md_u64(md, "seed", ck->seed) | md_u64(md, "batch", ck->batch) |
              md_str(md, "optimizer", tt_optim_kind_name(c.kind));
    for (int k = 0; k < TT_OPTIM_N_PARAMS; k++) {
        const tt_optim_param *p = &tt_optim_params[k];
        const void *v = tt_optim_param_field(&c, p);
        if (p->quiet && *(const float *)v == 0) continue; /* none: no key, as before the parameter existed */
        bad |= p->type == TT_OPTIM_REAL ? md_f32(md, p->name, *(const float *)v)
                                        : md_str(md, p->name, *(const int *)v ? "true" : "false");
    }
    bad |= md_f64(md, "u_product", ck->u_product) | md_f64(md, "best", ck->best) | md_u64(md, "towers", ck->towers) |
           md_str(md, "backend", ck->backend);
    /* the rate of every step: the schedule (tt_lr_schedule_words), the scaling rule's factor, the warm-up */
    char sched[TT_SCHED_WORDS];
    if (c.sched.kind != TT_SCHED_CONSTANT)
        bad |= md_str(md, "lr_schedule", tt_lr_schedule_words(&c.sched, sched, sizeof sched));
    if (c.sched.scale > 1 && (c.sched.kind != TT_SCHED_CONSTANT || c.sched.ramp_steps))
        bad |= md_f32(md, "lr_scale", c.sched.scale);
    if (c.sched.ramp_steps) bad |= md_u64(md, "lr_warmup_steps", c.sched.ramp_steps);
    if (ck->loss_scale != 0)
        bad |= md_f64(md, "loss_scale", ck->loss_scale) | md_u64(md, "loss_scale_good", ck->scale_good) |
               md_u64(md, "loss_scale_skipped", ck->scale_skipped);
    const tt_ckpt_callbacks *cb = &ck->cb;
    if (cb->early) {
        bad |= md_u64(md, "es_wait", cb->es_wait) | md_u64(md, "es_best_epoch", cb->es_best_epoch) |
               md_u64(md, "es_stopped_epoch", cb->es_stopped_epoch) |
               md_str(md, "es_best_weights", cb->es_kept ? "true" : "false");
        if (cb->es_has_best) bad |= md_f64(md, "es_best", cb->es_best);
    }
    if (cb->plateau) {
        bad |= md_u64(md, "plateau_wait", cb->rl_wait) | md_u64(md, "plateau_cooldown", cb->rl_cooldown) |
               md_f32(md, "plateau_lr", cb->lr);
        if (cb->rl_has_best) bad |= md_f64(md, "plateau_best", cb->rl_best);
    }
    if (ck->model_desc) bad |= md_str(md, "model", ck->model_desc);
    if (ck->options) bad |= md_str(md, "options", ck->options);
    bad |= md_u64(md, "n_params", ck->n_params) | md_str(md, "checksum", CK_SUM_ZERO);
    if (bad) {
        json_object_put(md);
        return NULL;
    }
    return md;
}

/* ---- reading ---------------------------------------------------------------------------------------------------- */

/* The metadata value of key (required unless *v may stay NULL for an optional key). */
tt_status md_get(const ck_parse *p, const char *key, int optional, const char **v)
{
    json_object *o;
    *v = NULL;
    if (!json_object_object_get_ex(p->md, key, &o)) {
        if (optional) return TT_OK;
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: no key '%s'", p->what, key);
    }
    *v = json_object_get_string(o); /* a string without NUL bytes: checked with the keys */
    return TT_OK;
}

static tt_status md_bad(const ck_parse *p, const char *key, const char *v, const char *want)
{
    char q[CK_QUOTE];
    return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: key '%s' is '%s', not %s", p->what, key, ck_quote(v, q, sizeof q),
                   want);
}

/* A decimal unsigned integer, all of the string, at most max. */
static tt_status md_uint(const ck_parse *p, const char *key, uint64_t max, uint64_t *out)
{
    const char *v;
    tt_status s = md_get(p, key, 0, &v);
    if (s) return s;
    char *end;
    errno = 0;
    const unsigned long long x = (*v >= '0' && *v <= '9') ? strtoull(v, &end, 10) : 0;
    if (!(*v >= '0' && *v <= '9') || *end || errno == ERANGE) return md_bad(p, key, v, "an unsigned integer");
    if (v[0] == '0' && v[1]) /* "%llu" as written: "02" is no run's */
        return md_bad(p, key, v, "an unsigned integer as a run writes it (no leading zeros)");
    if (x > max) {
        char want[64];
        snprintf(want, sizeof want, "an integer up to %llu", (unsigned long long)max);
        return md_bad(p, key, v, want);
    }
    *out = (uint64_t)x;
    return TT_OK;
}

/* An optional unsigned integer: absent, *out = def. */
static tt_status md_uint_optional(const ck_parse *p, const char *key, uint64_t def, uint64_t *out)
{
    const char *v;
    md_get(p, key, 1, &v);
    if (!v) {
        *out = def;
        return TT_OK;
    }
    return md_uint(p, key, UINT64_MAX, out);
}

static tt_status md_size(const ck_parse *p, const char *key, size_t *out)
{
    uint64_t x;
    tt_status s = md_uint(p, key, SIZE_MAX, &x);
    if (!s) *out = (size_t)x;
    return s;
}

/* A finite float, all of the string ("%.9g" as written). */
static tt_status md_float(const ck_parse *p, const char *key, float *out)
{
    const char *v;
    tt_status s = md_get(p, key, 0, &v);
    if (s) return s;
    char *end;
    const float x = strtof(v, &end);
    if (!*v || isspace((unsigned char)*v) || end == v || *end || !isfinite(x)) return md_bad(p, key, v, "a finite number");
    char again[48];
    snprintf(again, sizeof again, "%.9g", (double)x);
    if (strcmp(again, v) != 0) /* "0x1p-10", "1e-3", "+0.5": no run writes them */
        return md_bad(p, key, v, "a number as a run writes it (%.9g)");
    *out = x;
    return TT_OK;
}

/* A double, all of the string ("%.17g" as written); "nan" only where allowed (the best metric: none yet). */
static tt_status md_double_of(const ck_parse *p, const char *key, const char *v, int nan_ok, double *out)
{
    if (nan_ok && strcmp(v, "nan") == 0) {
        *out = NAN;
        return TT_OK;
    }
    char *end;
    const double x = strtod(v, &end);
    if (!*v || isspace((unsigned char)*v) || end == v || *end || isnan(x) || (!nan_ok && !isfinite(x)))
        return md_bad(p, key, v, nan_ok ? "a number or nan" : "a finite number");
    char again[48];
    snprintf(again, sizeof again, "%.17g", x);
    if (strcmp(again, v) != 0) return md_bad(p, key, v, "a number as a run writes it (%.17g)");
    *out = x;
    return TT_OK;
}

static tt_status md_double(const ck_parse *p, const char *key, int nan_ok, double *out)
{
    const char *v;
    tt_status s = md_get(p, key, 0, &v);
    if (s) return s;
    return md_double_of(p, key, v, nan_ok, out);
}

/* The loss scaler's keys, optional together: a scale in (0, FLT_MAX] (what the towers' kernels take as a float),
 * its run of finite steps, the steps skipped — at most global_step, and with optim_steps at least global_step. */
static tt_status md_scaler(const ck_parse *p, tt_checkpoint *ck)
{
    const char *v;
    md_get(p, "loss_scale", 1, &v);
    tt_status s;
    if (!v) {
        const char *good, *skipped;
        md_get(p, "loss_scale_good", 1, &good);
        md_get(p, "loss_scale_skipped", 1, &skipped);
        ck->loss_scale = 0;
        ck->scale_good = ck->scale_skipped = 0;
        if (good || skipped)
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: %s without loss_scale", p->what,
                           good ? "loss_scale_good" : "loss_scale_skipped");
        return TT_OK;
    }
    if ((s = md_double_of(p, "loss_scale", v, 0, &ck->loss_scale))) return s;
    if (!(ck->loss_scale >= 1.0 && ck->loss_scale <= TT_SCALE_MAX)) /* what a run writes: below 1 it halts */
        return md_bad(p, "loss_scale", v, "a scale from 1 to 2^64");
    if ((s = md_uint(p, "loss_scale_good", UINT64_MAX, &ck->scale_good)) ||
        (s = md_uint(p, "loss_scale_skipped", ck->global_step, &ck->scale_skipped)))
        return s;
    return TT_OK;
}

static tt_status md_bool(const ck_parse *p, const char *key, int *out)
{
    const char *v;
    tt_status s = md_get(p, key, 0, &v);
    if (s) return s;
    if (strcmp(v, "true") == 0) *out = 1;
    else if (strcmp(v, "false") == 0) *out = 0;
    else return md_bad(p, key, v, "true or false");
    return TT_OK;
}

/* Every key known, every value a string without NUL bytes. */
static tt_status md_keys(const ck_parse *p)
{
    json_object_object_foreach(p->md, key, val) {
        int known = 0;
        for (int i = 0; i < CK_N_MD_KEYS; i++) known |= strcmp(key, g_md_keys[i].key) == 0;
        known |= tt_optim_param_find(key) >= 0;
        char q[CK_QUOTE];
        if (!known)
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: unknown key '%s'", p->what, ck_quote(key, q, sizeof q));
        if (!json_object_is_type(val, json_type_string))
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: key '%s' is not a string (safetensors metadata are "
                           "strings)", p->what, key);
    }
    return TT_OK;
}

/* The checksum, "crc32:" and 8 lower-case hex digits: the CRC-32 of the whole file — prefix, header and data — with
 * these 8 digits read as '0's, so every byte of the file but them is covered, the header's too. Checked right after
 * the format and its version, before any other value is read. */
static tt_status md_checksum(const ck_parse *p)
{
    const char *v;
    tt_status s = md_get(p, "checksum", 0, &v);
    if (s) return s;
    unsigned want = 0;
    int ok = strlen(v) == 14 && strncmp(v, "crc32:", 6) == 0;
    for (int i = 6; ok && i < 14; i++) {
        const char c = v[i];
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        want = want << 4 | (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (!ok) return md_bad(p, "checksum", v, "crc32: and 8 lower-case hex digits");
    size_t digits;
    const size_t n = (size_t)(p->data - p->buf) - 8;
    if ((s = ck_sum_locate(p->what, (const char *)p->buf + 8, n, &p->sc, &digits, p->err))) return s;
    if (memcmp(p->buf + 8 + digits, v + 6, 8) != 0) /* the raw key found is not __metadata__'s */
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: the header's \"checksum\" key is not __metadata__'s", p->what);
    const uint32_t got = ck_file_crc(p->buf, p->len, 8 + digits);
    if (got != want)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: checksum mismatch: the file's CRC-32 is %08x, the header says %08x "
                       "(the file is damaged, cut short or edited)", p->what, (unsigned)got, want);
    return TT_OK;
}

/* The format and its version (what the rest of the header means), then the checksum: nothing else is read before
 * the file is known whole. Version 1 (its checksum over the tensors only) is refused, naming what reads it. */
tt_status md_version(const ck_parse *p)
{
    tt_status s = md_keys(p);
    const char *v;
    char q[CK_QUOTE];
    if (!s && !(s = md_get(p, "format", 0, &v)) && strcmp(v, CK_FORMAT) != 0)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: format is '%s', not '" CK_FORMAT "'", p->what,
                       ck_quote(v, q, sizeof q));
    if (!s && !(s = md_get(p, "format_version", 0, &v)) && strcmp(v, "1") == 0)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: format_version is '1' (its header has no checksum); this "
                       "towertrain reads version " CK_FORMAT_VERSION " only: towertrain up to commit 50436ee reads "
                       "version 1", p->what);
    if (!s && strcmp(v, CK_FORMAT_VERSION) != 0)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: format_version is '%s'; this towertrain reads version "
                       CK_FORMAT_VERSION, p->what, ck_quote(v, q, sizeof q));
    return s ? s : md_checksum(p);
}

/* One callback's keys (names[0] says whether they are there; the others then required, but `best`, optional: no best
 * yet): all or none. 1: they are there. */
static tt_status md_group(const ck_parse *p, const char *const *names, int n, const char *best, int *there)
{
    const char *v;
    md_get(p, names[0], 1, &v);
    *there = v != NULL;
    for (int k = 1; k <= n; k++) {
        const char *key = k < n ? names[k] : best, *w;
        md_get(p, key, 1, &w);
        if (!*there && w)
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: %s without %s (a callback's keys come together)",
                           p->what, key, names[0]);
        if (*there && !w && k < n) return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: no key '%s'", p->what, key);
    }
    return TT_OK;
}

/* --early-stopping, --reduce-lr-on-plateau: their state, optional, each callback's keys together, as a run can have
 * written them — waits and epochs no later than this epoch, a best epoch with a best (kept weights with one), a stop
 * at the end of this epoch only, a rate in force that is a finite number >= 0. */
static tt_status md_callbacks(const ck_parse *p, tt_checkpoint *ck)
{
    static const char *const es[] = {"es_wait", "es_best_epoch", "es_stopped_epoch", "es_best_weights"};
    static const char *const rl[] = {"plateau_wait", "plateau_cooldown", "plateau_lr"};
    tt_ckpt_callbacks *cb = &ck->cb;
    const char *v;
    tt_status s;
    if ((s = md_group(p, es, 4, "es_best", &cb->early)) || (s = md_group(p, rl, 3, "plateau_best", &cb->plateau)))
        return s;
    if (cb->early) {
        if ((s = md_uint(p, "es_wait", ck->epoch, &cb->es_wait)) ||
            (s = md_uint(p, "es_best_epoch", ck->epoch, &cb->es_best_epoch)) ||
            (s = md_uint(p, "es_stopped_epoch", ck->epoch, &cb->es_stopped_epoch)) ||
            (s = md_bool(p, "es_best_weights", &cb->es_kept)))
            return s;
        md_get(p, "es_best", 1, &v);
        cb->es_has_best = v != NULL;
        if (v && (s = md_double_of(p, "es_best", v, 1, &cb->es_best))) return s;
        if (isinf(cb->es_best)) return md_bad(p, "es_best", v, "a finite number or nan");
        if (!cb->es_has_best != !cb->es_best_epoch || (cb->es_kept && !cb->es_best_epoch))
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: es_best_epoch %llu %s (a best epoch has a best value, "
                           "and kept weights a best epoch)", p->what, (unsigned long long)cb->es_best_epoch,
                           cb->es_has_best ? "with es_best" : "without es_best");
        if (cb->es_stopped_epoch && (cb->es_stopped_epoch != ck->epoch || ck->step != ck->steps_per_epoch))
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: es_stopped_epoch %llu is not this checkpoint's "
                           "finished epoch (a stopped run writes no later one)", p->what,
                           (unsigned long long)cb->es_stopped_epoch);
    }
    if (cb->plateau) {
        if ((s = md_uint(p, "plateau_wait", ck->epoch, &cb->rl_wait)) ||
            (s = md_uint(p, "plateau_cooldown", UINT64_MAX, &cb->rl_cooldown)) ||
            (s = md_float(p, "plateau_lr", &cb->lr)))
            return s;
        if (!(cb->lr >= 0)) return md_bad(p, "plateau_lr", json_object_get_string(json_object_object_get(p->md,
                                          "plateau_lr")), "a rate >= 0");
        md_get(p, "plateau_best", 1, &v);
        cb->rl_has_best = v != NULL;
        if (v && (s = md_double_of(p, "plateau_best", v, 1, &cb->rl_best))) return s;
        if (isinf(cb->rl_best)) return md_bad(p, "plateau_best", v, "a finite number or nan");
    }
    return TT_OK;
}

/* An optimizer parameter as a run can have written it: in its range in tt_optim_params (the command line's own
 * table) — the rate up to the most towers times it (--lr-scaling linear) —, a flag only with what it needs. */
static tt_status md_optim_range(const ck_parse *p, const tt_optim_param *q, tt_optim_config *c)
{
    const char *v;
    md_get(p, q->name, 0, &v);
    const void *have = tt_optim_param_field(c, q);
    char want[96];
    if (q->type == TT_OPTIM_FLAG) {
        const int needs = q->needs ? tt_optim_param_find(q->needs) : -1;
        if (*(const int *)have && needs >= 0 && *(const float *)tt_optim_param_field(c, &tt_optim_params[needs]) <= 0)
            return md_bad(p, q->name, v, "false (it needs a positive momentum)");
        return TT_OK;
    }
    const double x = *(const float *)have;
    /* the rate: --lr-scaling linear multiplies it by the towers of every rank, so any finite rate above lo */
    const double hi = strcmp(q->name, "lr") == 0 ? (double)FLT_MAX : q->hi;
    if (x < q->lo || (q->lo_open && x == q->lo) || x > hi) {
        snprintf(want, sizeof want, "a number in %c%g, %g]", q->lo_open ? '(' : '[', q->lo, hi);
        return md_bad(p, q->name, v, want);
    }
    return TT_OK;
}

/* The rate's schedule (optional keys: none is constant, no scale, no warm-up), as a run writes it. */
static tt_status md_schedule(const ck_parse *p, tt_optim_config *c)
{
    const char *v;
    tt_status s;
    const char *clip_a, *clip_b;
    if (tt_optim_clips_clash(c, &clip_a, &clip_b))
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: both %s and %s are set (a run sets one)", p->what, clip_a,
                       clip_b);
    md_get(p, "lr_schedule", 1, &v);
    if (v) {
        tt_error e;
        if (tt_lr_schedule_parse("lr_schedule", v, &c->sched, &e) || c->sched.kind == TT_SCHED_CONSTANT)
            return md_bad(p, "lr_schedule", v, "a schedule as a run writes it (--lr-schedule's words, not constant)");
        char again[TT_SCHED_WORDS];
        if (strcmp(tt_lr_schedule_words(&c->sched, again, sizeof again), v) != 0)
            return md_bad(p, "lr_schedule", v, "a schedule as a run writes it");
    }
    if ((s = md_uint_optional(p, "lr_warmup_steps", 0, &c->sched.ramp_steps))) return s;
    md_get(p, "lr_scale", 1, &v);
    if (v) {
        if ((s = md_float(p, "lr_scale", &c->sched.scale))) return s;
        /* the towers of every rank: at least 2 (1 writes no key), at most what the ranks' towers can be */
        if (!(c->sched.scale >= 2 && c->sched.scale <= 1048576.0f) || c->sched.scale != floorf(c->sched.scale))
            return md_bad(p, "lr_scale", v, "a whole number of towers from 2 to 2^20");
    }
    return TT_OK;
}

/* The run's position, the optimizer and what wrote it, into ck. */
tt_status md_read(const ck_parse *p, tt_checkpoint *ck)
{
    const char *v;
    tt_status s;
    if ((s = md_uint(p, "epoch", UINT64_MAX, &ck->epoch)) || (s = md_uint(p, "step", UINT64_MAX, &ck->step)) ||
        (s = md_uint(p, "steps_per_epoch", UINT64_MAX, &ck->steps_per_epoch)) ||
        (s = md_uint(p, "global_step", UINT64_MAX, &ck->global_step)) || (s = md_uint(p, "seed", UINT64_MAX, &ck->seed)) ||
        (s = md_uint_optional(p, "optim_steps", ck->global_step, &ck->optim_steps)) ||
        (s = md_size(p, "batch", &ck->batch)) || (s = md_size(p, "towers", &ck->towers)) ||
        (s = md_size(p, "n_params", &ck->n_params)))
        return s;
    if (ck->epoch < 1 || ck->epoch > CK_EPOCH_MAX)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: epoch %llu is not in 1..%llu", p->what,
                       (unsigned long long)ck->epoch, (unsigned long long)CK_EPOCH_MAX);
    if (ck->steps_per_epoch < 1)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: steps_per_epoch is 0", p->what);
    if (ck->step <= ck->steps_per_epoch &&
        ck->global_step != (ck->epoch - 1) * ck->steps_per_epoch + ck->step)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: global_step %llu is not (epoch - 1) x steps_per_epoch + "
                       "step = %llu", p->what, (unsigned long long)ck->global_step,
                       (unsigned long long)((ck->epoch - 1) * ck->steps_per_epoch + ck->step));
    /* the optimizer's count: one per step, or (--sync ssp, async) one per gradient applied alone — N a step, where
     * the runs that wrote it may each have had another N: at most the most towers a run can have (--towers) */
    const uint64_t per_step = CK_TOWERS_MAX;
    const uint64_t extra_max = /* global_step x (towers - 1), saturated */
        ck->global_step > UINT64_MAX / per_step ? UINT64_MAX : ck->global_step * (per_step - 1);
    if ((s = md_scaler(p, ck))) return s;
    if (ck->optim_steps < ck->global_step - ck->scale_skipped || /* skipped <= global_step: md_scaler */
        (ck->optim_steps > ck->global_step && ck->optim_steps - ck->global_step > extra_max))
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: optim_steps %llu is not between global_step %llu (less "
                       "the steps skipped) and global_step x the most towers = %llu x %llu", p->what,
                       (unsigned long long)ck->optim_steps, (unsigned long long)ck->global_step,
                       (unsigned long long)ck->global_step,
                       (unsigned long long)per_step);
    if (ck->step > ck->steps_per_epoch)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: step %llu is beyond steps_per_epoch %llu", p->what,
                       (unsigned long long)ck->step, (unsigned long long)ck->steps_per_epoch);
    if ((s = md_get(p, "optimizer", 0, &v))) return s;
    tt_optim_kind kind;
    char kinds[128];
    if (tt_optim_parse_kind(v, &kind) != 0)
        return md_bad(p, "optimizer", v, tt_optim_kind_list(kinds, sizeof kinds, ~0u, ", ", " or "));
    tt_optim_config *c = &ck->optim;
    *c = tt_optim_defaults(kind);
    for (int k = 0; k < TT_OPTIM_N_PARAMS; k++) {
        const tt_optim_param *q = &tt_optim_params[k];
        void *f = tt_optim_param_field(c, q);
        const char *given;
        md_get(p, q->name, 1, &given);
        if (q->quiet && !given) continue; /* none */
        if ((s = q->type == TT_OPTIM_REAL ? md_float(p, q->name, (float *)f) : md_bool(p, q->name, (int *)f)) ||
            (s = md_optim_range(p, q, c)))
            return s;
    }
    if ((s = md_schedule(p, c))) return s;
    if ((s = md_double(p, "u_product", 0, &ck->u_product)) || (s = md_double(p, "best", 1, &ck->best))) return s;
    /* what a run can have written: Nadam's product of momenta in (0, 1) (0 once it underflows; 1 before a step), a
     * best metric that is a number or none yet — an Inf there would keep best.safetensors from ever being written */
    if (!(ck->u_product >= 0 && ck->u_product <= 1))
        return md_bad(p, "u_product", json_object_get_string(json_object_object_get(p->md, "u_product")),
                      "a number in [0, 1] (a product of momenta)");
    if (isinf(ck->best))
        return md_bad(p, "best", json_object_get_string(json_object_object_get(p->md, "best")), "a finite number or nan");
    if ((s = md_callbacks(p, ck))) return s;
    if ((s = md_get(p, "backend", 0, &v))) return s;
    if (strlen(v) >= sizeof ck->backend) return md_bad(p, "backend", v, "a backend name");
    memcpy(ck->backend, v, strlen(v) + 1);
    const char *names[3];
    ck->n_slots = tt_optim_slot_names(c, names);
    for (int k = 0; k < ck->n_slots; k++) snprintf(ck->slot_names[k], sizeof ck->slot_names[k], "%s", names[k]);
    return TT_OK;
}
