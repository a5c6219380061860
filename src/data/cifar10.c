/* data/cifar10.c — the CIFAR-10 binary version (https://www.cs.toronto.edu/~kriz/cifar.html) as a data set:
 * DIR/data_batch_1.bin .. data_batch_5.bin (train, in that order) and DIR/test_batch.bin (--data cifar10:DIR).
 *
 * A file is records of 3073 bytes and nothing else: 1 label byte (0..9), then a 32x32 image as three planes, 1024
 * red, 1024 green and 1024 blue bytes, each row-major. There is no header, so the file's size is the only claim:
 * it must be a non-zero multiple of 3073, checked before anything is allocated, and the data set is sized from it.
 * Samples are stored channels last, (32, 32, 3) — pixel p's red, green and blue bytes side by side — as the model
 * layers expect images; each record is reordered as it is read, so no second copy of the data is ever held.
 * Files are opened through tt_input_open (regular files only, exact reads; a FIFO is refused without blocking).
 * Not for: the Python ("pickle") version of CIFAR-10, CIFAR-100 (two label bytes), gzip'd files. */
#include <string.h>

#include "tt_data.h"
#include "tt_input.h"

enum {
    CIFAR_SIDE = 32,
    CIFAR_PLANE = CIFAR_SIDE * CIFAR_SIDE, /* pixels of one channel */
    CIFAR_PIXELS = 3 * CIFAR_PLANE,        /* bytes of one image */
    CIFAR_CLASSES = 10,
    CIFAR_TRAIN_FILES = 5
};

/* The records a file holds: its size must be a non-zero multiple of TT_CIFAR10_RECORD. */
static tt_status cifar_count(const tt_input *in, size_t *n, tt_error *err)
{
    uint64_t size = 0;
    *n = 0;
    tt_input_left(in, &size); /* never gzip here: raw inputs always know what is left */
    if (size == 0) return tt_fail(err, TT_ERR_FORMAT, "%s: empty file: no CIFAR-10 records", in->path);
    if (size % TT_CIFAR10_RECORD)
        return tt_fail(err, TT_ERR_FORMAT,
                       "%s: %llu bytes is not a whole number of %u-byte CIFAR-10 records (1 label byte + 3072 pixel "
                       "bytes): %llu records and %llu bytes over",
                       in->path, (unsigned long long)size, TT_CIFAR10_RECORD,
                       (unsigned long long)(size / TT_CIFAR10_RECORD), (unsigned long long)(size % TT_CIFAR10_RECORD));
    if (size / TT_CIFAR10_RECORD > TT_IDX_MAX_ITEMS)
        return tt_fail(err, TT_ERR_FORMAT, "%s: %llu records is more than %u", in->path,
                       (unsigned long long)(size / TT_CIFAR10_RECORD), TT_IDX_MAX_ITEMS);
    *n = (size_t)(size / TT_CIFAR10_RECORD);
    return TT_OK;
}

/* Reads n records into x (n images of CIFAR_PIXELS bytes, channels last) and y, then expects the end of the input
 * (a file that grew after cifar_count sized it is refused). */
static tt_status cifar_records(tt_input *in, size_t n, uint8_t *x, int32_t *y, tt_error *err)
{
    unsigned char rec[TT_CIFAR10_RECORD];
    for (size_t r = 0; r < n; r++) {
        tt_status s = tt_input_read(in, rec, sizeof rec, "a record", err);
        if (s) return s;
        if (rec[0] >= CIFAR_CLASSES)
            return tt_fail(err, TT_ERR_FORMAT, "%s: record %zu (from 0): label %u is out of range 0..%d", in->path, r,
                           rec[0], CIFAR_CLASSES - 1);
        y[r] = rec[0];
        /* planes (all red, then all green, then all blue) to channels last: img[3p + c] = plane c's pixel p */
        uint8_t *img = x + r * CIFAR_PIXELS;
        const unsigned char *planes = rec + 1;
        for (size_t p = 0; p < CIFAR_PLANE; p++)
            for (size_t c = 0; c < 3; c++) img[3 * p + c] = planes[c * CIFAR_PLANE + p];
    }
    int more = 0;
    tt_status s = tt_input_at_end(in, &more, err);
    if (!s && more)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: trailing bytes after %zu records (the file grew while being read)",
                    in->path, n);
    return s;
}

