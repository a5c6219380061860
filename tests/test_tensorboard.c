/* test_tensorboard.c — --tensorboard's event files (issue 21, item 1), read back by a decoder of this file's own: the
 * TFRecord framing with a bit-at-a-time CRC-32C (not the writer's table) and the protocol-buffer wire format by hand
 * (not protobuf-c), so a writer bug cannot hide behind the same bug in the reader. Every value is held to the
 * JSON log of the same run, and the per-step records of a later epoch to those of the same epoch resumed in another
 * process. Also: the options' refusals, a directory another run holds, a failed write (a file size
 * limit) named in one line, and a run stopped by SIGINT leaving files that decode to their last byte. */
#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <zlib.h>

#include "tt_tensorboard.h"
#include "tt_test.h"
#include "tt_train.h"

static char dir[64];
static char out_path[128], err_path[128];

static void expect(const char *args, int code, const char *fragment)
{
    tt_test_expect(args, code, fragment, out_path, err_path);
}

/* ---- the data: a tiny MNIST-format directory (4x4 images, 10 classes) ---- */

static void write_idx(const char *name, int ndim, const uint32_t *dims, const unsigned char *data, size_t n)
{
    tt_test_write_idx(dir, name, ndim, dims, data, n);
}

static void setup(void)
{
    tt_test_tmpdir(dir, sizeof dir);
    snprintf(out_path, sizeof out_path, "%s/stdout", dir);
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    enum { NTR = 400, NTE = 40, D = 16 };
    static unsigned char img[NTR * D], lab[NTR];
    for (int i = 0; i < NTR; i++) {
        lab[i] = (unsigned char)(i % 10);
        for (int j = 0; j < D; j++) img[i * D + j] = (unsigned char)((i * 7 + j * 13) % 60 + (j == lab[i] ? 190 : 0));
    }
    uint32_t tri[3] = {NTR, 4, 4}, trl[1] = {NTR}, tei[3] = {NTE, 4, 4}, tel[1] = {NTE};
    write_idx("train-images-idx3-ubyte.gz", 3, tri, img, sizeof img);
    write_idx("train-labels-idx1-ubyte.gz", 1, trl, lab, sizeof lab);
    write_idx("t10k-images-idx3-ubyte.gz", 3, tei, img, NTE * D);
    write_idx("t10k-labels-idx1-ubyte.gz", 1, tel, lab, NTE);
}

/* ---- an independent reader ---- */

static uint32_t crc32c_bitwise(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0x82f63b78u & (0u - (c & 1)));
    }
    return ~c;
}

