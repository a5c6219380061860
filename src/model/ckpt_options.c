/* ckpt_options.c — the training options a checkpoint carries (the "options" metadata value: a JSON object in a
 * string) and the model they describe. The options' keys and types (g_opt_keys), checked when the file is read — a
 * key the format does not list, or a value not of its key's type or range, is refused —; tt_checkpoint_option, the one
 * way a reader takes a value; the "layers" list a run writes (tt_checkpoint_layer_desc, tt_checkpoint_layers_json);
 * and the check that a checkpoint's model is this run's (tt_checkpoint_same_model: the input's shape, the layers, the
 * built-in's name).
 *
 * Not for: which options a run writes or requires (train.c, eval.c), the other metadata keys (ckpt_metadata.c). */
#include <ctype.h>
#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckpt.h"

/* The options' keys (train.c writes them all) and their types: any other key, or another type, is refused on reading.
 * Readers ask tt_checkpoint_option for each; which are required is theirs to say (resume: the data and the layers;
 * eval: the input, classes and vocabulary). */
static const struct {
    const char *key;
    tt_ckpt_type type;
    uint64_t lo, hi; /* UINT, UINTS: the values a run writes (0, 0: any the type takes) */
} g_opt_keys[] = {
    {"input", TT_CKPT_UINTS, 1, TT_MAX_SAMPLE_ELEMS}, {"classes", TT_CKPT_UINT, 1, TT_MAX_CLASSES},
    {"vocab", TT_CKPT_UINT, 0, TT_MAX_VOCAB}, {"model_text", TT_CKPT_STRING, 0, 0}, {"layers", TT_CKPT_STRINGS, 0, 0},
    {"train_samples", TT_CKPT_UINT, 0, 0}, {"val_samples", TT_CKPT_UINT, 0, 0}, {"train_crc32", TT_CKPT_STRING, 0, 0},
    {"epochs", TT_CKPT_UINT, 1, CK_EPOCH_MAX}, {"reduce", TT_CKPT_STRING, 0, 0}, {"lr_scaling", TT_CKPT_STRING, 0, 0},
    {"base_lr", TT_CKPT_NUMBER, 0, 0}, {"same", TT_CKPT_STRINGS, 0, 0}, {"precision", TT_CKPT_STRING, 0, 0},
    {"loss_scale", TT_CKPT_STRING, 0, 0}, {"early_stopping", TT_CKPT_STRING, 0, 0},
    {"reduce_lr_on_plateau", TT_CKPT_STRING, 0, 0},
};
enum { CK_N_OPT_KEYS = (int)(sizeof g_opt_keys / sizeof g_opt_keys[0]) };

/* ---- reading ---------------------------------------------------------------------------------------------------- */

/* The options' "same" list as a run writes it (tt_run_config.resume_same): each entry "--name value" — "--", a name of
 * lower-case letters, digits and '-', one space, a value of printable ASCII without spaces —, no name twice. */
static tt_status ck_same_list(const ck_parse *p, const tt_ckpt_value *v)
{
    for (size_t i = 0; i < v->n; i++) {
        const char *e = v->ss[i];
        size_t n = 2;
        while (e[n] && (islower((unsigned char)e[n]) || isdigit((unsigned char)e[n]) || e[n] == '-')) n++;
        int ok = strncmp(e, "--", 2) == 0 && n > 2 && e[n] == ' ' && e[n + 1];
        for (size_t j = n + 1; ok && e[j]; j++) ok = e[j] > ' ' && e[j] < 0x7f;
        for (size_t k = 0; ok && k < i; k++)
            ok = !(strncmp(v->ss[k], e, n + 1) == 0);
        if (!ok) {
            char q[CK_QUOTE];
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: options: key 'same' holds '%s', not '--option value' as a run "
                           "writes it (each option once)", p->what, ck_quote(e, q, sizeof q));
        }
    }
    return TT_OK;
}

/* The optional texts: the model's description, and the options — a JSON object in a string, parsed as strictly as
 * the header, every key one of g_opt_keys and of its type (tt_checkpoint_option, the one way they are read). */
