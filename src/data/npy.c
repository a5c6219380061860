/* data/npy.c — NumPy .npy files (https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html) as a data
 * set: DIR/x_train.npy, y_train.npy, x_test.npy and y_test.npy (--data npy:DIR).
 *
 * A .npy file is the magic "\x93NUMPY", a version (1.0, 2.0 or 3.0), the header's length (2 bytes little-endian in
 * 1.0, 4 in 2.0 and 3.0), the header — the text of a Python dict, {'descr': '<f4', 'fortran_order': False,
 * 'shape': (3, 4), } padded with spaces and a newline — and then the array's bytes. The dict is never evaluated: a
 * small strict parser takes exactly what NumPy writes (the three keys once each and no others, single-quoted strings
 * without escapes, True / False, tuples of decimal integers where a 1-tuple has its comma). Every file is hostile,
 * as in idx.c: every header field is checked before anything is allocated, the header's length must be sane and the
 * file must hold it, the file's size must be the header plus exactly the bytes the shape and dtype say before the
 * data's buffer is made, and integer data are converted in chunks into a buffer no larger than the file's data.
 * Not for: other dtypes (bool, float64, int16, ...), big-endian or Fortran-order arrays, structured or object
 * arrays, .npz archives, memory mapping.
 */
#include <stdio.h>
#include <string.h>

#include "tt_data.h"
#include "tt_input.h"

enum {
    NPY_MAX_NDIM = 32,   /* NumPy's limit before 2.0 (64 since): any real file of ours has at most 4 */
    NPY_DESCR_MAX = 16,  /* room for a dtype string ('<f4'); longer ones are not ours */
    NPY_CHUNK = 1 << 14  /* bytes converted per read: integer data never need a second whole-file buffer */
};

/* The dtypes read. U1 samples stay bytes (TT_X_U8); the others become float32 samples or int32 labels. */
typedef enum { NPY_U1, NPY_I4, NPY_I8, NPY_F4 } npy_type;
static const struct {
    const char *descr; /* the little-endian spelling NumPy writes ('|' for a single byte) */
    size_t size;       /* bytes of one element */
} g_npy_types[] = {{"|u1", 1}, {"<i4", 4}, {"<i8", 8}, {"<f4", 4}};

typedef enum { NPY_X, NPY_Y } npy_role; /* samples or labels */

typedef struct npy_header {
    char descr[NPY_DESCR_MAX]; /* as the file spells it, for messages */
    int fortran;               /* fortran_order */
    npy_type type;
    size_t ndim;
    size_t dims[NPY_MAX_NDIM];
} npy_header;

/* ---- the header dict ------------------------------------------------------------------------------------------ */

typedef struct npy_text {
    const char *s; /* the header's bytes (checked to be printable ASCII and blanks) */
    size_t len, pos;
    const char *path;
} npy_text;

static void npy_skip_blanks(npy_text *t)
{
    while (t->pos < t->len && (t->s[t->pos] == ' ' || t->s[t->pos] == '\t' || t->s[t->pos] == '\n' ||
                               t->s[t->pos] == '\r'))
        t->pos++;
}

/* "PATH: malformed header at byte N: expected WHAT, found 'c'" (npy_check_text let only printable bytes and blanks
 * through, so the byte can be quoted). */
static tt_status npy_syntax(const npy_text *t, const char *what, tt_error *err)
{
    if (t->pos >= t->len)
        return tt_fail(err, TT_ERR_FORMAT, "%s: malformed header: expected %s, found the end of the header", t->path,
                       what);
    char c = t->s[t->pos];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r')
        return tt_fail(err, TT_ERR_FORMAT, "%s: malformed header at byte %zu: expected %s, found a blank", t->path,
                       t->pos, what);
    return tt_fail(err, TT_ERR_FORMAT, "%s: malformed header at byte %zu: expected %s, found '%c'", t->path, t->pos,
                   what, c);
}

static int npy_accept(npy_text *t, char c)
{
    if (t->pos < t->len && t->s[t->pos] == c) {
        t->pos++;
        return 1;
    }
    return 0;
}

