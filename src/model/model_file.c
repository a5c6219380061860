/* model_file.c — the model file (docs/model-file.md): an optional `input shape=...` line, then one line per layer,
 * `kind key=value ...`, '#' comments. Each key is checked against its kind's table (known, at most once, in range;
 * every default applied is said in m->notes), and the text is read as hostile: lines of at most 511 characters, no
 * control bytes, a regular file of at most 1 MiB without NUL bytes (tt_model_load). Also what --model names: a
 * built-in's name or a file (tt_model_make).
 * Not for: laying the layers out (model.c) or the built-in models (model_builtin.c). */
#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_build.h"
#include "tt_input.h"

/* Every kind a model file may name, in the order the error message lists them (tt_model.h's list). */
#define KIND_REF(name) &tt_layer_##name,
static const tt_layer_kind *const KINDS[] = {TT_LAYER_KINDS(KIND_REF)};
#undef KIND_REF
#define N_KINDS (sizeof KINDS / sizeof KINDS[0])

static int parse_size(const char *v, size_t lo, size_t hi, size_t *out)
{
    if (!isdigit((unsigned char)v[0])) return -1;
    errno = 0;
    char *end;
    unsigned long long x = strtoull(v, &end, 10);
    if (errno || *end || x < lo || x > hi) return -1;
    *out = (size_t)x;
    return 0;
}

/* "3" or "3,5" */
static int parse_pair(const char *v, size_t lo, size_t hi, size_t out[2])
{
    char a[32];
    const char *comma = strchr(v, ',');
    if (!comma) {
        if (parse_size(v, lo, hi, &out[0])) return -1;
        out[1] = out[0];
        return 0;
    }
    size_t n = (size_t)(comma - v);
    if (n == 0 || n >= sizeof a) return -1;
    memcpy(a, v, n);
    a[n] = '\0';
    return parse_size(a, lo, hi, &out[0]) || parse_size(comma + 1, lo, hi, &out[1]) ? -1 : 0;
}

/* A decimal like 0.25 or .5 (no sign, exponent allowed), in [lo, hi]. */
static int parse_float(const char *v, double lo, double hi, float *out)
{
    if (!(isdigit((unsigned char)v[0]) || v[0] == '.') || strpbrk(v, "xXpP")) return -1;
    errno = 0;
    char *end;
    double x = strtod(v, &end);
    if (errno || *end || !(x >= lo && x <= hi)) return -1;
    const float f = (float)x;
    if (x != 0 && !(fabsf(f) >= FLT_MIN)) return -1; /* 0 or subnormal as a float32: not the value written */
    *out = f;
    return 0;
}

static void add_note(tt_model *m, size_t lineno, const char *kind, const char *key, const char *def)
{
    size_t len = strlen(m->notes);
    if (len + 1 >= sizeof m->notes) return;
    snprintf(m->notes + len, sizeof m->notes - len, "%s:%zu: %s: %s not given, using default '%s'\n", m->source,
             lineno, kind, key, def);
}

/* One key=value of a layer line into l (or *act for an activation). */
static tt_status parse_key(const tt_layer_key *k, const char *val, tt_layer *l, const tt_layer_kind **act,
                           const char *where, const char *kind, tt_error *err)
{
    char *field = (char *)l + k->offset;
    switch (k->type) {
    case TT_KEY_SIZE:
        if (strcmp(val, "pool") == 0 && k->def && strcmp(k->def, "pool") == 0) return TT_OK; /* 0: the pool size */
        if (parse_size(val, (size_t)k->lo, (size_t)k->hi, (size_t *)(void *)field))
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s must be an integer in %zu..%zu, got '%s'", where, kind,
                           k->name, (size_t)k->lo, (size_t)k->hi, val);
        return TT_OK;
    case TT_KEY_PAIR:
        if (strcmp(val, "pool") == 0 && k->def && strcmp(k->def, "pool") == 0) return TT_OK;
        if (parse_pair(val, (size_t)k->lo, (size_t)k->hi, (size_t *)(void *)field))
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s must be N or N,M with integers in %zu..%zu, got '%s'",
                           where, kind, k->name, (size_t)k->lo, (size_t)k->hi, val);
        return TT_OK;
    case TT_KEY_FLOAT:
        if (parse_float(val, k->lo, k->hi, (float *)(void *)field))
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s must be a number in [%g, %g], got '%s'", where, kind,
                           k->name, k->lo, k->hi, val);
        return TT_OK;
    case TT_KEY_PADDING:
    case TT_KEY_BOOL: {
        const char *yes = k->type == TT_KEY_PADDING ? "same" : "true",
                   *no = k->type == TT_KEY_PADDING ? "valid" : "false";
        if (strcmp(val, yes) != 0 && strcmp(val, no) != 0)
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s must be %s or %s, got '%s'", where, kind, k->name, yes, no,
                           val);
        *(int *)(void *)field = strcmp(val, yes) == 0;
        return TT_OK;
    }
    case TT_KEY_ACTIVATION:
        if (strcmp(val, "linear") == 0)
            *act = NULL;
        else if (strcmp(val, "relu") == 0)
            *act = &tt_layer_relu;
        else if (strcmp(val, "softmax") == 0)
            *act = &tt_layer_softmax;
        else
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: activation must be linear, relu or softmax, got '%s'", where,
                           kind, val);
        return TT_OK;
    }
    return TT_OK;
}

