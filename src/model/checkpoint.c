/* checkpoint.c — a training run's state in one safetensors file (tt_checkpoint.h, docs/checkpoints.md).
 *
 * The file: u64 little-endian N, N bytes of JSON header (padded with spaces so the data start 8-byte aligned), then
 * the tensors' float32 bytes, contiguous, in layout-table order: the weights, then each optimizer slot's copy of
 * them ("optimizer/<slot>/<tensor>"). The header's "__metadata__" holds strings only (the format's rule): where the
 * run is, the optimizer, what wrote it, and "crc32:%08x" of the whole file (its own 8 digits read as zeros).
 *
 * Reading treats the file as hostile, as src/data/npy.c does: a regular file only (tt_input_open), the header's
 * length capped and checked against the file before it is parsed, the header read as strict JSON (src/model/json.c:
 * json-c behind a scan for what json-c lets through), the whole file's checksum verified before any value is read, the
 * options typed (tt_checkpoint_option), every tensor's dtype, shape and offsets checked and the tensors required to
 * tile the data section exactly, and only then, with a model, buffers of the model's size allocated and filled. Every
 * refusal is one line that starts with the file's name. A checkpoint is data: nothing here opens a path it names.
 *
 * Writing never leaves a torn file at the path: a temporary beside it, written, fsync'd, closed, renamed over the
 * path, then the directory fsync'd.
 * Not for: deciding when to save or what to resume (train.c), other dtypes than F32, big-endian hosts. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tt_checkpoint.h"
#include "tt_out.h"
#include "tt_input.h"
#include "tt_json.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c copies float32 tensors as they lie in memory: it assumes a little-endian host"
#endif

enum {
    CK_HEADER_MAX = 64 << 20, /* a header of 1M tensors' entries; anything larger is not a checkpoint */
    CK_MAX_NDIM = 8,          /* ours have at most TT_MAX_DIMS; safetensors files from elsewhere rarely more */
    CK_JSON_DEPTH = 8,        /* ours nest 3 deep (header, entry, shape) */
    CK_NAME_MAX = 255,        /* bytes of a tensor name */
    CK_QUOTE = 64,            /* bytes of a file's value quoted in a message */
    /* JSON values in a header (counted as commas by the pre-scan, before json-c allocates an object for each): ours
     * have ~15 per tensor, at most 4 x TT_MAX_TENSORS tensors, so about 8,000; a 64 MiB header of "[0,0,0,...]"
     * would have 32 million, some gigabytes as json-c objects */
    CK_MAX_VALUES = 1 << 16
};
#define CK_FORMAT "towertrain-checkpoint"
#define CK_FORMAT_VERSION "2"
#define CK_SUM_ZERO "crc32:00000000" /* the checksum's value while the file's CRC-32 is taken */
#define CK_EPOCH_MAX ((uint64_t)1 << 32) /* a run resumes at epoch + 1: no wrap-around to 0 */
#define CK_DIM_MAX ((uint64_t)1 << 48) /* larger dims are refused before any product is formed */

enum { CK_TOWERS_MAX = 1024 }; /* --towers' largest: the most gradients a step applies alone (optim_steps) */

/* The metadata keys, all required but the three marked optional, and the optimizer's (tt_optim_params, written after
 * "optimizer"); any other key is refused. */
static const struct {
    const char *key;
    int optional;
} g_md_keys[] = {
    {"format", 0}, {"format_version", 0}, {"epoch", 0}, {"step", 0}, {"steps_per_epoch", 0}, {"global_step", 0},
    {"seed", 0}, {"batch", 0}, {"optimizer", 0}, {"u_product", 0}, {"best", 0}, {"towers", 0},
    {"backend", 0}, {"model", 1}, {"options", 1}, {"n_params", 0}, {"checksum", 0}, {"optim_steps", 1},
};
enum { CK_N_MD_KEYS = (int)(sizeof g_md_keys / sizeof g_md_keys[0]) };

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
    {"base_lr", TT_CKPT_NUMBER, 0, 0}, {"same", TT_CKPT_STRINGS, 0, 0},
};
enum { CK_N_OPT_KEYS = (int)(sizeof g_opt_keys / sizeof g_opt_keys[0]) };