tt_status md_texts(const ck_parse *p, tt_checkpoint *ck)
{
    const char *desc, *opts;
    tt_status s = md_get(p, "model", 1, &desc);
    if (!s) s = md_get(p, "options", 1, &opts);
    if (s) return s;
    if (opts) {
        char why[200];
        tt_json_scan sc = {0};
        if (!(ck->opts = tt_json_parse_object(opts, strlen(opts), CK_JSON_DEPTH, CK_MAX_VALUES, &sc, why, sizeof why)))
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: options %s", p->what, why);

        json_object_object_foreach(ck->opts, key, val) {
            (void)val;
            int k = 0;
            while (k < CK_N_OPT_KEYS && strcmp(key, g_opt_keys[k].key) != 0) k++;
            char q[CK_QUOTE];
            if (k == CK_N_OPT_KEYS)
                return tt_fail(p->err, TT_ERR_FORMAT, "%s: options: unknown key '%s'", p->what,
                               ck_quote(key, q, sizeof q));
            tt_ckpt_value v;
            if ((s = tt_checkpoint_option(ck, p->what, key, g_opt_keys[k].type, 1, &v, p->err))) return s;
            if (strcmp(key, "same") == 0 && (s = ck_same_list(p, &v))) return s;
            const uint64_t lo = g_opt_keys[k].lo, hi = g_opt_keys[k].hi;
            const size_t n = g_opt_keys[k].type == TT_CKPT_UINT ? 1 : g_opt_keys[k].type == TT_CKPT_UINTS ? v.n : 0;
            for (size_t i = 0; hi && i < n; i++) {
                const uint64_t u = g_opt_keys[k].type == TT_CKPT_UINT ? v.u : v.us[i];
                if (u < lo || u > hi)
                    return tt_fail(p->err, TT_ERR_FORMAT, "%s: options: key '%s' holds %llu, not in %llu..%llu (what "
                                   "a run writes)", p->what, key, (unsigned long long)u, (unsigned long long)lo,
                                   (unsigned long long)hi);
            }
        }
    }
    if ((desc && !(ck->model_desc = (char *)tt_malloc(strlen(desc) + 1))) ||
        (opts && !(ck->options = (char *)tt_malloc(strlen(opts) + 1))))
        return tt_fail(p->err, TT_ERR_NOMEM, "%s: out of memory for the metadata", p->what);
    if (desc) memcpy(ck->model_desc, desc, strlen(desc) + 1);
    if (opts) memcpy(ck->options, opts, strlen(opts) + 1);
    return TT_OK;
}

/* ---- the options, typed ---------------------------------------------------------------------------------------- */

static const char *ck_type_name(tt_ckpt_type t)
{
    switch (t) {
    case TT_CKPT_UINT: return "an unsigned integer";
    case TT_CKPT_NUMBER: return "a finite number";
    case TT_CKPT_STRING: return "a string";
    case TT_CKPT_UINTS: return "an array of unsigned integers";
    default: return "an array of strings";
    }
}

static const char *ck_json_type_name(json_object *v)
{
    switch (json_object_get_type(v)) {
    case json_type_null: return "null";
    case json_type_boolean: return "a boolean";
    case json_type_double: return isfinite(json_object_get_double(v)) ? "a fraction" : "a number beyond a double";
    case json_type_int: return "an integer";
    case json_type_string: return "a string";
    case json_type_array: return "an array";
    default: return "an object";
    }
}

/* One value of type t (an array's element: never an array) into v's slot i; 0 if it is not of that type. */
static int ck_opt_one(json_object *x, tt_ckpt_type t, tt_ckpt_value *v, size_t i)
{
    if (t == TT_CKPT_UINT || t == TT_CKPT_UINTS) {
        uint64_t u;
        if (!ck_uint(x, (uint64_t)INT64_MAX - 1, &u)) return 0;
        if (t == TT_CKPT_UINT) v->u = u;
        else v->us[i] = u;
        return 1;
    }
    if (t == TT_CKPT_NUMBER) {
        if (!json_object_is_type(x, json_type_double) && !json_object_is_type(x, json_type_int)) return 0;
        v->d = json_object_get_double(x);
        return isfinite(v->d);
    }
    if (!json_object_is_type(x, json_type_string) || strlen(json_object_get_string(x)) !=
                                                         (size_t)json_object_get_string_len(x))
        return 0;
    if (t == TT_CKPT_STRING) v->s = json_object_get_string(x);
    else v->ss[i] = json_object_get_string(x);
    return 1;
}

tt_status tt_checkpoint_option(const tt_checkpoint *ck, const char *what, const char *key, tt_ckpt_type type,
                               int required, tt_ckpt_value *v, tt_error *err)
{
    memset(v, 0, sizeof *v);
    json_object *x;
    if (!ck->opts || !json_object_object_get_ex(ck->opts, key, &x)) {
        if (!required) return TT_OK;
        return tt_fail(err, TT_ERR_FORMAT, "%s: %s no key '%s' (towertrain train writes it)", what,
                       ck->opts ? "its options have" : "it has no options, so", key);
    }
    int ok;
    if (type == TT_CKPT_UINTS || type == TT_CKPT_STRINGS) {
        ok = json_object_is_type(x, json_type_array) && json_object_array_length(x) <= TT_CKPT_MAX_ITEMS;
        v->n = ok ? json_object_array_length(x) : 0;
        for (size_t i = 0; ok && i < v->n; i++) ok = ck_opt_one(json_object_array_get_idx(x, i), type, v, i);
    } else {
        ok = ck_opt_one(x, type, v, 0);
    }
    if (!ok) {
        const int arr = type == TT_CKPT_UINTS || type == TT_CKPT_STRINGS;
        memset(v, 0, sizeof *v);
        return tt_fail(err, TT_ERR_FORMAT, "%s: options: key '%s' is %s, not %s%s", what, key, ck_json_type_name(x),
                       ck_type_name(type), arr ? " (at most 64)" : "");
    }
    v->found = 1;
    return TT_OK;
}