static uint32_t masked(const uint8_t *p, size_t n)
{
    const uint32_t c = crc32c_bitwise(p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

/* Protocol-buffer wire format: a varint at *p (< end), advancing *p. */
static uint64_t varint(const uint8_t **p, const uint8_t *end)
{
    uint64_t v = 0;
    for (int s = 0; s < 64; s += 7) {
        ck_assert_msg(*p < end, "varint runs past its message");
        const uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) return v;
    }
    ck_abort_msg("varint longer than 10 bytes");
    return 0;
}

/* One field: its number, wire type, and (length-delimited) its bytes or (fixed/varint) its value. */
typedef struct field {
    unsigned num, type;
    const uint8_t *bytes;
    size_t len;
    uint64_t v;
} field;

static int next_field(const uint8_t **p, const uint8_t *end, field *f)
{
    if (*p >= end) return 0;
    const uint64_t key = varint(p, end);
    f->num = (unsigned)(key >> 3);
    f->type = (unsigned)(key & 7);
    switch (f->type) {
    case 0: f->v = varint(p, end); break;
    case 1: ck_assert(end - *p >= 8); f->v = le(*p, 8); *p += 8; break;
    case 5: ck_assert(end - *p >= 4); f->v = le(*p, 4); *p += 4; break;
    case 2:
        f->len = (size_t)varint(p, end);
        ck_assert_msg(f->len <= (size_t)(end - *p), "a field runs past its message");
        f->bytes = *p;
        *p += f->len;
        break;
    default: ck_abort_msg("wire type %u", f->type);
    }
    return 1;
}

typedef struct scalar {
    char tag[128];
    int64_t step;
    double wall;
    float v;
} scalar;

/* Summary.Value: tag (1), metadata (9: plugin_data (1) .plugin_name (1) must be "scalars"), tensor (8: dtype (1) = 1,
 * float_val (5, packed)). */
static void decode_value(const uint8_t *p, const uint8_t *end, scalar *s)
{
    field f;
    int have_v = 0, plugin = 0;
    while (next_field(&p, end, &f)) {
        if (f.num == 1 && f.type == 2) {
            ck_assert(f.len < sizeof s->tag);
            memcpy(s->tag, f.bytes, f.len);
            s->tag[f.len] = '\0';
        } else if (f.num == 9 && f.type == 2) {
            const uint8_t *q = f.bytes, *qe = f.bytes + f.len;
            field g, h;
            while (next_field(&q, qe, &g))
                if (g.num == 1 && g.type == 2) {
                    const uint8_t *r = g.bytes, *re = g.bytes + g.len;
                    while (next_field(&r, re, &h))
                        if (h.num == 1 && h.type == 2) plugin = h.len == 7 && memcmp(h.bytes, "scalars", 7) == 0;
                }
        } else if (f.num == 8 && f.type == 2) {
            const uint8_t *q = f.bytes, *qe = f.bytes + f.len;
            field g;
            int dtype = 0;
            while (next_field(&q, qe, &g)) {
                if (g.num == 1 && g.type == 0) dtype = (int)g.v;
                if (g.num == 5 && g.type == 2) {
                    ck_assert_uint_eq(g.len, 4); /* one packed float: a scalar */
                    const uint32_t bits = (uint32_t)le(g.bytes, 4);
                    memcpy(&s->v, &bits, 4);
                    have_v = 1;
                }
            }
            ck_assert_int_eq(dtype, 1); /* DT_FLOAT */
        }
    }
    ck_assert_msg(have_v && plugin && s->tag[0], "a value without its tag, float or scalars plugin (tag '%s')", s->tag);
}

/* Reads a whole event file: every record's framing and both CRCs, the first record's file_version, then each
 * summary's scalars. Returns the count; the file must end exactly at a record's end. */
static size_t read_events(const char *path, scalar *out, size_t max)
{
    size_t len, n = 0, records = 0;
    uint8_t *b = tt_test_read_file(path, &len);
    size_t at = 0;
    while (at < len) {
        ck_assert_msg(len - at >= 12, "%s: a partial record header at byte %zu", path, at);
        const uint64_t rl = le(b + at, 8);
        ck_assert_msg(le(b + at + 8, 4) == masked(b + at, 8), "%s: bad length CRC at byte %zu", path, at);
        ck_assert_msg(rl <= len - at - 16, "%s: a record past the file's end at byte %zu", path, at);
        const uint8_t *rec = b + at + 12;
        ck_assert_msg(le(rec + rl, 4) == masked(rec, rl), "%s: bad data CRC at byte %zu", path, at);
        const uint8_t *p = rec, *end = rec + rl;
        field f;
        double wall = 0;
        int64_t step = 0;
        int version = 0;
        while (next_field(&p, end, &f)) {
            if (f.num == 1 && f.type == 1) memcpy(&wall, &f.v, 8);
            if (f.num == 2 && f.type == 0) step = (int64_t)f.v;
            if (f.num == 3 && f.type == 2) version = f.len == 13 && memcmp(f.bytes, "brain.Event:2", 13) == 0;
            if (f.num == 5 && f.type == 2) {
                const uint8_t *q = f.bytes, *qe = f.bytes + f.len;
                field g;
                while (next_field(&q, qe, &g)) {
                    ck_assert(g.num == 1 && g.type == 2);
                    ck_assert(n < max);
                    memset(&out[n], 0, sizeof out[n]);
                    decode_value(g.bytes, g.bytes + g.len, &out[n]);
                    out[n].step = step;
                    out[n].wall = wall;
                    n++;
                }
            }
        }
        ck_assert_msg(records > 0 || version, "%s: the first record is not file_version brain.Event:2", path);
        ck_assert_msg(wall > 1.6e9 && wall < 4e9, "%s: wall time %f is not seconds since 1970", path, wall);
        records++;
        at += 16 + rl;
    }
    free(b);
    return n;
}

/* The one event file in DIR/RUN (named events.out.tfevents.<secs>.<host>.<pid>.<n>.v2). */
static void event_file(const char *tb, const char *run_name, char *path, size_t len)
{
    char sub[256];
    snprintf(sub, sizeof sub, "%s/%s", tb, run_name);
    DIR *d = opendir(sub);
    ck_assert_msg(d != NULL, "no %s", sub);
    int found = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, "events.out.tfevents.", 20) == 0) {
            ck_assert_msg(!found, "two event files in %s", sub);
            const size_t nl = strlen(e->d_name);
            ck_assert_msg(nl > 3 && strcmp(e->d_name + nl - 3, ".v2") == 0, "%s", e->d_name);
            snprintf(path, len, "%s/%s", sub, e->d_name);
            found = 1;
        }
    closedir(d);
    ck_assert_msg(found, "no event file in %s", sub);
}

