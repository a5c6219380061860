/* data/idx.c — the IDX file format (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS"): a big-endian header
 * 0x00 0x00 <type 0x08 = ubyte> <ndim>, then ndim big-endian uint32 sizes, then the data.
 * Files are read through zlib's gz* functions, which read gzip and plain files alike. Every file is hostile:
 * the header is validated before any allocation, reads are checked, and a short or long file is an error. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <zlib.h>

#include "tt_data.h"

typedef struct idx_file {
    gzFile gz;
    const char *path;
} idx_file;

static tt_status idx_open(idx_file *f, const char *path, tt_error *err)
{
    f->path = path;
    struct stat st;
    if (stat(path, &st) != 0) return tt_fail(err, TT_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return tt_fail(err, TT_ERR_IO, "%s: is a directory, expected an IDX file", path);
    f->gz = gzopen(path, "rb");
    if (!f->gz) return tt_fail(err, TT_ERR_IO, "%s: cannot open: %s", path, errno ? strerror(errno) : "zlib error");
    gzbuffer(f->gz, 1 << 17);
    return TT_OK;
}

/* Reads exactly `want` bytes; a short read is "truncated", a zlib error is "corrupt". */
static tt_status idx_read(idx_file *f, void *buf, size_t want, const char *what, tt_error *err)
{
    unsigned char *p = (unsigned char *)buf;
    size_t got = 0;
    while (got < want) {
        size_t chunk = want - got;
        if (chunk > (1u << 30)) chunk = 1u << 30;
        int r = gzread(f->gz, p + got, (unsigned)chunk);
        if (r < 0) {
            int zerr;
            const char *msg = gzerror(f->gz, &zerr);
            return tt_fail(err, TT_ERR_FORMAT, "%s: corrupt compressed data while reading %s (%s)", f->path, what,
                           msg);
        }
        if (r == 0) break;
        got += (size_t)r;
    }
    if (got < want) {
        int zerr;
        gzerror(f->gz, &zerr);
        return tt_fail(err, TT_ERR_FORMAT, "%s: truncated: %s needs %zu bytes, the file has %zu%s", f->path, what, want,
                       got, zerr == Z_BUF_ERROR ? " (gzip stream ends early)" : "");
    }
    return TT_OK;
}

/* After the data: the file must end. */
static tt_status idx_expect_end(idx_file *f, size_t n_items, const char *items, tt_error *err)
{
    unsigned char extra;
    int r = gzread(f->gz, &extra, 1);
    if (r < 0) {
        int zerr;
        return tt_fail(err, TT_ERR_FORMAT, "%s: corrupt compressed data after the %s (%s)", f->path, items,
                       gzerror(f->gz, &zerr));
    }
    if (r > 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: wrong count: the header says %zu %s but the file has more data",
                       f->path, n_items, items);
    return TT_OK;
}

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Reads the magic and sizes: expects unsigned-byte data with `ndim` dimensions. */
static tt_status idx_header(idx_file *f, int ndim, uint32_t *dims, tt_error *err)
{
    unsigned char h[4 + 4 * 3];
    tt_status s = idx_read(f, h, 4, "the header", err);
    if (s) return s;
    if (h[0] != 0 || h[1] != 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: bad magic 0x%02x%02x%02x%02x: not an IDX file", f->path, h[0], h[1],
                       h[2], h[3]);
    if (h[2] != 0x08)
        return tt_fail(err, TT_ERR_FORMAT, "%s: IDX data type 0x%02x is not unsigned byte (0x08)", f->path, h[2]);
    if (h[3] != ndim)
        return tt_fail(err, TT_ERR_FORMAT, "%s: IDX file has %d dimensions, expected %d (%s)", f->path, h[3], ndim,
                       ndim == 3 ? "an images file" : "a labels file");
    s = idx_read(f, h + 4, 4 * (size_t)ndim, "the header", err);
    if (s) return s;
    for (int i = 0; i < ndim; i++) dims[i] = be32(h + 4 + 4 * i);
    if (dims[0] == 0) return tt_fail(err, TT_ERR_FORMAT, "%s: the header says 0 items", f->path);
    if (dims[0] > TT_IDX_MAX_ITEMS)
        return tt_fail(err, TT_ERR_FORMAT, "%s: the header claims %u items (more than %u)", f->path, dims[0],
                       TT_IDX_MAX_ITEMS);
    for (int i = 1; i < ndim; i++)
        if (dims[i] == 0 || dims[i] > TT_IDX_MAX_SIDE)
            return tt_fail(err, TT_ERR_FORMAT, "%s: image side %u is out of range 1..%u", f->path, dims[i],
                           TT_IDX_MAX_SIDE);
    return TT_OK;
}

tt_status tt_idx_read_images(const char *path, size_t *n, size_t *rows, size_t *cols, uint8_t **pixels,
                             tt_error *err)
{
    *pixels = NULL;
    idx_file f;
    tt_status s = idx_open(&f, path, err);
    if (s) return s;
    uint32_t dims[3] = {0, 0, 0};
    s = idx_header(&f, 3, dims, err);
    size_t bytes = 0;
    if (!s && (tt_mul_size(dims[0], (size_t)dims[1] * dims[2], &bytes) || bytes > ((size_t)1 << 36)))
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %u images of %ux%u is too large", path, dims[0], dims[1], dims[2]);
    uint8_t *buf = NULL;
    if (!s && !(buf = (uint8_t *)tt_malloc(bytes)))
        s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu bytes of pixels", path, bytes);
    if (!s) s = idx_read(&f, buf, bytes, "the pixel data", err);
    if (!s) s = idx_expect_end(&f, dims[0], "images", err);
    gzclose(f.gz);
    if (s) {
        tt_free(buf);
        return s;
    }
    *n = dims[0];
    *rows = dims[1];
    *cols = dims[2];
    *pixels = buf;
    return TT_OK;
}

tt_status tt_idx_read_labels(const char *path, size_t n_classes, size_t *n, uint8_t **labels, tt_error *err)
{
    *labels = NULL;
    idx_file f;
    tt_status s = idx_open(&f, path, err);
    if (s) return s;
    uint32_t dims[1] = {0};
    s = idx_header(&f, 1, dims, err);
    uint8_t *buf = NULL;
    if (!s && !(buf = (uint8_t *)tt_malloc(dims[0])))
        s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %u labels", path, dims[0]);
    if (!s) s = idx_read(&f, buf, dims[0], "the labels", err);
    if (!s) s = idx_expect_end(&f, dims[0], "labels", err);
    for (uint32_t i = 0; !s && i < dims[0]; i++)
        if (buf[i] >= n_classes)
            s = tt_fail(err, TT_ERR_FORMAT, "%s: label %u of item %u is out of range 0..%zu", path, buf[i], i,
                        n_classes - 1);
    gzclose(f.gz);
    if (s) {
        tt_free(buf);
        return s;
    }
    *n = dims[0];
    *labels = buf;
    return TT_OK;
}
