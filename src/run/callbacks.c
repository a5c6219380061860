/* callbacks.c — EarlyStopping and ReduceLROnPlateau as Keras 3 decides them (tt_callbacks.h): the settings read from
 * an option's SPEC by a table of keys per callback, in Keras's argument order, and written back as one canonical
 * SPEC; the state between epochs and the epoch's decisions, a pure function of the epoch's metrics (no I/O: the run's
 * side, train_callbacks.c, prints, logs, keeps weights and checkpoints). Not for: when the run calls it or what it
 * does with a decision (train.c, train_callbacks.c).
 *
 * Keras's comparison (keras/src/callbacks/monitor_callback.py, _is_improvement): with min_delta = |min_delta|, negated
 * in min mode, a value improves on a reference when op(value - min_delta, reference), op ops.less in min mode and
 * ops.greater in max mode; no reference yet (None) always improves. The subtraction is Python's, in float64; ops.less
 * and ops.greater take Python floats as float32 tensors, so the comparison itself is of float32 values: 0.3 - 1e-9 is
 * no improvement on 0.3, and neither is 0.4 on 0.5 with min_delta 0.1 (0.4 + 0.1 is 0.5). That is written out here, in
 * cb_improves, once. */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_callbacks.h"

const char *const tt_cb_metric_names[] = {"loss", "accuracy", "top5", "val_loss", "val_accuracy", "val_top5", NULL};
const char *const tt_cb_mode_names[] = {"auto", "min", "max", NULL};

void tt_callback_defaults(tt_callback *cb, tt_cb_kind kind)
{
    memset(cb, 0, sizeof *cb);
    cb->kind = kind;
    cb->monitor = TT_CB_VAL_LOSS;
    cb->mode = TT_CB_AUTO;
    if (kind == TT_CB_REDUCE_LR) {
        cb->min_delta = 1e-4;
        cb->patience = 10;
        cb->factor = 0.1;
    }
}

/* ---- the SPEC: one table of keys per callback, in Keras's argument order ------------------------------------- */

typedef enum { KEY_METRIC, KEY_MODE, KEY_REAL, KEY_COUNT, KEY_FLAG, KEY_BASELINE } key_type;
typedef struct cb_key {
    const char *name; /* Keras's argument name */
    key_type type;
    size_t field;     /* offsetof in tt_callback */
    double lo, hi;    /* KEY_REAL, KEY_BASELINE: the range; KEY_COUNT: hi */
    int open;         /* KEY_REAL: lo and hi themselves refused (the factor) */
} cb_key;

#define AT(f) offsetof(tt_callback, f)
enum { CB_COUNT_MAX = 100000, CB_KEYS = 7 }; /* counts of epochs: --epochs' largest */
#define CB_REAL_MAX 1e9

static const cb_key g_es_keys[CB_KEYS] = {
    {"monitor", KEY_METRIC, AT(monitor), 0, 0, 0},
    {"min_delta", KEY_REAL, AT(min_delta), 0, CB_REAL_MAX, 0},
    {"patience", KEY_COUNT, AT(patience), 0, CB_COUNT_MAX, 0},
    {"mode", KEY_MODE, AT(mode), 0, 0, 0},
    {"baseline", KEY_BASELINE, AT(baseline), 0, CB_REAL_MAX, 0},
    {"restore_best_weights", KEY_FLAG, AT(restore_best_weights), 0, 0, 0},
    {"start_from_epoch", KEY_COUNT, AT(start_from_epoch), 0, CB_COUNT_MAX, 0},
};
static const cb_key g_rl_keys[CB_KEYS] = {
    {"monitor", KEY_METRIC, AT(monitor), 0, 0, 0},
    {"factor", KEY_REAL, AT(factor), 0, 1, 1}, /* Keras refuses a factor >= 1.0; 0 would set the rate to min_lr */
    {"patience", KEY_COUNT, AT(patience), 0, CB_COUNT_MAX, 0},
    {"mode", KEY_MODE, AT(mode), 0, 0, 0},
    {"min_delta", KEY_REAL, AT(min_delta), 0, CB_REAL_MAX, 0},
    {"cooldown", KEY_COUNT, AT(cooldown), 0, CB_COUNT_MAX, 0},
    {"min_lr", KEY_REAL, AT(min_lr), 0, CB_REAL_MAX, 0},
};