static const scalar *find(const scalar *s, size_t n, const char *tag, int64_t step)
{
    for (size_t i = 0; i < n; i++)
        if (s[i].step == step && strcmp(s[i].tag, tag) == 0) return &s[i];
    return NULL;
}

static size_t count_tag(const scalar *s, size_t n, const char *tag)
{
    size_t c = 0;
    for (size_t i = 0; i < n; i++) c += strcmp(s[i].tag, tag) == 0;
    return c;
}

/* The JSON log's epoch records: field of epoch e (from 1). */
static double log_field(const char *log, size_t e, const char *key)
{
    FILE *f = fopen(log, "r");
    ck_assert_ptr_nonnull(f);
    char line[1 << 16];
    double v = NAN;
    while (fgets(line, sizeof line, f)) {
        json_object *o = json_tokener_parse(line), *ev, *ep, *x;
        if (!o) continue;
        if (json_object_object_get_ex(o, "event", &ev) && strcmp(json_object_get_string(ev), "epoch") == 0 &&
            json_object_object_get_ex(o, "epoch", &ep) && (size_t)json_object_get_int64(ep) == e) {
            if (strncmp(key, "split.", 6) == 0) {
                json_object *sp;
                ck_assert(json_object_object_get_ex(o, "split", &sp) && json_object_object_get_ex(sp, key + 6, &x));
            } else {
                ck_assert_msg(json_object_object_get_ex(o, key, &x), "no %s", key);
            }
            v = json_object_get_double(x);
        }
        json_object_put(o);
    }
    fclose(f);
    return v;
}

START_TEST(test_crc32c)
{
    /* the check value of CRC-32C (Castagnoli): "123456789" */
    ck_assert_uint_eq(tt_crc32c(0, "123456789", 9), 0xe3069283u);
    ck_assert_uint_eq(crc32c_bitwise((const uint8_t *)"123456789", 9), 0xe3069283u);
    uint8_t buf[1000];
    for (int i = 0; i < 1000; i++) buf[i] = (uint8_t)(i * 131 + 7);
    ck_assert_uint_eq(tt_crc32c(tt_crc32c(0, buf, 300), buf + 300, 700), crc32c_bitwise(buf, 1000));
}
END_TEST

