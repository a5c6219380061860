/* profile.c — the measured profile's JSON (tt_profile.h): one schema, as tables of fields, walked by the writer
 * (`probe --json FILE`) and by the reader (`probe --assume FILE`), so the two cannot drift apart.
 *
 * A field is a key, a type, where its value lives in tt_profile and the values it may take. The reader treats the
 * file as hostile: a regular file only, its size bounded before anything is read, the bytes checked as strict JSON
 * (tt_json.h) before json-c builds them, then every key of the probe's object looked up in the tables (an unknown
 * key is refused: version 1's set is fixed), every table key required, every value's type and range checked, and
 * what the ranges cannot say checked after (GEMM shapes listed twice, the shard's rows, the optimizer's name).
 * Not for: the measurements themselves (probe.c, probe_kernels.c) or what the cost model makes of the figures
 * (cost_model.c). */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tt_input.h"
#include "tt_json.h"
#include "tt_profile.h"

/* ---- the schema ---------------------------------------------------------------------------------------------- */

typedef enum { F_STR, F_SIZE, F_NUM, F_BOOL, F_OBJ, F_ARRAY } field_type;

enum {
    NULLABLE = 1, /* null allowed: not measured (NaN in the struct); an object: every number in it */
    GT = 2,       /* strictly above lo (a rate, a time that cannot be 0) */
};

typedef struct field field;
struct field {
    const char *key;
    field_type type;
    size_t off;               /* from the base of what the table describes */
    double lo, hi;            /* F_SIZE, F_NUM: the range; F_STR: hi is the buffer's size */
    unsigned flags;
    const char *const *names; /* F_STR: the only values allowed (NULL-terminated), or NULL: any */
    const field *sub;         /* F_OBJ: its fields (offsets from the same base + off); F_ARRAY: an item's */
    size_t item, count_off, max; /* F_ARRAY: an item's size, where the count goes (from the base), at most */
};

#define END {NULL, F_STR, 0, 0, 0, 0, NULL, NULL, 0, 0, 0}
#define STR(k, member, names) {k, F_STR, offsetof(tt_profile, member), 0, sizeof(((tt_profile *)0)->member), 0, names, \
                               NULL, 0, 0, 0}
#define SIZE(k, type, member, lo, hi) {k, F_SIZE, offsetof(type, member), lo, hi, 0, NULL, NULL, 0, 0, 0}
#define NUM(k, type, member, lo, hi, flags) {k, F_NUM, offsetof(type, member), lo, hi, flags, NULL, NULL, 0, 0, 0}
#define OBJ(k, off, sub, flags) {k, F_OBJ, off, 0, 0, flags, NULL, sub, 0, 0, 0}

#define MAX_S 1e5     /* no figure of one step is a day long */
#define MAX_GBS 1e6   /* GB/s: HBM is 10^4 */
#define MAX_COUNT 1e9 /* batches, rows, parameters per element of a step */

/* The placements' and updates' names (tt_reduce_name, tt_update_name: test_assume checks they agree), spelt here so
 * that the reader stands alone (the fuzz target links it without the trainer). */
static const char *const REDUCE_NAMES[] = {"cpu", "device", "allreduce", "nccl", NULL};
static const char *const UPDATE_NAMES[] = {"host", "device", "replicated", NULL};
_Static_assert(TT_REDUCE_COUNT == 4 && TT_UPDATE_COUNT == 3, "the name lists hold every placement and update");

static const field LINKS[] = {
    NUM("h2d_pinned_gbs", tt_profile, h2d_pinned_gbs, 0, MAX_GBS, GT),
    NUM("h2d_pageable_gbs", tt_profile, h2d_pageable_gbs, 0, MAX_GBS, GT),
    NUM("d2h_pinned_gbs", tt_profile, d2h_pinned_gbs, 0, MAX_GBS, GT),
    NUM("d2h_pageable_gbs", tt_profile, d2h_pageable_gbs, 0, MAX_GBS, GT),
    NUM("d2d_gbs", tt_profile, d2d_gbs, 0, MAX_GBS, GT),
    NUM("peer_gbs", tt_profile, peer_gbs, 0, MAX_GBS, GT | NULLABLE),
    NUM("copy_s", tt_profile, copy_s, 0, 1, GT),
    END,
};

