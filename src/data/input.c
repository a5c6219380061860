/* data/input.c — opening input files safely and reading them exactly, raw or through gzip (tt_input.h).
 *
 * Two layers: the raw source (a file read TT_INPUT_RAW_BUF bytes at a time, or memory) and, for gzip, zlib's
 * inflate driven by hand. zlib's gz* functions are not used because they hide what a hostile file needs reported:
 * gzread returns 0 (a clean-looking end) at a member cut short, and ignores bytes after the last member. Here a
 * member must reach Z_STREAM_END (its trailer's CRC-32 and length checked by inflate), the bytes after it must be
 * another member (magic 1f 8b) or nothing, and input ending inside a member is "truncated".
 * Not for: knowing any file format; callers name what they read ("the labels") for the messages. */
#define ZLIB_CONST /* next_in is const: zlib never writes to its input */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "tt_input.h"
#include "tt_mem.h"
#include "tt_out.h"

struct tt_input_gz {
    z_stream zs;
    int member_done; /* inflate returned Z_STREAM_END: another member or the end of the input must follow */
    int ended;       /* the last member ended and nothing follows it: a clean end of the stream */
};

static void input_reset(tt_input *in, const char *path)
{
    memset(in, 0, sizeof *in);
    in->path = path;
    in->fd = -1;
}

static const char *file_kind(mode_t mode)
{
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "an unknown file type";
}

