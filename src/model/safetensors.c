/* safetensors.c — the container of a checkpoint (https://huggingface.co/docs/safetensors): the 8-byte little-endian
 * length, the JSON header with one entry per tensor (dtype, shape, data_offsets), and the whole file's CRC-32 that
 * towertrain keeps in the header's "__metadata__" "checksum" value.
 *
 * Writing: a tensor's entry and the length prefix; the checksum's digits found in the header's text as the reader
 * finds them, and put there (tt_checkpoint_seal rewrites them in a file's bytes). Reading, as hostile input: the length
 * capped (CK_HEADER_MAX) and checked against the file before anything is parsed, the header parsed as strict JSON
 * (src/model/json.c), one object with a "__metadata__" object; every entry exactly dtype "F32", a shape whose product
 * is formed without overflow, and data_offsets inside the data section holding exactly the shape's bytes; and the
 * entries together tiling the data section — no overlap, no gap, nothing after.
 *
 * Not for: what the metadata say (ckpt_metadata.c) or which tensors a model has (checkpoint.c); only F32. */
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "ckpt.h"

enum {
    CK_HEADER_MAX = 64 << 20, /* a header of 1M tensors' entries; anything larger is not a checkpoint */
    CK_NAME_MAX = 255         /* bytes of a tensor name */
};
#define CK_DIM_MAX ((uint64_t)1 << 48) /* larger dims are refused before any product is formed */

/* ---- the header, written ---------------------------------------------------------------------------------------- */

/* Adds key: v to a JSON object, taking v (NULL: json-c ran out of memory); -1 on failure. */
int ck_put(json_object *o, const char *key, json_object *v)
{
    if (!v) return -1;
    if (json_object_object_add(o, key, v) != 0) {
        json_object_put(v);
        return -1;
    }
    return 0;
}

/* Appends v to a JSON array, taking v (NULL: out of memory); -1 on failure. */
int ck_push(json_object *a, json_object *v)
{
    if (!v) return -1;
    if (json_object_array_add(a, v) != 0) {
        json_object_put(v);
        return -1;
    }
    return 0;
}

/* {"dtype": "F32", "shape": [...], "data_offsets": [begin, begin + bytes]}; NULL: out of memory. */
json_object *ck_entry_json(const tt_tensor_info *t, uint64_t begin)
{
    json_object *e = json_object_new_object(), *shape = NULL, *off = NULL;
    if (!e) return NULL;
    /* each child is handed to e as soon as it exists, so freeing e frees everything on any failure */
    int bad = ck_put(e, "dtype", json_object_new_string("F32")) || ck_put(e, "shape", shape = json_object_new_array()) ||
              ck_put(e, "data_offsets", off = json_object_new_array());
    for (int d = 0; !bad && d < t->ndim; d++) bad = ck_push(shape, json_object_new_int64((int64_t)t->shape[d]));
    if (!bad)
        bad = ck_push(off, json_object_new_int64((int64_t)begin)) ||
              ck_push(off, json_object_new_int64((int64_t)(begin + t->size * sizeof(float))));
    if (bad) {
        json_object_put(e);
        return NULL;
    }
    return e;
}

/* The 8-byte little-endian length prefix of a header of n bytes. */
void ck_prefix(unsigned char *out, size_t n)
{
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)n >> (8 * i));
}

/* ---- the checksum: the whole file's CRC-32, at a place in the header's text ------------------------------------- */

uint32_t tt_crc32(uint32_t crc, const void *p, size_t n)
{
    const unsigned char *b = (const unsigned char *)p;
    while (n) {
        const size_t k = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        crc = (uint32_t)crc32(crc, b, (uInt)k);
        b += k;
        n -= k;
    }
    return crc;
}

/* 8 lower-case hex digits of crc at out (no NUL). */
void ck_put_hex(char *out, uint32_t crc)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++) out[i] = hex[(crc >> (28 - 4 * i)) & 15];
}

/* Where the checksum's 8 hex digits lie in a header's text h (n bytes): __metadata__'s one "checksum" key, spelt
 * without escapes, whose value is "crc32:" and 8 lower-case hex digits — found by the strict scan, so a quoted
 * '"checksum":' inside another string never counts. *digits: their offset in h. */
tt_status ck_sum_locate(const char *what, const char *h, size_t n, const tt_json_scan *sc, size_t *digits,
                        tt_error *err)
{
    const size_t at = sc->found_at + 7; /* past the opening quote and "crc32:" */
    int ok = sc->found == 1 && n - sc->found_at >= 16 && memcmp(h + sc->found_at, "\"crc32:", 7) == 0 &&
             h[sc->found_at + 15] == '"';
    for (size_t i = 0; ok && i < 8; i++) ok = (h[at + i] >= '0' && h[at + i] <= '9') || (h[at + i] >= 'a' && h[at + i] <= 'f');
    if (!ok)
        return tt_fail(err, TT_ERR_FORMAT, "%s: the header has no single __metadata__ key \"checksum\" (unescaped) with "
                       "a value crc32: and 8 lower-case hex digits (%zu such keys)", what, sc->found);
    *digits = at;
    return TT_OK;
}