/* ---- shared by both directions ---------------------------------------------------------------------------------- */

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

/* Tensor j of a checkpoint of model m, in file order: the weights (j < T), then slot k's copy (j / T = k + 1). Writes
 * its name and sets *ti to its layout-table entry; returns -1 for the weights, else the slot's index. */
static int ck_tensor(const tt_model *m, const char (*slot_names)[24], size_t j, char *name, size_t cap,
                     const tt_tensor_info **ti)
{
    const size_t T = m->n_tensors;
    const int k = (int)(j / T) - 1;
    *ti = &m->tensors[j % T];
    if (k < 0) snprintf(name, cap, "%s", (*ti)->name);
    else snprintf(name, cap, "optimizer/%s/%s", slot_names[k], (*ti)->name);
    return k;
}

/* "(784, 128)", as Keras and NumPy print a shape ("(5,)" for one dimension, "()" for none). */
static const char *ck_shape_str(int ndim, const uint64_t *d, char *out, size_t len)
{
    size_t k = (size_t)snprintf(out, len, "(");
    for (int i = 0; i < ndim && k < len; i++)
        k += (size_t)snprintf(out + k, len - k, "%s%llu", i ? ", " : "", (unsigned long long)d[i]);
    if (k < len) snprintf(out + k, len - k, ndim == 1 ? ",)" : ")");
    return out;
}

void tt_checkpoint_free(tt_checkpoint *ck)
{
    if (!ck) return;
    tt_free(ck->model_desc);
    tt_free(ck->options);
    json_object_put(ck->opts);
    tt_free(ck->params);
    for (int k = 0; k < TT_CKPT_MAX_SLOTS; k++) tt_free(ck->slots[k]);
    memset(ck, 0, sizeof *ck);
}

/* ---- writing ---------------------------------------------------------------------------------------------------- */

/* Adds key: v to a JSON object, taking v (NULL: json-c ran out of memory); -1 on failure. */
static int ck_put(json_object *o, const char *key, json_object *v)
{
    if (!v) return -1;
    if (json_object_object_add(o, key, v) != 0) {
        json_object_put(v);
        return -1;
    }
    return 0;
}

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
static json_object *ck_metadata(const tt_checkpoint *ck)
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
        bad |= p->type == TT_OPTIM_REAL ? md_f32(md, p->name, *(const float *)v)
                                        : md_str(md, p->name, *(const int *)v ? "true" : "false");
    }
    bad |= md_f64(md, "u_product", ck->u_product) | md_f64(md, "best", ck->best) | md_u64(md, "towers", ck->towers) |
           md_str(md, "backend", ck->backend);
    if (ck->model_desc) bad |= md_str(md, "model", ck->model_desc);
    if (ck->options) bad |= md_str(md, "options", ck->options);
    bad |= md_u64(md, "n_params", ck->n_params) | md_str(md, "checksum", CK_SUM_ZERO);
    if (bad) {
        json_object_put(md);
        return NULL;
    }
    return md;
}

/* Appends v to a JSON array, taking v (NULL: out of memory); -1 on failure. */
static int ck_push(json_object *a, json_object *v)
{
    if (!v) return -1;
    if (json_object_array_add(a, v) != 0) {
        json_object_put(v);
        return -1;
    }
    return 0;
}

/* {"dtype": "F32", "shape": [...], "data_offsets": [begin, begin + bytes]}; NULL: out of memory. */
static json_object *ck_entry_json(const tt_tensor_info *t, uint64_t begin)
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

