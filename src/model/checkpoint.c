/* checkpoint.c — a training run's state in one safetensors file (tt_checkpoint.h, docs/checkpoints.md): the walk of
 * the model's layout table that writes it and reads it back, and the checks a run makes of what it read.
 *
 * The file: u64 little-endian N, N bytes of JSON header (padded with spaces so the data start 8-byte aligned), then
 * the tensors' float32 bytes, contiguous, in layout-table order: the weights, then each optimizer slot's copy of
 * them ("optimizer/<slot>/<tensor>"), then with --early-stopping restore_best_weights the best epoch's weights
 * ("early_stopping/best_weights/<tensor>"). The header's "__metadata__" holds strings only (the format's rule): where
 * the run is, the optimizer, the callbacks' state, what wrote it, and "crc32:%08x" of the whole file (its own 8 digits
 * read as zeros).
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
 *
 * This file holds the tensors' order (ck_tensor), the safe write, the read in its order (tt_checkpoint_parse) with
 * the tensors matched against the model and copied, and the finite check. The parts it calls, through ckpt.h:
 * safetensors.c (the container: the header's text, its entries and offsets, the checksum), ckpt_metadata.c (the
 * __metadata__ keys, written and read) and ckpt_options.c (the options object and the model it describes).
 * Not for: deciding when to save or what to resume (train.c), other dtypes than F32, big-endian hosts. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckpt.h"
#include "tt_input.h"
#include "tt_out.h"

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "checkpoint.c copies float32 tensors as they lie in memory: it assumes a little-endian host"
#endif

/* Tensor j of a checkpoint of model m, in file order: the weights (j < T), then slot k's copy (j / T = k + 1), then
 * with ck->cb.es_kept the best epoch's weights (k = n_slots). Writes its name and sets *ti to its layout-table entry;
 * returns -1 for the weights, else the slot's index (n_slots: the best weights). */
static int ck_tensor(const tt_model *m, const tt_checkpoint *ck, size_t j, char *name, size_t cap,
                     const tt_tensor_info **ti)
{
    const size_t T = m->n_tensors;
    const int k = (int)(j / T) - 1;
    *ti = &m->tensors[j % T];
    if (k < 0) snprintf(name, cap, "%s", (*ti)->name);
    else if (k == ck->n_slots) snprintf(name, cap, "early_stopping/best_weights/%s", (*ti)->name);
    else snprintf(name, cap, "optimizer/%s/%s", ck->slot_names[k], (*ti)->name);
    return k;
}

/* The tensors of a checkpoint of m, and the floats of tensor set k (ck_tensor's index). */
static size_t ck_n_tensors(const tt_model *m, const tt_checkpoint *ck)
{
    return (size_t)(1 + ck->n_slots + (ck->cb.es_kept != 0)) * m->n_tensors;
}
static float *ck_set(const tt_checkpoint *ck, int k)
{
    return k < 0 ? ck->params : k == ck->n_slots ? ck->best_params : ck->slots[k];
}

void tt_checkpoint_free(tt_checkpoint *ck)
{
    if (!ck) return;
    tt_free(ck->model_desc);
    tt_free(ck->options);
    json_object_put(ck->opts);
    tt_free(ck->params);
    for (int k = 0; k < TT_CKPT_MAX_SLOTS; k++) tt_free(ck->slots[k]);
    tt_free(ck->best_params);
    memset(ck, 0, sizeof *ck);
}

/* ---- writing ---------------------------------------------------------------------------------------------------- */