/* Two epochs, 2 towers, every 3 steps: every tag Keras writes, with the log's figures. */
START_TEST(test_event_files_read_back)
{
    char args[1024], tb[128], logp[128], path[512];
    snprintf(tb, sizeof tb, "%s/tb", dir);
    snprintf(logp, sizeof logp, "%s/log.json", dir);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 80 --epochs 2 --batch 32 --towers 2 "
             "--progress lines --tensorboard %s --tensorboard-every-steps 3 --log-json %s", dir, tb, logp);
    expect(args, 0, "");
    enum { MAX = 4096 };
    static scalar tr[MAX], va[MAX];
    event_file(tb, "train", path, sizeof path);
    const size_t nt = read_events(path, tr, MAX);
    event_file(tb, "validation", path, sizeof path);
    const size_t nv = read_events(path, va, MAX);
    ck_assert_uint_eq(nv, 12); /* epoch_loss, epoch_accuracy, epoch_top5 and their _vs_iterations, 2 epochs */
    const size_t steps = (400 - 80 + 31) / 32; /* 10 a epoch */
    for (size_t e = 1; e <= 2; e++) {
        static const char *const tags[][2] = {{"epoch_loss", "loss"}, {"epoch_accuracy", "accuracy"},
                                              {"epoch_top5", "top5"}};
        for (int k = 0; k < 3; k++) {
            const scalar *s = find(tr, nt, tags[k][0], (int64_t)e - 1);
            ck_assert_msg(s != NULL, "train %s at step %zu", tags[k][0], e - 1);
            ck_assert_float_eq(s->v, (float)log_field(logp, e, tags[k][1]));
            char vkey[32];
            snprintf(vkey, sizeof vkey, "val_%s", tags[k][1]);
            s = find(va, nv, tags[k][0], (int64_t)e - 1);
            ck_assert_msg(s != NULL, "validation %s at step %zu", tags[k][0], e - 1);
            ck_assert_float_eq(s->v, (float)log_field(logp, e, vkey));
        }
        const scalar *vi = find(va, nv, "evaluation_loss_vs_iterations", (int64_t)(e * steps)); /* Keras 3's */
        ck_assert_msg(vi && vi->v == (float)log_field(logp, e, "val_loss"), "evaluation_loss_vs_iterations, epoch %zu",
                      e);
        const scalar *lr = find(tr, nt, "epoch_learning_rate", (int64_t)e - 1);
        ck_assert(lr && lr->v == 0.001f);
        /* the split: seconds per step, the log's sums over the epoch's steps */
        static const char *const phases[] = {"launch", "pull", "data", "compute", "push", "wait", "reduce",
                                             "update", "total"};
        for (size_t k = 0; k < sizeof phases / sizeof *phases; k++) {
            char tag[64], key[64];
            snprintf(tag, sizeof tag, "epoch_split/%s", phases[k]);
            snprintf(key, sizeof key, "split.%s", phases[k]);
            const scalar *s = find(tr, nt, tag, (int64_t)e - 1);
            ck_assert_msg(s != NULL, "%s", tag);
            ck_assert_msg(fabs(s->v - log_field(logp, e, key) / (double)steps) <= 1e-6 * (1 + fabs(s->v)), "%s %g",
                          tag, s->v);
        }
        ck_assert(find(tr, nt, "epoch_split/combine", (int64_t)e - 1) == NULL); /* one rank: no combine */
        for (int t = 0; t < 2; t++) {
            static const char *const lanes[] = {"pull", "data", "compute", "push", "wait"};
            for (int k = 0; k < 5; k++) {
                char tag[64];
                snprintf(tag, sizeof tag, "epoch_tower/%d/%s", t, lanes[k]);
                const scalar *s = find(tr, nt, tag, (int64_t)e - 1);
                ck_assert_msg(s != NULL && s->v >= 0 && s->v < 10, "%s", tag);
            }
        }
    }
    /* every 3rd step of the run's 20: batch_* at steps 3, 6, ..., 18 (the global batch count, from 1) */
    ck_assert_uint_eq(count_tag(tr, nt, "batch_loss"), 6);
    for (int64_t g = 3; g <= 18; g += 3) {
        ck_assert_msg(find(tr, nt, "batch_loss", g) && find(tr, nt, "batch_accuracy", g) &&
                      find(tr, nt, "batch_split/total", g) && find(tr, nt, "batch_tower/1/compute", g),
                      "step %lld", (long long)g);
    }
    /* the last batch record of epoch 1 (step 9: 9 of its 10 steps) is close to the epoch's own running mean: the
     * first 9 steps' loss; and the epoch's loss lies between the batch means that surround it */
    const scalar *b9 = find(tr, nt, "batch_loss", 9);
    ck_assert(b9->v > 0 && isfinite(b9->v));
    /* wall times never go backwards within a run's epoch records */
    for (size_t i = 1; i < nv; i++) ck_assert(va[i].wall >= va[i - 1].wall);
}
END_TEST

/* --tensorboard-every-steps after the first epoch: batch_loss, batch_accuracy and batch_top5 are the epoch's running
 * means (Keras's batch logs), so every epoch's sums start again from zero. The reference for epoch 2 is a second
 * process: the run resumed from epoch 1's checkpoint, where epoch 2 is the first epoch it runs (save -> resume is
 * exact: docs/checkpoints.md), so its records owe nothing to a sum carried over. Every record of epoch 2 (steps 12,
 * 14, ..., 20 of the run) must equal that run's; and at each epoch's last step the running mean is the whole epoch's,
 * the JSON log's epoch loss and accuracy (computed apart, over the epoch's steps). */