/* A single-quoted string without escapes, as Python's repr writes the keys and the descr. */
static tt_status npy_string(npy_text *t, char *out, size_t cap, tt_error *err)
{
    if (!npy_accept(t, '\'')) return npy_syntax(t, "a single-quoted string", err);
    size_t n = 0;
    while (t->pos < t->len && t->s[t->pos] != '\'') {
        if (t->s[t->pos] == '\\')
            return tt_fail(err, TT_ERR_FORMAT, "%s: malformed header at byte %zu: escapes in strings are not "
                           "supported", t->path, t->pos);
        if (t->s[t->pos] < 0x20) /* a line break inside quotes: not Python, and it would split a message in two */
            return tt_fail(err, TT_ERR_FORMAT, "%s: malformed header at byte %zu: a blank other than ' ' inside a "
                           "string", t->path, t->pos);
        if (n + 1 >= cap)
            return tt_fail(err, TT_ERR_FORMAT, "%s: malformed header at byte %zu: a string longer than %zu bytes",
                           t->path, t->pos, cap - 2);
        out[n++] = t->s[t->pos++];
    }
    out[n] = '\0';
    if (!npy_accept(t, '\'')) return npy_syntax(t, "the closing quote of a string", err);
    return TT_OK;
}

/* True or False (Python's spelling; not 1, 0 or true). */
static tt_status npy_bool(npy_text *t, int *out, tt_error *err)
{
    size_t start = t->pos;
    while (t->pos < t->len && ((t->s[t->pos] >= 'a' && t->s[t->pos] <= 'z') ||
                               (t->s[t->pos] >= 'A' && t->s[t->pos] <= 'Z') ||
                               (t->s[t->pos] >= '0' && t->s[t->pos] <= '9') || t->s[t->pos] == '_'))
        t->pos++;
    size_t n = t->pos - start;
    if (n == 4 && memcmp(t->s + start, "True", 4) == 0) *out = 1;
    else if (n == 5 && memcmp(t->s + start, "False", 5) == 0) *out = 0;
    else {
        t->pos = start;
        return npy_syntax(t, "True or False", err);
    }
    return TT_OK;
}

/* A non-negative decimal integer as Python writes one: no sign, no leading zeros, no '_', no 'L'. */
static tt_status npy_uint(npy_text *t, size_t *out, tt_error *err)
{
    size_t start = t->pos, v = 0;
    while (t->pos < t->len && t->s[t->pos] >= '0' && t->s[t->pos] <= '9') {
        size_t d = (size_t)(t->s[t->pos] - '0');
        if (v > (SIZE_MAX - d) / 10)
            return tt_fail(err, TT_ERR_FORMAT, "%s: header: a shape dimension at byte %zu is too large", t->path,
                           start);
        v = v * 10 + d;
        t->pos++;
    }
    if (t->pos == start) return npy_syntax(t, "a dimension (a non-negative integer)", err);
    if (t->s[start] == '0' && t->pos - start > 1) {
        t->pos = start;
        return npy_syntax(t, "an integer without leading zeros", err);
    }
    *out = v;
    return TT_OK;
}

/* A tuple of integers: (), (n,), (a, b) or (a, b,). (n) is an int in Python, not a tuple, and is refused. */
static tt_status npy_shape(npy_text *t, npy_header *h, tt_error *err)
{
    h->ndim = 0;
    if (!npy_accept(t, '(')) return npy_syntax(t, "a tuple '(' for the shape", err);
    npy_skip_blanks(t);
    int comma = 0;
    while (!npy_accept(t, ')')) {
        if (h->ndim == NPY_MAX_NDIM)
            return tt_fail(err, TT_ERR_FORMAT, "%s: header: the shape has more than %d dimensions", t->path,
                           NPY_MAX_NDIM);
        tt_status s = npy_uint(t, &h->dims[h->ndim++], err);
        if (s) return s;
        npy_skip_blanks(t);
        comma = npy_accept(t, ',');
        npy_skip_blanks(t);
        if (!comma && !(t->pos < t->len && t->s[t->pos] == ')')) return npy_syntax(t, "',' or ')' in the shape", err);
    }
    if (h->ndim == 1 && !comma)
        return tt_fail(err, TT_ERR_FORMAT, "%s: header: the shape (%zu) is not a tuple (a 1-tuple is written (%zu,))",
                       t->path, h->dims[0], h->dims[0]);
    return TT_OK;
}