/* The whole header as text, padded with spaces to a multiple of 8 bytes (tt_malloc'd), or NULL (out of memory). */
static char *ck_header_text(const tt_model *m, const tt_checkpoint *ck, size_t *len)
{
    json_object *h = json_object_new_object();
    int bad = !h || ck_put(h, "__metadata__", ck_metadata(ck));
    uint64_t at = 0;
    char name[128];
    const size_t n = (size_t)(1 + ck->n_slots) * m->n_tensors;
    for (size_t j = 0; !bad && j < n; j++) {
        const tt_tensor_info *t;
        ck_tensor(m, ck->slot_names, j, name, sizeof name, &t);
        bad = ck_put(h, name, ck_entry_json(t, at));
        at += t->size * sizeof(float);
    }
    char *out = NULL;
    size_t tl = 0;
    const char *text = bad ? NULL : json_object_to_json_string_length(h, JSON_C_TO_STRING_PLAIN |
                                                                          JSON_C_TO_STRING_NOSLASHESCAPE, &tl);
    if (text) {
        *len = (tl + 7) / 8 * 8;
        if ((out = (char *)tt_malloc(*len))) {
            memcpy(out, text, tl);
            memset(out + tl, ' ', *len - tl);
        }
    }
    json_object_put(h);
    return out;
}

/* The 8-byte little-endian length prefix of a header of n bytes. */
static void ck_prefix(unsigned char *out, size_t n)
{
    for (int i = 0; i < 8; i++) out[i] = (unsigned char)((uint64_t)n >> (8 * i));
}

/* 8 lower-case hex digits of crc at out (no NUL). */
static void ck_put_hex(char *out, uint32_t crc)
{
    static const char hex[] = "0123456789abcdef";
    for (int i = 0; i < 8; i++) out[i] = hex[(crc >> (28 - 4 * i)) & 15];
}

/* Where the checksum's 8 hex digits lie in a header's text h (n bytes): __metadata__'s one "checksum" key, spelt
 * without escapes, whose value is "crc32:" and 8 lower-case hex digits — found by the strict scan, so a quoted
 * '"checksum":' inside another string never counts. *digits: their offset in h. */
