/* out.c — whole-line output files (see tt_out.h). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt_input.h"
#include "tt_out.h"

/* Outputs open now, by device and inode: two outputs on one file would interleave into garbage. */
enum { MAX_OUTPUTS = 16 };
static struct {
    dev_t dev;
    ino_t ino;
    const tt_out *by;
} g_outputs[MAX_OUTPUTS];

/* Refuses a path that is an input of this run or another open output, before it is truncated. */
static tt_status check_not_in_use(const char *path, const char *what, tt_error *err)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return TT_OK; /* new, or a device / FIFO / pipe */
    if (tt_input_was_opened(&st))
        return tt_fail(err, TT_ERR_ARG, "%s: is a file this run reads (refusing to overwrite an input)", what);
    for (int i = 0; i < MAX_OUTPUTS; i++)
        if (g_outputs[i].by && g_outputs[i].dev == st.st_dev && g_outputs[i].ino == st.st_ino)
            return tt_fail(err, TT_ERR_ARG, "%s: is already open as %s", what, g_outputs[i].by->what);
    return TT_OK;
}

static void register_output(const tt_out *o, int on)
{
    struct stat st;
    for (int i = 0; i < MAX_OUTPUTS; i++) {
        if (!on && g_outputs[i].by == o) g_outputs[i].by = NULL;
        if (on && !g_outputs[i].by && fstat(o->fd, &st) == 0 && S_ISREG(st.st_mode)) {
            g_outputs[i].by = o;
            g_outputs[i].dev = st.st_dev;
            g_outputs[i].ino = st.st_ino;
            return;
        }
    }
}

tt_status tt_out_open(tt_out *o, const char *path, const char *what, size_t cap, tt_error *err)
{
    memset(o, 0, sizeof *o);
    o->fd = -1;
    snprintf(o->what, sizeof o->what, "%s", what);
    o->cap = cap < 256 ? 256 : cap;
    tt_status s = check_not_in_use(path, o->what, err);
    if (s) return s;
    o->buf = (char *)tt_malloc(o->cap);
    if (!o->buf) return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory", o->what);
    /* non-blocking, so a FIFO nobody reads fails now (ENXIO) instead of hanging; writes block again after */
    o->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0644);
    int flags = o->fd >= 0 ? fcntl(o->fd, F_GETFL) : -1;
    if (o->fd < 0 || flags < 0 || fcntl(o->fd, F_SETFL, flags & ~O_NONBLOCK) < 0) {
        int e = errno;
        if (o->fd >= 0) close(o->fd);
        tt_free(o->buf);
        o->buf = NULL;
        return tt_fail(err, TT_ERR_IO, "%s: cannot open for writing: %s", o->what,
                       e == ENXIO ? "a FIFO that no process is reading" : strerror(e));
    }
    register_output(o, 1);
    return TT_OK;
}

void tt_out_printf(tt_out *o, const char *fmt, ...)
{
    if (!o->buf || o->err_no) return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(o->buf + o->len, o->cap - o->len, fmt, ap);
        va_end(ap);
        if (n < 0) {
            o->err_no = EINVAL;
            return;
        }
        if ((size_t)n < o->cap - o->len) {
            o->len += (size_t)n;
            return;
        }
        /* grow: only when a line is longer than the caller's estimate */
        size_t cap = 2 * (o->cap + (size_t)n);
        char *b = (char *)tt_malloc(cap);
        if (!b) {
            o->err_no = ENOMEM;
            return;
        }
        memcpy(b, o->buf, o->len);
        tt_free(o->buf);
        o->buf = b;
        o->cap = cap;
    }
}

void tt_out_json_num(tt_out *o, const char *key, double v, int comma)
{
    if (isfinite(v))
        tt_out_printf(o, "\"%s\":%.9g%s", key, v, comma ? "," : "");
    else
        tt_out_printf(o, "\"%s\":null%s", key, comma ? "," : "");
}

/* Length of the well-formed UTF-8 sequence at p (RFC 3629: no overlongs, no surrogates, <= U+10FFFF), or 0. */
static int utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80) return 1;
    int n = p[0] >= 0xf0 && p[0] <= 0xf4 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc2 && p[0] < 0xe0 ? 2 : 0;
    if (n == 0) return 0;
    for (int k = 1; k < n; k++)
        if ((p[k] & 0xc0) != 0x80) return 0;
    if ((p[0] == 0xe0 && p[1] < 0xa0) || (p[0] == 0xed && p[1] >= 0xa0) || (p[0] == 0xf0 && p[1] < 0x90) ||
        (p[0] == 0xf4 && p[1] >= 0x90))
        return 0;
    return n;
}

void tt_out_json_str(tt_out *o, const char *key, const char *v, int comma)
{
    tt_out_printf(o, "\"%s\":\"", key);
    for (const unsigned char *p = (const unsigned char *)v; *p;) {
        int n = utf8_len(p);
        if (n == 0)
            tt_out_printf(o, "\\ufffd"); /* a byte that is not UTF-8 (a raw file name): JSON must stay valid */
        else if (*p == '"' || *p == '\\')
            tt_out_printf(o, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            tt_out_printf(o, "\\u%04x", *p);
        else
            tt_out_printf(o, "%.*s", n, (const char *)p);
        p += n ? n : 1;
    }
    tt_out_printf(o, "\"%s", comma ? "," : "");
}

tt_status tt_out_commit(tt_out *o, tt_error *err)
{
    if (!o->buf) return TT_OK;
    for (size_t off = 0; !o->err_no && off < o->len;) {
        ssize_t w = write(o->fd, o->buf + off, o->len - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) o->err_no = w < 0 ? errno : EIO;
        else off += (size_t)w;
    }
    o->len = 0;
    if (o->err_no)
        return tt_fail(err, TT_ERR_IO, "%s: write failed: %s", o->what,
                       o->err_no == ENOMEM ? "out of memory for a line" : strerror(o->err_no));
    return TT_OK;
}

tt_status tt_out_close(tt_out *o, tt_error *err)
{
    if (!o->buf) return TT_OK;
    tt_status s = tt_out_commit(o, err);
    register_output(o, 0);
    if (close(o->fd) != 0 && s == TT_OK) s = tt_fail(err, TT_ERR_IO, "%s: write failed: %s", o->what, strerror(errno));
    o->fd = -1;
    tt_free(o->buf);
    o->buf = NULL;
    return s;
}