enum { KEY_DESCR = 1, KEY_FORTRAN = 2, KEY_SHAPE = 4, KEY_ALL = 7 };

/* One "'key': value" pair; *seen collects the keys so far. */
static tt_status npy_item(npy_text *t, npy_header *h, int *seen, tt_error *err)
{
    char key[NPY_DESCR_MAX + 16];
    size_t at = t->pos;
    tt_status s = npy_string(t, key, sizeof key, err);
    if (s) return s;
    int k = strcmp(key, "descr") == 0 ? KEY_DESCR
            : strcmp(key, "fortran_order") == 0 ? KEY_FORTRAN
            : strcmp(key, "shape") == 0 ? KEY_SHAPE
            : 0;
    if (!k)
        return tt_fail(err, TT_ERR_FORMAT, "%s: header: unknown key '%s' at byte %zu (a .npy header has 'descr', "
                       "'fortran_order' and 'shape' only)", t->path, key, at);
    if (*seen & k)
        return tt_fail(err, TT_ERR_FORMAT, "%s: header: duplicate key '%s' at byte %zu", t->path, key, at);
    *seen |= k;
    npy_skip_blanks(t);
    if (!npy_accept(t, ':')) return npy_syntax(t, "':' after a key", err);
    npy_skip_blanks(t);
    if (k == KEY_FORTRAN) return npy_bool(t, &h->fortran, err);
    if (k == KEY_SHAPE) return npy_shape(t, h, err);
    if (t->pos < t->len && t->s[t->pos] == '[')
        return tt_fail(err, TT_ERR_FORMAT, "%s: header: a structured dtype (a list as 'descr') is not supported",
                       t->path);
    return npy_string(t, h->descr, sizeof h->descr, err);
}

/* The whole header: one dict with each of the three keys exactly once, and nothing but blanks around it. */
static tt_status npy_dict(npy_text *t, npy_header *h, tt_error *err)
{
    int seen = 0;
    npy_skip_blanks(t);
    if (!npy_accept(t, '{')) return npy_syntax(t, "'{' (a .npy header is a Python dict)", err);
    npy_skip_blanks(t);
    while (!npy_accept(t, '}')) {
        tt_status s = npy_item(t, h, &seen, err);
        if (s) return s;
        npy_skip_blanks(t);
        if (!npy_accept(t, ',')) {
            if (!(t->pos < t->len && t->s[t->pos] == '}')) return npy_syntax(t, "',' or '}' after a value", err);
        }
        npy_skip_blanks(t);
    }
    npy_skip_blanks(t);
    if (t->pos != t->len) return npy_syntax(t, "only blanks after the dict", err);
    const char *missing = !(seen & KEY_DESCR) ? "descr" : !(seen & KEY_FORTRAN) ? "fortran_order" : "shape";
    if (seen != KEY_ALL) return tt_fail(err, TT_ERR_FORMAT, "%s: header: no '%s' key", t->path, missing);
    return TT_OK;
}

/* ---- the header's meaning ------------------------------------------------------------------------------------ */