static const cb_key *keys_of(tt_cb_kind kind) { return kind == TT_CB_REDUCE_LR ? g_rl_keys : g_es_keys; }
static const char *kind_name(tt_cb_kind kind)
{
    return kind == TT_CB_REDUCE_LR ? "ReduceLROnPlateau" : "EarlyStopping";
}

/* A number as the command line takes one (tt_cli_float's form): plain decimal — a digit or '.' first, no sign, blank,
 * hex or inf/nan word —, all of the text, finite, in [lo, hi] (open: (lo, hi)). */
static int cb_number(const char *v, double lo, double hi, int open, double *out)
{
    if (!(isdigit((unsigned char)v[0]) || v[0] == '.') || strpbrk(v, "xXpP")) return 0;
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (*end || errno == ERANGE || !isfinite(x) || x < lo || x > hi || (open && (x == lo || x == hi))) return 0;
    *out = x;
    return 1;
}

/* One key's value into cb (v: after '=', NULL for a bare key). */
static tt_status cb_set(const char *opt, const cb_key *k, const char *v, tt_callback *cb, tt_error *err)
{
    char *f = (char *)cb + k->field;
    double x = 0;
    size_t i;
    char list[96];
    if (!v && k->type != KEY_FLAG)
        return tt_fail(err, TT_ERR_ARG, "%s: %s: needs a value (%s=...)", opt, k->name, k->name);
    switch (k->type) {
    case KEY_METRIC:
    case KEY_MODE: {
        const char *const *names = k->type == KEY_METRIC ? tt_cb_metric_names : tt_cb_mode_names;
        for (i = 0; names[i] && strcmp(v, names[i]) != 0; i++) {}
        const size_t n = k->type == KEY_METRIC ? TT_CB_METRICS : 3;
        if (!names[i])
            return tt_fail(err, TT_ERR_ARG, "%s: %s: '%.40s' is not %s", opt, k->name, v,
                           tt_join_words(list, sizeof list, names, n, ", ", " or "));
        const int e = (int)i;
        memcpy(f, &e, sizeof e);
        return TT_OK;
    }
    case KEY_FLAG: {
        const int b = !v || strcmp(v, "true") == 0 ? 1 : strcmp(v, "false") == 0 ? 0 : -1;
        if (b < 0) return tt_fail(err, TT_ERR_ARG, "%s: %s: '%.40s' is not true or false", opt, k->name, v);
        memcpy(f, &b, sizeof b);
        return TT_OK;
    }
    case KEY_COUNT: {
        char *end;
        errno = 0;
        const unsigned long long n = isdigit((unsigned char)v[0]) ? strtoull(v, &end, 10) : 0;
        if (!isdigit((unsigned char)v[0]) || *end || errno || n > (unsigned long long)k->hi)
            return tt_fail(err, TT_ERR_ARG, "%s: %s: '%.40s' is not an integer in 0..%.0f", opt, k->name, v, k->hi);
        const size_t z = (size_t)n;
        memcpy(f, &z, sizeof z);
        return TT_OK;
    }
    case KEY_BASELINE:
    case KEY_REAL:
        if (k->type == KEY_BASELINE && strcmp(v, "none") == 0) { /* Keras's None: no baseline */
            cb->has_baseline = 0;
            cb->baseline = 0;
            return TT_OK;
        }
        if (!cb_number(v, k->lo, k->hi, k->open, &x))
            return tt_fail(err, TT_ERR_ARG, "%s: %s: '%.40s' is not a number in %s%g, %g%s%s", opt, k->name, v,
                           k->open ? "(" : "[", k->lo, k->hi, k->open ? ")" : "]",
                           k->type == KEY_BASELINE ? " (or none)" : "");
        cb->has_baseline |= k->type == KEY_BASELINE;
        memcpy(f, &x, sizeof x);
        return TT_OK;
    }
    return TT_OK;
}