static tt_status ck_sum_locate(const char *what, const char *h, size_t n, const tt_json_scan *sc, size_t *digits,
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
static tt_status ck_sum_digits(const char *what, const char *h, size_t n, size_t *digits, tt_error *err)
{
    tt_json_scan sc = {.find = "checksum", .find_depth = 2};
    char why[160];
    json_object *top = tt_json_parse_object(h, n, CK_JSON_DEPTH, CK_MAX_VALUES, &sc, why, sizeof why);
    json_object_put(top);
    if (!top) return tt_fail(err, TT_ERR_FORMAT, "%s: the header %s", what, why);
    return ck_sum_locate(what, h, n, &sc, digits, err);
}

/* CRC-32 of a file of len bytes whose checksum digits are at byte `digits`, read as '0's. */
static uint32_t ck_file_crc(const uint8_t *buf, size_t len, size_t digits)
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

/* Writes all n bytes: short writes continued, EINTR retried. 0, or -1 with errno set. */
static int ck_write_all(int fd, const void *p, size_t n)
{
    const char *b = (const char *)p;
    while (n) {
        const size_t k = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
        const ssize_t w = write(fd, b, k);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return -1;
        if (w == 0) {
            errno = EIO; /* no progress and no error: do not spin */
            return -1;
        }
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

/* What the writer is given must describe a file the reader takes back: the model's size, the optimizer's slots. */
static tt_status ck_check_for_write(const char *path, const tt_model *m, const tt_checkpoint *ck, tt_error *err)
{
    const char *names[3];
    const int ns = tt_optim_slot_names(&ck->optim, names);
    if (ck->n_params != m->n_params || !ck->params)
        return tt_fail(err, TT_ERR_ARG, "%s: checkpoint of %zu parameters for a model of %zu", path, ck->n_params,
                       m->n_params);
    if (ck->n_slots != ns)
        return tt_fail(err, TT_ERR_ARG, "%s: %d optimizer slots given, optimizer %s keeps %d", path, ck->n_slots,
                       tt_optim_kind_name(ck->optim.kind), ns);
    for (int k = 0; k < ns; k++)
        if (strcmp(ck->slot_names[k], names[k]) != 0 || !ck->slots[k])
            return tt_fail(err, TT_ERR_ARG, "%s: optimizer slot %d is '%.23s', optimizer %s keeps '%s' there", path, k,
                           ck->slot_names[k], tt_optim_kind_name(ck->optim.kind), names[k]);
    if (!memchr(ck->backend, '\0', sizeof ck->backend) || !tt_json_utf8(ck->backend, strlen(ck->backend)) ||
        (ck->model_desc && !tt_json_utf8(ck->model_desc, strlen(ck->model_desc))) ||
        (ck->options && !tt_json_utf8(ck->options, strlen(ck->options))))
        return tt_fail(err, TT_ERR_ARG, "%s: the backend, model description or options are not UTF-8 text", path);
    return TT_OK;
}

/* Writes the prefix, header and tensors to fd. 0, or -1 with errno set. */
static int ck_write_body(int fd, const tt_model *m, const tt_checkpoint *ck, const char *hdr, size_t hlen)
{
    unsigned char prefix[8];
    ck_prefix(prefix, hlen);
    if (ck_write_all(fd, prefix, 8) || ck_write_all(fd, hdr, hlen)) return -1;
    char name[128];
    const size_t n = (size_t)(1 + ck->n_slots) * m->n_tensors;
    for (size_t j = 0; j < n; j++) {
        const tt_tensor_info *t;
        const int k = ck_tensor(m, ck->slot_names, j, name, sizeof name, &t);
        const float *base = k < 0 ? ck->params : ck->slots[k];
        if (ck_write_all(fd, base + t->offset, t->size * sizeof(float))) return -1;
    }
    return 0;
}

/* The directory holding path ("." for a bare name) and mkstemp's template for the temporary beside it: "." + the
 * base name + "." + TEMP_RANDOM 'X' characters, which mkstemp replaces with a unique suffix. */
enum { TEMP_RANDOM = 6 };
static tt_status ck_temp_names(const char *path, char *dir, char *tmpl, size_t cap, tt_error *err)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return tt_fail(err, TT_ERR_ARG, "%s: not a file name (it ends in '/')", path);
    const size_t dl = slash ? (size_t)(slash - path) : 0;
    int n1 = slash ? snprintf(dir, cap, "%.*s", (int)(dl ? dl : 1), dl ? path : "/") : snprintf(dir, cap, ".");
    int n2 = snprintf(tmpl, cap, "%.*s.%s.", (int)(slash ? dl + 1 : 0), path, base);
    if (n1 < 0 || n2 < 0 || (size_t)n1 >= cap || (size_t)n2 + TEMP_RANDOM >= cap)
        return tt_fail(err, TT_ERR_ARG, "%.200s...: path too long", path);
    memset(tmpl + n2, 'X', TEMP_RANDOM);
    tmpl[n2 + TEMP_RANDOM] = '\0';
    return TT_OK;
}

tt_status tt_checkpoint_write(const char *path, const tt_model *m, const tt_checkpoint *ck, tt_error *err)
{
    tt_status s = ck_check_for_write(path, m, ck, err);
    if (s) return s;
    char dir[PATH_MAX], tmp[PATH_MAX];
    if ((s = ck_temp_names(path, dir, tmp, sizeof tmp, err))) return s;

    size_t hlen = 0, digits = 0;
    char *hdr = ck_header_text(m, ck, &hlen);
    if (!hdr) return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for the checkpoint's header", path);
    /* the checksum covers the whole file with its own 8 digits as '0's: the prefix and header, then the tensors in
     * file order; it is found in the header as the reader finds it */
    if ((s = ck_sum_digits(path, hdr, hlen, &digits, err))) {
        tt_free(hdr);
        return s;
    }
    unsigned char prefix[8];
    ck_prefix(prefix, hlen);
    uint32_t crc = tt_crc32(tt_crc32(0, prefix, 8), hdr, hlen);
    char name[128];
    for (size_t j = 0; j < (size_t)(1 + ck->n_slots) * m->n_tensors; j++) {
        const tt_tensor_info *t;
        const int k = ck_tensor(m, ck->slot_names, j, name, sizeof name, &t);
        crc = tt_crc32(crc, (k < 0 ? ck->params : ck->slots[k]) + t->offset, t->size * sizeof(float));
    }
    ck_put_hex(hdr + digits, crc);

    const int fd = mkstemp(tmp);
    if (fd < 0) {
        tt_free(hdr);
        return tt_fail(err, TT_ERR_IO, "%s: cannot create a temporary file in %s: %s", path, dir, strerror(errno));
    }
    /* mkstemp makes it 0600: keep the mode of the file it replaces, else rw-r--r-- as most tools write */
    struct stat old;
    const mode_t mode = stat(path, &old) == 0 && S_ISREG(old.st_mode) ? (old.st_mode & 07777) : 0644;
    const char *step = NULL;
    int e = 0;
    if (fchmod(fd, mode) != 0) step = "cannot set the mode of", e = errno;
    else if (ck_write_body(fd, m, ck, hdr, hlen) != 0) step = "cannot write", e = errno;
    else if (fsync(fd) != 0) step = "cannot fsync", e = errno; /* the data on disk before the name points at them */
    tt_free(hdr);
    if (close(fd) != 0 && !step) step = "cannot close", e = errno; /* NFS and quotas may report a failed write here */
    if (!step && rename(tmp, path) != 0) step = "cannot rename the temporary file over", e = errno;
    if (step) {
        unlink(tmp);
        return tt_fail(err, TT_ERR_IO, "%s: %s the checkpoint (temporary %s): %s", path, step, tmp, strerror(e));
    }
    /* the rename on disk: until the directory is synced, a crash can bring the old entry back */
    const int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) != 0) {
        const int de = errno;
        if (dfd >= 0) close(dfd);
        return tt_fail(err, TT_ERR_IO, "%s: written, but cannot fsync its directory %s: %s", path, dir, strerror(de));
    }
    close(dfd);
    return TT_OK;
}