START_TEST(test_batch_records_after_the_first_epoch)
{
    char args[2048], tb[128], tb2[128], ck[128], logp[128], log2[128], path[512], resume[512];
    snprintf(tb, sizeof tb, "%s/tb", dir);
    snprintf(tb2, sizeof tb2, "%s/tb-resumed", dir);
    snprintf(ck, sizeof ck, "%s/ck", dir);
    snprintf(logp, sizeof logp, "%s/log.json", dir);
    snprintf(log2, sizeof log2, "%s/log-resumed.json", dir);
    static const char common[] = "train --device cpu --val-samples 80 --epochs 2 --batch 32 --towers 2 --seed 5 "
                                 "--progress lines --tensorboard-every-steps 2";
    snprintf(args, sizeof args, "%s --data %s --tensorboard %s --checkpoint-dir %s --save-every-epoch --log-json %s",
             common, dir, tb, ck, logp);
    expect(args, 0, "");
    enum { STEPS = 10, MAX = 1 << 14 };        /* (400 - 80) / 32 steps an epoch */
    tt_ckpt_path(resume, sizeof resume, ck, 1, STEPS); /* the end of epoch 1 */
    snprintf(args, sizeof args, "%s --data %s --tensorboard %s --resume %s --log-json %s", common, dir, tb2, resume,
             log2);
    expect(args, 0, "");
    static scalar a[MAX], b[MAX];
    event_file(tb, "train", path, sizeof path);
    const size_t na = read_events(path, a, MAX);
    event_file(tb2, "train", path, sizeof path);
    const size_t nb = read_events(path, b, MAX);
    ck_assert_uint_eq(count_tag(a, na, "batch_loss"), 2 * STEPS / 2);
    ck_assert_uint_eq(count_tag(b, nb, "batch_loss"), STEPS / 2); /* epoch 2's only */
    static const char *const tags[] = {"batch_loss", "batch_accuracy", "batch_top5"};
    for (int64_t g = STEPS + 2; g <= 2 * STEPS; g += 2)
        for (int k = 0; k < 3; k++) {
            const scalar *x = find(a, na, tags[k], g), *y = find(b, nb, tags[k], g);
            ck_assert_msg(x && y, "%s at step %lld: in the run %d, in the resumed run %d", tags[k], (long long)g,
                          x != NULL, y != NULL);
            ck_assert_msg(fabs(x->v - y->v) <= 1e-6 * fabs(y->v), "%s at step %lld (epoch 2): %.9g, the resumed run "
                          "(epoch 2 its first) %.9g", tags[k], (long long)g, x->v, y->v);
        }
    for (size_t e = 1; e <= 2; e++) { /* the epoch's last step: its running mean is the epoch's */
        const scalar *l = find(a, na, "batch_loss", (int64_t)(e * STEPS)),
                     *acc = find(a, na, "batch_accuracy", (int64_t)(e * STEPS));
        ck_assert(l && acc);
        const double want_l = log_field(logp, e, "loss"), want_a = log_field(logp, e, "accuracy");
        ck_assert_msg(fabs(l->v - want_l) <= 1e-6 * fabs(want_l), "epoch %zu: last batch_loss %.9g, the log's loss "
                      "%.9g", e, l->v, want_l);
        ck_assert_msg(fabs(acc->v - want_a) <= 1e-6, "epoch %zu: last batch_accuracy %.9g, the log's %.9g", e, acc->v,
                      want_a);
    }
    ck_assert_msg(fabs(log_field(log2, 2, "loss") - log_field(logp, 2, "loss")) <= 1e-9, "the resumed run's epoch 2 "
                  "is not the run's: the reference does not hold");
}
END_TEST

START_TEST(test_refusals)
{
    char args[1024], p[256];
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 40 --epochs 1 --tensorboard-every-steps 5", dir);
    expect(args, 2, "--tensorboard-every-steps: needs --tensorboard DIR");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 40 --epochs 1 --tensorboard ''", dir);
    expect(args, 2, "--tensorboard: empty file name");
    snprintf(p, sizeof p, "%s/plain", dir);
    tt_test_write_str(p, "x");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 40 --epochs 1 --tensorboard %s", dir, p);
    expect(args, 1, "not a directory");
    snprintf(p, sizeof p, "%s/dangling", dir);
    ck_assert_int_eq(symlink("/nonexistent/towertrain/x", p), 0);
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 40 --epochs 1 --tensorboard %s", dir, p);
    expect(args, 1, "dangling symbolic link");
    /* DIR/train is a file: named */
    snprintf(p, sizeof p, "%s/tbx", dir);
    ck_assert_int_eq(mkdir(p, 0777), 0);
    snprintf(p, sizeof p, "%s/tbx/train", dir);
    tt_test_write_str(p, "x");
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 40 --epochs 1 --tensorboard %s/tbx", dir, dir);
    expect(args, 1, "train/: not a directory");
}
END_TEST

