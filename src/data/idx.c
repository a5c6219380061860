/* data/idx.c — the IDX file format (http://yann.lecun.com/exdb/mnist/, "FILE FORMATS"): a big-endian header
 * 0x00 0x00 <type 0x08 = ubyte> <ndim>, then ndim big-endian uint32 sizes, then the data.
 * Files and memory are read through tt_input (include/tt_input.h), gzip or plain. Every file is hostile: the
 * header is validated before any allocation; a plain file's size must be exactly header + data before the buffer
 * is made; a gzip payload's buffer grows as data arrive, never beyond what the header claims; every read is
 * checked and the input must end right after the data. An image file and a label file make a data set, and an
 * MNIST-format directory's four files a train and test pair (--data DIR).
 * Not for: the data set's own operations (src/data/dataset.c) or the --data dispatch (src/data/load.c). */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tt_data.h"
#include "tt_input.h"

static uint32_t be32(const unsigned char *b)
{
    return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | (uint32_t)b[3];
}

/* Reads the magic and sizes: expects unsigned-byte data with `ndim` dimensions. */
static tt_status idx_header(tt_input *in, int ndim, uint32_t *dims, tt_error *err)
{
    unsigned char h[4 + 4 * 3];
    tt_status s = tt_input_read(in, h, 4, "the header", err);
    if (s) return s;
    if (h[0] != 0 || h[1] != 0)
        return tt_fail(err, TT_ERR_FORMAT, "%s: bad magic 0x%02x%02x%02x%02x: not an IDX file", in->path, h[0],
                       h[1], h[2], h[3]);
    if (h[2] != 0x08)
        return tt_fail(err, TT_ERR_FORMAT, "%s: IDX data type 0x%02x is not unsigned byte (0x08)", in->path, h[2]);
    if (h[3] != ndim)
        return tt_fail(err, TT_ERR_FORMAT, "%s: IDX file has %d dimensions, expected %d (%s)", in->path, h[3], ndim,
                       ndim == 3 ? "an images file" : "a labels file");
    s = tt_input_read(in, h + 4, 4 * (size_t)ndim, "the header", err);
    if (s) return s;
    for (int i = 0; i < ndim; i++) dims[i] = be32(h + 4 + 4 * i);
    if (dims[0] == 0) return tt_fail(err, TT_ERR_FORMAT, "%s: the header says 0 items", in->path);
    if (dims[0] > TT_IDX_MAX_ITEMS)
        return tt_fail(err, TT_ERR_FORMAT, "%s: the header claims %u items (more than %u)", in->path, dims[0],
                       TT_IDX_MAX_ITEMS);
    for (int i = 1; i < ndim; i++)
        if (dims[i] == 0 || dims[i] > TT_IDX_MAX_SIDE)
            return tt_fail(err, TT_ERR_FORMAT, "%s: image side %u is out of range 1..%u", in->path, dims[i],
                           TT_IDX_MAX_SIDE);
    return TT_OK;
}

/* The data after the header: `bytes` bytes for `n_items` items, then the end of the input. A plain file's size is
 * checked first, so a header that lies about the count allocates nothing. *out is NULL on failure. */
static tt_status idx_payload(tt_input *in, size_t bytes, uint32_t n_items, const char *items, uint8_t **out,
                             tt_error *err)
{
    *out = NULL;
    uint64_t left;
    if (tt_input_left(in, &left) && left != bytes)
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: %s: the header says %u %s (%zu bytes of data), the file has %llu bytes after the header",
                       in->path, left < bytes ? "truncated" : "wrong count", n_items, items, bytes,
                       (unsigned long long)left);
    char what[32];
    snprintf(what, sizeof what, "the %s", items);
    tt_status s = tt_input_read_alloc(in, bytes, what, out, err);
    int more = 0;
    if (!s) s = tt_input_at_end(in, &more, err);
    if (!s && more)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: wrong count: the header says %u %s but the file has more data",
                    in->path, n_items, items);
    if (s) {
        tt_free(*out);
        *out = NULL;
    }
    return s;
}