/* An empty data set of n CIFAR-10 images, its buffers checked against host memory (`in` names them in messages). */
static tt_status cifar_alloc(tt_dataset *ds, const tt_input *in, size_t n, const char *what, tt_error *err)
{
    memset(ds, 0, sizeof *ds);
    uint8_t *y = NULL;
    tt_status s = tt_input_alloc(in, n * CIFAR_PIXELS, what, &ds->x, err); /* n <= TT_IDX_MAX_ITEMS: no overflow */
    if (!s) s = tt_input_alloc(in, n * sizeof(int32_t), "the labels", &y, err);
    if (s) {
        tt_free(ds->x);
        ds->x = NULL;
        return s;
    }
    ds->y = (int32_t *)(void *)y; /* tt_malloc is 64-byte aligned */
    ds->n = n;
    ds->shape = tt_shape3(CIFAR_SIDE, CIFAR_SIDE, 3);
    ds->dim = CIFAR_PIXELS;
    ds->xtype = TT_X_U8;
    ds->scale = 1.0f / 255.0f;
    ds->n_classes = CIFAR_CLASSES;
    return TT_OK;
}

/* One data set from k files, in order: every file is opened and sized before the buffers are made. */
static tt_status cifar_load_files(const char *paths, size_t k, const char *what, tt_dataset *ds, tt_error *err)
{
    tt_input in[CIFAR_TRAIN_FILES];
    size_t count[CIFAR_TRAIN_FILES] = {0}, n = 0, opened = 0;
    TT_ASSERT(k >= 1 && k <= CIFAR_TRAIN_FILES);
    memset(ds, 0, sizeof *ds);
    tt_status s = TT_OK;
    for (; !s && opened < k; opened++) {
        s = tt_input_open(&in[opened], paths + opened * TT_DATA_PATH_MAX, err);
        if (s) break;
        s = cifar_count(&in[opened], &count[opened], err);
        n += count[opened];
    }
    if (!s && n > TT_IDX_MAX_ITEMS)
        s = tt_fail(err, TT_ERR_FORMAT, "%s: %zu records in all is more than %u", in[0].path, n, TT_IDX_MAX_ITEMS);
    if (!s) s = cifar_alloc(ds, &in[0], n, what, err);
    for (size_t i = 0, first = 0; !s && i < k; first += count[i], i++)
        s = cifar_records(&in[i], count[i], ds->x + first * CIFAR_PIXELS, ds->y + first, err);
    for (size_t i = 0; i < opened && i < k; i++) tt_input_close(&in[i]);
    if (s) tt_dataset_free(ds);
    return s;
}

tt_status tt_cifar10_read_mem(const void *data, size_t len, const char *name, tt_dataset *ds, tt_error *err)
{
    memset(ds, 0, sizeof *ds);
    tt_input in;
    size_t n = 0;
    tt_status s = tt_input_open_mem(&in, data, len, name, err);
    if (!s) s = cifar_count(&in, &n, err);
    if (!s) s = cifar_alloc(ds, &in, n, "the images", err);
    if (!s) s = cifar_records(&in, n, ds->x, ds->y, err);
    tt_input_close(&in);
    if (s) tt_dataset_free(ds);
    return s;
}

tt_status tt_dataset_load_cifar10(const char *dir, tt_dataset *train, tt_dataset *test, tt_error *err)
{
    static const char *const names[CIFAR_TRAIN_FILES + 1] = {"data_batch_1.bin", "data_batch_2.bin",
                                                             "data_batch_3.bin", "data_batch_4.bin",
                                                             "data_batch_5.bin", "test_batch.bin"};
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    char *paths = (char *)tt_malloc((CIFAR_TRAIN_FILES + 1) * TT_DATA_PATH_MAX);
    if (!paths) return tt_fail(err, TT_ERR_NOMEM, "--data cifar10:%s: out of memory for the file names", dir);
    tt_status s = tt_data_dir_files("cifar10", dir, names, CIFAR_TRAIN_FILES + 1, paths, err);
    if (!s) s = cifar_load_files(paths, CIFAR_TRAIN_FILES, "the training images (5 files)", train, err);
    if (!s) s = cifar_load_files(paths + CIFAR_TRAIN_FILES * TT_DATA_PATH_MAX, 1, "the test images", test, err);
    tt_free(paths);
    if (s) {
        tt_dataset_free(train);
        tt_dataset_free(test);
    }
    return s;
}