/* One directory, one run: a directory whose lock another process holds is refused, naming that pid. */
START_TEST(test_dir_held)
{
    char args[1024], p[256];
    snprintf(p, sizeof p, "%s/held", dir);
    ck_assert_int_eq(mkdir(p, 0777), 0);
    snprintf(p, sizeof p, "%s/held/.towertrain.lock", dir);
    const int fd = open(p, O_RDWR | O_CREAT, 0644);
    ck_assert(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0);
    char pid[32];
    snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    ck_assert(write(fd, pid, strlen(pid)) == (ssize_t)strlen(pid));
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 40 --epochs 1 --tensorboard %s/held", dir, dir);
    snprintf(pid, sizeof pid, "pid %ld", (long)getpid());
    expect(args, 1, pid);
    close(fd);
    /* the same directory as --checkpoint-dir: one run, one lock, both written */
    snprintf(args, sizeof args, "train --device cpu --data %s --val-samples 40 --epochs 1 --tensorboard %s/held --checkpoint-dir %s/held",
             dir, dir, dir);
    expect(args, 0, "");
}
END_TEST

/* A write that fails (a file-size limit, SIGXFSZ ignored so write(2) says EFBIG) ends the run with one line naming
 * the event file, exit 1, and what was written before decodes whole. */
START_TEST(test_failed_write)
{
    char cmd[2048], tb[128], path[512];
    snprintf(tb, sizeof tb, "%s/tbfull", dir);
    snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 40; exec '%s' train --device cpu --data %s --val-samples 40 --epochs 20 "
             "--batch 8 --towers 4 --progress quiet --tensorboard %s --tensorboard-every-steps 1 >'%s' 2>'%s' "
             "</dev/null", TT_BIN, dir, tb, out_path, err_path);
    const int st = system(cmd);
    ck_assert(WIFEXITED(st));
    const char *e = tt_test_slurp(err_path);
    ck_assert_msg(WEXITSTATUS(st) == 1, "exit %d: %s", WEXITSTATUS(st), e);
    ck_assert_msg(strstr(e, "--tensorboard") && strstr(e, "events.out.tfevents.") && tt_test_count_lines(e) == 1,
                  "%s", e);
    event_file(tb, "train", path, sizeof path);
    static scalar s[1 << 14];
    read_events(path, s, 1 << 14); /* to its last byte: the failed commit was cut back to the last whole one */
}
END_TEST

/* SIGINT while training: the run stops at a step boundary, and both event files decode to their last byte. */
START_TEST(test_signal_leaves_readable_files)
{
    char cmd[2048], tb[128], path[512];
    snprintf(tb, sizeof tb, "%s/tbsig", dir);
    snprintf(cmd, sizeof cmd, "exec '%s' train --device cpu --data %s --val-samples 40 --epochs 100000 --batch 8 --progress quiet "
             "--tensorboard %s --tensorboard-every-steps 1 >'%s' 2>'%s' </dev/null", TT_BIN, dir, tb, out_path,
             err_path);
    const pid_t pid = fork();
    ck_assert(pid >= 0);
    if (pid == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    /* wait until the train file holds some step records */
    snprintf(path, sizeof path, "%s/train", tb);
    struct stat st;
    int ready = 0;
    for (int i = 0; i < 6000 && !ready; i++) {
        const struct timespec t = {0, 10000000};
        nanosleep(&t, NULL);
        DIR *d = opendir(path);
        struct dirent *e;
        while (d && (e = readdir(d))) {
            char f[768];
            snprintf(f, sizeof f, "%s/%s", path, e->d_name);
            if (strncmp(e->d_name, "events.", 7) == 0 && stat(f, &st) == 0 && st.st_size > 4000) ready = 1;
        }
        if (d) closedir(d);
    }
    ck_assert_msg(ready, "no step records after 60 s");
    kill(pid, SIGINT);
    int ws;
    ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
    ck_assert_msg(WIFEXITED(ws), "killed by a signal");
    static scalar s[1 << 16];
    event_file(tb, "train", path, sizeof path);
    ck_assert_uint_gt(read_events(path, s, 1 << 16), 0);
    event_file(tb, "validation", path, sizeof path);
    read_events(path, s, 1 << 16);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("tensorboard");
    TCase *tc = tcase_create("files");
    tcase_set_timeout(tc, 120);
    tcase_add_checked_fixture(tc, setup, NULL);
    tcase_add_test(tc, test_crc32c);
    tcase_add_test(tc, test_event_files_read_back);
    tcase_add_test(tc, test_batch_records_after_the_first_epoch);
    tcase_add_test(tc, test_refusals);
    tcase_add_test(tc, test_dir_held);
    tcase_add_test(tc, test_failed_write);
    tcase_add_test(tc, test_signal_leaves_readable_files);
    suite_add_tcase(s, tc);
    return tt_test_run_suite(s);
}