/* "(3, 4)", "(3,)" or "()", as NumPy prints a shape. */
static const char *npy_shape_str(const npy_header *h, char *out, size_t len)
{
    size_t k = (size_t)snprintf(out, len, "(");
    for (size_t i = 0; i < h->ndim && k < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%s%zu", i ? ", " : "", h->dims[i]);
    if (k < len) snprintf(out + k, len - k, h->ndim == 1 ? ",)" : ")");
    return out;
}

/* The dtype, by role: big-endian and Fortran order refused with what to do instead. */
static tt_status npy_check_dtype(const char *path, npy_header *h, npy_role role, tt_error *err)
{
    if (h->descr[0] == '>')
        return tt_fail(err, TT_ERR_FORMAT, "%s: big-endian dtype '%s' is not supported (save the array with "
                       ".astype('<%s'))", path, h->descr, h->descr + 1);
    int found = -1;
    for (int i = 0; i < (int)(sizeof g_npy_types / sizeof g_npy_types[0]); i++)
        if (strcmp(h->descr, g_npy_types[i].descr) == 0) found = i;
    if (strcmp(h->descr, "<u1") == 0) found = NPY_U1; /* one byte has no order: NumPy writes '|', '<' means the same */
    if (found < 0 || (role == NPY_Y && found == NPY_F4))
        return tt_fail(err, TT_ERR_FORMAT, "%s: dtype '%s' is not supported for %s (%s)", path, h->descr,
                       role == NPY_X ? "samples" : "labels",
                       role == NPY_X ? "x: '|u1', '<f4', '<i4' or '<i8'" : "y: '|u1', '<i4' or '<i8'");
    h->type = (npy_type)found;
    if (h->fortran)
        return tt_fail(err, TT_ERR_FORMAT, "%s: fortran_order is True (column-major data): save a C-order array "
                       "(np.ascontiguousarray)", path);
    return TT_OK;
}

/* The shape, by role, and the data's size: x is (n, ...) with 1..3 sample dimensions, y is (n,) or (n, 1). */
static tt_status npy_check_shape(const char *path, const npy_header *h, npy_role role, size_t *bytes, tt_error *err)
{
    char sh[NPY_MAX_NDIM * 22 + 4];
    npy_shape_str(h, sh, sizeof sh);
    if (role == NPY_X && (h->ndim < 2 || h->ndim > 4))
        return tt_fail(err, TT_ERR_FORMAT, "%s: shape %s: samples must be (n, L), (n, H, W) or (n, H, W, C)", path,
                       sh);
    if (role == NPY_Y && !(h->ndim == 1 || (h->ndim == 2 && h->dims[1] == 1)))
        return tt_fail(err, TT_ERR_FORMAT, "%s: shape %s: labels must be (n,) or (n, 1)", path, sh);
    size_t elems = 1;
    for (size_t i = 0; i < h->ndim; i++) {
        if (h->dims[i] == 0) return tt_fail(err, TT_ERR_FORMAT, "%s: shape %s holds no data (a 0 dimension)", path, sh);
        if (tt_mul_size(elems, h->dims[i], &elems))
            return tt_fail(err, TT_ERR_FORMAT, "%s: shape %s is too large (its size overflows)", path, sh);
    }
    if (tt_mul_size(elems, g_npy_types[h->type].size, bytes))
        return tt_fail(err, TT_ERR_FORMAT, "%s: shape %s of '%s' is too large (its size overflows)", path, sh,
                       h->descr);
    if (h->dims[0] > TT_IDX_MAX_ITEMS)
        return tt_fail(err, TT_ERR_FORMAT, "%s: shape %s: more than %u samples", path, sh, TT_IDX_MAX_ITEMS);
    return TT_OK;
}

/* Every header byte is printable ASCII or a blank: NumPy writes nothing else, and messages can quote the text. */
static tt_status npy_check_text(const char *path, const unsigned char *s, size_t len, tt_error *err)
{
    for (size_t i = 0; i < len; i++)
        if (!((s[i] >= 0x20 && s[i] < 0x7f) || s[i] == '\t' || s[i] == '\n' || s[i] == '\r'))
            return tt_fail(err, TT_ERR_FORMAT, "%s: malformed header: byte %zu is 0x%02x (a .npy header is ASCII "
                           "text)", path, i, s[i]);
    return TT_OK;
}

/* The preamble and the header dict, read and checked for the role; *bytes = the data's size. Allocates only the
 * header's text, which the file must hold and which is at most TT_NPY_MAX_HEADER bytes. */
static tt_status npy_header_read(tt_input *in, npy_role role, npy_header *h, size_t *bytes, tt_error *err)
{
    unsigned char pre[12];
    memset(h, 0, sizeof *h);
    tt_status s = tt_input_read(in, pre, 8, "the .npy preamble", err);
    if (s) return s;
    if (memcmp(pre, "\x93NUMPY", 6) != 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: bad magic: not a .npy file (it does not start with \\x93NUMPY)",
                       in->path);
    if (pre[6] < 1 || pre[6] > 3 || pre[7] != 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: .npy format version %u.%u is not supported (1.0, 2.0 or 3.0)",
                       in->path, pre[6], pre[7]);
    size_t lbytes = pre[6] == 1 ? 2 : 4, hlen = 0;
    if ((s = tt_input_read(in, pre + 8, lbytes, "the .npy preamble", err))) return s;
    for (size_t i = 0; i < lbytes; i++) hlen |= (size_t)pre[8 + i] << (8 * i); /* little-endian */
    uint64_t left = 0;
    tt_input_left(in, &left);
    if (hlen > TT_NPY_MAX_HEADER)
        return tt_fail(err, TT_ERR_FORMAT, "%s: the preamble claims a header of %zu bytes (more than %zu)", in->path,
                       hlen, TT_NPY_MAX_HEADER);
    if (left < hlen)
        return tt_fail(err, TT_ERR_FORMAT, "%s: truncated: the preamble claims a header of %zu bytes, the file has "
                       "%llu after the preamble", in->path, hlen, (unsigned long long)left);
    char *text = (char *)tt_malloc(hlen);
    if (!text) return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for a header of %zu bytes", in->path, hlen);
    npy_text t = {text, hlen, 0, in->path};
    s = tt_input_read(in, text, hlen, "the .npy header", err);
    if (!s) s = npy_check_text(in->path, (const unsigned char *)text, hlen, err);
    if (!s) s = npy_dict(&t, h, err);
    tt_free(text);
    if (!s) s = npy_check_dtype(in->path, h, role, err);
    if (!s) s = npy_check_shape(in->path, h, role, bytes, err);
    if (s) return s;
    /* the data must be exactly what the header says, before any buffer for it is made */
    tt_input_left(in, &left);
    if (left != *bytes) {
        char sh[NPY_MAX_NDIM * 22 + 4];
        return tt_fail(err, TT_ERR_FORMAT, "%s: %s: the header says shape %s of '%s' (%zu bytes of data), the file "
                       "has %llu bytes after the header", in->path, left < *bytes ? "truncated" : "trailing bytes",
                       npy_shape_str(h, sh, sizeof sh), h->descr, *bytes, (unsigned long long)left);
    }
    return TT_OK;
}

/* ---- the data ------------------------------------------------------------------------------------------------- */

static uint32_t npy_le32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

/* Element i of a chunk of integers, whatever its width (two's complement, little-endian). */
static int64_t npy_int(const unsigned char *chunk, npy_type type, size_t i)
{
    if (type == NPY_U1) return chunk[i];
    if (type == NPY_I4) return (int32_t)npy_le32(chunk + 4 * i);
    uint64_t lo = npy_le32(chunk + 8 * i), hi = npy_le32(chunk + 8 * i + 4);
    return (int64_t)(lo | hi << 32);
}

/* After the data: nothing more (a file that grew while being read is refused). */
static tt_status npy_end(tt_input *in, tt_error *err)
{
    int more = 0;
    tt_status s = tt_input_at_end(in, &more, err);
    if (!s && more)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: trailing bytes after the data (the file grew while being read)",
                    in->path);
    return s;
}