tt_status tt_callback_parse(const char *opt, const char *spec, tt_cb_kind kind, tt_callback *cb, tt_error *err)
{
    tt_callback_defaults(cb, kind);
    if (strcmp(spec, "on") == 0) return TT_OK;
    if (strcmp(spec, "off") == 0) {
        tt_callback_defaults(cb, TT_CB_NONE);
        return TT_OK;
    }
    const cb_key *keys = keys_of(kind);
    int seen[CB_KEYS] = {0};
    for (const char *at = spec;;) {
        const size_t len = strcspn(at, ","), nlen = strcspn(at, "=,");
        char item[128], names[160];
        if (len == 0 || len >= sizeof item)
            return tt_fail(err, TT_ERR_ARG, "%s: %s in '%.60s' (a comma list of key=value, or on)", opt,
                           len ? "an item over 127 characters" : "an empty item", spec);
        memcpy(item, at, len);
        item[len] = '\0';
        item[nlen] = '\0'; /* the key; its value after it */
        int k = 0;
        while (k < CB_KEYS && strcmp(item, keys[k].name) != 0) k++;
        if (k == CB_KEYS) {
            size_t n = 0;
            for (int j = 0; j < CB_KEYS; j++)
                n += (size_t)snprintf(names + n, sizeof names - n, "%s%s", j ? ", " : "", keys[j].name);
            return tt_fail(err, TT_ERR_ARG, "%s: unknown key '%.40s' (%s takes %s; or on alone, for its defaults)",
                           opt, item, kind_name(kind), names);
        }
        if (seen[k]++) return tt_fail(err, TT_ERR_ARG, "%s: %s: given twice", opt, item);
        tt_status s = cb_set(opt, &keys[k], nlen < len ? item + nlen + 1 : NULL, cb, err);
        if (s) return s;
        if (!at[len]) return TT_OK;
        at += len + 1;
    }
}

const char *tt_callback_words(const tt_callback *cb, char *out, size_t len)
{
    if (cb->kind == TT_CB_NONE) {
        snprintf(out, len, "off");
        return out;
    }
    const cb_key *keys = keys_of(cb->kind);
    size_t n = 0;
    out[0] = '\0';
    for (int k = 0; k < CB_KEYS && n < len; k++) {
        const char *f = (const char *)cb + keys[k].field;
        char v[40];
        int i;
        size_t z;
        double x;
        switch (keys[k].type) {
        case KEY_METRIC:
        case KEY_MODE:
            memcpy(&i, f, sizeof i);
            snprintf(v, sizeof v, "%s", (keys[k].type == KEY_METRIC ? tt_cb_metric_names : tt_cb_mode_names)[i]);
            break;
        case KEY_FLAG:
            memcpy(&i, f, sizeof i);
            snprintf(v, sizeof v, "%s", i ? "true" : "false");
            break;
        case KEY_COUNT:
            memcpy(&z, f, sizeof z);
            snprintf(v, sizeof v, "%zu", z);
            break;
        case KEY_BASELINE:
        case KEY_REAL:
            memcpy(&x, f, sizeof x);
            if (keys[k].type == KEY_BASELINE && !cb->has_baseline) snprintf(v, sizeof v, "none");
            else tt_double_str(x, v, sizeof v); /* read back as the same double */
            break;
        }
        n += (size_t)snprintf(out + n, len - n, "%s%s=%s", k ? "," : "", keys[k].name, v);
    }
    return out;
}

int tt_callback_maximizes(const tt_callback *cb)
{
    if (cb->mode != TT_CB_AUTO) return cb->mode == TT_CB_MAX;
    return cb->monitor != TT_CB_LOSS && cb->monitor != TT_CB_VAL_LOSS; /* accuracy and top5 go up */
}