static const field HOST[] = {
    NUM("memcpy_gbs", tt_profile, memcpy_gbs, 0, MAX_GBS, GT),
    NUM("sum_gbs", tt_profile, sum_gbs, 0, MAX_GBS, GT),
    NUM("barrier_s", tt_profile, barrier_s, 0, 1, 0),
    NUM("wake_s", tt_profile, wake_s, 0, 1, 0),
    END,
};

static const field LAUNCH[] = {
    NUM("kernel_s", tt_profile, launch_s, 0, 1, GT),
    NUM("graph_node_s", tt_profile, graph_node_s, 0, 1, GT | NULLABLE),
    SIZE("chain", tt_profile, chain, 1, 1e6),
    END,
};

static const field GEMM[] = {
    SIZE("trans_a", tt_profile_gemm, trans_a, 0, 1),
    SIZE("trans_b", tt_profile_gemm, trans_b, 0, 1),
    SIZE("m", tt_profile_gemm, m, 1, TT_PROFILE_MAX_DIM),
    SIZE("n", tt_profile_gemm, n, 1, TT_PROFILE_MAX_DIM),
    SIZE("k", tt_profile_gemm, k, 1, TT_PROFILE_MAX_DIM),
    SIZE("calls_per_step", tt_profile_gemm, calls, 1, 1e6),
    NUM("seconds", tt_profile_gemm, seconds, 0, MAX_S, GT),
    NUM("gflops", tt_profile_gemm, gflops, 0, 1e9, GT),
    END,
};

static const field KERNELS[] = {
    SIZE("count", tt_profile, kernels, 0, 1e6),
    NUM("seconds", tt_profile, kernels_s, 0, MAX_S, NULLABLE),
    END,
};

static const field REDUCE_S[] = {
    NUM("cpu", tt_profile, reduce_s[TT_REDUCE_CPU], 0, MAX_S, NULLABLE),
    NUM("device", tt_profile, reduce_s[TT_REDUCE_DEVICE], 0, MAX_S, NULLABLE),
    NUM("allreduce", tt_profile, reduce_s[TT_REDUCE_ALLREDUCE], 0, MAX_S, NULLABLE),
    NUM("nccl", tt_profile, reduce_s[TT_REDUCE_NCCL], 0, MAX_S, NULLABLE),
    END,
};

static const field PHASES[] = {
    NUM("pull_s", tt_profile, pull_s, 0, MAX_S, 0),
    NUM("data_s", tt_profile, data_s, 0, MAX_S, 0),
    NUM("compute_s", tt_profile, compute_s, 0, MAX_S, 0),
    NUM("push_grad_s", tt_profile, push_grad_s, 0, MAX_S, 0),
    NUM("push_stats_s", tt_profile, push_stats_s, 0, MAX_S, 0),
    NUM("straggle_s", tt_profile, straggle_s, 0, MAX_S, 0),
    NUM("update_s", tt_profile, update_s, 0, MAX_S, 0),
    OBJ("reduce_s", 0, REDUCE_S, 0),
    END,
};

/* A step's split, as probe prints it (tt_step_times; the parts add up to total_s): measured, or predicted (null as a
 * whole where the phase model has no prediction). */
#define TIME(k, member, flags) NUM(k, tt_step_times, member, 0, MAX_S, flags)
#define TIMES_OF(name, flags) \
    static const field name[] = { \
        TIME("launch_s", launch, flags), TIME("pull_s", pull, flags), TIME("data_s", data, flags), \
        TIME("compute_s", compute, flags), TIME("push_s", push, flags), TIME("wait_s", wait, flags), \
        TIME("reduce_s", reduce, flags), TIME("update_s", update, flags), TIME("total_s", total, flags), END, \
    }