/* Integer samples to float32, exactly: every value must have |v| < 2^24 (TT_TOKEN_LIMIT), where float32 still holds
 * every integer. `dim` elements per sample, for the message. */
static tt_status npy_x_ints(tt_input *in, const npy_header *h, size_t elems, size_t dim, float *out, tt_error *err)
{
    unsigned char chunk[NPY_CHUNK];
    const int64_t lim = (int64_t)TT_TOKEN_LIMIT;
    const size_t size = g_npy_types[h->type].size, per = NPY_CHUNK / size;
    for (size_t done = 0; done < elems;) {
        size_t k = elems - done < per ? elems - done : per;
        tt_status s = tt_input_read(in, chunk, k * size, "the samples", err);
        if (s) return s;
        for (size_t i = 0; i < k; i++) {
            int64_t v = npy_int(chunk, h->type, i);
            if (v >= lim || v <= -lim)
                return tt_fail(err, TT_ERR_FORMAT, "%s: element %zu (sample %zu) is %lld: integer samples must be "
                               "below 2^24 = 16777216 in magnitude to be exact in float32", in->path, done + i,
                               (done + i) / dim, (long long)v);
            out[done + i] = (float)v;
        }
        done += k;
    }
    return TT_OK;
}

/* float32 samples in place: each must be finite (a NaN or an infinity would only surface as a diverged run). */
static tt_status npy_x_floats(const tt_input *in, uint8_t *x, size_t elems, size_t dim, tt_error *err)
{
    for (size_t i = 0; i < elems; i++) {
        uint32_t bits = npy_le32(x + 4 * i); /* little-endian in the file, whatever the host */
        float f;
        memcpy(&f, &bits, sizeof f);
        memcpy(x + 4 * i, &f, sizeof f);
        if ((bits & 0x7f800000u) == 0x7f800000u) /* exponent all ones: an infinity or a NaN */
            return tt_fail(err, TT_ERR_FORMAT, "%s: element %zu (sample %zu) is %s: float samples must be finite",
                           in->path, i, i / dim, bits & 0x007fffffu ? "NaN" : f > 0 ? "+inf" : "-inf");
    }
    return TT_OK;
}