/* ---- the model the options describe ----------------------------------------------------------------------------- */

void tt_checkpoint_layer_desc(const tt_layer *l, char *out, size_t len)
{
    size_t k = (size_t)snprintf(out, len, "%s", l->kind->name);
    for (const tt_layer_key *key = l->kind->keys; key->name && k < len; key++) {
        const char *f = (const char *)l + key->offset;
        const size_t *z = (const size_t *)(const void *)f;
        const int b = *(const int *)(const void *)f;
        if ((key->type == TT_KEY_SIZE || key->type == TT_KEY_PAIR) && z[0] == 0 && key->def &&
            strcmp(key->def, "pool") == 0) { /* "as the pool size": kept as 0, as the model file says it */
            k += (size_t)snprintf(out + k, len - k, " %s=pool", key->name);
            continue;
        }
        switch (key->type) {
        case TT_KEY_SIZE: k += (size_t)snprintf(out + k, len - k, " %s=%zu", key->name, z[0]); break;
        case TT_KEY_PAIR: k += (size_t)snprintf(out + k, len - k, " %s=%zu,%zu", key->name, z[0], z[1]); break;
        case TT_KEY_FLOAT: { /* the shortest digits that give the same float back: "0.1", never "0.100000001" */
            const float x = *(const float *)(const void *)f;
            char num[32];
            k += (size_t)snprintf(out + k, len - k, " %s=%s", key->name, tt_float_str(x, num, sizeof num));
            break;
        }
        case TT_KEY_PADDING: k += (size_t)snprintf(out + k, len - k, " %s=%s", key->name, b ? "same" : "valid"); break;
        case TT_KEY_BOOL: k += (size_t)snprintf(out + k, len - k, " %s=%s", key->name, b ? "true" : "false"); break;
        case TT_KEY_ACTIVATION: break; /* a layer of its own, described as such */
        }
    }
}

json_object *tt_checkpoint_layers_json(const tt_model *m)
{
    json_object *a = json_object_new_array();
    char d[256];
    for (size_t i = 0; a && i < m->n_layers; i++) {
        tt_checkpoint_layer_desc(&m->layers[i], d, sizeof d);
        if (ck_push(a, json_object_new_string(d))) {
            json_object_put(a);
            return NULL;
        }
    }
    return a;
}

tt_status tt_checkpoint_same_model(const tt_checkpoint *ck, const char *what, const tt_model *m, const char *builtin,
                                   tt_error *err)
{
    tt_ckpt_value v, in;
    tt_status s = tt_checkpoint_option(ck, what, "layers", TT_CKPT_STRINGS, 1, &v, err);
    if (!s) s = tt_checkpoint_option(ck, what, "input", TT_CKPT_UINTS, 1, &in, err);
    if (s) return s;
    /* the input's geometry too: the same bytes read as 14x56 instead of 28x28 images keep the data's CRC-32, and with
     * padding=same and a pool, every weight's shape */
    int same_in = in.n == (size_t)m->input_shape.ndim;
    for (size_t i = 0; same_in && i < in.n; i++) same_in = in.us[i] == (uint64_t)m->input_shape.d[i];
    if (!same_in) {
        char a[160] = "", b[160];
        for (size_t i = 0; i < in.n && strlen(a) < 100; i++) /* as tt_shape_str writes b: 28x28x1 */
            snprintf(a + strlen(a), sizeof a - strlen(a), "%s%llu", i ? "x" : "", (unsigned long long)in.us[i]);
        return tt_fail(err, TT_ERR_FORMAT, "%s: the model's input differs: the checkpoint's is %s, this run's is %s (the "
                       "same --data, read in the same shape?)", what, a, tt_shape_str(&m->input_shape, 0, b, sizeof b));
    }
    const char *theirs = ck->model_desc && strncmp(ck->model_desc, "builtin:", 8) == 0 ? ck->model_desc + 8 : NULL;
    char q1[256], q2[256];
    if (theirs && builtin && strcmp(theirs, builtin) != 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: trained with --model %s, this run has --model %s", what,
                       ck_quote(theirs, q1, sizeof q1), builtin);
    char d[256];
    for (size_t i = 0; i < v.n || i < m->n_layers; i++) {
        if (i < m->n_layers) tt_checkpoint_layer_desc(&m->layers[i], d, sizeof d);
        if (i < v.n && i < m->n_layers && strcmp(v.ss[i], d) == 0) continue;
        return tt_fail(err, TT_ERR_FORMAT, "%s: the model differs at layer %zu: the checkpoint's is '%s', this run's is "
                       "'%s'", what, i + 1, i < v.n ? ck_quote(v.ss[i], q1, sizeof q1) : "(none: it has fewer)",
                       i < m->n_layers ? ck_quote(d, q2, sizeof q2) : "(none: it has fewer)");
    }
    return TT_OK;
}