tt_status tt_input_open(tt_input *in, const char *path, tt_error *err)
{
    input_reset(in, path);
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer, possibly forever */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return tt_fail(err, TT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    int flags;
    tt_status s = TT_OK;
    if (fstat(fd, &st) != 0)
        s = tt_fail(err, TT_ERR_IO, "%s: cannot stat: %s", path, strerror(errno));
    else if (!S_ISREG(st.st_mode))
        s = tt_fail(err, TT_ERR_IO, "%s: not a regular file (%s)", path, file_kind(st.st_mode));
    else if ((flags = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
        s = tt_fail(err, TT_ERR_IO, "%s: cannot make reads blocking: %s", path, strerror(errno));
    else if (!(in->buf = (unsigned char *)tt_malloc(TT_INPUT_RAW_BUF)))
        s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for a read buffer", path);
    if (s) {
        close(fd);
        return s;
    }
    in->fd = fd;
    in->next = in->buf;
    in->raw_size = (uint64_t)st.st_size;
    tt_out_note_input(&st); /* an output must never be it (src/core/out.c) */
    return TT_OK;
}

tt_status tt_input_open_mem(tt_input *in, const void *data, size_t n, const char *name, tt_error *err)
{
    input_reset(in, name);
    in->next = (const unsigned char *)data;
    in->avail = n;
    in->raw_size = n;
    in->raw_read = n;
    in->eof = 1;
    return TT_OK;
}

void tt_input_close(tt_input *in)
{
    if (in->gz) {
        inflateEnd(&in->gz->zs);
        tt_free(in->gz);
        in->gz = NULL;
    }
    if (in->fd >= 0) close(in->fd);
    in->fd = -1;
    tt_free(in->buf);
    in->buf = NULL;
    in->next = NULL;
    in->avail = 0;
}

/* ---- the raw source ----------------------------------------------------------------------------------------- */

/* Tops up a file's raw buffer: the unconsumed bytes move to its front and one read() appends after them. Sets eof
 * when the file has no more bytes. Memory inputs are at eof from the start. */
static tt_status raw_fill(tt_input *in, tt_error *err)
{
    if (in->eof || in->avail == TT_INPUT_RAW_BUF) return TT_OK;
    if (in->avail && in->next != in->buf) memmove(in->buf, in->next, in->avail);
    in->next = in->buf;
    ssize_t r;
    do r = read(in->fd, in->buf + in->avail, TT_INPUT_RAW_BUF - in->avail);
    while (r < 0 && errno == EINTR);
    if (r < 0) return tt_fail(err, TT_ERR_IO, "%s: read error: %s", in->path, strerror(errno));
    if (r == 0) in->eof = 1;
    in->avail += (size_t)r;
    in->raw_read += (uint64_t)r;
    return TT_OK;
}

/* Raw bytes not consumed yet: those in the buffer plus those the file's size says are still unread. */
static uint64_t raw_left(const tt_input *in)
{
    return (uint64_t)in->avail + (in->raw_size > in->raw_read ? in->raw_size - in->raw_read : 0);
}

/* Copies up to `want` raw bytes; fewer only at the end of the input. */
static tt_status raw_some(tt_input *in, unsigned char *dst, size_t want, size_t *got, tt_error *err)
{
    *got = 0;
    while (*got < want) {
        if (in->avail == 0) {
            if (in->eof) break;
            tt_status s = raw_fill(in, err);
            if (s) return s;
            continue;
        }
        size_t k = want - *got < in->avail ? want - *got : in->avail;
        memcpy(dst + *got, in->next, k);
        in->next += k;
        in->avail -= k;
        *got += k;
    }
    return TT_OK;
}

/* ---- gzip --------------------------------------------------------------------------------------------------- */

tt_status tt_input_detect_gzip(tt_input *in, tt_error *err)
{
    TT_ASSERT(!in->gz && in->raw_read == in->avail); /* before any read */
    while (in->avail < 2 && !in->eof) {
        tt_status s = raw_fill(in, err);
        if (s) return s;
    }
    if (in->avail < 2 || in->next[0] != 0x1f || in->next[1] != 0x8b) return TT_OK;
    struct tt_input_gz *g = (struct tt_input_gz *)tt_calloc(1, sizeof *g); /* zalloc = zfree = Z_NULL */
    if (!g) return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for the gzip state", in->path);
    /* 16 + MAX_WBITS: a gzip wrapper (not zlib, not raw deflate), the largest window */
    if (inflateInit2(&g->zs, 16 + MAX_WBITS) != Z_OK) {
        tt_free(g);
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for the gzip state", in->path);
    }
    in->gz = g;
    return TT_OK;
}

/* After a member's end: the next two bytes must start another member, or the input must end here. */
static tt_status gz_next_member(tt_input *in, tt_error *err)
{
    struct tt_input_gz *g = in->gz;
    while (in->avail < 2 && !in->eof) {
        tt_status s = raw_fill(in, err);
        if (s) return s;
    }
    if (in->avail == 0) {
        g->ended = 1;
        return TT_OK;
    }
    if (in->avail >= 2 && in->next[0] == 0x1f && in->next[1] == 0x8b) {
        int r = inflateReset(&g->zs);
        TT_ASSERT(r == Z_OK);
        g->member_done = 0;
        return TT_OK;
    }
    unsigned long long extra = (unsigned long long)raw_left(in);
    return tt_fail(err, TT_ERR_FORMAT, "%s: %llu byte%s after the last gzip member", in->path, extra,
                   extra == 1 ? "" : "s");
}

/* Turns an inflate result other than Z_OK / Z_STREAM_END into a status. */
static tt_status gz_failure(const tt_input *in, int r, tt_error *err)
{
    const z_stream *zs = &in->gz->zs;
    if (r == Z_BUF_ERROR) {
        /* no progress with room to write: only possible when the input is used up before the member's end */
        TT_ASSERT(in->avail == 0 && in->eof);
        return tt_fail(err, TT_ERR_FORMAT, "%s: truncated gzip member (the file ends before the gzip trailer)",
                       in->path);
    }
    if (r == Z_MEM_ERROR) return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory while decompressing", in->path);
    if (r == Z_DATA_ERROR)
        return tt_fail(err, TT_ERR_FORMAT, "%s: corrupt gzip data (%s)", in->path,
                       zs->msg ? zs->msg : "invalid deflate data");
    return tt_fail(err, TT_ERR_FORMAT, "%s: corrupt gzip data (zlib error %d)", in->path, r);
}

/* Decompresses up to `want` bytes; fewer only at a clean end of the stream. */
static tt_status gz_some(tt_input *in, unsigned char *dst, size_t want, size_t *got, tt_error *err)
{
    struct tt_input_gz *g = in->gz;
    z_stream *zs = &g->zs;
    *got = 0;
    while (*got < want && !g->ended) {
        tt_status s = TT_OK;
        if (g->member_done)
            s = gz_next_member(in, err);
        else if (in->avail == 0 && !in->eof)
            s = raw_fill(in, err);
        if (s) return s;
        if (g->member_done || g->ended || (in->avail == 0 && !in->eof)) continue;
        uInt in_chunk = in->avail > UINT_MAX ? UINT_MAX : (uInt)in->avail;
        uInt out_chunk = want - *got > UINT_MAX ? UINT_MAX : (uInt)(want - *got);
        zs->next_in = in->next;
        zs->avail_in = in_chunk;
        zs->next_out = dst + *got;
        zs->avail_out = out_chunk;
        int r = inflate(zs, Z_NO_FLUSH);
        in->next += in_chunk - zs->avail_in;
        in->avail -= in_chunk - zs->avail_in;
        *got += out_chunk - zs->avail_out;
        if (r == Z_STREAM_END)
            g->member_done = 1;
        else if (r != Z_OK)
            return gz_failure(in, r, err);
    }
    return TT_OK;
}

/* ---- exact reads ------------------------------------------------------------------------------------------ */

static tt_status input_some(tt_input *in, void *dst, size_t want, size_t *got, tt_error *err)
{
    return in->gz ? gz_some(in, (unsigned char *)dst, want, got, err)
                  : raw_some(in, (unsigned char *)dst, want, got, err);
}

static tt_status truncated(const tt_input *in, const char *what, size_t want, size_t got, tt_error *err)
{
    return tt_fail(err, TT_ERR_FORMAT, "%s: truncated: %s after %zu of the %zu bytes of %s", in->path,
                   in->gz ? "the decompressed data end" : "the file ends", got, want, what);
}

int tt_input_left(const tt_input *in, uint64_t *left)
{
    if (in->gz) return 0;
    *left = raw_left(in);
    return 1;
}

tt_status tt_input_read(tt_input *in, void *buf, size_t n, const char *what, tt_error *err)
{
    size_t got;
    tt_status s = input_some(in, buf, n, &got, err);
    if (s) return s;
    return got < n ? truncated(in, what, n, got, err) : TT_OK;
}

/* Host memory for `bytes` more, checked before asking: a file that fits its header can still be larger than the
 * machine (a 30 GB plain file, a deflate bomb growing its buffer), and that is one line, not an OOM kill. */
static tt_status room_for(const tt_input *in, double bytes, const char *what, size_t n, tt_error *err)
{
    const char *src;
    double avail = tt_mem_host_available(&src);
    if (avail < 0 || bytes <= avail) return TT_OK;
    char need[32], have[32];
    tt_mem_human(bytes, need, sizeof need);
    tt_mem_human(avail, have, sizeof have);
    return tt_fail(err, TT_ERR_NOMEM, "%s: %zu bytes of %s: the next %s do not fit in the %s of host memory available "
                   "(%s)", in->path, n, what, need, have, src);
}

tt_status tt_input_read_alloc(tt_input *in, size_t n, const char *what, uint8_t **out, tt_error *err)
{
    *out = NULL;
    uint64_t left;
    if (tt_input_left(in, &left) && left < n) return truncated(in, what, n, (size_t)left, err);
    /* a gzip payload's size is only a claim until the data arrive: grow towards it, doubling */
    size_t cap = in->gz && n > TT_INPUT_FIRST_ALLOC ? TT_INPUT_FIRST_ALLOC : n;
    tt_status room = room_for(in, (double)cap, what, n, err);
    if (room) return room;
    uint8_t *buf = (uint8_t *)tt_malloc(cap);
    size_t have = 0;
    while (buf) {
        size_t got;
        tt_status s = input_some(in, buf + have, cap - have, &got, err);
        have += got;
        if (!s && have < cap) s = truncated(in, what, n, have, err);
        if (s) {
            tt_free(buf);
            return s;
        }
        if (cap == n) {
            *out = buf;
            return TT_OK;
        }
        size_t bigger = cap > n / 2 ? n : 2 * cap;
        if ((s = room_for(in, (double)bigger, what, n, err))) { /* the old buffer is counted as in use already */
            tt_free(buf);
            return s;
        }
        uint8_t *grown = (uint8_t *)tt_malloc(bigger);
        if (grown) memcpy(grown, buf, have);
        tt_free(buf);
        buf = grown;
        cap = bigger;
    }
    return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu bytes of %s", in->path, cap, what);
}

tt_status tt_input_alloc(const tt_input *in, size_t n, const char *what, uint8_t **out, tt_error *err)
{
    *out = NULL;
    tt_status s = room_for(in, (double)n, what, n, err);
    if (s) return s;
    if (!(*out = (uint8_t *)tt_malloc(n)))
        return tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu bytes of %s", in->path, n, what);
    return TT_OK;
}

tt_status tt_input_at_end(tt_input *in, int *more, tt_error *err)
{
    unsigned char byte;
    size_t got = 0;
    tt_status s = input_some(in, &byte, 1, &got, err);
    *more = got == 1;
    return s;
}

tt_status tt_input_read_text(const char *path, const char *what, size_t max_bytes, char **text, size_t *len,
                             tt_error *err)
{
    *text = NULL;
    *len = 0;
    tt_input in;
    tt_status s = tt_input_open(&in, path, err);
    if (s) return s;
    struct stat st;
    if (fstat(in.fd, &st) == 0) tt_out_note_own(&st); /* a text the run reads (a model file, a profile) is no data */
    uint64_t size = 0;
    tt_input_left(&in, &size);
    char *buf = NULL;
    size_t got = 0;
    if (size > max_bytes)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %s of %llu bytes is larger than the limit of %zu bytes", path, what,
                    (unsigned long long)size, max_bytes);
    else if (!(buf = (char *)tt_malloc((size_t)size + 1)))
        s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %llu bytes", path, (unsigned long long)size);
    else
        s = input_some(&in, buf, (size_t)size + 1, &got, err); /* one byte more than the size: it must not come */
    if (!s && got != size)
        s = tt_fail(err, TT_ERR_IO, "%s: the file changed size while being read", path);
    if (!s && memchr(buf, '\0', got))
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %s contains a NUL byte (not a text file?)", path, what);
    tt_input_close(&in);
    if (s) {
        tt_free(buf);
        return s;
    }
    buf[got] = '\0';
    *text = buf;
    *len = got;
    return TT_OK;
}