/* `input shape=H,W,C` (or the older `input size=N`): must match the data. */
static tt_status parse_input(tt_model *m, char **save, const char *where, tt_error *err)
{
    char *tok = strtok_r(NULL, " \t\r", save);
    if (!tok) return tt_fail(err, TT_ERR_MODEL, "%s: input: shape= is required", where);
    char *eq = strchr(tok, '=');
    if (!eq) return tt_fail(err, TT_ERR_MODEL, "%s: input: expected key=value, got '%s'", where, tok);
    *eq = '\0';
    tt_shape want = {0, {0, 0, 0, 0}};
    if (strcmp(tok, "size") == 0 || strcmp(tok, "shape") == 0) {
        const char *v = eq + 1;
        const size_t vlen = strlen(v);
        if (vlen == 0 || v[0] == ',' || v[vlen - 1] == ',' || strstr(v, ",,")) /* strtok would skip an empty size */
            return tt_fail(err, TT_ERR_MODEL, "%s: input: %s must be 1 to 3 positive integers, like 28,28,1", where,
                           tok);
        char *psave = NULL;
        for (char *part = strtok_r(eq + 1, ",", &psave); part; part = strtok_r(NULL, ",", &psave)) {
            if (want.ndim == 3 || parse_size(part, 1, (size_t)1 << 24, &want.d[want.ndim]))
                return tt_fail(err, TT_ERR_MODEL, "%s: input: %s must be 1 to 3 positive integers, like 28,28,1",
                               where, tok);
            want.ndim++;
        }
    } else {
        return tt_fail(err, TT_ERR_MODEL, "%s: input: unknown key '%s' (known: shape)", where, tok);
    }
    if ((tok = strtok_r(NULL, " \t\r", save)) != NULL)
        return tt_fail(err, TT_ERR_MODEL, "%s: input: unexpected '%s'", where, tok);
    size_t elems = 1;
    for (int i = 0; i < want.ndim; i++)
        if (tt_mul_size(elems, want.d[i], &elems) || elems > TT_MAX_SAMPLE_ELEMS)
            return tt_fail(err, TT_ERR_MODEL, "%s: input: a sample of more than %zu values", where,
                           TT_MAX_SAMPLE_ELEMS);
    if (m->input_shape.ndim == 0 && want.ndim) { /* no data: the file says what the model is for */
        m->input_shape = want;
        m->input_dim = tt_shape_elems(&want);
        return TT_OK;
    }
    const int flat = want.ndim == 1 && want.d[0] == m->input_dim; /* size=784 for a 28x28 image: flattened */
    if (want.ndim == 0 || (!tt_shape_eq(&want, &m->input_shape) && !flat)) {
        char a[64], b[64];
        return tt_fail(err, TT_ERR_MODEL, "%s: input shape %s but the data's samples are %s", where,
                       tt_shape_str(&want, 0, a, sizeof a), tt_shape_str(&m->input_shape, 0, b, sizeof b));
    }
    m->input_shape = want; /* a flat line over images: the model sees the sample flattened, as the line says */
    return TT_OK;
}

static const tt_layer_kind *find_kind(const char *name)
{
    for (size_t i = 0; i < N_KINDS; i++)
        if (strcmp(name, KINDS[i]->name) == 0) return KINDS[i];
    return NULL;
}