/* ---- reading: the header's text --------------------------------------------------------------------------------- */

typedef struct ck_entry {
    const char *name; /* json-c's copy of the key (lives as long as the parsed header) */
    uint64_t begin, end; /* bytes, from the start of the data section */
    int ndim;
    uint64_t shape[CK_MAX_NDIM];
    int used; /* matched to a model tensor */
} ck_entry;

typedef struct ck_parse {
    const char *what; /* the source's name, first in every message */
    tt_error *err;
    json_object *top; /* the parsed header */
    json_object *md;  /* its "__metadata__" */
    const uint8_t *data; /* the data section */
    uint64_t data_len;
    ck_entry *e;
    size_t n_e;
    const uint8_t *buf; /* the whole file */
    size_t len;
    tt_json_scan sc; /* the header's scan: where its "checksum" value lies */
} ck_parse;

/* ---- reading: the metadata -------------------------------------------------------------------------------------- */

static int ck_uint(json_object *v, uint64_t max, uint64_t *out);
static tt_status md_checksum(const ck_parse *p);

/* A file's value for a message: escaped, at most CK_QUOTE bytes. */
static const char *ck_quote(const char *s, char *out, size_t len)
{
    tt_escape(s, out, len);
    return out;
}

/* The metadata value of key (required unless *v may stay NULL for an optional key). */
static tt_status md_get(const ck_parse *p, const char *key, int optional, const char **v)
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