/* The whole header as text, padded with spaces to a multiple of 8 bytes (tt_malloc'd), or NULL (out of memory). */
static char *ck_header_text(const tt_model *m, const tt_checkpoint *ck, size_t *len)
{
    json_object *h = json_object_new_object();
    int bad = !h || ck_put(h, "__metadata__", ck_metadata(ck));
    uint64_t at = 0;
    char name[128];
    const size_t n = ck_n_tensors(m, ck);
    for (size_t j = 0; !bad && j < n; j++) {
        const tt_tensor_info *t;
        ck_tensor(m, ck, j, name, sizeof name, &t);
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
    if (ck->cb.es_kept && !ck->best_params)
        return tt_fail(err, TT_ERR_ARG, "%s: es_best_weights without the best epoch's weights", path);
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
    const size_t n = ck_n_tensors(m, ck);
    for (size_t j = 0; j < n; j++) {
        const tt_tensor_info *t;
        const int k = ck_tensor(m, ck, j, name, sizeof name, &t);
        const float *base = ck_set(ck, k);
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
    for (size_t j = 0; j < ck_n_tensors(m, ck); j++) {
        const tt_tensor_info *t;
        const int k = ck_tensor(m, ck, j, name, sizeof name, &t);
        crc = tt_crc32(crc, ck_set(ck, k) + t->offset, t->size * sizeof(float));
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

/* ---- reading ---------------------------------------------------------------------------------------------------- */

/* Every tensor of m and of each slot, with m's shapes, and no other; then the buffers filled from them. */
static tt_status ck_match(ck_parse *p, const tt_model *m, tt_checkpoint *ck)
{
    char name[128];
    const size_t n = ck_n_tensors(m, ck);
    for (size_t j = 0; j < n; j++) {
        const tt_tensor_info *t;
        ck_tensor(m, ck, j, name, sizeof name, &t);
        const ck_entry key = {.name = name};
        ck_entry *e = p->n_e ? (ck_entry *)bsearch(&key, p->e, p->n_e, sizeof *p->e, ck_by_name) : NULL;
        if (!e && j < m->n_tensors)
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: has no tensor %s (the model has it: a different --model?)",
                           p->what, name);
        if (!e && j >= (size_t)(1 + ck->n_slots) * m->n_tensors)
            return tt_fail(p->err, TT_ERR_FORMAT, "%s: has no tensor %s (its metadata say es_best_weights true: a "
                           "damaged file?)", p->what, name);
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
    if (ck->cb.es_kept && !(ck->best_params = (float *)tt_malloc(bytes)))
        return tt_fail(p->err, TT_ERR_NOMEM, "%s: out of memory for the best epoch's weights", p->what);
    for (size_t j = 0; j < n; j++) {
        const tt_tensor_info *t;
        const int k = ck_tensor(m, ck, j, name, sizeof name, &t);
        const ck_entry key = {.name = name};
        const ck_entry *e = (const ck_entry *)bsearch(&key, p->e, p->n_e, sizeof *p->e, ck_by_name);
        memcpy(ck_set(ck, k) + t->offset, p->data + e->begin, t->size * sizeof(float));
    }
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
    /* bytes: the weight, its slots and its best epoch's copy */
    const uint64_t per_param = sizeof(float) * (uint64_t)(1 + ck->n_slots + (ck->cb.es_kept != 0));
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

/* A tensor (of the weights: slot -1 or the best epoch's, n_slots; or of an optimizer's slot) that can never hold a
 * negative value: a batchnorm's
 * moving variance, and the "velocity" slot (Adam's and Nadam's second moment, RMSprop's average of g^2) — the square
 * root of a negative one is NaN, so a file with one would train or evaluate into NaN and blame something else. */
static int never_negative(const char *name, int slot, const tt_checkpoint *ck)
{
    const char *suffix = "/moving_variance";
    const size_t nl = strlen(name), sl = strlen(suffix);
    if (slot < 0 || slot == ck->n_slots) return nl >= sl && strcmp(name + nl - sl, suffix) == 0; /* weights */
    return strcmp(ck->slot_names[slot], "velocity") == 0;
}

tt_status tt_checkpoint_check_finite(const tt_checkpoint *ck, const tt_model *m, const char *what, int with_slots,
                                     size_t *bad, tt_error *err)
{
    char name[128], first[128] = "";
    size_t at = 0, n_nonfinite = 0, n_negative = 0;
    float x = 0;
    const size_t n = with_slots ? ck_n_tensors(m, ck) : m->n_tensors; /* the slots and the best weights too */
    for (size_t j = 0; j < n; j++) {
        const tt_tensor_info *t;
        const int k = ck_tensor(m, ck, j, name, sizeof name, &t);
        const float *v = ck_set(ck, k) + t->offset;
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