/* The sample shape of an x header: (n, L) -> (L); (n, H, W) -> (H, W, 1); (n, H, W, C) -> (H, W, C). */
static tt_shape npy_sample_shape(const npy_header *h)
{
    if (h->ndim == 2) return tt_shape1(h->dims[1]);
    return tt_shape3(h->dims[1], h->dims[2], h->ndim == 4 ? h->dims[3] : 1);
}

/* Samples: the header, then the data as bytes (|u1), float32 (<f4) or integers converted (<i4, <i8). */
static tt_status npy_read_x(tt_input *in, tt_dataset *ds, npy_header *h, tt_error *err)
{
    memset(ds, 0, sizeof *ds);
    size_t bytes = 0;
    tt_status s = npy_header_read(in, NPY_X, h, &bytes, err);
    if (s) return s;
    size_t n = h->dims[0], elems = bytes / g_npy_types[h->type].size;
    ds->shape = npy_sample_shape(h);
    ds->dim = elems / n;
    ds->xtype = h->type == NPY_U1 ? TT_X_U8 : TT_X_F32;
    ds->scale = h->type == NPY_U1 ? 1.0f / 255.0f : 1.0f;
    if (h->type == NPY_U1 || h->type == NPY_F4) {
        s = tt_input_read_alloc(in, bytes, "the samples", &ds->x, err);
        if (!s && h->type == NPY_F4) s = npy_x_floats(in, ds->x, elems, ds->dim, err);
    } else {
        s = tt_input_alloc(in, elems * sizeof(float), "the samples as float32", &ds->x, err); /* <= bytes */
        if (!s) s = npy_x_ints(in, h, elems, ds->dim, (float *)(void *)ds->x, err);
    }
    if (!s) s = npy_end(in, err);
    if (s) {
        tt_dataset_free(ds);
        return s;
    }
    ds->n = n;
    return TT_OK;
}

/* Labels: the header, then n integers, each in [0, TT_NPY_MAX_CLASSES), into int32. */
static tt_status npy_read_y(tt_input *in, size_t *n, int32_t **labels, size_t *max_label, tt_error *err)
{
    unsigned char chunk[NPY_CHUNK];
    npy_header h;
    size_t bytes = 0;
    uint8_t *buf = NULL;
    *labels = NULL;
    *n = *max_label = 0;
    tt_status s = npy_header_read(in, NPY_Y, &h, &bytes, err);
    const size_t count = h.dims[0], size = g_npy_types[h.type].size, per = NPY_CHUNK / size;
    if (!s) s = tt_input_alloc(in, count * sizeof(int32_t), "the labels", &buf, err); /* count <= 1e8 */
    int32_t *y = (int32_t *)(void *)buf;
    size_t max = 0;
    for (size_t done = 0; !s && done < count;) {
        size_t k = count - done < per ? count - done : per;
        s = tt_input_read(in, chunk, k * size, "the labels", err);
        for (size_t i = 0; !s && i < k; i++, done++) {
            int64_t v = npy_int(chunk, h.type, i);
            if (v < 0)
                s = tt_fail(err, TT_ERR_FORMAT, "%s: label %lld of sample %zu is negative", in->path, (long long)v,
                            done);
            else if (v >= (int64_t)TT_NPY_MAX_CLASSES)
                s = tt_fail(err, TT_ERR_FORMAT, "%s: label %lld of sample %zu: more than %u classes", in->path,
                            (long long)v, done, TT_NPY_MAX_CLASSES);
            else {
                y[done] = (int32_t)v;
                max = (size_t)v > max ? (size_t)v : max;
            }
        }
    }
    if (!s) s = npy_end(in, err);
    if (s) {
        tt_free(buf);
        return s;
    }
    *labels = y;
    *n = count;
    *max_label = max;
    return TT_OK;
}