TIMES_OF(TIMES, 0);
TIMES_OF(PREDICTED, NULLABLE);

static const field STEP[] = {
    {"reduce", F_STR, offsetof(tt_profile_step, reduce), 0, sizeof(((tt_profile_step *)0)->reduce), 0, REDUCE_NAMES,
     NULL, 0, 0, 0},
    {"update", F_STR, offsetof(tt_profile_step, update), 0, sizeof(((tt_profile_step *)0)->update), 0, UPDATE_NAMES,
     NULL, 0, 0, 0},
    {"graphs", F_BOOL, offsetof(tt_profile_step, graphs), 0, 1, 0, NULL, NULL, 0, 0, 0},
    {"overlap", F_BOOL, offsetof(tt_profile_step, overlap), 0, 1, 0, NULL, NULL, 0, 0, 0},
    OBJ("measured", offsetof(tt_profile_step, measured), TIMES, 0),
    OBJ("predicted", offsetof(tt_profile_step, predicted), PREDICTED, NULLABLE),
    END,
};

/* The probe's object. "schema" and "version" come first and are checked before anything else (a file of another
 * kind or version is named as such, not by its first odd field). */
static const field TOP[] = {
    STR("towertrain", towertrain, NULL),
    STR("backend", backend, NULL),
    STR("device", device, NULL),
    STR("blas", blas, NULL),
    STR("model", model, NULL),
    STR("optimizer", optimizer, NULL),
    SIZE("params", tt_profile, params, 1, MAX_COUNT),
    NUM("train_flops_per_sample", tt_profile, train_flops, 0, 1e15, GT),
    SIZE("towers", tt_profile, towers, 1, 4096),
    SIZE("batch", tt_profile, batch, 1, MAX_COUNT),
    SIZE("rows", tt_profile, rows, 1, MAX_COUNT),
    SIZE("reps", tt_profile, reps, 1, 1024),
    SIZE("host_threads", tt_profile, host_threads, 1, 4096),
    OBJ("links", 0, LINKS, 0),
    OBJ("host", 0, HOST, 0),
    OBJ("launch", 0, LAUNCH, 0),
    {"gemms", F_ARRAY, offsetof(tt_profile, gemms), 0, 0, 0, NULL, GEMM, sizeof(tt_profile_gemm),
     offsetof(tt_profile, n_gemms), TT_PROFILE_MAX_GEMMS},
    NUM("gemm_step_s", tt_profile, gemm_step_s, 0, MAX_S, GT),
    OBJ("kernels", 0, KERNELS, 0),
    OBJ("phases", 0, PHASES, 0),
    {"steps", F_ARRAY, offsetof(tt_profile, steps), 0, 0, 0, NULL, STEP, sizeof(tt_profile_step),
     offsetof(tt_profile, n_steps), TT_PROFILE_MAX_STEPS},
    END,
};

/* ---- writing --------------------------------------------------------------------------------------------------- */

static double *num_at(const void *base, const field *f) { return (double *)((char *)base + f->off); }

/* Every number of an object (and of its objects) not measured: it is written null. */
static int all_nan(const void *base, const field *t)
{
    for (const field *f = t; f->key; f++) {
        if (f->type == F_NUM && !isnan(*num_at(base, f))) return 0;
        if (f->type == F_OBJ && !all_nan((const char *)base + f->off, f->sub)) return 0;
    }
    return 1;
}

static void write_object(tt_out *o, const void *base, const field *t, const char *indent);