static tt_status read_images(tt_input *in, size_t *n, size_t *rows, size_t *cols, uint8_t **pixels, tt_error *err)
{
    uint32_t dims[3] = {0, 0, 0};
    tt_status s = tt_input_detect_gzip(in, err);
    if (!s) s = idx_header(in, 3, dims, err);
    size_t bytes = 0;
    if (!s && (tt_mul_size(dims[0], (size_t)dims[1] * dims[2], &bytes) || bytes > ((size_t)1 << 36)))
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %u images of %ux%u is too large", in->path, dims[0], dims[1], dims[2]);
    if (!s) s = idx_payload(in, bytes, dims[0], "images", pixels, err);
    if (s) return s;
    *n = dims[0];
    *rows = dims[1];
    *cols = dims[2];
    return TT_OK;
}

static tt_status read_labels(tt_input *in, size_t n_classes, size_t *n, uint8_t **labels, tt_error *err)
{
    uint32_t dims[1] = {0};
    tt_status s = tt_input_detect_gzip(in, err);
    if (!s) s = idx_header(in, 1, dims, err);
    if (!s) s = idx_payload(in, dims[0], dims[0], "labels", labels, err);
    for (uint32_t i = 0; !s && i < dims[0]; i++)
        if ((*labels)[i] >= n_classes)
            s = tt_fail(err, TT_ERR_FORMAT, "%s: label %u of item %u is out of range 0..%zu", in->path,
                        (*labels)[i], i, n_classes - 1);
    if (s) {
        tt_free(*labels);
        *labels = NULL;
        return s;
    }
    *n = dims[0];
    return TT_OK;
}

tt_status tt_idx_read_images(const char *path, size_t *n, size_t *rows, size_t *cols, uint8_t **pixels,
                             tt_error *err)
{
    *pixels = NULL;
    tt_input in;
    tt_status s = tt_input_open(&in, path, err);
    if (!s) s = read_images(&in, n, rows, cols, pixels, err);
    tt_input_close(&in);
    return s;
}

tt_status tt_idx_read_labels(const char *path, size_t n_classes, size_t *n, uint8_t **labels, tt_error *err)
{
    *labels = NULL;
    tt_input in;
    tt_status s = tt_input_open(&in, path, err);
    if (!s) s = read_labels(&in, n_classes, n, labels, err);
    tt_input_close(&in);
    return s;
}

tt_status tt_idx_read_images_mem(const void *data, size_t len, const char *name, size_t *n, size_t *rows,
                                 size_t *cols, uint8_t **pixels, tt_error *err)
{
    *pixels = NULL;
    tt_input in;
    tt_status s = tt_input_open_mem(&in, data, len, name, err);
    if (!s) s = read_images(&in, n, rows, cols, pixels, err);
    tt_input_close(&in);
    return s;
}

tt_status tt_idx_read_labels_mem(const void *data, size_t len, const char *name, size_t n_classes, size_t *n,
                                 uint8_t **labels, tt_error *err)
{
    *labels = NULL;
    tt_input in;
    tt_status s = tt_input_open_mem(&in, data, len, name, err);
    if (!s) s = read_labels(&in, n_classes, n, labels, err);
    tt_input_close(&in);
    return s;
}

/* ---- data sets of IDX files ---------------------------------------------------------------------------------- */

