/* schedule.c — the learning rate of each optimizer step: Keras 3's schedules (keras/src/optimizers/schedules/
 * learning_rate_schedule.py), the linear scaling rule over all of them, and Goyal et al.'s gradual warm-up
 * (tt_optim.h has the definitions). The optimizer asks for its step's rate once per step (tt_optim_begin_step): a
 * scalar on the host, so every placement and sync mode gets the same rate, and a resumed run (its step count
 * restored) the same rates as an unbroken one. */
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_optim.h"

static const char *const g_sched_names[TT_SCHED_KINDS] = {"constant", "step", "exponential", "cosine"};

/* Keras computes in float32; the same formulas in double, rounded once, agree with it to a float's rounding. */
static double sched_rate(const tt_lr_schedule *s, double lr, double t)
{
    switch (s->kind) {
    case TT_SCHED_CONSTANT:
    case TT_SCHED_KINDS: break;
    case TT_SCHED_STEP: {
        size_t i = 0;
        while (i < s->n_bounds && t > (double)s->bounds[i]) i++; /* values[i] while bounds[i-1] < t <= bounds[i] */
        return s->values[i];
    }
    case TT_SCHED_EXPONENTIAL: {
        double p = t / (double)s->decay_steps;
        if (s->staircase) p = floor(p);
        return lr * pow((double)s->decay_rate, p);
    }
    case TT_SCHED_COSINE: {
        const double steps = (double)s->decay_steps, warm = (double)s->warmup_steps;
        double from = lr;
        if (s->warmup_target > 0) { /* Keras: a warmup_target (not None) is the decay's start, warm-up or none */
            t = t < steps + warm ? t : steps + warm;
            if (t < warm) return ((double)s->warmup_target - lr) * (t / warm) + lr;
            t -= warm;
            from = s->warmup_target;
        } else {
            t = t < steps ? t : steps;
        }
        const double cosine = 0.5 * (1.0 + cos(3.14159265358979323846 * (t / steps)));
        return from * ((1.0 - s->alpha) * cosine + s->alpha);
    }
    }
    return lr;
}

float tt_lr_at(const tt_lr_schedule *s, float lr, uint64_t t)
{
    const double k = s->scale > 1 ? s->scale : 1.0;
    /* lr is the optimizer's rate, already scaled: the schedule runs on the base rate and is scaled as a whole */
    double r = s->kind == TT_SCHED_CONSTANT ? (double)lr : k * sched_rate(s, (double)lr / k, (double)t);
    if (s->ramp_steps && t < s->ramp_steps) r *= 1.0 / k + (1.0 - 1.0 / k) * ((double)t / (double)s->ramp_steps);
    return (float)r;
}

/* A number of the spec: the text up to the next ':' or ',' (or its end), in [lo, hi]. */
static int spec_num(const char **p, double lo, double hi, int integer, double *x)
{
    const char *q = *p;
    if (!(*q >= '0' && *q <= '9') && *q != '.') return -1; /* plain decimal: no sign, blank, inf or nan */
    char *end = NULL;
    errno = 0;
    const double v = strtod(q, &end);
    const char *hex = strpbrk(q, "xXpP");
    if (end == q || errno || !(v >= lo && v <= hi) || (hex && hex < end)) return -1;
    if (integer && v != floor(v)) return -1;
    if (!integer && v != 0 && !(fabsf((float)v) >= FLT_MIN)) return -1; /* 0 or subnormal as the float a rate is */
    if (*end && *end != ':' && *end != ',') return -1;
    *p = end;
    *x = v;
    return 0;
}

/* The largest step count a schedule takes (2^53: exact in a double). */
#define STEPS_MAX 9007199254740992.0