static void write_value(tt_out *o, const void *base, const field *f, const char *indent)
{
    const char *at = (const char *)base + f->off;
    switch (f->type) {
    case F_STR: tt_out_json_str(o, f->key, at, 0); return;
    case F_SIZE: tt_out_printf(o, "\"%s\":%zu", f->key, *(const size_t *)(const void *)at); return;
    case F_BOOL: tt_out_printf(o, "\"%s\":%s", f->key, *(const int *)(const void *)at ? "true" : "false"); return;
    case F_NUM: {
        const double v = *(const double *)(const void *)at;
        /* %.17g: strtod gives back the same double, so a profile reads back with the very figures written */
        if (isfinite(v)) tt_out_printf(o, "\"%s\":%.17g", f->key, v);
        else tt_out_printf(o, "\"%s\":null", f->key);
        return;
    }
    case F_OBJ:
        if ((f->flags & NULLABLE) && all_nan(at, f->sub)) {
            tt_out_printf(o, "\"%s\":null", f->key);
            return;
        }
        tt_out_printf(o, "\"%s\":", f->key);
        write_object(o, at, f->sub, NULL);
        return;
    case F_ARRAY: {
        const size_t n = *(const size_t *)(const void *)((const char *)base + f->count_off);
        tt_out_printf(o, "\"%s\":[", f->key);
        for (size_t i = 0; i < n; i++) {
            tt_out_printf(o, "%s\n%s  ", i ? "," : "", indent ? indent : "");
            write_object(o, at + i * f->item, f->sub, NULL);
        }
        tt_out_printf(o, "%s]", n ? "\n  " : "");
        return;
    }
    }
}

/* An object; indent non-NULL: one key a line (the top), else all on one line. */
static void write_object(tt_out *o, const void *base, const field *t, const char *indent)
{
    tt_out_printf(o, "{");
    for (const field *f = t; f->key; f++) {
        if (indent) tt_out_printf(o, "\n%s", indent);
        write_value(o, base, f, indent);
        if (f[1].key) tt_out_printf(o, indent ? "," : ", ");
    }
    tt_out_printf(o, indent ? "\n}" : "}");
}

void tt_profile_write(tt_out *o, const tt_profile *p)
{
    tt_out_printf(o, "{\"schema\":\"%s\", \"version\":%d,\n  ", TT_PROFILE_SCHEMA, TT_PROFILE_VERSION);
    /* the rest as the table says, one top-level key a line */
    for (const field *f = TOP; f->key; f++) {
        write_value(o, p, f, "  ");
        tt_out_printf(o, f[1].key ? ",\n  " : "\n}\n");
    }
}

/* ---- reading --------------------------------------------------------------------------------------------------- */

typedef struct reader {
    const char *name; /* the file, for messages */
    tt_error *err;
} reader;

/* "NAME: PATH: WHAT" (TT_ERR_FORMAT: the CLI exits 1, a file problem). */
static tt_status bad(const reader *r, const char *path, const char *what)
{
    return tt_fail(r->err, TT_ERR_FORMAT, "%s: %s: %s", r->name, path, what);
}

static const char *json_kind(json_object *v)
{
    switch (json_object_get_type(v)) {
    case json_type_null: return "null";
    case json_type_boolean: return "a boolean";
    case json_type_double: return "a number with a fraction or exponent";
    case json_type_int: return "an integer";
    case json_type_object: return "an object";
    case json_type_array: return "an array";
    case json_type_string: return "a string";
    }
    return "?";
}

static tt_status read_object(const reader *r, json_object *obj, void *base, const field *t, const char *path);

/* One value v of field f into base (path names it in messages). */
/* The readers of read_value's types: v is the value at `path`, `at` the field's place in the struct. */
static tt_status read_str(const reader *r, json_object *v, char *at, const field *f, const char *path)
{
    char msg[256];
    if (!json_object_is_type(v, json_type_string)) {
        snprintf(msg, sizeof msg, "%s, not a string", json_kind(v));
        return bad(r, path, msg);
    }
    const char *s = json_object_get_string(v);
    const size_t len = (size_t)json_object_get_string_len(v);
    if (len >= (size_t)f->hi || memchr(s, '\0', len)) {
        snprintf(msg, sizeof msg, "a string of %zu bytes (at most %zu, no NUL)", len, (size_t)f->hi - 1);
        return bad(r, path, msg);
    }
    if (f->names) {
        size_t i = 0;
        while (f->names[i] && strcmp(f->names[i], s) != 0) i++;
        if (!f->names[i]) {
            char q[80];
            tt_escape(s, q, sizeof q);
            snprintf(msg, sizeof msg, "'%s' is not one of its names", q);
            return bad(r, path, msg);
        }
    }
    memcpy(at, s, len + 1);
    return TT_OK;
}