static tt_status md_bad(const ck_parse *p, const char *key, const char *v, const char *want);
static tt_status md_uint(const ck_parse *p, const char *key, uint64_t max, uint64_t *out);

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
static tt_status md_double(const ck_parse *p, const char *key, int nan_ok, double *out)
{
    const char *v;
    tt_status s = md_get(p, key, 0, &v);
    if (s) return s;
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

/* The format and its version (what the rest of the header means), then the checksum: nothing else is read before
 * the file is known whole. Version 1 (its checksum over the tensors only) is refused, naming what reads it. */
static tt_status md_version(const ck_parse *p)
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

/* The run's position, the optimizer and what wrote it, into ck. */
static tt_status md_read(const ck_parse *p, tt_checkpoint *ck)
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
    if (ck->optim_steps < ck->global_step || ck->optim_steps - ck->global_step > extra_max)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: optim_steps %llu is not between global_step %llu and "
                       "global_step x the most towers = %llu x %llu", p->what, (unsigned long long)ck->optim_steps,
                       (unsigned long long)ck->global_step, (unsigned long long)ck->global_step,
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
        if ((s = q->type == TT_OPTIM_REAL ? md_float(p, q->name, (float *)f) : md_bool(p, q->name, (int *)f)) ||
            (s = md_optim_range(p, q, c)))
            return s;
    }
    if ((s = md_double(p, "u_product", 0, &ck->u_product)) || (s = md_double(p, "best", 1, &ck->best))) return s;
    /* what a run can have written: Nadam's product of momenta in (0, 1) (0 once it underflows; 1 before a step), a
     * best metric that is a number or none yet — an Inf there would keep best.safetensors from ever being written */
    if (!(ck->u_product >= 0 && ck->u_product <= 1))
        return md_bad(p, "u_product", json_object_get_string(json_object_object_get(p->md, "u_product")),
                      "a number in [0, 1] (a product of momenta)");
    if (isinf(ck->best))
        return md_bad(p, "best", json_object_get_string(json_object_object_get(p->md, "best")), "a finite number or nan");
    if ((s = md_get(p, "backend", 0, &v))) return s;
    if (strlen(v) >= sizeof ck->backend) return md_bad(p, "backend", v, "a backend name");
    memcpy(ck->backend, v, strlen(v) + 1);
    const char *names[3];
    ck->n_slots = tt_optim_slot_names(c, names);
    for (int k = 0; k < ck->n_slots; k++) snprintf(ck->slot_names[k], sizeof ck->slot_names[k], "%s", names[k]);
    return TT_OK;
}

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
static tt_status md_texts(const ck_parse *p, tt_checkpoint *ck)
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

/* ---- reading: the tensors --------------------------------------------------------------------------------------- */

/* A JSON integer in [0, max]. */
static int ck_uint(json_object *v, uint64_t max, uint64_t *out)
{
    if (!json_object_is_type(v, json_type_int)) return 0;
    const int64_t x = json_object_get_int64(v); /* json-c gives INT64_MAX for anything larger: refused below */
    if (x < 0 || x == INT64_MAX || (uint64_t)x > max) return 0;
    *out = (uint64_t)x;
    return 1;
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

static int ck_by_name(const void *a, const void *b)
{
    return strcmp(((const ck_entry *)a)->name, ((const ck_entry *)b)->name);
}

/* Every entry read, and together they tile the data section: from byte 0, each where the previous ended, the last
 * at its end — no overlap, no gap, nothing after. Leaves the entries sorted by name. */
static tt_status ck_entries(ck_parse *p)
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

/* Every tensor of m and of each slot, with m's shapes, and no other; then the buffers filled from them. */
static tt_status ck_match(ck_parse *p, const tt_model *m, tt_checkpoint *ck)
{
    char name[128];
    const size_t n = (size_t)(1 + ck->n_slots) * m->n_tensors;
    for (size_t j = 0; j < n; j++) {
        const tt_tensor_info *t;
        ck_tensor(m, ck->slot_names, j, name, sizeof name, &t);
        const ck_entry key = {.name = name};
        ck_entry *e = p->n_e ? (ck_entry *)bsearch(&key, p->e, p->n_e, sizeof *p->e, ck_by_name) : NULL;
        if (!e && j < m->n_tensors)
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: has no tensor %s (the model has it: a different --model?)",
                           p->what, name);
        if (!e)
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: has no tensor %s (optimizer %s keeps it: a damaged file?)",
                           p->what, name, tt_optim_kind_name(ck->optim.kind));
        uint64_t want[TT_MAX_DIMS];
        int same = e->ndim == t->ndim;
        for (int d = 0; d < t->ndim; d++) {
            want[d] = t->shape[d];
            same = same && e->shape[d] == want[d];
        }
        if (!same) {
            char a[160], b[160];
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensor %s has shape %s, the model has %s", p->what, name,
                           ck_shape_str(e->ndim, e->shape, a, sizeof a), ck_shape_str(t->ndim, want, b, sizeof b));
        }
        e->used = 1;
    }
    for (size_t i = 0; i < p->n_e; i++)
        if (!p->e[i].used) {
            char q[CK_QUOTE];
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: tensor %s is not one of the model's or optimizer %s's (a "
                           "different --model or optimizer?)", p->what, ck_quote(p->e[i].name, q, sizeof q),
                           tt_optim_kind_name(ck->optim.kind));
        }
    if (ck->n_params != m->n_params)
        return tt_fail(p->err, TT_ERR_FORMAT, "%s: metadata: n_params is %zu, the model has %zu", p->what,
                       ck->n_params, m->n_params);
    const size_t bytes = m->n_params * sizeof(float);
    if (!(ck->params = (float *)tt_malloc(bytes)))
        return tt_fail(p->err, TT_ERR_NOMEM, "%s: out of memory for %zu parameters", p->what, m->n_params);
    for (int k = 0; k < ck->n_slots; k++)
        if (!(ck->slots[k] = (float *)tt_malloc(bytes)))
            return tt_fail(p->err, TT_ERR_NOMEM, "%s: out of memory for the optimizer's %s", p->what,
                           ck->slot_names[k]);
    for (size_t j = 0; j < n; j++) {
        const tt_tensor_info *t;
        const int k = ck_tensor(m, ck->slot_names, j, name, sizeof name, &t);
        const ck_entry key = {.name = name};
        const ck_entry *e = (const ck_entry *)bsearch(&key, p->e, p->n_e, sizeof *p->e, ck_by_name);
        memcpy((k < 0 ? ck->params : ck->slots[k]) + t->offset, p->data + e->begin, t->size * sizeof(float));
    }
    return TT_OK;
}

