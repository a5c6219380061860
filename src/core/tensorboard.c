/* tensorboard.c — TensorBoard event files (tt_tensorboard.h): TFRecord frames of Event protocol buffers, packed by
 * protobuf-c from proto/tensorboard.proto. */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "tensorboard.pb-c.h"
#include "tt_tensorboard.h"

const char *const tt_tb_run_names[TT_TB_RUNS] = {"train", "validation"};

/* ---- CRC-32C, byte at a time from a table built once (a file's few records a second need nothing faster) ---- */

static uint32_t crc32c_table[256];

static void crc32c_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc32c_table[i] = c;
    }
}

uint32_t tt_crc32c(uint32_t crc, const void *p, size_t n)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, crc32c_init);
    const unsigned char *b = (const unsigned char *)p;
    crc = ~crc;
    for (size_t i = 0; i < n; i++) crc = crc32c_table[(crc ^ b[i]) & 0xff] ^ (crc >> 8);
    return ~crc;
}

/* TFRecord's masked CRC (tensorflow/core/lib/hash/crc32c.h): rotate right by 15, add a constant, so a CRC stored
 * inside data that is itself CRC'd does not cancel out. */
static uint32_t masked_crc(const void *p, size_t n)
{
    const uint32_t c = tt_crc32c(0, p, n);
    return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

static void put_le(unsigned char *b, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++) b[i] = (unsigned char)(v >> (8 * i));
}

/* One TFRecord: length, masked CRC of the length, the record, masked CRC of the record. */
static void put_record(tt_out *o, const uint8_t *rec, size_t n)
{
    unsigned char head[12], tail[4];
    put_le(head, n, 8);
    put_le(head + 8, masked_crc(head, 8), 4);
    put_le(tail, masked_crc(rec, n), 4);
    tt_out_bytes(o, head, sizeof head);
    tt_out_bytes(o, rec, n);
    tt_out_bytes(o, tail, sizeof tail);
}

/* Packs ev into a record of o. Our events are a tag of at most TAG_MAX bytes and a float: well inside buf. */
enum { TAG_MAX = 200 };
static void put_event(tt_out *o, const Tensorflow__Event *ev)
{
    uint8_t buf[512];
    const size_t n = tensorflow__event__get_packed_size(ev);
    if (n > sizeof buf) return; /* cannot happen with TAG_MAX; never write a partial record */
    tensorflow__event__pack(ev, buf);
    put_record(o, buf, n);
}

/* The host name as Keras's writer puts it into file names, bytes other than [A-Za-z0-9._-] as '_'. */
static void host_name(char *h, size_t len)
{
    if (gethostname(h, len) != 0) snprintf(h, len, "localhost");
    h[len - 1] = '\0';
    for (char *c = h; *c; c++)
        if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '.' ||
              *c == '-'))
            *c = '_';
}

static tt_status open_run(tt_out *o, const char *dir, const char *run, const char *what, tt_error *err)
{
    char sub[4200], sub_what[4400];
    snprintf(sub, sizeof sub, "%s/%s", dir, run);
    snprintf(sub_what, sizeof sub_what, "%s: %s/", what, run);
    tt_status s = tt_out_dir_ready(sub, sub_what, err);
    if (s) return s;
    char host[128], path[4500], file_what[4600];
    host_name(host, sizeof host);
    const double now = tt_wall_now();
    for (unsigned n = 0;; n++) { /* the first name no file has: another run of this pid and second, or a restart */
        const int len = snprintf(path, sizeof path, "%s/events.out.tfevents.%lld.%s.%ld.%u.v2", sub, (long long)now,
                                 host, (long)getpid(), n);
        struct stat st;
        if (len < 0 || (size_t)len >= sizeof path || len >= PATH_MAX)
            return tt_fail(err, TT_ERR_IO, "%s: the event file's path would be too long (%d bytes)", what, len);
        if (lstat(path, &st) == 0) {
            if (n == 1000) return tt_fail(err, TT_ERR_IO, "%s: no free event-file name in %s", what, sub);
            continue;
        }
        if (errno == ENOENT) break;
        return tt_fail(err, TT_ERR_IO, "%s: %s: %s", what, run, strerror(errno));
    }
    snprintf(file_what, sizeof file_what, "%s: %s", what, path);
    if ((s = tt_out_open(o, path, file_what, 4096, err))) return s;
    Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
    ev.wall_time = now;
    ev.what_case = TENSORFLOW__EVENT__WHAT_FILE_VERSION;
    ev.file_version = (char *)"brain.Event:2";
    put_event(o, &ev);
    return tt_out_commit(o, err);
}