static tt_status read_size(const reader *r, json_object *v, char *at, const field *f, const char *path)
{
    char msg[256];
    if (!json_object_is_type(v, json_type_int)) {
        snprintf(msg, sizeof msg, "%s, not an integer", json_kind(v));
        return bad(r, path, msg);
    }
    /* json-c keeps integers beyond int64 as uint64; get_int64 clamps them to INT64_MAX, above every range */
    const int64_t x = json_object_get_int64(v);
    if (x < 0 || (double)x < f->lo || (double)x > f->hi) {
        snprintf(msg, sizeof msg, "%s is outside %.0f..%.0f", json_object_to_json_string(v), f->lo, f->hi);
        return bad(r, path, msg);
    }
    *(size_t *)(void *)at = (size_t)x;
    return TT_OK;
}

static tt_status read_num(const reader *r, json_object *v, char *at, const field *f, const char *path)
{
    char msg[256];
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int)) {
        snprintf(msg, sizeof msg, "%s, not a number%s", json_kind(v), f->flags & NULLABLE ? " or null" : "");
        return bad(r, path, msg);
    }
    const double x = json_object_get_double(v);
    const int low = (f->flags & GT) ? !(x > f->lo) : !(x >= f->lo);
    if (!isfinite(x) || low || x > f->hi) {
        const char *why = !isfinite(x) ? "not finite" : !low ? "implausibly large" : (f->flags & GT) ? "not > 0"
                                                                                                      : "negative";
        snprintf(msg, sizeof msg, "%.17g is %s", x, why);
        if (isfinite(x) && !low) snprintf(msg + strlen(msg), sizeof msg - strlen(msg), " (at most %g)", f->hi);
        return bad(r, path, msg);
    }
    *(double *)(void *)at = x;
    return TT_OK;
}

/* An array of objects into f->max items of f->item bytes from `at`; its length into base's count field. */
static tt_status read_array(const reader *r, json_object *v, void *base, char *at, const field *f, const char *path)
{
    char msg[256];
    if (!json_object_is_type(v, json_type_array)) {
        snprintf(msg, sizeof msg, "%s, not an array", json_kind(v));
        return bad(r, path, msg);
    }
    const size_t n = json_object_array_length(v);
    if (n > f->max) {
        snprintf(msg, sizeof msg, "%zu items, more than %zu", n, f->max);
        return bad(r, path, msg);
    }
    for (size_t i = 0; i < n; i++) {
        char sub[160];
        snprintf(sub, sizeof sub, "%.120s[%zu]", path, i);
        json_object *item = json_object_array_get_idx(v, i);
        if (!json_object_is_type(item, json_type_object)) {
            snprintf(msg, sizeof msg, "%s, not an object", json_kind(item));
            return bad(r, sub, msg);
        }
        tt_status s = read_object(r, item, at + i * f->item, f->sub, sub);
        if (s) return s;
    }
    *(size_t *)(void *)((char *)base + f->count_off) = n;
    return TT_OK;
}