/* The prefix and the header: its length sane and inside the buffer, its text JSON as the format says, one object
 * with a __metadata__ object. Sets p->top, p->md, p->data, p->data_len. */
static tt_status ck_header(ck_parse *p, const uint8_t *buf, size_t len)
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

tt_status tt_checkpoint_parse(const uint8_t *buf, size_t len, const char *what, const tt_model *m, tt_checkpoint *ck,
                              tt_error *err)
{
    memset(ck, 0, sizeof *ck);
    ck_parse p = {.what = what, .err = err};
    tt_status s = ck_header(&p, buf, len);
    if (!s) s = md_version(&p);
    if (!s) s = md_read(&p, ck);
    if (!s) s = ck_entries(&p);
    if (!s) s = md_texts(&p, ck);
    if (!s && m) s = ck_match(&p, m, ck);
    const uint64_t per_param = sizeof(float) * (uint64_t)(1 + ck->n_slots); /* bytes: the weight and its slots */
    if (!s && !m && (p.data_len % per_param != 0 || p.data_len / per_param != ck->n_params))
        s = tt_fail(err, TT_ERR_FORMAT, "%s: the tensors hold %llu bytes, not n_params %zu x (weights + %d optimizer "
                    "slots) x 4", what, (unsigned long long)p.data_len, ck->n_params, ck->n_slots);
    tt_free(p.e);
    json_object_put(p.top);
    if (s) tt_checkpoint_free(ck);
    return s;
}

tt_status tt_checkpoint_read(const char *path, const tt_model *m, tt_checkpoint *ck, tt_error *err)
{
    memset(ck, 0, sizeof *ck);
    uint8_t *buf = NULL;
    size_t len = 0;
    tt_status s = tt_checkpoint_read_bytes(path, &buf, &len, err);
    if (!s) s = tt_checkpoint_parse(buf, len, path, m, ck, err);
    tt_free(buf);
    return s;
}