/* ---- entry points --------------------------------------------------------------------------------------------- */

tt_status tt_npy_read_x_mem(const void *data, size_t len, const char *name, tt_dataset *ds, tt_error *err)
{
    tt_input in;
    npy_header h;
    memset(ds, 0, sizeof *ds);
    tt_status s = tt_input_open_mem(&in, data, len, name, err);
    if (!s) s = npy_read_x(&in, ds, &h, err);
    tt_input_close(&in);
    return s;
}

tt_status tt_npy_read_y_mem(const void *data, size_t len, const char *name, size_t *n, int32_t **labels,
                            size_t *max_label, tt_error *err)
{
    tt_input in;
    *labels = NULL;
    tt_status s = tt_input_open_mem(&in, data, len, name, err);
    if (!s) s = npy_read_y(&in, n, labels, max_label, err);
    tt_input_close(&in);
    return s;
}

tt_status tt_npy_read_x(const char *path, tt_dataset *ds, tt_error *err)
{
    tt_input in;
    npy_header h;
    memset(ds, 0, sizeof *ds);
    tt_status s = tt_input_open(&in, path, err);
    if (!s) s = npy_read_x(&in, ds, &h, err);
    tt_input_close(&in);
    if (s) tt_dataset_free(ds);
    return s;
}

/* One split: x and y files into ds (its n_classes is set by the caller); *max_label for n_classes. */
static tt_status npy_load_split(const char *xpath, const char *ypath, tt_dataset *ds, npy_header *h,
                                size_t *max_label, tt_error *err)
{
    tt_input in;
    size_t n_y = 0;
    tt_status s = tt_input_open(&in, xpath, err);
    if (!s) s = npy_read_x(&in, ds, h, err);
    tt_input_close(&in);
    if (!s) s = tt_input_open(&in, ypath, err);
    if (!s) s = npy_read_y(&in, &n_y, &ds->y, max_label, err);
    tt_input_close(&in);
    if (!s && n_y != ds->n)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %zu labels but %s has %zu samples", ypath, n_y, xpath, ds->n);
    return s;
}

tt_status tt_dataset_load_npy(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err)
{
    static const char *const names[4] = {"x_train.npy", "y_train.npy", "x_test.npy", "y_test.npy"};
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    char *paths = (char *)tt_malloc(4 * TT_DATA_PATH_MAX);
    if (!paths) return tt_fail(err, TT_ERR_NOMEM, "--data npy:%s: out of memory for the file names", dir);
    const char *p[4] = {paths, paths + TT_DATA_PATH_MAX, paths + 2 * TT_DATA_PATH_MAX, paths + 3 * TT_DATA_PATH_MAX};
    npy_header htr, hte;
    memset(&htr, 0, sizeof htr);
    memset(&hte, 0, sizeof hte);
    size_t max_tr = 0, max_te = 0;
    char a[64], b[64];
    tt_status s = tt_data_dir_files("npy", dir, names, 4, paths, err);
    if (!s) s = npy_load_split(p[0], p[1], train, &htr, &max_tr, err);
    if (!s) s = npy_load_split(p[2], p[3], test, &hte, &max_te, err);
    if (!s && htr.type != hte.type)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: dtype '%s' but %s has '%s' (train and test must agree)", p[2],
                    hte.descr, p[0], htr.descr);
    if (!s && !tt_shape_eq(&train->shape, &test->shape))
        s = tt_fail(err, TT_ERR_FORMAT, "%s: samples of shape %s but %s has %s (train and test must agree)", p[2],
                    tt_shape_str(&test->shape, 0, a, sizeof a), p[0], tt_shape_str(&train->shape, 0, b, sizeof b));
    tt_free(paths);
    if (s) {
        tt_dataset_free(train);
        tt_dataset_free(test);
        return s;
    }
    /* the largest label of either split: a class seen only in the test set still needs its output */
    train->n_classes = test->n_classes = (max_tr > max_te ? max_tr : max_te) + 1;
    return TT_OK;
}