tt_status tt_dataset_load_idx(tt_dataset *ds, const char *images_path, const char *labels_path, size_t n_classes,
                              tt_error *err)
{
    memset(ds, 0, sizeof *ds);
    size_t n_img, rows, cols, n_lab;
    uint8_t *pix = NULL, *lab = NULL;
    tt_status s = tt_idx_read_images(images_path, &n_img, &rows, &cols, &pix, err);
    if (s) return s;
    s = tt_idx_read_labels(labels_path, n_classes, &n_lab, &lab, err);
    if (s) {
        tt_free(pix);
        return s;
    }
    if (n_img != n_lab) {
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %zu labels but %s has %zu images", labels_path, n_lab, images_path,
                    n_img);
        goto done;
    }
    ds->n = n_img;
    ds->shape = tt_shape3(rows, cols, 1);
    ds->dim = rows * cols;
    ds->xtype = TT_X_U8;
    ds->n_classes = n_classes;
    ds->scale = 1.0f / 255.0f;
    ds->x = pix; /* the data set takes the pixel buffer */
    pix = NULL;
    ds->y = (int32_t *)tt_calloc(n_img, sizeof(int32_t));
    if (!ds->y) {
        tt_dataset_free(ds);
        s = tt_fail(err, TT_ERR_NOMEM, "%s: out of memory for %zu labels", labels_path, n_img);
        goto done;
    }
    for (size_t i = 0; i < n_img; i++) ds->y[i] = lab[i];
done:
    tt_free(pix);
    tt_free(lab);
    return s;
}

/* Finds `<dir>/<stem>` among the usual spellings of MNIST file names. */
static tt_status find_file(const char *dir, const char *stem, const char *alt, char *out, size_t outlen,
                           tt_error *err)
{
    const char *names[4] = {stem, alt, NULL, NULL};
    char gz0[96], gz1[96];
    snprintf(gz0, sizeof gz0, "%s.gz", stem);
    snprintf(gz1, sizeof gz1, "%s.gz", alt);
    const char *all[4] = {gz0, names[0], gz1, names[1]};
    for (int i = 0; i < 4; i++) {
        int len = snprintf(out, outlen, "%s/%s", dir, all[i]);
        if (len < 0 || (size_t)len >= outlen) return tt_fail(err, TT_ERR_ARG, "--data: path too long: %s", dir);
        if (access(out, F_OK) == 0) return TT_OK;
    }
    return tt_fail(err, TT_ERR_IO, "%s: no %s[.gz] (or %s[.gz]) in this directory", dir, stem, alt);
}

tt_status tt_dataset_load_dir(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    if (strcmp(dir, "fashion-mnist") == 0) {
        struct stat st;
        if (stat(TT_FASHION_MNIST_DIR, &st) != 0)
            return tt_fail(err, TT_ERR_IO,
                           "--data fashion-mnist: %s not found (install it: apt-get install dataset-fashion-mnist)",
                           TT_FASHION_MNIST_DIR);
        dir = TT_FASHION_MNIST_DIR;
    }
    struct stat st;
    if (stat(dir, &st) != 0) return tt_fail(err, TT_ERR_IO, "--data %s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return tt_fail(err, TT_ERR_IO, "--data %s: not a directory", dir);
    char ti[4200], tl[4200], ei[4200], el[4200];
    tt_status s = find_file(dir, "train-images-idx3-ubyte", "train-images.idx3-ubyte", ti, sizeof ti, err);
    if (!s) s = find_file(dir, "train-labels-idx1-ubyte", "train-labels.idx1-ubyte", tl, sizeof tl, err);
    if (!s) s = find_file(dir, "t10k-images-idx3-ubyte", "t10k-images.idx3-ubyte", ei, sizeof ei, err);
    if (!s) s = find_file(dir, "t10k-labels-idx1-ubyte", "t10k-labels.idx1-ubyte", el, sizeof el, err);
    if (!s) s = tt_dataset_load_idx(train, ti, tl, 10, err);
    if (!s) s = tt_dataset_load_idx(test, ei, el, 10, err);
    if (!s && !tt_shape_eq(&train->shape, &test->shape))
        s = tt_fail(err, TT_ERR_FORMAT, "%s: test images are %zux%zu but training images are %zux%zu", ei,
                    test->shape.d[0], test->shape.d[1], train->shape.d[0], train->shape.d[1]);
    if (s) {
        tt_dataset_free(train);
        tt_dataset_free(test);
    }
    return s;
}