tt_status tt_checkpoint_read_bytes(const char *path, uint8_t **out, size_t *len, tt_error *err)
{
    *out = NULL;
    *len = 0;
    tt_input in;
    uint64_t size = 0;
    uint8_t *buf = NULL;
    int more = 0;
    tt_status s = tt_input_open(&in, path, err); /* regular files only; FIFOs refused without blocking */
    struct stat st;
    if (!s && fstat(in.fd, &st) == 0) tt_out_note_own(&st); /* a run's own file: its directory may take outputs */
    if (!s) {
        tt_input_left(&in, &size);
        if (size > SIZE_MAX) s = tt_fail(err, TT_ERR_FORMAT, "%s: too large for this machine", path);
    }
    if (!s) s = tt_input_read_alloc(&in, (size_t)size, "the checkpoint", &buf, err);
    if (!s) s = tt_input_at_end(&in, &more, err);
    if (!s && more) s = tt_fail(err, TT_ERR_IO, "%s: the file grew while being read", path);
    tt_input_close(&in);
    if (s) {
        tt_free(buf);
        return s;
    }
    *out = buf;
    *len = (size_t)size;
    return TT_OK;
}

/* ---- checks a run makes of what it read ------------------------------------------------------------------------ */

/* A tensor (of the weights: slot -1, or of an optimizer's slot) that can never hold a negative value: a batchnorm's
 * moving variance, and the "velocity" slot (Adam's and Nadam's second moment, RMSprop's average of g^2) — the square
 * root of a negative one is NaN, so a file with one would train or evaluate into NaN and blame something else. */
static int never_negative(const char *name, int slot, const tt_checkpoint *ck)
{
    const char *suffix = "/moving_variance";
    const size_t nl = strlen(name), sl = strlen(suffix);
    if (slot < 0) return nl >= sl && strcmp(name + nl - sl, suffix) == 0;
    return strcmp(ck->slot_names[slot], "velocity") == 0;
}

tt_status tt_checkpoint_check_finite(const tt_checkpoint *ck, const tt_model *m, const char *what, int with_slots,
                                     size_t *bad, tt_error *err)
{
    char name[128], first[128] = "";
    size_t at = 0, n_nonfinite = 0, n_negative = 0;
    float x = 0;
    const size_t n = (size_t)(1 + (with_slots ? ck->n_slots : 0)) * m->n_tensors;
    for (size_t j = 0; j < n; j++) {
        const tt_tensor_info *t;
        const int k = ck_tensor(m, ck->slot_names, j, name, sizeof name, &t);
        const float *v = (k < 0 ? ck->params : ck->slots[k]) + t->offset;
        const int nonneg = never_negative(name, k, ck);
        for (size_t i = 0; i < t->size; i++) {
            const int nonfinite = !isfinite(v[i]), negative = !nonfinite && nonneg && v[i] < 0.0f;
            if (!nonfinite && !negative) continue;
            if (n_nonfinite + n_negative == 0) {
                snprintf(first, sizeof first, "%s", name);
                at = i;
                x = v[i];
            }
            n_nonfinite += (size_t)nonfinite;
            n_negative += (size_t)negative;
        }
    }
    const size_t n_bad = n_nonfinite + n_negative;
    if (bad) *bad = n_bad;
    if (!n_bad) return TT_OK;
    char count[96];
    if (n_nonfinite && n_negative)
        snprintf(count, sizeof count, "%zu non-finite and %zu negative value%s in all", n_nonfinite, n_negative,
                 n_negative == 1 ? "" : "s");
    else
        snprintf(count, sizeof count, "%zu %s value%s in all", n_bad, n_negative ? "negative" : "non-finite",
                 n_bad == 1 ? "" : "s");
    if (isfinite(x))
        return tt_fail(err, TT_ERR_FORMAT, "%s: tensor %s holds a negative value (%g) at index %zu, where only a "
                       "variance or a mean square can be (%s)", what, first, (double)x, at, count);
    return tt_fail(err, TT_ERR_FORMAT, "%s: tensor %s holds %s at index %zu (%s)", what, first,
                   isnan(x) ? "NaN" : x > 0 ? "Inf" : "-Inf", at, count);
}

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
            for (int digits = 1; digits <= 9; digits++) {
                snprintf(num, sizeof num, "%.*g", digits, (double)x);
                if (strtof(num, NULL) == x) break;
            }
            k += (size_t)snprintf(out + k, len - k, " %s=%s", key->name, num);
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