static tt_status read_value(const reader *r, json_object *v, void *base, const field *f, const char *path)
{
    char msg[256];
    char *at = (char *)base + f->off;
    const int is_null = json_object_is_type(v, json_type_null);
    if (is_null && (f->flags & NULLABLE) && (f->type == F_NUM || f->type == F_OBJ)) {
        if (f->type == F_NUM) *(double *)(void *)at = NAN;
        else
            for (const field *s = f->sub; s->key; s++)
                if (s->type == F_NUM) *num_at(at, s) = NAN;
        return TT_OK;
    }
    switch (f->type) {
    case F_STR: return read_str(r, v, at, f, path);
    case F_BOOL:
        if (!json_object_is_type(v, json_type_boolean)) {
            snprintf(msg, sizeof msg, "%s, not true or false", json_kind(v));
            return bad(r, path, msg);
        }
        *(int *)(void *)at = json_object_get_boolean(v) ? 1 : 0;
        return TT_OK;
    case F_SIZE: return read_size(r, v, at, f, path);
    case F_NUM: return read_num(r, v, at, f, path);
    case F_OBJ:
        if (!json_object_is_type(v, json_type_object)) {
            snprintf(msg, sizeof msg, "%s, not an object%s", json_kind(v), f->flags & NULLABLE ? " or null" : "");
            return bad(r, path, msg);
        }
        return read_object(r, v, at, f->sub, path);
    case F_ARRAY: return read_array(r, v, base, at, f, path);
    }
    return bad(r, path, "a field of an unknown type");
}

static void sub_path(char *out, size_t len, const char *path, const char *key)
{
    char q[64];
    tt_escape(key, q, sizeof q);
    snprintf(out, len, "%.90s%s%s", path, *path ? "." : "", q);
}

/* Every key of obj must be in the table t (skip: keys checked by the caller), and every key of t in obj. */
static tt_status read_object_skip(const reader *r, json_object *obj, void *base, const field *t, const char *path,
                                  const char *const *skip)
{
    char sub[160];
    for (const field *f = t; f->key; f++) {
        sub_path(sub, sizeof sub, path, f->key);
        json_object *v;
        if (!json_object_object_get_ex(obj, f->key, &v)) return bad(r, sub, "missing");
        tt_status s = read_value(r, v, base, f, sub);
        if (s) return s;
    }
    json_object_object_foreach(obj, key, val) {
        (void)val;
        const field *f = t;
        while (f->key && strcmp(f->key, key) != 0) f++;
        int skipped = 0;
        for (const char *const *k = skip; k && *k; k++) skipped |= strcmp(*k, key) == 0;
        if (!f->key && !skipped) {
            sub_path(sub, sizeof sub, path, key);
            return bad(r, sub, "an unknown key (version 1 of the profile has none)");
        }
    }
    return TT_OK;
}

static tt_status read_object(const reader *r, json_object *obj, void *base, const field *t, const char *path)
{
    return read_object_skip(r, obj, base, t, path, NULL);
}

/* What the ranges cannot say. */
static tt_status check_profile(const reader *r, const tt_profile *p)
{
    char msg[200], path[64];
    tt_optim_kind kind;
    if (tt_optim_parse_kind(p->optimizer, &kind) != 0) return bad(r, "optimizer", "not an optimizer towertrain has");
    if (p->rows != (p->batch + p->towers - 1) / p->towers) {
        snprintf(msg, sizeof msg, "%zu, but a batch of %zu over %zu towers has shards of up to %zu", p->rows, p->batch,
                 p->towers, (p->batch + p->towers - 1) / p->towers);
        return bad(r, "rows", msg);
    }
    for (size_t i = 0; i < p->n_gemms; i++) {
        const tt_profile_gemm *g = &p->gemms[i];
        snprintf(path, sizeof path, "gemms[%zu]", i);
        if ((double)g->m * (double)g->n * (double)g->k > 1e15) {
            snprintf(msg, sizeof msg, "m x n x k = %zu x %zu x %zu is beyond any step's GEMM (10^15)", g->m, g->n,
                     g->k);
            return bad(r, path, msg);
        }
        for (size_t j = 0; j < i; j++) {
            const tt_profile_gemm *h = &p->gemms[j];
            if (h->trans_a == g->trans_a && h->trans_b == g->trans_b && h->m == g->m && h->n == g->n && h->k == g->k) {
                snprintf(msg, sizeof msg, "the shape of gemms[%zu] again (a shape is listed once, with its calls)", j);
                return bad(r, path, msg);
            }
        }
    }
    return TT_OK;
}