tt_status tt_tb_open(tt_tb *tb, const char *dir, const char *what, tt_error *err)
{
    memset(tb, 0, sizeof *tb);
    for (int r = 0; r < TT_TB_RUNS; r++) {
        tt_status s = open_run(&tb->f[r], dir, tt_tb_run_names[r], what, err);
        if (s) {
            tt_error ignored;
            tt_tb_close(tb, &ignored);
            return s;
        }
    }
    return TT_OK;
}

void tt_tb_scalar(tt_tb *tb, tt_tb_run run, const char *tag, int64_t step, double wall_time, double value)
{
    tt_out *o = &tb->f[run];
    if (!o->buf) return;
    char t[TAG_MAX + 1];
    snprintf(t, sizeof t, "%s", tag);
    float v = (float)value;
    Tensorflow__TensorShapeProto shape = TENSORFLOW__TENSOR_SHAPE_PROTO__INIT; /* no dims: a scalar */
    Tensorflow__TensorProto tensor = TENSORFLOW__TENSOR_PROTO__INIT;
    tensor.dtype = TENSORFLOW__DATA_TYPE__DT_FLOAT;
    tensor.tensor_shape = &shape;
    tensor.n_float_val = 1;
    tensor.float_val = &v;
    Tensorflow__SummaryMetadata__PluginData plugin = TENSORFLOW__SUMMARY_METADATA__PLUGIN_DATA__INIT;
    plugin.plugin_name = (char *)"scalars";
    Tensorflow__SummaryMetadata meta = TENSORFLOW__SUMMARY_METADATA__INIT;
    meta.plugin_data = &plugin;
    meta.data_class = TENSORFLOW__DATA_CLASS__DATA_CLASS_SCALAR;
    Tensorflow__Summary__Value val = TENSORFLOW__SUMMARY__VALUE__INIT;
    val.tag = t;
    val.metadata = &meta;
    val.value_case = TENSORFLOW__SUMMARY__VALUE__VALUE_TENSOR;
    val.tensor = &tensor;
    Tensorflow__Summary__Value *vals[1] = {&val};
    Tensorflow__Summary sum = TENSORFLOW__SUMMARY__INIT;
    sum.n_value = 1;
    sum.value = vals;
    Tensorflow__Event ev = TENSORFLOW__EVENT__INIT;
    ev.wall_time = wall_time;
    ev.step = step;
    ev.what_case = TENSORFLOW__EVENT__WHAT_SUMMARY;
    ev.summary = &sum;
    put_event(o, &ev);
}

tt_status tt_tb_commit(tt_tb *tb, tt_error *err)
{
    for (int r = 0; r < TT_TB_RUNS; r++) {
        if (!tb->f[r].buf) continue;
        tt_status s = tt_out_commit(&tb->f[r], err);
        if (s) { /* the other file's records of this commit go too: both files end at the same epoch */
            for (int o = 0; o < TT_TB_RUNS; o++) tt_out_discard(&tb->f[o]);
            return s;
        }
    }
    return TT_OK;
}

tt_status tt_tb_close(tt_tb *tb, tt_error *err)
{
    tt_status first = TT_OK;
    for (int r = 0; r < TT_TB_RUNS; r++) {
        tt_error e;
        tt_status s = tt_out_close(&tb->f[r], &e);
        if (s && !first) {
            first = s;
            *err = e;
        }
    }
    return first;
}