/* The checksum's place in a header's text, scanned as the reader scans it. */
tt_status ck_sum_digits(const char *what, const char *h, size_t n, size_t *digits, tt_error *err)
{
    tt_json_scan sc = {.find = "checksum", .find_depth = 2};
    char why[160];
    json_object *top = tt_json_parse_object(h, n, CK_JSON_DEPTH, CK_MAX_VALUES, &sc, why, sizeof why);
    json_object_put(top);
    if (!top) return tt_fail(err, TT_ERR_FORMAT, "%s: the header %s", what, why);
    return ck_sum_locate(what, h, n, &sc, digits, err);
}

/* CRC-32 of a file of len bytes whose checksum digits are at byte `digits`, read as '0's. */
uint32_t ck_file_crc(const uint8_t *buf, size_t len, size_t digits)
{
    const uint32_t crc = tt_crc32(tt_crc32(0, buf, digits), "00000000", 8);
    return tt_crc32(crc, buf + digits + 8, len - digits - 8);
}

tt_status tt_checkpoint_seal(uint8_t *buf, size_t len, tt_error *err)
{
    uint64_t n = 0;
    for (int i = 7; len >= 8 && i >= 0; i--) n = n << 8 | buf[i];
    if (len < 8 || n > len - 8) return tt_fail(err, TT_ERR_FORMAT, "seal: no header of %llu bytes", (unsigned long long)n);
    size_t digits;
    tt_status s = ck_sum_digits("seal", (const char *)buf + 8, (size_t)n, &digits, err);
    if (s) return s;
    ck_put_hex((char *)buf + 8 + digits, ck_file_crc(buf, len, 8 + digits));
    return TT_OK;
}

/* ---- the header, read ------------------------------------------------------------------------------------------- */

/* The prefix and the header: its length sane and inside the buffer, its text JSON as the format says, one object
 * with a __metadata__ object. Sets p->top, p->md, p->data, p->data_len. */
tt_status ck_header(ck_parse *p, const uint8_t *buf, size_t len)
{
    if (len < 8)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: %zu bytes is too short for a safetensors file (an 8-byte header "
                       "length first)", p->what, len);
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--) n = n << 8 | buf[i];
    if (n > CK_HEADER_MAX)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: header length %llu is over the limit of %d bytes (not a "
                       "safetensors file?)", p->what, (unsigned long long)n, CK_HEADER_MAX);
    if (n > len - 8)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: header length %llu is beyond the end of the file (%zu bytes): "
                       "truncated?", p->what, (unsigned long long)n, len);
    char why[200];
    p->sc = (tt_json_scan){.find = "checksum", .find_depth = 2};
    if (!(p->top = tt_json_parse_object((const char *)buf + 8, (size_t)n, CK_JSON_DEPTH, CK_MAX_VALUES, &p->sc, why,
                                        sizeof why)))
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: the header %s", p->what, why);
    if (!json_object_object_get_ex(p->top, "__metadata__", &p->md))
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: the header has no __metadata__ (not a towertrain checkpoint)",
                       p->what);
    if (!json_object_is_type(p->md, json_type_object))
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: __metadata__ is not an object", p->what);
    p->data = buf + 8 + n;
    p->data_len = (uint64_t)len - 8 - n;
    p->buf = buf;
    p->len = len;
    return TT_OK;
}

/* A JSON integer in [0, max]. */
int ck_uint(json_object *v, uint64_t max, uint64_t *out)
{
    if (!json_object_is_type(v, json_type_int)) return 0;
    const int64_t x = json_object_get_int64(v); /* json-c gives INT64_MAX for anything larger: refused below */
    if (x < 0 || x == INT64_MAX || (uint64_t)x > max) return 0;
    *out = (uint64_t)x;
    return 1;
}

/* "(784, 128)", as Keras and NumPy print a shape ("(5,)" for one dimension, "()" for none). */
const char *ck_shape_str(int ndim, const uint64_t *d, char *out, size_t len)
{
    size_t k = (size_t)snprintf(out, len, "(");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
    if (k < len) snprintf(out + k, len - k, ndim == 1 ? ",)" : ")");
    return out;
}

/* One tensor's entry: exactly dtype "F32", a shape of at most CK_MAX_NDIM dims, data_offsets inside the data section
 * holding exactly the shape's bytes. */