tt_status tt_lr_schedule_parse(const char *what, const char *spec, tt_lr_schedule *s, tt_error *err)
{
    memset(s, 0, sizeof *s);
    const char *forms = "constant, step:B1,...,Bn:V0,...,Vn, exponential:STEPS:RATE[:staircase] or "
                        "cosine:STEPS[:ALPHA[:TARGET:WARMUP_STEPS]]";
    int k = 0;
    size_t nlen = strcspn(spec, ":");
    while (k < TT_SCHED_KINDS && !(strlen(g_sched_names[k]) == nlen && strncmp(spec, g_sched_names[k], nlen) == 0))
        k++;
    if (k == TT_SCHED_KINDS) return tt_fail(err, TT_ERR_ARG, "%s: '%.64s' is not %s", what, spec, forms);
    s->kind = (tt_sched_kind)k;
    const char *p = spec + nlen;
    double x;
    const char *why = NULL;
    if (s->kind == TT_SCHED_CONSTANT) {
        if (*p) why = "constant takes no values";
    } else if (s->kind == TT_SCHED_STEP) {
        for (p++; !why;) { /* boundaries, then ':' */
            if (p[-1] != ':' && p[-1] != ',') why = "boundaries are step counts, comma-separated";
            else if (s->n_bounds == TT_SCHED_MAX_BOUNDS) why = "at most 16 boundaries";
            else if (spec_num(&p, 0, STEPS_MAX, 1, &x)) why = "a boundary is a step count (0 to 2^53)";
            else if (s->n_bounds && x <= (double)s->bounds[s->n_bounds - 1]) why = "boundaries must increase";
            else s->bounds[s->n_bounds++] = (uint64_t)x;
            if (why || *p == ':') break;
            if (!*p) why = "it needs ':' and the values after the boundaries";
            else p++;
        }
        for (size_t n = 0; !why; n++) { /* n_bounds + 1 values */
            p++;
            if (n > s->n_bounds) why = "it needs one value more than boundaries";
            else if (spec_num(&p, 0, 1e3, 0, &x) || x <= 0) why = "a value is a rate in (0, 1000]";
            else s->values[n] = (float)x;
            if (why) break;
            if (!*p) {
                if (n != s->n_bounds) why = "it needs one value more than boundaries";
                break;
            }
            if (*p != ',') why = "values are comma-separated";
        }
    } else {
        const int cosine = s->kind == TT_SCHED_COSINE;
        double v[4] = {0, 0, 0, 0};
        int n = 0;
        while (!why && *p == ':' && n < 4) {
            p++;
            if (!cosine && n == 2) {
                if (strcmp(p, "staircase") != 0) why = "its third field can only be staircase";
                s->staircase = 1;
                p += strlen(p);
                n++;
                break;
            }
            /* STEPS, RATE | STEPS, ALPHA, TARGET, WARMUP_STEPS */
            static const double elo[2] = {1, 0}, ehi[2] = {STEPS_MAX, 1e3};
            static const double clo[4] = {1, 0, 0, 0}, chi[4] = {STEPS_MAX, 1, 1e3, STEPS_MAX};
            if (spec_num(&p, cosine ? clo[n] : elo[n], cosine ? chi[n] : ehi[n], n == 0 || n == 3, &v[n])) {
                static const char *const ewhy[3] = {"STEPS is a step count (1 to 2^53)", "RATE is a number in (0, 1000]",
                                                    ""};
                static const char *const cwhy[4] = {"STEPS is a step count (1 to 2^53)", "ALPHA is a number in [0, 1]",
                                                    "TARGET is a rate in (0, 1000]",
                                                    "WARMUP_STEPS is a step count (0 to 2^53)"};
                why = cosine ? cwhy[n] : ewhy[n];
            }
            n++;
        }
        if (!why && *p) why = "too many fields";
        if (!why && (n < (cosine ? 1 : 2))) why = cosine ? "it needs STEPS" : "it needs STEPS and RATE";
        if (!why && !cosine && v[1] <= 0) why = "RATE is a number in (0, 1000]";
        if (!why && cosine && n == 3) why = "TARGET needs WARMUP_STEPS after it";
        if (!why && cosine && n == 4 && v[2] <= 0) why = "TARGET is a rate in (0, 1000]";
        s->decay_steps = (uint64_t)v[0];
        if (cosine) {
            s->alpha = (float)v[1];
            s->warmup_target = (float)v[2];
            s->warmup_steps = (uint64_t)v[3];
        } else {
            s->decay_rate = (float)v[1];
        }
    }
    if (why) return tt_fail(err, TT_ERR_ARG, "%s: '%.64s': %s (%s)", what, spec, why, forms);
    return TT_OK;
}

const char *tt_lr_schedule_words(const tt_lr_schedule *s, char *out, size_t len)
{
    char a[32], b[32];
    size_t n = (size_t)snprintf(out, len, "%s", (int)s->kind < TT_SCHED_KINDS ? g_sched_names[s->kind] : "?");
    switch (s->kind) {
    case TT_SCHED_STEP:
        for (size_t i = 0; i < s->n_bounds && n < len; i++)
            n += (size_t)snprintf(out + n, len - n, "%c%llu", i ? ',' : ':', (unsigned long long)s->bounds[i]);
        for (size_t i = 0; i <= s->n_bounds && n < len; i++)
            n += (size_t)snprintf(out + n, len - n, "%c%s", i ? ',' : ':', tt_float_str(s->values[i], a, sizeof a));
        break;
    case TT_SCHED_EXPONENTIAL:
        snprintf(out + n, len - n, ":%llu:%s%s", (unsigned long long)s->decay_steps,
                 tt_float_str(s->decay_rate, a, sizeof a), s->staircase ? ":staircase" : "");
        break;
    case TT_SCHED_COSINE:
        if (s->warmup_target > 0)
            snprintf(out + n, len - n, ":%llu:%s:%s:%llu", (unsigned long long)s->decay_steps,
                     tt_float_str(s->alpha, a, sizeof a), tt_float_str(s->warmup_target, b, sizeof b),
                     (unsigned long long)s->warmup_steps);
        else if (s->alpha > 0)
            snprintf(out + n, len - n, ":%llu:%s", (unsigned long long)s->decay_steps, tt_float_str(s->alpha, a, sizeof a));
        else
            snprintf(out + n, len - n, ":%llu", (unsigned long long)s->decay_steps);
        break;
    default: break;
    }
    return out;
}