/* One layer line: the kind's keys (each at most once), defaults noted, then the layer and its fused activation. */
static tt_status parse_layer(tt_model *m, const tt_layer_kind *kind, char **save, const char *where, size_t lineno,
                             tt_error *err)
{
    tt_layer l;
    memset(&l, 0, sizeof l);
    const tt_layer_kind *act = NULL;
    int given[TT_MAX_KEYS] = {0};
    char *tok;
    while ((tok = strtok_r(NULL, " \t\r", save)) != NULL) {
        char *eq = strchr(tok, '=');
        if (!eq || eq == tok)
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: expected key=value, got '%s'", where, kind->name, tok);
        *eq = '\0';
        int k = 0;
        while (kind->keys[k].name && strcmp(kind->keys[k].name, tok) != 0) k++;
        if (!kind->keys[k].name) {
            char known[160] = "";
            for (int j = 0; kind->keys[j].name; j++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", j ? ", " : "",
                         kind->keys[j].name);
            return tt_fail(err, TT_ERR_MODEL, "%s: %s: unknown key '%s' (known: %s)", where, kind->name, tok,
                           known[0] ? known : "none");
        }
        if (given[k]) return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s given twice", where, kind->name, tok);
        given[k] = 1;
        tt_status s = parse_key(&kind->keys[k], eq + 1, &l, &act, where, kind->name, err);
        if (s) return s;
    }
    for (int k = 0; kind->keys[k].name; k++) {
        const tt_layer_key *key = &kind->keys[k];
        if (given[k]) continue;
        if (!key->def) return tt_fail(err, TT_ERR_MODEL, "%s: %s: %s= is required", where, kind->name, key->name);
        add_note(m, lineno, kind->name, key->name, key->def);
        if (strcmp(key->def, "pool") == 0 || strcmp(key->def, "data") == 0) continue; /* 0: filled by setup */
        tt_status s = parse_key(key, key->def, &l, &act, where, kind->name, err);
        TT_ASSERT(s == TT_OK); /* the defaults in the tables parse */
    }
    tt_status s = model_add(m, kind, &l, 0, err, where);
    if (!s && act) s = model_add(m, act, NULL, 1, err, where);
    return s;
}

tt_status tt_model_parse(tt_model *m, const char *text, const char *path, const tt_model_input *in, tt_error *err)
{
    model_reset(m, in, path);
    size_t lineno = 0;
    int seen_input = 0;
    const char *p = text;
    while (*p) {
        lineno++;
        const char *eol = strchr(p, '\n');
        size_t len = eol ? (size_t)(eol - p) : strlen(p);
        char line[512];
        if (len >= sizeof line)
            return tt_fail(err, TT_ERR_MODEL, "%s:%zu: line too long (at most %zu characters)", path, lineno,
                           sizeof line - 1);
        memcpy(line, p, len);
        line[len] = '\0';
        p = eol ? eol + 1 : p + len;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        char *save = NULL;
        char *name = strtok_r(line, " \t\r", &save);
        if (!name) continue;
        for (char *c = name; *c; c++) /* in a value, the key's own message shows it (escaped) */
            if ((unsigned char)*c < 0x20)
                return tt_fail(err, TT_ERR_MODEL, "%s:%zu: control character in the model file", path, lineno);
        char where[160];
        snprintf(where, sizeof where, "%s:%zu", path, lineno);
        tt_status s;
        if (strcmp(name, "input") == 0) {
            if (m->n_layers) return tt_fail(err, TT_ERR_MODEL, "%s: input must come before every layer", where);
            if (seen_input) return tt_fail(err, TT_ERR_MODEL, "%s: input given twice", where);
            seen_input = 1;
            s = parse_input(m, &save, where, err);
        } else {
            const tt_layer_kind *kind = find_kind(name);
            if (!kind) {
                char known[256] = "input";
                for (size_t i = 0; i < N_KINDS; i++)
                    snprintf(known + strlen(known), sizeof known - strlen(known), ", %s", KINDS[i]->name);
                return tt_fail(err, TT_ERR_MODEL, "%s: unknown layer '%s' (known: %s)", where, name, known);
            }
            s = parse_layer(m, kind, &save, where, lineno, err);
        }
        if (s) return s;
    }
    return model_finish(m, err);
}

tt_status tt_model_load(tt_model *m, const char *path, const tt_model_input *in, tt_error *err)
{
    char *text = NULL;
    size_t len = 0;
    /* regular files only (a FIFO would block), at most 1 MiB, no NUL byte: tt_model_parse gets a C string */
    tt_status s = tt_input_read_text(path, "model file", (size_t)1 << 20, &text, &len, err);
    if (s) return s;
    s = tt_model_parse(m, text, path, in, err);
    tt_free(text);
    return s;
}

/* --model's value: a built-in's name, else a model file's path. */
tt_status tt_model_make(tt_model *m, const char *model, const tt_model_input *in, tt_error *err)
{
    return tt_model_is_builtin(model) ? tt_model_builtin(m, model, in, err) : tt_model_load(m, model, in, err);
}

const char *tt_model_file(const tt_model *m) { return m->builtin ? NULL : m->source; }