tt_status tt_profile_parse(const char *text, size_t n, const char *name, tt_profile *p, tt_error *err)
{
    memset(p, 0, sizeof *p);
    const reader r = {name, err};
    char why[200];
    tt_json_scan sc = {0};
    /* depth: a report.json's "probe" one level down, then steps[i].measured: 5; a little room for the report */
    json_object *top = tt_json_parse_object(text, n, 16, 1000000, &sc, why, sizeof why);
    if (!top) return tt_fail(err, TT_ERR_FORMAT, "%s: the profile %s", name, why);
    json_object *obj = top, *v = NULL;
    tt_status s = TT_OK;
    char where[96] = "";
    if (!json_object_object_get_ex(top, "schema", NULL) && json_object_object_get_ex(top, "probe", &v)) {
        obj = v; /* a report (tools/gpu-check's report.json) holding the probe's object; its other keys are its own */
        snprintf(where, sizeof where, "probe");
        if (!json_object_is_type(obj, json_type_object))
            s = bad(&r, "probe", "not an object (a report's \"probe\" holds towertrain probe --json's object)");
    }
    if (!s && *where && !json_object_object_get_ex(obj, "schema", NULL)) {
        /* a report of several runs keeps one profile per model ("probe": {"mlp": {...}, "cnn": {...}}): one is
         * read; of several, none is chosen here */
        json_object *one = NULL;
        char names[64] = "";
        size_t found = 0, len = 0;
        json_object_object_foreach(obj, key, val) {
            if (!json_object_is_type(val, json_type_object) || !json_object_object_get_ex(val, "schema", NULL))
                continue;
            one = val;
            char q[32];
            tt_escape(key, q, sizeof q);
            if (found++ == 0) snprintf(where, sizeof where, "probe.%s", q);
            if (len < sizeof names)
                len += (size_t)snprintf(names + len, sizeof names - len, "%s%s", len ? ", " : "", q);
        }
        if (found == 1) obj = one;
        else if (found > 1)
            s = tt_fail(err, TT_ERR_FORMAT, "%s: probe: holds %zu profiles (%s): give the one to use as a file of "
                        "its own (probe --json's)", name, found, names);
    }
    char path[128];
    if (!s && (!json_object_object_get_ex(obj, "schema", &v) || !json_object_is_type(v, json_type_string) ||
               strcmp(json_object_get_string(v), TT_PROFILE_SCHEMA) != 0))
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %s is not a towertrain probe profile (no \"schema\":\"%s\"; write "
                    "one with towertrain probe --json FILE, or give a report.json holding one under \"probe\")",
                    name, *where ? "its \"probe\"" : "the object", TT_PROFILE_SCHEMA);
    snprintf(path, sizeof path, "%s%sversion", where, *where ? "." : "");
    if (!s && (!json_object_object_get_ex(obj, "version", &v) || !json_object_is_type(v, json_type_int) ||
               json_object_get_int64(v) != TT_PROFILE_VERSION))
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %s: %s, this build reads version %d", name, path,
                    v && json_object_is_type(v, json_type_int) ? json_object_to_json_string(v)
                                                               : "missing or not an integer",
                    TT_PROFILE_VERSION);
    static const char *const checked[] = {"schema", "version", NULL};
    if (!s) s = read_object_skip(&r, obj, p, TOP, where, checked);
    if (!s) s = check_profile(&r, p);
    json_object_put(top);
    return s;
}

tt_status tt_profile_read(const char *path, tt_profile *p, tt_error *err)
{
    char *text;
    size_t len;
    memset(p, 0, sizeof *p);
    tt_status s = tt_input_read_text(path, "profile", TT_PROFILE_MAX_BYTES, &text, &len, err);
    if (s) return s;
    s = tt_profile_parse(text, len, path, p, err);
    tt_free(text);
    return s;
}