int tt_callback_needs_val(const tt_callback *cb) { return cb->kind != TT_CB_NONE && cb->monitor >= TT_CB_VAL_LOSS; }

/* ---- the decisions ---------------------------------------------------------------------------------------------- */

/* Keras's _is_improvement: op(value - min_delta, reference) in float32 (the file's opening comment says why), no
 * reference yet always an improvement. */
static int cb_improves(const tt_callback *cb, double value, int has_ref, double ref)
{
    if (!has_ref) return 1;
    const int up = tt_callback_maximizes(cb);
    const float v = (float)(value - (up ? cb->min_delta : -cb->min_delta)), r = (float)ref;
    return up ? v > r : v < r;
}

void tt_callbacks_begin(tt_callbacks_state *st, const tt_callback *es, const tt_callback *rl, float lr)
{
    memset(st, 0, sizeof *st);
    st->early = es && es->kind == TT_CB_EARLY_STOPPING;
    st->plateau = rl && rl->kind == TT_CB_REDUCE_LR;
    st->lr = lr;
}

/* keras/src/callbacks/early_stopping.py, on_epoch_end; Keras counts epochs from 0, these from 1. */
static void early_stopping(const tt_callback *es, tt_callbacks_state *st, uint64_t epoch, double v, tt_cb_decision *d)
{
    if (epoch <= es->start_from_epoch) return; /* warm-up: Keras's epoch < start_from_epoch */
    /* Keras takes a copy of the weights here when it has none yet (restore_best_weights): the first epoch monitored
     * has no best yet, so it improves below and takes the copy there */
    st->es_wait++;
    if (cb_improves(es, v, st->es_has_best, st->es_best)) {
        st->es_has_best = 1;
        st->es_best = v;
        st->es_best_epoch = epoch;
        d->keep_weights = es->restore_best_weights;
        st->es_kept |= d->keep_weights;
        /* the wait starts again only when the epoch beats the baseline too */
        if (!es->has_baseline || cb_improves(es, v, 1, es->baseline)) st->es_wait = 0;
        return;
    }
    if (st->es_wait >= es->patience && epoch > 1) { /* Keras: epoch > 0 */
        st->es_stopped_epoch = epoch;
        d->stop = 1;
    }
}

/* keras/src/callbacks/reduce_lr_on_plateau.py, on_epoch_end and _reduce_optimizer_lr: the rate is reduced while it is
 * above min_lr, compared as Keras does, old_lr > np.float32(min_lr), of float32 values (the rate is a float32
 * variable); the product and the bound are Python's float64, the result stored in float32. */
static void reduce_lr(const tt_callback *rl, tt_callbacks_state *st, double v, tt_cb_decision *d)
{
    if (st->rl_cooldown > 0) {
        st->rl_cooldown--;
        st->rl_wait = 0;
    }
    if (cb_improves(rl, v, st->rl_has_best, st->rl_best)) {
        st->rl_has_best = 1;
        st->rl_best = v;
        st->rl_wait = 0;
        return;
    }
    if (st->rl_cooldown > 0 || ++st->rl_wait < rl->patience) return;
    if (!(st->lr > (float)rl->min_lr)) return; /* at the bound: the wait goes on counting */
    d->reduced = 1;
    d->old_lr = st->lr;
    st->lr = (float)fmax((double)st->lr * rl->factor, rl->min_lr);
    st->rl_cooldown = rl->cooldown;
    st->rl_wait = 0;
}

void tt_callbacks_epoch_end(const tt_callback *es, const tt_callback *rl, tt_callbacks_state *st, uint64_t epoch,
                            const double *metrics, tt_cb_decision *d)
{
    memset(d, 0, sizeof *d);
    d->old_lr = st->lr;
    if (st->early) early_stopping(es, st, epoch, metrics[es->monitor], d);
    if (st->plateau) reduce_lr(rl, st, metrics[rl->monitor], d);
}

int tt_callbacks_restores(const tt_callback *es, const tt_callbacks_state *st)
{
    return st->early && es->restore_best_weights && st->es_kept;
}