static tt_status ck_entry_read(const ck_parse *p, const char *name, json_object *v, ck_entry *e)
{
    char q[CK_QUOTE];
    const char *nq = ck_quote(name, q, sizeof q);
    json_object *dtype, *shape, *off;
    memset(e, 0, sizeof *e);
    e->name = name;
    if (strlen(name) > CK_NAME_MAX)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: a tensor name of %zu bytes ('%s...'): at most %d", p->what,
                       strlen(name), nq, CK_NAME_MAX);
    if (!json_object_is_type(v, json_type_object) || json_object_object_length(v) != 3 ||
        !json_object_object_get_ex(v, "dtype", &dtype) || !json_object_object_get_ex(v, "shape", &shape) ||
        !json_object_object_get_ex(v, "data_offsets", &off))
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensor %s: not an object of exactly dtype, shape and data_offsets",
                       p->what, nq);
    if (!json_object_is_type(dtype, json_type_string) || strcmp(json_object_get_string(dtype), "F32") != 0) {
        char dq[CK_QUOTE];
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensor %s has dtype '%s' (towertrain reads F32 only)", p->what, nq,
                       json_object_is_type(dtype, json_type_string) ? ck_quote(json_object_get_string(dtype), dq, sizeof dq)
                                                                    : "(not a string)");
    }
    if (!json_object_is_type(shape, json_type_array) || json_object_array_length(shape) > CK_MAX_NDIM)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensor %s: shape is not an array of at most %d dimensions", p->what,
                       nq, CK_MAX_NDIM);
    e->ndim = (int)json_object_array_length(shape);
    uint64_t elems = 1;
    const uint64_t max_elems = p->data_len / sizeof(float);
    for (int d = 0; d < e->ndim; d++) {
        if (!ck_uint(json_object_array_get_idx(shape, (size_t)d), CK_DIM_MAX, &e->shape[d]))
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensor %s: shape dimension %d is not an integer in [0, 2^48]",
                           p->what, nq, d);
        if (e->shape[d] && elems > max_elems / e->shape[d])
            elems = max_elems + 1; /* more than the file holds: saturate, no overflow */
        else
            elems *= e->shape[d];
    }
    if (!json_object_is_type(off, json_type_array) || json_object_array_length(off) != 2 ||
        !ck_uint(json_object_array_get_idx(off, 0), UINT64_MAX, &e->begin) ||
        !ck_uint(json_object_array_get_idx(off, 1), UINT64_MAX, &e->end) || e->begin > e->end)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensor %s: data_offsets is not [begin, end] with 0 <= begin <= end",
                       p->what, nq);
    if (e->end > p->data_len)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensor %s ends at byte %llu of the data section, which holds %llu "
                       "(a truncated file?)", p->what, nq, (unsigned long long)e->end, (unsigned long long)p->data_len);
    if (elems > max_elems || elems * sizeof(float) != e->end - e->begin) {
        char sh[160];
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensor %s: shape %s %s, data_offsets [%llu, %llu] hold %llu bytes",
                       p->what, nq, ck_shape_str(e->ndim, e->shape, sh, sizeof sh),
                       elems > max_elems ? "is larger than the data section" : "does not fit its bytes",
                       (unsigned long long)e->begin, (unsigned long long)e->end,
                       (unsigned long long)(e->end - e->begin));
    }
    return TT_OK;
}

static int ck_by_offset(const void *a, const void *b)
{
    const ck_entry *x = (const ck_entry *)a, *y = (const ck_entry *)b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end) return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

int ck_by_name(const void *a, const void *b)
{
    return strcmp(((const ck_entry *)a)->name, ((const ck_entry *)b)->name);
}

/* Every entry read, and together they tile the data section: from byte 0, each where the previous ended, the last
 * at its end — no overlap, no gap, nothing after. Leaves the entries sorted by name. */
tt_status ck_entries(ck_parse *p)
{
    const size_t n = (size_t)json_object_object_length(p->top) - 1; /* all but __metadata__ */
    if (n && !(p->e = (ck_entry *)tt_calloc(n, sizeof *p->e)))
        return tt_fail(p->err, TT_ERR_NOMEM, "%s: out of memory for %zu tensor entries", p->what, n);
    tt_status s = TT_OK;
    json_object_object_foreach(p->top, key, val) {
        if (strcmp(key, "__metadata__") == 0) continue;
        if ((s = ck_entry_read(p, key, val, &p->e[p->n_e]))) return s;
        p->n_e++;
    }
    if (n) qsort(p->e, n, sizeof *p->e, ck_by_offset);
    uint64_t at = 0;
    for (size_t i = 0; i < n; i++) {
        const ck_entry *e = &p->e[i];
        if (e->begin != at) {
            char q1[CK_QUOTE], q2[CK_QUOTE];
            if (i == 0)
                return tt_fail(p->err, TT_ERR_FORMAT, "%s: the data section starts with %llu bytes no tensor holds "
                               "(the first, %s, begins at %llu)", p->what, (unsigned long long)e->begin,
                               ck_quote(e->name, q1, sizeof q1), (unsigned long long)e->begin);
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensors %s [%llu, %llu] and %s [%llu, %llu] %s", p->what,
                           ck_quote(p->e[i - 1].name, q1, sizeof q1), (unsigned long long)p->e[i - 1].begin,
                           (unsigned long long)p->e[i - 1].end, ck_quote(e->name, q2, sizeof q2),
                           (unsigned long long)e->begin, (unsigned long long)e->end,
                           e->begin < at ? "overlap" : "leave a gap");
        }
        at = e->end;
    }
    if (at != p->data_len)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: the data section holds %llu bytes, the tensors %llu", p->what,
                       (unsigned long long)p->data_len, (unsigned long long)at);
    if (n) qsort(p->e, n, sizeof *p->e, ck_by_name);
    return TT_OK;
}
